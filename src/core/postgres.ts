// The PostgreSQL connection layer (DATABASE_URL): a pool, transactions with the contract of
// core/db.ts (writeTransaction, readTransaction, onRollback, nested savepoints), migrations
// under a lock, and one error type for "the database cannot be reached". The repos are not
// ported yet; this is what they will run on.
import { AsyncLocalStorage } from "node:async_hooks";
import fs from "node:fs";
import path from "node:path";
import { type MigrationMeta, readMigrationFiles } from "drizzle-orm/migrator";
// Types only at the top: the driver and drizzle's PostgreSQL side are loaded by openPostgres,
// so a server on SQLite (the default) never loads them (some 70-110 ms of start-up from source).
import type { NodePgDatabase } from "drizzle-orm/node-postgres";
import type pg from "pg";
import { isSingleExecutable, readAsset, sourceRoot } from "./assets.ts";
import { ConfigError } from "./config.ts";
import { BUSY_TIMEOUT_MS, newerDatabaseMessage } from "./db.ts";
import * as schema from "./schema.pg.ts";

export type PgDb = NodePgDatabase<typeof schema>;

/** What a statement runs on: the pool outside a transaction, the transaction's client inside one. */
export type PgQueryable = pg.Pool | pg.PoolClient;

export interface PgStore {
  readonly kind: "postgres";
  readonly pool: pg.Pool;
  /** The current transaction's client when called inside one (across its awaits), else the pool. */
  client(): PgQueryable;
  /** drizzle over client(): the same object inside and outside a transaction, routed per statement. */
  db(): PgDb;
  /** Ends every connection of the pool. */
  close(): Promise<void>;
}

export interface PostgresOptions {
  /** Connections this server keeps at most (PostgreSQL's max_connections is shared by every server). */
  poolSize?: number;
  /** A statement running longer is cancelled by the server (a write waiting for the write lock included). */
  statementTimeoutMs?: number;
  /** How long a new connection may take before the request fails as "database unavailable". */
  connectionTimeoutMs?: number;
  /** A CA certificate (PEM file) the server's certificate must chain to. */
  caFile?: string;
  /** How long a write transaction waits for the write lock (SQLite's busy timeout by default). */
  writeLockTimeoutMs?: number;
}

export const DEFAULT_POOL_SIZE = 10;
export const DEFAULT_STATEMENT_TIMEOUT_MS = 30_000;
export const DEFAULT_CONNECTION_TIMEOUT_MS = 5_000;

/*
 * Advisory lock keys, in the two-integer form so they cannot collide with a one-key lock
 * another application takes on the same database: the first is "SECR" in ASCII, the second
 * names the lock.
 */
const LOCK_CLASS = 0x53454352;
const WRITE_LOCK = 1;
const MIGRATION_LOCK = 2;

/**
 * The database cannot be reached: refused, gone mid-statement, shutting down, or not
 * answering within the connection timeout. A condition of the machine, not of the request:
 * core/storage.ts answers it 503 with Retry-After (code DATABASE_UNAVAILABLE), and the pool
 * opens fresh connections once PostgreSQL is back.
 */
export class DatabaseUnavailableError extends Error {
  readonly code = "DATABASE_UNAVAILABLE";
  constructor(cause: unknown) {
    // pg's own sentence (an address and an errno, never a password or a statement) for the log.
    super(`The database cannot be reached: ${cause instanceof Error ? cause.message : String(cause)}`, { cause });
    this.name = "DatabaseUnavailableError";
  }
}

/** Whether `error` (or what it wraps: drizzle wraps a failed query in DrizzleQueryError) means the database is out of reach. */
export function isDatabaseUnavailable(error: unknown): boolean {
  for (let current = error, depth = 0; current && depth < 5; current = (current as { cause?: unknown }).cause, depth++) {
    if (current instanceof DatabaseUnavailableError || isConnectionError(current)) return true;
  }
  return false;
}

/** Socket errors of a connection that is refused, cut or unreachable. */
const SOCKET_CODES = new Set(["ECONNREFUSED", "ECONNRESET", "EPIPE", "ETIMEDOUT", "EHOSTUNREACH", "ENETUNREACH", "ENOTFOUND", "EAI_AGAIN"]);

/**
 * pg throws these without a code, so only the sentence tells them apart: the server closed
 * the connection (or a new one passed the connection timeout: "Connection terminated due
 * to connection timeout"), a client already broken is used, or the server did not answer a
 * statement in time (query_timeout).
 */
