import { AsyncLocalStorage } from "node:async_hooks";
import fs from "node:fs";
import path from "node:path";
import Database from "better-sqlite3";
import { type BetterSQLite3Database, drizzle } from "drizzle-orm/better-sqlite3";
import { type MigrationMeta, readMigrationFiles } from "drizzle-orm/migrator";
import { isSingleExecutable, readAsset, sourceRoot } from "./assets.ts";
import { type Config, ConfigError, unusableDataDir } from "./config.ts";
import { type GroupCommit, type GroupCommitOptions, startGroupCommit, syncFolder } from "./group-commit.ts";
import * as schema from "./schema.ts";
import { printable } from "./text.ts";

export type Db = BetterSQLite3Database<typeof schema> & { $client: Database.Database };

export const DATABASE_FILE = "secrets.db";

/*
 * Joins with parameters: the hot path's joins compare their columns with `CAST(? AS TEXT)`
 * rather than a bare `?`. SQLite's constant propagation (a.x = b.y AND a.x = ? becomes b.y = ? too) marks a
 * bare parameter of a join as one whose value may change the plan, and a prepared statement
 * is then compiled again on every call with new values (sqlite3Reprepare: about 20 µs a
 * lookup, measured with perf on the secret read). A parameter with an affinity is left out
 * of that propagation; the comparison means the same for a text column.
 */

/** How long a statement waits for another connection's lock before SQLITE_BUSY. */
export const BUSY_TIMEOUT_MS = 5000;
// SQLite's page cache, per connection. better-sqlite3 is built with 16 MB, and every audited
// read appends pages (the event and its indexes), so under load the cache filled to its limit
// and kept it for the process's life: after 20 s of reads glibc's heap held 26 MiB, against
// 12–17 MiB with this cache.
// SQLite's own default of 2 MiB holds the hot pages (sessions, memberships, an environment's
// secrets, the indexes' upper levels); the rest comes from the operating system's file cache.
const PAGE_CACHE_KIB = 2048;
// SQLite checkpoints inside the commit that takes the WAL past this many pages, on the event
// loop, and syncs the WAL and the database for it. At its default of 1,000 (4 MiB) a stream
// of reads, each committing its audit event's row and seven index pages, checkpointed about
// every half second, copying the same hot pages each time. At 10,000 (40 MiB at most, emptied
// when idle by wal.ts) each checkpoint copies them once for ten times the commits: 4–12 %
// more reads a second, in turns against 1,000 (bench/compare.ts).
const AUTOCHECKPOINT_PAGES = 10_000;

/** Files of DATA_DIR that hold ciphertext or key material: only the server's user may read them. */
const PRIVATE_FILES = [DATABASE_FILE, `${DATABASE_FILE}-wal`, `${DATABASE_FILE}-shm`, `${DATABASE_FILE}-journal`, "master.key"];

export interface OpenOptions {
  /** Where a warning about DATA_DIR goes (the server's log; stderr for the commands). */
  warn?: (message: string) => void;
  /**
   * The server's connection at SQLITE_SYNCHRONOUS=full: commits are made durable by group
   * commit (core/group-commit.ts) instead of an fsync in each. The commands keep SQLite's
   * FULL: they write little, and exit right after.
   */
  groupCommit?: GroupCommitOptions;
}

const groupCommits = new WeakMap<Database.Database, GroupCommit>();

