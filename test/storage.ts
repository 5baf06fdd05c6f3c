// The one place tests touch the database: every other test reads state through the API, the
// audit log and the server commands. What is here the API cannot show or do by design: what
// lands on disk (hashes, ciphertexts), tampering an attacker with file access could do, a
// failing write to prove atomicity, states no endpoint can reach, and counts no endpoint
// lists. Each function says why. The statements are plain SQL that PostgreSQL accepts too,
// except where a function says otherwise, so a PostgreSQL twin is one small change here.
import fs from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { Worker } from "node:worker_threads";
import Database from "better-sqlite3";
import type { CheckpointRow, StoredEventRow } from "../src/audit/audit.repo.ts";
import { DATABASE_FILE, type Db } from "../src/core/db.ts";
import { databaseUrlOf, type TestServer } from "./helpers.ts";
import { queryPostgresSync } from "./pg-sync.ts";

/** A running test server, or the data folder of a stopped one (or of a copy of it). */
export type Store = TestServer | string;

type Value = string | number | bigint | Buffer | null;
type Where = Record<string, Value>;
type Row = Record<string, unknown>;

/** The PostgreSQL database of a test server (or of its stopped server's folder), or undefined on SQLite. */
function postgresUrl(store: Store): string | undefined {
  return typeof store === "string" ? databaseUrlOf.get(store) : store.env.DATABASE_URL;
}

/** Whether this store is a PostgreSQL database: a function that is SQLite-specific says so and refuses. */
export function isPostgresStore(store: Store): boolean {
  return postgresUrl(store) !== undefined;
}

/** One statement with `?` parameters on either store: its rows and how many rows it changed. */
function query(store: Store, sql: string, params: Value[] = []): { rows: Row[]; changes: number } {
  const url = postgresUrl(store);
  if (url !== undefined) return queryPostgresSync(url, sql, params);
  return withDb(store, (db) => {
    const statement = db.prepare(sql);
    if (statement.reader) return { rows: statement.all(...params) as Row[], changes: 0 };
    return { rows: [], changes: statement.run(...params).changes };
  });
}

function sqliteOnly(store: Store, what: string): void {
  if (isPostgresStore(store)) throw new Error(`${what} is SQLite-specific; this test cannot run on PostgreSQL as written`);
}

function withDb<T>(store: Store, use: (db: Database.Database) => T): T {
  if (typeof store !== "string") return use((store.app.db as Db).$client);
  const db = new Database(path.join(store, DATABASE_FILE), { fileMustExist: true });
  try {
    return use(db);
  } finally {
    db.close();
  }
}

function whereClause(where: Where): { sql: string; params: Value[] } {
  const names = Object.keys(where);
  if (names.length === 0) return { sql: "", params: [] };
  return {
    sql: ` WHERE ${names.map((name) => (where[name] === null ? `${name} IS NULL` : `${name} = ?`)).join(" AND ")}`,
    params: names.filter((name) => where[name] !== null).map((name) => where[name]!),
  };
}

function remove(store: Store, table: string, where: Where): number {
  const clause = whereClause(where);
  return query(store, `DELETE FROM ${table}${clause.sql}`, clause.params).changes;
}

function insert(store: Store, table: string, row: Record<string, Value>): void {
  const names = Object.keys(row);
  query(
    store,
    `INSERT INTO ${table} (${names.join(", ")}) VALUES (${names.map(() => "?").join(", ")})`,
    names.map((n) => row[n]!),
  );
}

function select(store: Store, table: string, columns: string, where: Where = {}, orderBy?: string): Row[] {
  const clause = whereClause(where);
  return query(store, `SELECT ${columns} FROM ${table}${clause.sql}${orderBy ? ` ORDER BY ${orderBy}` : ""}`, clause.params).rows;
}

function update(store: Store, table: string, set: Record<string, Value>, where: Where): number {
  const names = Object.keys(set);
  const clause = whereClause(where);
  return query(store, `UPDATE ${table} SET ${names.map((name) => `${name} = ?`).join(", ")}${clause.sql}`, [
    ...names.map((name) => set[name]!),
    ...clause.params,
  ]).changes;
}