const PG_CONNECTION_MESSAGES = [/^Connection terminated/, /is not queryable$/, /^Query read timeout$/];

/**
 * pg-pool's sentence for a request that waited the connection timeout for one of the pool's
 * connections, all of them busy with other requests: the database answered them all, so
 * this is a busy server (503 busy), not an unreachable database.
 */
const POOL_WAIT_TIMEOUT = "timeout exceeded when trying to connect";

/** Every connection of this server's pool stayed taken for the connection timeout. */
export class PoolBusyError extends Error {
  readonly code = "DATABASE_POOL_BUSY";
  constructor(cause: unknown) {
    super("Every database connection of this server stayed busy for the connection timeout", { cause });
    this.name = "PoolBusyError";
  }
}

function isConnectionError(error: unknown): boolean {
  const { code, syscall, message } = error as { code?: unknown; syscall?: unknown; message?: unknown };
  if (typeof code === "string") {
    if (SOCKET_CODES.has(code)) return true;
    // A Unix socket whose server is stopped: the socket file is gone.
    if (code === "ENOENT" && syscall === "connect") return true;
    // SQLSTATE class 08 (connection exception); 57P01-57P03: the server is shutting down,
    // crashed or is still starting (admin_shutdown, crash_shutdown, cannot_connect_now).
    if (/^08[0-9A-Z]{3}$/.test(code) || code === "57P01" || code === "57P02" || code === "57P03") return true;
  }
  return typeof message === "string" && PG_CONNECTION_MESSAGES.some((pattern) => pattern.test(message));
}

function asUnavailable(error: unknown): unknown {
  if ((error as { message?: unknown }).message === POOL_WAIT_TIMEOUT) return new PoolBusyError(error);
  return !(error instanceof DatabaseUnavailableError) && isConnectionError(error) ? new DatabaseUnavailableError(error) : error;
}

/** Makes `target.query` reject with DatabaseUnavailableError where the connection is at fault (promise form only, which drizzle uses). */
function convertQueryErrors(target: { query: unknown }): void {
  const original = (target.query as (...args: unknown[]) => unknown).bind(target);
  target.query = (...args: unknown[]) => {
    const result = original(...args);
    if (result instanceof Promise) {
      return result.catch((error: unknown) => {
        throw asUnavailable(error);
      });
    }
    return result;
  };
}

/**
 * The CA file is added to the URL as libpq's sslrootcert, so that pg reads it together with
 * the URL's sslmode: pg lets a connection string's TLS settings replace an `ssl` option
 * given beside it, and would drop the CA. Without an sslmode, a CA file means verify-full.
 */
function withCaFile(url: string, caFile: string | undefined): string {
  if (caFile === undefined) return url;
  // pg reads the file at each new connection: checked here, so a missing or unreadable file stops the start with its name.
  try {
    fs.accessSync(caFile, fs.constants.R_OK);
  } catch (error) {
    throw new ConfigError(`The CA file ${caFile} cannot be read: ${(error as NodeJS.ErrnoException).code ?? String(error)}.`);
  }
  return `${url}${url.includes("?") ? "&" : "?"}sslrootcert=${encodeURIComponent(caFile)}`;
}

const rollbackListeners = new WeakMap<PgStore, (() => void)[]>();
const writeLockTimeouts = new WeakMap<PgStore, number>();

const INT8_OID = 20;

/** Rows of one statement ($1, $2… parameters), run inside the caller's transaction when there is one. */
export async function pgRows<T>(store: PgStore, text: string, values: unknown[] = []): Promise<T[]> {
  return (await store.client().query(text, values)).rows as T[];
}

/** The first row of one statement, or undefined. */
export async function pgRow<T>(store: PgStore, text: string, values: unknown[] = []): Promise<T | undefined> {
  return (await store.client().query(text, values)).rows[0] as T | undefined;
}

/** Runs one statement and answers how many rows it changed. */
export async function pgRun(store: PgStore, text: string, values: unknown[] = []): Promise<number> {
  return (await store.client().query(text, values)).rowCount ?? 0;
}