/** Opens (creating if needed) the database under DATA_DIR, sets the pragmas and applies migrations. */
export function openDatabase(config: Pick<Config, "dataDir" | "sqliteSynchronous">, options: OpenOptions = {}): Db {
  try {
    fs.mkdirSync(config.dataDir, { recursive: true, mode: 0o700 });
  } catch (error) {
    // A file in the way or a folder this user may not write.
    throw unusableDataDir(config.dataDir, error);
  }
  protectDataDir(config.dataDir, options.warn ?? ((message) => process.stderr.write(`secrets-server: warning: ${message}\n`)));
  const file = path.join(config.dataDir, DATABASE_FILE);
  // SQLite quietly opens a file it may read but not write (say a restored copy owned by root)
  // read-only, and every write would then answer 500: refuse to start instead.
  if (fs.existsSync(file)) {
    try {
      fs.accessSync(file, fs.constants.R_OK | fs.constants.W_OK);
    } catch {
      throw new ConfigError(
        `DATA_DIR ${config.dataDir} cannot be used: this user may not write ${DATABASE_FILE}; give it to the user the server runs as.`,
      );
    }
  }
  let sqlite: Database.Database;
  try {
    sqlite = openSqliteFile(config.dataDir, file);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code !== "SQLITE_CANTOPEN" && code !== "EACCES") throw error;
    throw new ConfigError(`DATA_DIR ${config.dataDir} cannot be used: the database cannot be opened by this user (${code}).`);
  }
  sqlite.pragma("journal_mode = WAL");
  // FULL by default: an acknowledged secret write must survive a power cut. better-sqlite3
  // is built to run WAL at NORMAL, so this has to be said explicitly.
  sqlite.pragma(`synchronous = ${config.sqliteSynchronous === "normal" ? "NORMAL" : "FULL"}`);
  sqlite.pragma("foreign_keys = ON");
  sqlite.pragma(`busy_timeout = ${BUSY_TIMEOUT_MS}`);
  sqlite.pragma(`cache_size = -${PAGE_CACHE_KIB}`);
  sqlite.pragma(`wal_autocheckpoint = ${AUTOCHECKPOINT_PAGES}`);
  const db = drizzle(sqlite, { schema }) as Db;
  try {
    migrate(db);
    // After the migrations, which SQLite's FULL keeps durable on their own, and before the
    // repos prepare their statements, which it must count.
    if (options.groupCommit && config.sqliteSynchronous === "full") {
      // SQLite puts the WAL beside the file a symbolic link names.
      groupCommits.set(sqlite, startGroupCommit(sqlite, `${fs.realpathSync(file)}-wal`, options.groupCommit));
    }
  } catch (error) {
    sqlite.close();
    throw error;
  }
  return db;
}

/** Closes the connection, once the writes made on it are on disk. */
export async function closeDatabase(db: Db): Promise<void> {
  const commits = groupCommits.get(db.$client);
  if (commits) {
    // After a failed sync the server stops at once (the group commit's onFailure) and never
    // gets here; where it goes on (a test's onFailure), the waiters were told already.
    await commits.durable().catch(() => {});
    await commits.close();
  }
  db.$client.close();
}

/** Runs fn when the connection's sync under way ends (see GroupCommit), or on the next turn of the event loop. */
export function sqliteAtNextCommit(db: Db, fn: () => void): void {
  const commits = groupCommits.get(db.$client);
  if (commits) commits.whenSyncEnds(fn);
  else setImmediate(fn);
}

/**
 * Settles once every write made on the connection so far is on disk: at once without group
 * commit, whose FULL commits were durable when they returned.
 */
export function sqliteWritesDurable(db: Db): Promise<void> {
  return groupCommits.get(db.$client)?.durable() ?? Promise.resolve();
}

/** As sqliteWritesDurable, for other processes' commits on the file too (GroupCommit.durableWithOthers). */
export function sqliteAllWritesDurable(db: Db): Promise<void> {
  return groupCommits.get(db.$client)?.durableWithOthers() ?? Promise.resolve();
}

/** Whether the caller wrote since `before` (the group commit's count, undefined without it). */
function wroteSince(commits: GroupCommit | undefined, before: number | undefined): commits is GroupCommit {
  return commits !== undefined && commits.writes !== before;
}

/**
 * The database files are created 0600 and existing ones are tightened to 0600 (an older
 * version, a restore or a copy may have left them 0644): a readable database is every
 * ciphertext, its wrapped keys and the audit log, protected only by the folder's mode.
 * SQLite gives the -wal and -shm files the mode of the database file, so creating that
 * one private is enough for the others. The folder itself is the operator's to set; a
 * folder others may enter is only reported.
 */