/**
 * How many rows of `table` match `where` (every row without it). For "nothing was written"
 * across every project and user, and for tables no endpoint lists (sessions, failures,
 * tokens' hashes, the rows of a deleted project, events of no project).
 */
export function rowCount(store: Store, table: string, where: Where = {}): number {
  return Number(select(store, table, "count(*) AS n", where)[0]!.n);
}

/**
 * The audit table as stored, oldest first: with the chain's columns (seq, prev_hash, hash,
 * mac_key_version) and the events of deleted projects and of no project, none of which the
 * audit API shows.
 */
export function auditRows(store: Store, where: Where = {}): StoredAuditRow[] {
  return select(store, "audit_events", "*", where, "seq") as unknown as StoredAuditRow[];
}

/**
 * The environments a user holds a grant row for in a project. The API shows a non-member's
 * grants nowhere and an owner's or admin's access as implicit whatever rows exist, so that
 * grants went with a membership, or were never written for an admin, shows only here.
 */
export function grantRows(store: Store, projectId: string, userId: string): string[] {
  return select(store, "environment_grants", "environment", { project_id: projectId, user_id: userId }, "environment").map(
    (row) => row.environment as string,
  );
}

/**
 * A table's rows as stored, to prove what lands on disk (a hash and not the token, a
 * ciphertext and not the value), which the API by design never shows.
 */
export function storedRows(store: Store, table: string, where: Where = {}): Record<string, any>[] {
  return select(store, table, "*", where);
}

/**
 * Sets a user's e-mail address and whether it is verified. Both come from the identity
 * provider and no endpoint changes them; the development provider keys users by address and
 * always verifies it, so a changed, missing or unverified address cannot be made by signing in.
 */
export function setUserEmail(store: Store, userId: string, email: string | null, verified = true): void {
  update(store, "users", { email, email_verified: verified ? 1 : 0 }, { id: userId });
}

/**
 * Stores `passwordHash` as the account's password hash: for tests that make hundreds of
 * guesses, with a hash of cheaper scrypt parameters (a hash carries its own, and
 * verification uses them). The sign-in limits count guesses, not the hashing's cost.
 */
export function setPasswordHash(store: Store, email: string, passwordHash: string): void {
  update(store, "users", { password_hash: passwordHash }, { email });
}

let failures = 0;

/**
 * Makes every insert into `table` (only those of `action`, for audit_events; updates with
 * `on: "UPDATE"`) fail as a full disk would, to prove a request's writes are one transaction:
 * no endpoint can make the storage refuse a write. Returns the undo. A trigger on SQLite, a
 * trigger function on PostgreSQL.
 */
export function failWritesTo(
  store: TestServer,
  table: string,
  options: { action?: string; message?: string; on?: "INSERT" | "UPDATE" } = {},
): () => void {
  const on = options.on ?? "INSERT";
  const name = `test_fail_writes_${++failures}`;
  const quote = (text: string) => `'${text.replaceAll("'", "''")}'`;
  const message = quote(options.message ?? "disk full");
  if (isPostgresStore(store)) {
    const when = options.action === undefined ? "TRUE" : `NEW.action = ${quote(options.action)}`;
    query(
      store,
      `CREATE FUNCTION ${name}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN IF ${when} THEN RAISE EXCEPTION ${message}; END IF; RETURN NEW; END $$;
       CREATE TRIGGER ${name} BEFORE ${on} ON ${table} FOR EACH ROW EXECUTE FUNCTION ${name}()`,
    );
    return () => {
      query(store, `DROP TRIGGER ${name} ON ${table}; DROP FUNCTION ${name}()`);
    };
  }
  const when = options.action === undefined ? "" : ` WHEN NEW.action = ${quote(options.action)}`;
  withDb(store, (db) => db.exec(`CREATE TRIGGER ${name} BEFORE ${on} ON ${table}${when} BEGIN SELECT RAISE(ABORT, ${message}); END`));
  return () => withDb(store, (db) => db.exec(`DROP TRIGGER ${name}`));
}