/** Opens a pool to `url` (nothing connects until the first statement). */
export async function openPostgres(url: string, options: PostgresOptions = {}): Promise<PgStore> {
  const [{ default: pg }, { drizzle }] = await Promise.all([import("pg"), import("drizzle-orm/node-postgres")]);
  // pg hands int8 (count(*), a bigint seq) to raw SQL as a string; every such value here is
  // far below 2^53, so read it as a number, as better-sqlite3 does.
  const types = {
    getTypeParser: ((oid: number, format?: "text" | "binary") =>
      oid === INT8_OID && format !== "binary"
        ? (value: string) => Number(value)
        : pg.types.getTypeParser(oid, format)) as typeof pg.types.getTypeParser,
  };
  const statementTimeoutMs = options.statementTimeoutMs ?? DEFAULT_STATEMENT_TIMEOUT_MS;
  const connectionTimeoutMs = options.connectionTimeoutMs ?? DEFAULT_CONNECTION_TIMEOUT_MS;
  const pool = new pg.Pool({
    connectionString: withCaFile(url, options.caFile),
    max: options.poolSize ?? DEFAULT_POOL_SIZE,
    connectionTimeoutMillis: connectionTimeoutMs,
    // Set at connection start: the server cancels a statement that runs too long.
    statement_timeout: statementTimeoutMs,
    // A server that vanishes without closing the socket (a failover, a cut network) answers
    // nothing: the client gives up a little after the server would have cancelled.
    query_timeout: statementTimeoutMs + connectionTimeoutMs,
    keepAlive: true,
    types,
    // synchronous_commit off (for the cluster, the database or the role) becomes local, for
    // the connection's life: a write is answered, and a value shown after its audit event,
    // only once COMMIT has reached PostgreSQL's disk (with it off, COMMIT returns first, and
    // a crash loses both). Any other setting is left as it is: on, or what a standby setup
    // asks for. The pool hands the connection out only once this has answered (a query
    // queued behind it would be one pg deprecates).
    onConnect: async (client) => {
      await client.query("SELECT set_config('synchronous_commit', 'local', false) WHERE current_setting('synchronous_commit') = 'off'");
    },
  });
  // A connection that breaks while idle in the pool (PostgreSQL restarted, a failover) is
  // reported here; without a listener it would end the process. The pool has already
  // dropped it, and the next statement opens a fresh one.
  pool.on("error", () => {});
  pool.on("connect", (client) => convertQueryErrors(client));
  convertQueryErrors(pool);

  let routed: PgDb;
  const store: PgStore = {
    kind: "postgres",
    pool,
    client: () => currentTransaction(store)?.client ?? pool,
    db: () => routed,
    close: () => pool.end(),
  };
  // One drizzle instance whose "client" sends each statement to client(): repos hold one
  // db and still run inside the caller's transaction.
  const router = { query: (...args: unknown[]) => (store.client() as unknown as { query(...a: unknown[]): unknown }).query(...args) };
  routed = drizzle({ client: router as unknown as pg.Pool, schema });
  // drizzle's own transaction would send BEGIN and the statements after it to different
  // connections of the pool: only pgWriteTransaction / pgReadTransaction may be used.
  routed.transaction = () => {
    throw new Error("use pgWriteTransaction or pgReadTransaction (core/postgres.ts), not drizzle's transaction()");
  };
  writeLockTimeouts.set(store, options.writeLockTimeoutMs ?? BUSY_TIMEOUT_MS);
  return store;
}

/*
 * Transactions. Unlike SQLite's single connection, each transaction takes its own
 * connection from the pool, so nothing needs to wait for the connection itself: readers
 * never wait, and a statement outside a transaction runs on the pool at once. The running
 * transaction is found with AsyncLocalStorage (across its awaits), so the repos' calls made
 * by fn run inside it; `open` turns false when it ends, so work it left behind (a promise
 * settling later) goes to the pool.
 */

interface OpenTransaction {
  store: PgStore;
  client: pg.PoolClient;
  write: boolean;
  open: boolean;
  /** A nested transaction (savepoint) under way: two at once would undo each other's work. */
  nested: boolean;
  /** 0 for the transaction itself, 1 for a savepoint in it, and so on (as db.ts). */
  depth: number;
  /** The transaction itself, which a savepoint's failure must reach. */
  root?: OpenTransaction;
  /** A nested rollback that failed leaves the transaction aborted: it must not report a commit. */
  failed?: unknown;
}

const insideTransaction = new AsyncLocalStorage<OpenTransaction>();

function currentTransaction(store: PgStore): OpenTransaction | undefined {
  const current = insideTransaction.getStore();
  return current?.open === true && current.store === store ? current : undefined;
}