function protectDataDir(dataDir: string, warn: (message: string) => void): void {
  const database = path.join(dataDir, DATABASE_FILE);
  try {
    fs.closeSync(fs.openSync(database, fs.constants.O_CREAT | fs.constants.O_RDWR, 0o600));
  } catch {
    // Not writable or not creatable: the checks below and SQLite's own open say why.
  }
  for (const name of PRIVATE_FILES) {
    const file = path.join(dataDir, name);
    let stat: fs.Stats;
    try {
      stat = fs.lstatSync(file);
    } catch {
      continue;
    }
    if (!stat.isFile() || (stat.mode & 0o077) === 0) continue;
    try {
      fs.chmodSync(file, stat.mode & 0o700);
    } catch {
      warn(`${file} can be read by other users of this machine and this user may not change that: run chmod 600 on it.`);
    }
  }
  const folder = fs.statSync(dataDir);
  if ((folder.mode & 0o077) !== 0) {
    warn(
      `DATA_DIR ${dataDir} can be entered by other users of this machine (mode ${(folder.mode & 0o777).toString(8)}): run chmod 700 on it.`,
    );
  }
}

/** A plain better-sqlite3 connection to `file`, with the executable's bundled addon when needed. */
function openSqliteFile(dataDir: string, file: string, options: { readonly?: boolean } = {}): Database.Database {
  return new Database(file, {
    readonly: options.readonly ?? false,
    fileMustExist: options.readonly ?? false,
    // The loaded addon object is accepted at run time; the typings only know the path form.
    nativeBinding: (isSingleExecutable() ? loadBundledAddon(dataDir) : undefined) as string | undefined,
  });
}

/**
 * For commands that work on an existing database (backup, audit verify, rotate-key, users,
 * copy-database): a mistyped DATA_DIR must not become a new, empty database that then
 * "verifies" or lists nothing. PostgreSQL (DATABASE_URL) is not concerned.
 */
export function requireDatabaseFile(config: Pick<Config, "dataDir"> & { database?: unknown }): void {
  if (config.database) return;
  const file = path.join(config.dataDir, DATABASE_FILE);
  try {
    fs.statSync(file);
  } catch (error) {
    // A folder this user may not enter (DATA_DIR is 0700) is not a missing database.
    if ((error as NodeJS.ErrnoException).code === "EACCES") {
      throw new ConfigError(`${file} cannot be read by this user: run the command as the server's user.`);
    }
    throw new ConfigError(`There is no database at ${file}: check DATA_DIR.`);
  }
}

/** The most pages better-sqlite3 lets one backup step copy. */
const ALL_PAGES = 0x7fffffff;

/**
 * A consistent copy of the live database (SQLite's online backup: the server may keep
 * writing meanwhile). The copy holds only ciphertext; the master key is not in it.
 */