/** A secret version's sealed value as stored (nonce, ciphertext, tag): the API only ever returns it opened. */
export function storedCiphertext(store: Store, secretId: string, versionNumber: number): Buffer {
  const [row] = select(store, "secret_versions", "ciphertext", { secret_id: secretId, version_number: versionNumber });
  if (!row) throw new Error(`no version ${versionNumber} of secret ${secretId}`);
  return Buffer.from(row.ciphertext as Uint8Array);
}

/**
 * Overwrites a version's sealed value, as someone with write access to the database file
 * could (a copied or flipped ciphertext must not open): no endpoint writes a ciphertext.
 */
export function setStoredCiphertext(store: Store, secretId: string, versionNumber: number, ciphertext: Buffer): void {
  const changed = update(store, "secret_versions", { ciphertext }, { secret_id: secretId, version_number: versionNumber });
  if (changed !== 1) throw new Error(`no version ${versionNumber} of secret ${secretId}`);
}

/** Makes a version a BASELINE record with no author: what an import from elsewhere writes, which no endpoint does. */
export function markBaseline(store: Store, secretId: string, versionNumber: number): void {
  update(store, "secret_versions", { change_type: "BASELINE", changed_by: null }, { secret_id: secretId, version_number: versionNumber });
}

/** Copies one project's wrapped data key over another's, as an attacker with the file could: the API never shows a key. */
export function copyWrappedKey(store: Store, fromProjectId: string, toProjectId: string): void {
  const [from] = select(store, "project_keys", "wrapped_key", { project_id: fromProjectId });
  if (!from) throw new Error(`no key for project ${fromProjectId}`);
  update(store, "project_keys", { wrapped_key: from.wrapped_key as Buffer }, { project_id: toProjectId });
}

/** The keyed digest stored beside a version's value (null when it has none): the API never shows it. */
export function storedDigest(store: Store, secretId: string, versionNumber: number): string | null {
  const [row] = select(store, "secret_versions", "digest", { secret_id: secretId, version_number: versionNumber });
  if (!row) throw new Error(`no version ${versionNumber} of secret ${secretId}`);
  return row.digest as string | null;
}

/** Removes a secret's stored digests, as versions written before digests existed have none: no endpoint writes one without. */
export function clearDigests(store: Store, secretId: string): void {
  update(store, "secret_versions", { digest: null }, { secret_id: secretId });
}

/**
 * The master key versions the stored records use, per kind: the security overview counts
 * records on the current version and others, not which versions nor per kind.
 */
export function keyVersionsInUse(store: Store): { values: number[]; projectKeys: number[]; integrations: number[] } {
  const versions = (table: string, ...columns: string[]) =>
    [...new Set(columns.flatMap((column) => select(store, table, `DISTINCT ${column} AS v`).map((row) => row.v as number | null)))]
      .filter((v): v is number => v !== null)
      .sort((a, b) => a - b);
  return {
    values: versions("secret_versions", "key_version"),
    projectKeys: versions("project_keys", "key_version"),
    integrations: versions("integrations", "token_key_version", "hook_key_version"),
  };
}

/**
 * Every column of every table of the migrated database, to prove each ciphertext column is
 * known to the code that counts and re-encrypts them (sqlite_master and pragma_table_info on
 * SQLite, information_schema.columns on PostgreSQL).
 */
export function schemaColumns(store: Store): { table: string; name: string; type: string; isNotNull: number }[] {
  if (isPostgresStore(store)) {
    return query(
      store,
      `SELECT table_name AS "table", column_name AS name, data_type AS type, CASE is_nullable WHEN 'NO' THEN 1 ELSE 0 END AS "isNotNull"
       FROM information_schema.columns WHERE table_schema = current_schema() ORDER BY table_name, ordinal_position`,
    ).rows as { table: string; name: string; type: string; isNotNull: number }[];
  }
  return withDb(store, (db) => {
    const tables = db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'").pluck().all() as string[];
    return tables.flatMap((table) =>
      (
        db.prepare(`SELECT name, type, "notnull" AS isNotNull FROM pragma_table_info(?)`).all(table) as {
          name: string;
          type: string;
          isNotNull: number;
        }[]
      ).map((column) => ({ table, ...column })),
    );
  });
}