function rolledBack(store: PgStore): void {
  for (const listener of rollbackListeners.get(store) ?? []) listener();
}

async function connect(store: PgStore): Promise<pg.PoolClient> {
  try {
    return await store.pool.connect();
  } catch (error) {
    throw asUnavailable(error);
  }
}

/**
 * Watches a connection checked out of the pool: one that breaks while held emits "error",
 * which with no listener ends the process (the pool listens only to its idle ones). Given
 * back with `release`; destroyed rather than reused when it broke, or when `failed` says it
 * is in no state to be reused.
 */
export function holdConnection(client: pg.PoolClient): { release(failed?: unknown): void } {
  let broken: unknown;
  const onError = (error: unknown) => {
    broken ??= error;
  };
  client.on("error", onError);
  return {
    release(failed) {
      client.off("error", onError);
      const reason = broken ?? failed;
      client.release(reason === undefined ? undefined : reason instanceof Error ? reason : true);
    },
  };
}

async function nestedTransaction<T>(outer: OpenTransaction, write: boolean, fn: () => T | Promise<T>): Promise<T> {
  // A read transaction is READ ONLY: a write inside it would fail at its first statement.
  if (write && !outer.write) throw new Error("a write transaction cannot run inside a read transaction");
  if (outer.nested) throw new Error("nested transactions of one transaction must run one after the other");
  outer.nested = true;
  // Its own level, so it may nest again; a read inside a write may still write (one client, one lock).
  const root = outer.root ?? outer;
  const inner: OpenTransaction = { ...outer, nested: false, depth: outer.depth + 1, root, failed: undefined };
  const name = `nested_${inner.depth}`;
  try {
    // A savepoint, so a failure caught by the outer code undoes only the inner part.
    await outer.client.query(`SAVEPOINT ${name}`);
    const result = await insideTransaction.run(inner, fn);
    await outer.client.query(`RELEASE SAVEPOINT ${name}`);
    return result;
  } catch (error) {
    try {
      await outer.client.query(`ROLLBACK TO SAVEPOINT ${name}`);
      await outer.client.query(`RELEASE SAVEPOINT ${name}`);
    } catch (rollbackError) {
      // The transaction is now aborted: PostgreSQL would answer its COMMIT with a silent
      // ROLLBACK, so remember why and fail it.
      root.failed ??= rollbackError;
    } finally {
      rolledBack(outer.store);
    }
    throw error;
  } finally {
    inner.open = false;
    outer.nested = false;
  }
}

async function transaction<T>(store: PgStore, write: boolean, fn: () => T | Promise<T>): Promise<T> {
  const outer = currentTransaction(store);
  if (outer) return nestedTransaction(outer, write, fn);
  if (!write) return topLevelTransaction(store, false, fn);
  // This server's writers queue here, in arrival order, before taking a connection: one at a
  // time waits for the cluster-wide lock, and the rest of the pool stays free for reads and
  // credential lookups. Else a burst of writes behind another server's long transaction
  // would park every pooled connection on the lock, and reads would time out waiting for one.
  // One wait for the queue and the lock together: a write behind k others waiting on the lock
  // used to fail only after k times the lock timeout.
  const deadline = Date.now() + (writeLockTimeouts.get(store) ?? BUSY_TIMEOUT_MS);
  const previous = writeQueues.get(store);
  let done!: () => void;
  const mine = new Promise<void>((resolve) => {
    done = resolve;
  });
  writeQueues.set(store, mine);
  const leave = () => {
    if (writeQueues.get(store) === mine) writeQueues.delete(store);
    done();
  };
  // Alone in the queue (the usual case), no timer: the lock's own timeout is the whole wait.
  if (previous && !(await settlesBefore(previous, deadline))) {
    // Those behind still wait for the one ahead, as they would have waited for this one.
    void previous.then(leave);
    throw new WriteQueueBusyError();
  }
  try {
    return await topLevelTransaction(store, true, fn, deadline);
  } finally {
    leave();
  }
}

/** Whether `promise` (which never rejects) settles before `deadline`. */
async function settlesBefore(promise: Promise<void>, deadline: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<false>((resolve) => {
    timer = setTimeout(() => resolve(false), Math.max(0, deadline - Date.now()));
  });
  try {
    return await Promise.race([promise.then(() => true as const), late]);
  } finally {
    clearTimeout(timer);
  }
}