export async function backupDatabase(config: Pick<Config, "dataDir">, destination: string): Promise<void> {
  // better-sqlite3's backup() trims the name it writes to: the file made below would be
  // another one, left empty, and the copy would go to (even over) the trimmed name.
  if (destination !== destination.trim()) {
    throw new ConfigError(
      `The file name ${printable(JSON.stringify(destination))} begins or ends with white space, which the backup would drop and write another file: give FILE without it.`,
    );
  }
  requireDatabaseFile(config);
  const source = path.join(config.dataDir, DATABASE_FILE);
  // Opened before the copy's file is made: a database that cannot be opened must not leave
  // an empty file that looks like a backup (and restores as an empty database).
  let sqlite: Database.Database;
  try {
    sqlite = openSqliteFile(config.dataDir, source, { readonly: true });
  } catch (error) {
    throw new ConfigError(`${source} cannot be opened: ${error instanceof Error ? error.message : String(error)}.`);
  }
  // Created empty with mode 0600 first (SQLite takes an empty file as an empty database), so
  // the copy is never readable by others, not even while it is being written.
  try {
    fs.closeSync(fs.openSync(destination, "wx", 0o600));
  } catch (error) {
    sqlite.close();
    const code = (error as NodeJS.ErrnoException).code;
    if (code === "EEXIST") throw new ConfigError(`${destination} already exists; choose a new file name.`);
    if (code === "ENOENT") throw new ConfigError(`The folder of ${destination} does not exist; create it first.`);
    throw new ConfigError(`${destination} cannot be written: ${code ?? String(error)}.`);
  }
  try {
    // All pages in one step: between better-sqlite3's default steps of 100 pages another
    // process's commit restarts the copy from its first page, so a server that commits more
    // often than one pass takes would keep it from ever finishing. One step holds a WAL
    // read snapshot, which does not block the server's writes.
    await sqlite.backup(destination, { progress: () => ALL_PAGES });
    fs.chmodSync(destination, 0o600);
    // SQLite synced the copy's pages; its name must reach the disk too, or a power cut
    // right after "backup written" could leave no file.
    await syncFolder(path.dirname(path.resolve(destination)));
  } catch (error) {
    fs.rmSync(destination, { force: true });
    throw error;
  } finally {
    sqlite.close();
  }
}

function loadMigrations(): MigrationMeta[] {
  if (isSingleExecutable()) return JSON.parse(readAsset("migrations.json").toString("utf8")) as MigrationMeta[];
  return readMigrationFiles({ migrationsFolder: path.join(sourceRoot(), "migrations") });
}

/**
 * drizzle's migrator, its steps and its table as they are, with the write lock taken
 * before it decides what to apply. drizzle reads the newest migration applied before its
 * BEGIN: two processes starting together on one file after an upgrade (serve and a server
 * command) both applied it, and the second failed on a table that exists. Now, when one is
 * pending, the newest applied is read again inside BEGIN IMMEDIATE: the second waits for the
 * first (busy_timeout) and finds nothing to do. With nothing pending no lock is taken, so a
 * command does not wait for a busy server's writes. (drizzle's own migrator reads a folder,
 * which the executable lacks.)
 */
export function migrate(db: Db): void {
  const migrations = loadMigrations();
  const sqlite = db.$client;
  const newestKnown = Math.max(0, ...migrations.map((m) => m.folderMillis));
  /** The newest migration recorded (0 for none), or undefined before drizzle's table exists. */
  const newestApplied = (): number | undefined =>
    sqlite.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = '__drizzle_migrations'").get() === undefined
      ? undefined
      : Number(sqlite.prepare("SELECT max(created_at) FROM __drizzle_migrations").pluck().get() ?? 0);
  /**
   * drizzle applies the migrations newer than the newest one recorded, and says nothing when
   * the database is ahead of the code: an older executable started on a database a newer one
   * migrated would run against tables it does not know. Refuse instead.
   */
  const refuseNewer = (applied: number | undefined) => {
    if (applied !== undefined && applied > newestKnown) throw new ConfigError(newerDatabaseMessage("in DATA_DIR"));
  };
  const before = newestApplied();
  refuseNewer(before);
  if (before !== undefined && before >= newestKnown) return;
  sqlite
    .transaction(() => {
      sqlite.exec("CREATE TABLE IF NOT EXISTS __drizzle_migrations (id SERIAL PRIMARY KEY, hash text NOT NULL, created_at numeric)");
      // The table exists now: created just above, if not by a process that went first.
      const applied = newestApplied() ?? 0;
      refuseNewer(applied);
      const record = sqlite.prepare('INSERT INTO __drizzle_migrations ("hash", "created_at") VALUES (?, ?)');
      for (const migration of migrations) {
        if (applied >= migration.folderMillis) continue;
        for (const statement of migration.sql) sqlite.exec(statement);
        record.run(migration.hash, migration.folderMillis);
      }
    })
    .immediate();
}