/**
 * Another connection to the file (another process, a CLI command say) takes the write lock,
 * renames a secret's key, holds the lock for `holdMs` and commits: no endpoint holds a lock
 * across requests. A worker thread, because the server, in this thread, blocks while it
 * waits for the lock, so the hold cannot end on a signal from here. Resolves once the lock
 * is held; `messages` records "locked" and then "committed". SQLite-specific (BEGIN IMMEDIATE).
 */
export async function renameKeyHoldingWriteLock(
  server: TestServer,
  from: string,
  to: string,
  holdMs: number,
): Promise<{ messages: string[]; committed: Promise<void>; worker: Worker }> {
  sqliteOnly(server, "renameKeyHoldingWriteLock");
  const worker = new Worker(
    `const { workerData, parentPort } = require("node:worker_threads");
     const Database = require(workerData.module);
     const db = new Database(workerData.file);
     db.pragma("busy_timeout = 5000");
     db.exec("BEGIN IMMEDIATE");
     db.prepare("UPDATE secrets SET key = ? WHERE key = ?").run(workerData.to, workerData.from);
     parentPort.postMessage("locked");
     Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, workerData.holdMs);
     db.exec("COMMIT");
     db.close();
     parentPort.postMessage("committed");`,
    {
      eval: true,
      workerData: {
        module: createRequire(import.meta.url).resolve("better-sqlite3"),
        file: path.join(server.dataDir, DATABASE_FILE),
        from,
        to,
        holdMs,
      },
    },
  );
  const messages: string[] = [];
  const committed = new Promise<void>((resolve, reject) => {
    worker.on("message", (m: string) => {
      messages.push(m);
      if (m === "committed") resolve();
    });
    worker.on("error", reject);
  });
  await new Promise<void>((resolve, reject) => {
    worker.once("message", () => resolve());
    worker.once("error", reject);
  });
  return { messages, committed, worker };
}

/**
 * Whether no connection holds SQLite's write lock on the folder's database right now (a
 * BEGIN IMMEDIATE that does not wait). Always true on PostgreSQL, where the server ends a
 * stalled lock holder's session itself (test/postgres-store.test.ts).
 */
export function writeLockIsFree(dataDir: string): boolean {
  if (isPostgresStore(dataDir)) return true;
  const db = new Database(path.join(dataDir, DATABASE_FILE), { fileMustExist: true, timeout: 0 });
  try {
    db.exec("BEGIN IMMEDIATE");
    db.exec("ROLLBACK");
    return true;
  } catch (error) {
    if ((error as { code?: string }).code?.startsWith("SQLITE_BUSY")) return false;
    throw error;
  } finally {
    db.close();
  }
}

/** An audit row as stored: the chain's columns beside the event's (the repo's own row type). */
export type StoredAuditRow = StoredEventRow;

type AuditRowChange = Partial<Omit<StoredAuditRow, "seq">>;

/**
 * Changes a stored audit event, as someone with write access to the database file could, to
 * prove `audit verify` and retention notice: no endpoint edits the audit log.
 */
export function tamperAuditRow(store: Store, seq: number, change: AuditRowChange): void {
  if (update(store, "audit_events", change, { seq }) !== 1) throw new Error(`no audit event #${seq}`);
}

/** Removes a stored audit event, as someone with write access to the file could: no endpoint removes one. */
export function removeAuditRow(store: Store, seq: number): void {
  if (remove(store, "audit_events", { seq }) !== 1) throw new Error(`no audit event #${seq}`);
}

/**
 * Writes an audit row straight into the table, outside the writer and its chain: for the
 * leak scan's own test, which needs an event holding text the writer would never let in.
 */
export function insertAuditRow(
  store: Store,
  row: Omit<StoredAuditRow, "seq" | "mac_key_version" | "service_account_id" | "service_account_name">,
): void {
  insert(store, "audit_events", { ...row });
}

/** The audit log's retention checkpoint: the last pruned event, signed (the repo's own row type). */
type AuditCheckpoint = CheckpointRow;

/** The retention checkpoint as stored (undefined before the first pruning): no endpoint or command shows it whole. */
export function auditCheckpoint(store: Store): AuditCheckpoint | undefined {
  return select(store, "audit_checkpoint", "*")[0] as AuditCheckpoint | undefined;
}