/** A write that waited behind this server's other writes for the whole write lock timeout: 503 busy, as 55P03. */
export class WriteQueueBusyError extends Error {
  readonly code = "DATABASE_WRITE_QUEUE_BUSY";
  constructor() {
    super("A write waited behind this server's other writes for the write lock timeout");
    this.name = "WriteQueueBusyError";
  }
}

const writeQueues = new WeakMap<PgStore, Promise<void>>();

/** `deadline` (a write's): when its wait for the write lock must end, in Date.now() time. */
async function topLevelTransaction<T>(store: PgStore, write: boolean, fn: () => T | Promise<T>, deadline?: number): Promise<T> {
  const client = await connect(store);
  const connection = holdConnection(client);
  // A failed rollback leaves the connection in no state to be reused.
  let broken: unknown;
  const current: OpenTransaction = { store, client, write, open: true, nested: false, depth: 0 };
  try {
    if (write) {
      // One round trip (the simple protocol runs them in order), as the lock is what
      // every other writer waits for. lock_timeout plays SQLite's busy_timeout: a writer
      // that waits longer fails with 55P03, which core/storage.ts answers 503 "busy".
      // idle_in_transaction_session_timeout is what SQLite cannot do: a process that stalls
      // while holding the lock (paused VM, SIGSTOP, a frozen event loop) would block every
      // writer of every server until it woke; the server ends its session after the same
      // wait instead, which lets the lock go and rolls its work back.
      // The write lock is waited for only what is left of the write's time (its turn in the
      // queue and the connection took the rest; at least a millisecond, as 0 would mean no
      // limit); the row locks after it get the whole timeout again.
      const timeout = writeLockTimeouts.get(store) ?? BUSY_TIMEOUT_MS;
      const left = Math.max(1, Math.ceil((deadline ?? Date.now() + timeout) - Date.now()));
      await client.query(
        `BEGIN ISOLATION LEVEL READ COMMITTED; SET LOCAL lock_timeout = ${left}; SET LOCAL idle_in_transaction_session_timeout = ${timeout}; SELECT pg_advisory_xact_lock(${LOCK_CLASS}, ${WRITE_LOCK}); SET LOCAL lock_timeout = ${timeout}`,
      );
    } else {
      await client.query("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY");
    }
    const result = await insideTransaction.run(current, fn);
    if (current.failed !== undefined) throw current.failed;
    const done = await client.query("COMMIT");
    // fn caught a failed statement itself and went on: PostgreSQL rolled everything back.
    if (done.command === "ROLLBACK") throw new Error("the transaction was rolled back: a statement in it failed");
    return result;
  } catch (error) {
    try {
      await client.query("ROLLBACK");
    } catch (rollbackError) {
      // Not hiding the error that caused the rollback; the connection is not reused.
      broken ??= rollbackError;
    } finally {
      // Any rollback, a read's included, and a COMMIT whose answer was lost: a write may have been made inside it.
      rolledBack(store);
    }
    throw error;
  } finally {
    current.open = false;
    connection.release(broken);
  }
}

/**
 * Runs fn in one transaction that first takes a cluster-wide advisory lock: one writer at a
 * time across every server, as SQLite's BEGIN IMMEDIATE gives one writer per file. So a
 * check-then-write (name taken, stale version), the audit hash chain's head and an
 * optimistic version check behave exactly as on SQLite, with no service having to be
 * rewritten around row locks or SERIALIZABLE retries. The trade-off: writes do not run in
 * parallel, and a write holds the lock for its network round trips (reads never wait for
 * it). READ COMMITTED on purpose: each statement sees what was committed before it started,
 * so the first statement after the lock sees the previous writer's commit; a REPEATABLE READ
 * snapshot would be taken by the lock statement itself, before the previous writer let go.
 * A lone statement outside a transaction is not under the lock: check-then-write needs this.
 */
export function pgWriteTransaction<T>(store: PgStore, fn: () => T | Promise<T>): Promise<T> {
  return transaction(store, true, fn);
}

/** Reads in one snapshot (REPEATABLE READ READ ONLY): no lock, and commits made meanwhile stay out of sight. */
export function pgReadTransaction<T>(store: PgStore, fn: () => T | Promise<T>): Promise<T> {
  return transaction(store, false, fn);
}

/** Whether the caller runs inside a transaction of this store. */
export function inPgTransaction(store: PgStore): boolean {
  return currentTransaction(store) !== undefined;
}