/** The refusal of a database a newer version migrated, one sentence for both stores (core/postgres.ts too). */
export function newerDatabaseMessage(where: "in DATA_DIR" | "at DATABASE_URL"): string {
  return `The database ${where} was upgraded by a newer version of secrets-server, which this version cannot use. Run the newer version, or restore the backup taken before the upgrade.`;
}

/**
 * The executable carries better-sqlite3's addon as an asset. dlopen needs a file, so it
 * is written once to DATA_DIR/.cache under a name holding its content hash (a new
 * version never loads an old addon), via a temporary file and an atomic rename. build.mjs
 * stores the hash beside it: a start reads 64 bytes instead of copying and hashing the
 * 1.7 MB addon (7 ms of every start).
 */
function loadBundledAddon(dataDir: string): unknown {
  const digest = readAsset("better_sqlite3.node.sha256").toString("utf8").trim().slice(0, 16);
  const cacheDir = path.join(dataDir, ".cache");
  const file = path.join(cacheDir, `better_sqlite3-${digest}.node`);
  if (!fs.existsSync(file)) {
    const bytes = readAsset("better_sqlite3.node");
    fs.mkdirSync(cacheDir, { recursive: true, mode: 0o700 });
    const temporary = `${file}.${process.pid}.tmp`;
    fs.writeFileSync(temporary, bytes, { mode: 0o500 });
    fs.renameSync(temporary, file);
  }
  const module = { exports: {} as unknown };
  process.dlopen(module, file);
  return module.exports;
}

/*
 * Transactions. Services are written against promises, so that the same code can run on a
 * database reached over the network; better-sqlite3 itself answers at once. One connection
 * serves every request, so while a transaction is open the connection belongs to it: any
 * other repo call (through `guard`) and any other transaction wait until it ends, and
 * statements made by the transaction's own code (tracked with AsyncLocalStorage, across its
 * awaits) run inside it. A transaction must not wait for the network or a timer: others
 * queue behind it. Work it schedules (a timer, setImmediate) inherits it while it is open,
 * as AsyncLocalStorage does: schedule such work after the commit, not inside.
 */

interface Gate {
  /** Someone holds the connection: an open transaction, or a waiter whose turn it is. */
  busy: boolean;
  /** Waiters in arrival order (transactions and repo calls alike), each woken in its turn. */
  queue: (() => void)[];
}

const gates = new WeakMap<Database.Database, Gate>();

/** A transaction the running code belongs to; `open` turns false when it ends, so work it left behind (a promise settling later) no longer counts as inside. */
interface OpenTransaction {
  sqlite: Database.Database;
  open: boolean;
  /** Begun IMMEDIATE (a savepoint takes its transaction's). */
  write: boolean;
  /** A nested transaction (savepoint) under way: two at once would undo each other's work. */
  nested: boolean;
  /** 0 for the transaction itself, 1 for a savepoint in it, and so on. */
  depth: number;
  /** The transaction itself, for a savepoint. */
  root?: OpenTransaction;
  /** Why a savepoint could not be rolled back: SQLite ended the whole transaction, which must not report a commit. */
  failed?: unknown;
}
const insideTransaction = new AsyncLocalStorage<OpenTransaction>();

function currentTransaction(sqlite: Database.Database): OpenTransaction | undefined {
  const current = insideTransaction.getStore();
  return current?.open === true && current.sqlite === sqlite ? current : undefined;
}

function gateOf(sqlite: Database.Database): Gate {
  let gate = gates.get(sqlite);
  if (!gate) {
    gate = { busy: false, queue: [] };
    gates.set(sqlite, gate);
  }
  return gate;
}

/** Nobody holds the connection and nobody waits for it. */
function isFree(gate: Gate): boolean {
  return !gate.busy && gate.queue.length === 0;
}

/** Takes the connection: at once when it is free and nobody waits, else in arrival order. */
function acquire(gate: Gate): Promise<void> | undefined {
  if (isFree(gate)) {
    gate.busy = true;
    return undefined;
  }
  return new Promise((resolve) => gate.queue.push(resolve));
}