/** Changes the retention checkpoint, as someone with write access to the file could, to prove verification notices. */
export function tamperAuditCheckpoint(store: Store, change: Partial<AuditCheckpoint>): void {
  update(store, "audit_checkpoint", change, {});
}

/** Removes the retention checkpoint, as someone with write access to the file could. */
export function removeAuditCheckpoint(store: Store): void {
  remove(store, "audit_checkpoint", {});
}

/**
 * Marks a user disabled and nothing more. `users disable` also ends their sessions, so it
 * cannot prove that the request path checks the mark itself, on a session still alive.
 */
export function markUserDisabled(store: Store, where: { id: string } | { email: string }): void {
  if (update(store, "users", { disabled_at: new Date().toISOString() }, where) !== 1) throw new Error("no such user");
}

/**
 * Writes a project's and a user's names as rows written before the server refused control
 * characters would hold them: no endpoint accepts such text any more, and the CLI must
 * still not let it drive a terminal.
 */
export function writeLegacyNames(store: Store, names: { projectId: string; projectName: string; userId: string; userName: string }): void {
  update(store, "projects", { name: names.projectName }, { id: names.projectId });
  update(store, "users", { name: names.userName }, { id: names.userId });
}

/**
 * States an older server left behind, which no endpoint reaches any more: a member demoted
 * without their invitations being voided, an invitation whose inviter is gone, a Vercel
 * connection made before its connector was recorded, a service token's address list in a
 * form an older version accepted.
 */
export const legacy = {
  setRoleWithoutVoiding(store: Store, projectId: string, userId: string, role: string): void {
    update(store, "memberships", { role }, { project_id: projectId, user_id: userId });
  },
  clearInviter(store: Store, invitationId: string): void {
    update(store, "invitations", { invited_by: null }, { id: invitationId });
  },
  clearConnector(store: Store, projectId: string): void {
    update(store, "integrations", { connected_by: null }, { project_id: projectId });
  },
  setAllowedCidrs(store: Store, tokenId: string, cidrs: string[]): void {
    update(store, "service_tokens", { allowed_cidrs: JSON.stringify(cidrs) }, { id: tokenId });
  },
};

/**
 * A Vercel connection row with a given status and last sync, for the security overview,
 * which only reads them: reaching each state through the fake Vercel takes a connection and
 * a failing sync run per state. Written without a connector, as connections made before it
 * was recorded; the token and hook are one byte each, counted as records, never opened.
 */
export function writeIntegrationRow(
  store: Store,
  projectId: string,
  state: { status: string; lastSyncStatus: string; lastSyncAt: string },
): void {
  remove(store, "integrations", { project_id: projectId });
  insert(store, "integrations", {
    project_id: projectId,
    provider: "vercel",
    status: state.status,
    token_ciphertext: Buffer.from([0]),
    token_key_version: 1,
    hook_ciphertext: Buffer.from([0]),
    hook_key_version: 1,
    last_sync_at: state.lastSyncAt,
    last_sync_status: state.lastSyncStatus,
    created_at: state.lastSyncAt,
    updated_at: state.lastSyncAt,
  });
}

/**
 * Sets a Vercel connection's sync lock (and optionally its last run) as another server
 * process, or one that died mid-sync, would have left it: one process cannot hold a lock it
 * does not know about through the API.
 */
export function setSyncLock(store: Store, projectId: string, startedAt: string, lastRun?: Record<string, unknown>): void {
  update(
    store,
    "integrations",
    lastRun === undefined ? { sync_started_at: startedAt } : { sync_started_at: startedAt, last_run: JSON.stringify(lastRun) },
    { project_id: projectId },
  );
}

/**
 * Checkpoints the write-ahead log and truncates it, so the next write must grow a file, as
 * on a long-running server: the server does this itself only when idle. SQLite-specific.
 */
export function truncateWal(store: Store): void {
  // PostgreSQL has no file of the store's own to grow.
  if (isPostgresStore(store)) return;
  withDb(store, (db) => db.pragma("wal_checkpoint(TRUNCATE)"));
}