/** The write transaction the caller runs in (one object per transaction), if any. */
export function pgCurrentWriteTransaction(store: PgStore): object | undefined {
  const current = currentTransaction(store);
  return current?.write === true ? current : undefined;
}

/** Called after any transaction of this store rolled back (for caches of rows it wrote). */
export function onPgRollback(store: PgStore, listener: () => void): void {
  const list = rollbackListeners.get(store) ?? [];
  list.push(listener);
  rollbackListeners.set(store, list);
}

function loadPostgresMigrations(): MigrationMeta[] {
  if (isSingleExecutable()) return JSON.parse(readAsset("migrations-postgres.json").toString("utf8")) as MigrationMeta[];
  return readMigrationFiles({ migrationsFolder: path.join(sourceRoot(), "migrations", "postgres") });
}

/**
 * Applies migrations/postgres under a session advisory lock, so servers starting together
 * migrate once: the others wait, then find nothing left to apply. The connection goes back
 * to the pool only when the lock is known to be released; otherwise it is closed, which
 * frees the lock whatever happened.
 */
export async function migratePostgres(store: PgStore): Promise<void> {
  const migrations = loadPostgresMigrations();
  const client = await connect(store);
  const connection = holdConnection(client);
  const parameters = (client as unknown as { connectionParameters: { query_timeout?: number } }).connectionParameters;
  const queryTimeout = parameters.query_timeout;
  let unlocked = false;
  try {
    // Not bound by DATABASE_STATEMENT_TIMEOUT_SECONDS: a server starting while another
    // migrates waits for it, and an index built on a large table takes what it takes. Both
    // limits: the server's statement_timeout, and pg's own read timeout on the client.
    parameters.query_timeout = undefined;
    await client.query("SET statement_timeout = 0");
    await refuseNonUnicode(client);
    await client.query(`SELECT pg_advisory_lock(${LOCK_CLASS}, ${MIGRATION_LOCK})`);
    await refuseNewerPostgres(client, migrations);
    // drizzle's own migrator reads a folder; the executable has none, so feed it the list.
    const { drizzle } = await import("drizzle-orm/node-postgres");
    const db = drizzle({ client });
    const internals = db as unknown as { dialect: { migrate(m: MigrationMeta[], s: unknown, c: object): Promise<void> }; session: unknown };
    await internals.dialect.migrate(migrations, internals.session, {});
    const released = await client.query<{ released: boolean }>(`SELECT pg_advisory_unlock(${LOCK_CLASS}, ${MIGRATION_LOCK}) AS released`);
    // Back to the session's own timeout (set when it connected) before the pool reuses it.
    await client.query("RESET statement_timeout");
    unlocked = released.rows[0]?.released === true;
  } finally {
    parameters.query_timeout = queryTimeout;
    // Reused, the connection saves the next statement a new session (tens of milliseconds
    // of the database's CPU, once per server start).
    connection.release(unlocked ? undefined : true);
  }
}

/**
 * Text is Unicode here (names, keys, audit metadata): a database in a single-byte encoding
 * such as LATIN1 refuses an emoji with an error at the first write that holds one. Checked
 * at start instead. SQL_ASCII stores the bytes as given, which keeps them whole.
 */
async function refuseNonUnicode(client: pg.PoolClient): Promise<void> {
  const encoding = (await client.query<{ server_encoding: string }>("SHOW server_encoding")).rows[0]?.server_encoding;
  if (encoding === "UTF8" || encoding === "SQL_ASCII") return;
  throw new ConfigError(
    `The database at DATABASE_URL uses the ${encoding} encoding; secrets-server needs UTF8. Create the database with ENCODING 'UTF8' (createdb -E UTF8 -T template0).`,
  );
}

/** As db.ts's migrate: drizzle says nothing when the database is ahead of the code. */
async function refuseNewerPostgres(client: pg.PoolClient, migrations: MigrationMeta[]): Promise<void> {
  const table = await client.query<{ t: string | null }>("SELECT to_regclass('drizzle.__drizzle_migrations')::text AS t");
  if (table.rows[0]?.t == null) return;
  const newest = await client.query<{ newest: string | null }>("SELECT max(created_at)::text AS newest FROM drizzle.__drizzle_migrations");
  const newestApplied = Number(newest.rows[0]?.newest ?? 0);
  const newestKnown = Math.max(0, ...migrations.map((m) => m.folderMillis));
  if (newestApplied > newestKnown) throw new ConfigError(newerDatabaseMessage("at DATABASE_URL"));
}