/** Hands the connection to the next waiter (it stays busy meanwhile), or frees it. */
function release(gate: Gate): void {
  const next = gate.queue.shift();
  if (next) next();
  else gate.busy = false;
}

function rolledBack(sqlite: Database.Database): void {
  for (const listener of rollbackListeners.get(sqlite) ?? []) listener();
}

async function transaction<T>(db: Db, begin: string, fn: () => T | Promise<T>): Promise<T> {
  const sqlite = db.$client;
  const gate = gateOf(sqlite);
  const outer = currentTransaction(sqlite);
  if (outer) {
    // Nested: a savepoint, so a failure caught by the outer code undoes only the inner part.
    if (outer.nested) throw new Error("nested transactions of one transaction must run one after the other");
    outer.nested = true;
    const root = outer.root ?? outer;
    if (root.failed !== undefined) throw root.failed;
    const inner: OpenTransaction = { sqlite, open: true, write: outer.write, nested: false, depth: outer.depth + 1, root };
    const name = `nested_${inner.depth}`;
    sqlite.exec(`SAVEPOINT ${name}`);
    try {
      const result = await insideTransaction.run(inner, fn);
      sqlite.exec(`RELEASE ${name}`);
      return result;
    } catch (error) {
      try {
        sqlite.exec(`ROLLBACK TO ${name}`);
        sqlite.exec(`RELEASE ${name}`);
      } catch {
        // SQLite rolled the whole transaction back itself (a full disk, an I/O error): the
        // savepoint is gone. The error that did it says what happened, and the transaction
        // must fail with it rather than commit what is left. A transaction is begun again in
        // its place, so that what the caller still writes before it ends is rolled back with
        // it, not committed statement by statement.
        root.failed ??= error;
        if (!sqlite.inTransaction) sqlite.exec("BEGIN");
      } finally {
        rolledBack(sqlite);
      }
      throw error;
    } finally {
      inner.open = false;
      outer.nested = false;
    }
  }
  const wait = acquire(gate);
  if (wait !== undefined) await wait;
  const current: OpenTransaction = { sqlite, open: true, write: begin !== READ_BEGIN, nested: false, depth: 0 };
  const commits = groupCommits.get(sqlite);
  const writesBefore = commits?.writes;
  let result: T;
  let wrote = false;
  try {
    sqlite.exec(begin);
    try {
      result = await insideTransaction.run(current, fn);
      if (current.failed !== undefined) throw current.failed;
      sqlite.exec("COMMIT");
      wrote = wroteSince(commits, writesBefore);
      if (wrote) commits?.noteCommit();
    } catch (error) {
      try {
        if (sqlite.inTransaction) sqlite.exec("ROLLBACK");
      } finally {
        // Any rollback, a read's included: a write may have been made inside it.
        rolledBack(sqlite);
      }
      throw error;
    }
  } finally {
    current.open = false;
    release(gate);
  }
  // The connection is free again: others use it while this one waits for the disk.
  if (wrote) await commits?.durable();
  return result;
}

const READ_BEGIN = "BEGIN DEFERRED";

/**
 * Runs fn in one IMMEDIATE transaction: the write lock is taken up front, so two writers
 * (the server and a CLI command on the same file) queue on busy_timeout instead of
 * failing on a lock upgrade. Repo calls made by fn are part of it.
 */
export function sqliteWriteTransaction<T>(db: Db, fn: () => T | Promise<T>): Promise<T> {
  return transaction(db, "BEGIN IMMEDIATE", fn);
}

/** Reads in one snapshot (BEGIN DEFERRED): no lock is taken for writing, and nothing is fsynced. */
export function sqliteReadTransaction<T>(db: Db, fn: () => T | Promise<T>): Promise<T> {
  return transaction(db, READ_BEGIN, fn);
}

/**
 * Whether a transaction (or a waiter) holds the connection: work that talks to SQLite
 * directly rather than through a repo (the WAL checkpoint, the health probe) skips its turn
 * then, instead of running inside someone else's transaction.
 */