/** The connection's journal mode, synchronous level, foreign-key enforcement and page cache: settings no endpoint reports. SQLite-specific. */
export function connectionSettings(server: TestServer): {
  journalMode: unknown;
  synchronous: unknown;
  foreignKeys: unknown;
  cacheSize: unknown;
} {
  sqliteOnly(server, "connectionSettings");
  return withDb(server, (db) => ({
    journalMode: db.pragma("journal_mode", { simple: true }),
    synchronous: db.pragma("synchronous", { simple: true }),
    foreignKeys: db.pragma("foreign_keys", { simple: true }),
    cacheSize: db.pragma("cache_size", { simple: true }),
  }));
}

const FUTURE_MIGRATION = "from-the-future";

/**
 * Leaves what a newer version's migration would: a migration this code does not have, and
 * its table. Returns the undo of the record (as restoring the pre-upgrade backup would; the
 * table stays). Drizzle's migration journal in SQLite.
 */
export function migrateFromTheFuture(dataDir: string): () => void {
  if (isPostgresStore(dataDir)) {
    const newest = Number(query(dataDir, "SELECT max(created_at) AS n FROM drizzle.__drizzle_migrations").rows[0]!.n);
    query(dataDir, "INSERT INTO drizzle.__drizzle_migrations (hash, created_at) VALUES (?, ?)", [FUTURE_MIGRATION, newest + 86_400_000]);
    query(dataDir, "CREATE TABLE IF NOT EXISTS from_the_future (id integer)");
    return () => {
      query(dataDir, "DELETE FROM drizzle.__drizzle_migrations WHERE hash = ?", [FUTURE_MIGRATION]);
    };
  }
  withDb(dataDir, (db) => {
    const newest = db.prepare("SELECT max(created_at) FROM __drizzle_migrations").pluck().get() as number;
    db.prepare("INSERT INTO __drizzle_migrations (hash, created_at) VALUES (?, ?)").run(FUTURE_MIGRATION, newest + 86_400_000);
    db.prepare("CREATE TABLE from_the_future (id INTEGER)").run();
  });
  return () => remove(dataDir, "__drizzle_migrations", { hash: FUTURE_MIGRATION });
}

/** Copies the database of a stopped server into another data folder, to tamper with one and keep the other as it was. */
export function copyDatabase(fromDataDir: string, toDataDir: string): void {
  const url = postgresUrl(fromDataDir);
  if (url !== undefined) {
    // A PostgreSQL database is copied by creating another from it as a template, which
    // needs it unused: the stopped server's pool is closed; this thread's own reader is not.
    // The test cluster's URLs name a socket folder, not a host, which URL cannot parse.
    const name = /\/(\w+)\?/.exec(url)![1]!;
    const admin = url.replace(`/${name}?`, "/postgres?");
    const copy = `${name}_copy_${Date.now().toString(36)}`;
    queryPostgresSync(admin, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = ? AND pid <> pg_backend_pid()", [
      name,
    ]);
    queryPostgresSync(admin, `CREATE DATABASE ${copy} TEMPLATE ${name}`);
    databaseUrlOf.set(toDataDir, url.replace(`/${name}?`, `/${copy}?`));
    return;
  }
  fs.copyFileSync(path.join(fromDataDir, DATABASE_FILE), path.join(toDataDir, DATABASE_FILE));
}

/**
 * A counter in a scratch table of a server's own connection, as a synchronous repo would
 * read and write it: the transaction tests (test/transactions.test.ts) need a row that no
 * feature owns to prove what the connection's gate serialises.
 */
export function scratchCounter(server: TestServer): { read(): number; write(value: number): void } {
  sqliteOnly(server, "scratchCounter");
  const db = (server.app.db as Db).$client;
  db.exec("CREATE TABLE IF NOT EXISTS test_scratch_counter (id INTEGER PRIMARY KEY CHECK (id = 1), value INTEGER NOT NULL)");
  db.exec("INSERT INTO test_scratch_counter (id, value) VALUES (1, 0) ON CONFLICT (id) DO NOTHING");
  const read = db.prepare("SELECT value FROM test_scratch_counter WHERE id = 1").pluck();
  const write = db.prepare("UPDATE test_scratch_counter SET value = ? WHERE id = 1");
  return {
    read: () => read.get() as number,
    write: (value) => {
      write.run(value);
    },
  };
}