export function isConnectionBusy(db: Db): boolean {
  const gate = gates.get(db.$client);
  return gate !== undefined && !isFree(gate);
}

/** Whether the caller runs inside a transaction of this database. */
export function sqliteInTransaction(db: Db): boolean {
  return currentTransaction(db.$client) !== undefined;
}

/** The write transaction the caller runs in (one object per transaction), if any. */
export function sqliteCurrentWriteTransaction(db: Db): object | undefined {
  const current = currentTransaction(db.$client);
  return current?.write === true ? current : undefined;
}

// biome-ignore lint/suspicious/noExplicitAny: any function's parameters and result are kept as they are.
type AnyFunction = (...args: any[]) => any;
export type Guarded<R> = {
  [K in keyof R]: R[K] extends AnyFunction ? (...args: Parameters<R[K]>) => Promise<Awaited<ReturnType<R[K]>>> : R[K];
};

/**
 * A repo as services see it: every function returns a promise, and waits while another
 * caller's transaction holds the connection. The functions themselves stay synchronous
 * (better-sqlite3's prepared statements, the fast path).
 */
export function guard<R extends Record<string, unknown>>(db: Db, repo: R): Guarded<R> {
  const sqlite = db.$client;
  const gate = gateOf(sqlite);
  // Set when the database was opened, before any repo: it cannot change after this.
  const commits = groupCommits.get(sqlite);
  const guarded: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(repo)) {
    if (typeof value !== "function") {
      guarded[name] = value;
      continue;
    }
    const fn = value as AnyFunction;
    guarded[name] = async (...args: unknown[]) => {
      // `this` is the plain repo: a repo function calling another (this.x) stays synchronous.
      if (currentTransaction(sqlite)) return fn.apply(repo, args);
      const waited = !isFree(gate);
      if (waited) await new Promise<void>((resolve) => gate.queue.push(resolve));
      // Counted from our turn: the writes of whoever held the connection are theirs to wait for.
      const writesBefore = commits?.writes;
      let result: unknown;
      try {
        result = fn.apply(repo, args);
      } finally {
        if (waited) release(gate);
      }
      // A write outside a transaction (a rate-limit count) commits by itself: answered once durable.
      if (wroteSince(commits, writesBefore)) await commits.durable();
      return result;
    };
  }
  return guarded as Guarded<R>;
}

const rollbackListeners = new WeakMap<Database.Database, (() => void)[]>();

/** Called after any writeTransaction on this database rolled back (for caches of rows it wrote). */
export function onSqliteRollback(db: Db, listener: () => void): void {
  const list = rollbackListeners.get(db.$client) ?? [];
  list.push(listener);
  rollbackListeners.set(db.$client, list);
}

/**
 * A write that changes nothing visible but reaches the disk: the first key_checks row is
 * updated to itself in an IMMEDIATE transaction, which appends a WAL frame (SQLite rewrites
 * a row even when its values do not change; an empty or rolled-back
 * transaction would write nothing). Throws SQLite's error when the write cannot be made.
 * A short busy timeout for the duration: better-sqlite3 is synchronous, and /healthz must
 * not hold the event loop for the requests' five seconds. With group commit the frame
 * reaches the disk with the next sync: follow this with sqliteWritesDurable.
 */
export function probeDatabaseWrite(db: Db, busyTimeoutMs: number): void {
  const sqlite = db.$client;
  const previous = sqlite.pragma("busy_timeout", { simple: true }) as number;
  sqlite.pragma(`busy_timeout = ${Math.max(0, Math.floor(busyTimeoutMs))}`);
  try {
    sqlite
      .transaction(() => {
        sqlite.prepare("UPDATE key_checks SET check_value = check_value WHERE version = (SELECT min(version) FROM key_checks)").run();
      })
      .immediate();
  } finally {
    sqlite.pragma(`busy_timeout = ${previous}`);
  }
}
