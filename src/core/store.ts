// The one database a server runs on: SQLite in DATA_DIR (core/db.ts), or PostgreSQL when
// DATABASE_URL is set (core/postgres.ts). Services hold a Store and call the transaction
// functions below; only the repos look inside it, each with one implementation per store
// (x.repo.ts for SQLite, x.repo.pg.ts for PostgreSQL, the same type for both).
import type { Config } from "./config.ts";
import { ConfigError } from "./config.ts";
import type { Keyring } from "./crypto.ts";
import { safeEqual } from "./crypto.ts";
import {
  closeDatabase,
  type Db,
  type OpenOptions,
  onSqliteRollback,
  openDatabase,
  sqliteAllWritesDurable,
  sqliteAtNextCommit,
  sqliteCurrentWriteTransaction,
  sqliteInTransaction,
  sqliteReadTransaction,
  sqliteWriteTransaction,
} from "./db.ts";

export { requireDatabaseFile } from "./db.ts";

import { createEncryptedRecordCounter } from "./encrypted-columns.ts";
import { errorCode, rootMessage } from "./error-text.ts";
import {
  DatabaseUnavailableError,
  inPgTransaction,
  migratePostgres,
  onPgRollback,
  openPostgres,
  type PgStore,
  pgCurrentWriteTransaction,
  pgReadTransaction,
  pgRows,
  pgRun,
  pgWriteTransaction,
} from "./postgres.ts";

export type Store = Db | PgStore;

export function isPostgres(store: Store): store is PgStore {
  return (store as PgStore).kind === "postgres";
}

/**
 * Runs fn in one write transaction: one writer at a time (SQLite's write lock, PostgreSQL's
 * advisory lock taken first), so a check-then-write inside it sees every earlier commit and
 * no other writer's. Repo calls made by fn are part of it.
 */
export function writeTransaction<T>(store: Store, fn: () => T | Promise<T>): Promise<T> {
  return isPostgres(store) ? pgWriteTransaction(store, fn) : sqliteWriteTransaction(store, fn);
}

/** Reads in one snapshot; nothing is locked for writing. */
export function readTransaction<T>(store: Store, fn: () => T | Promise<T>): Promise<T> {
  return isPostgres(store) ? pgReadTransaction(store, fn) : sqliteReadTransaction(store, fn);
}

/**
 * Runs fn when a write made now would next reach the disk: on SQLite with group commit, when
 * the sync under way ends; otherwise on the next turn of the event loop. For writes whose
 * callers wait for them anyway, so that they share one commit.
 */
export function atNextCommit(store: Store, fn: () => void): void {
  if (isPostgres(store)) setImmediate(fn);
  else sqliteAtNextCommit(store, fn);
}

/**
 * Settles once every commit on the store so far is on disk, another server process's on
 * the same DATA_DIR included: for values about to leave the server that this process may
 * not have written itself.
 */
export function allWritesDurable(store: Store): Promise<void> {
  return isPostgres(store) ? Promise.resolve() : sqliteAllWritesDurable(store);
}

/** Whether the caller runs inside a transaction of this store. */
export function inTransaction(store: Store): boolean {
  return isPostgres(store) ? inPgTransaction(store) : sqliteInTransaction(store);
}

/** Whether the caller runs inside a write transaction of this store (which sees its own uncommitted rows). */
export function inWriteTransaction(store: Store): boolean {
  return currentWriteTransaction(store) !== undefined;
}

/** The write transaction the caller runs in, one object per transaction (a key for what it has checked once). */
export function currentWriteTransaction(store: Store): object | undefined {
  return isPostgres(store) ? pgCurrentWriteTransaction(store) : sqliteCurrentWriteTransaction(store);
}

/** Called after any transaction of this store rolled back (for caches of rows it wrote). */
export function onRollback(store: Store, listener: () => void): void {
  if (isPostgres(store)) onPgRollback(store, listener);
  else onSqliteRollback(store, listener);
}

/**
 * Opens the configured store and brings its schema up to date: SQLite in DATA_DIR, or the
 * PostgreSQL database at DATABASE_URL (migrated under a lock, so servers starting together
 * migrate once). A database that cannot be reached at start stops the start with one line.
 */
export async function openStore(
  config: Pick<Config, "dataDir" | "sqliteSynchronous" | "database">,
  options: OpenOptions = {},
): Promise<Store> {
  if (!config.database) return openDatabase(config, options);
  const store = await openPostgres(config.database.url, {
    poolSize: config.database.poolSize,
    statementTimeoutMs: config.database.statementTimeoutMs,
    caFile: config.database.caFile,
  });
  try {
    await migratePostgres(store);
  } catch (error) {
    await store.close();
    throw postgresStartError(error);
  }
  return store;
}

/** Node's names for a certificate it does not trust, or that names another host. */
const UNTRUSTED_CERTIFICATE = new Set([
  "SELF_SIGNED_CERT_IN_CHAIN",
  "DEPTH_ZERO_SELF_SIGNED_CERT",
  "UNABLE_TO_VERIFY_LEAF_SIGNATURE",
  "UNABLE_TO_GET_ISSUER_CERT",
  "UNABLE_TO_GET_ISSUER_CERT_LOCALLY",
  "CERT_HAS_EXPIRED",
  "CERT_NOT_YET_VALID",
  "ERR_TLS_CERT_ALTNAME_INVALID",
]);

/**
 * Anything else that stops a start on PostgreSQL, as the one line every configuration
 * problem gets rather than a stack: TLS that does not fit (the URL's sslmode, the server's
 * certificate), a password the server asks for and the URL does not give, or a migration
 * the database refuses. pg's sentences name no password.
 */
function postgresStartError(error: unknown): unknown {
  if (error instanceof ConfigError) return error;
  // The database's own sentence, not drizzle's wrapper around it (the whole statement). pg's
  // sentences name the address and the errno, never the password.
  const message = rootMessage(error);
  if (error instanceof DatabaseUnavailableError) return new ConfigError(`The database at DATABASE_URL cannot be reached: ${message}`);
  if (message.includes("does not support SSL connections")) {
    return new ConfigError(
      "The database at DATABASE_URL does not offer TLS, which the sslmode in DATABASE_URL asks for: enable ssl on the database server, or (on a network you trust) remove sslmode.",
    );
  }
  if (message.includes("client password must be a string")) {
    return new ConfigError(
      "The database at DATABASE_URL asks for a password, and none is given: put it in DATABASE_URL (percent-encoded) or in PGPASSWORD.",
    );
  }
  const code = errorCode(error);
  // A mistake of the code (no code of a driver, TLS or the database) keeps its stack.
  if (code === undefined) return error;
  // pg parses the URL only when it first connects (and never repeats it in the error).
  if (code === "ERR_INVALID_URL") {
    return new ConfigError(
      "DATABASE_URL is not a valid URL: percent-encode the user name and password (/ as %2F, ? as %3F, # as %23, @ as %40, : as %3A) and check the port.",
    );
  }
  // 28P01/28000: wrong password or no such role; 3D000: no such database; 42501: no right to create the tables.
  if (code === "28P01" || code === "28000" || code === "3D000" || code === "42501") {
    return new ConfigError(`The database at DATABASE_URL refused this server: ${message}.`);
  }
  if (UNTRUSTED_CERTIFICATE.has(code)) {
    return new ConfigError(
      `The database at DATABASE_URL presented a certificate this server does not accept (${code}): set DATABASE_CA_FILE to the CA that signed it, and name in DATABASE_URL the host the certificate is for.`,
    );
  }
  return new ConfigError(`The database at DATABASE_URL could not be used: ${message} (${code}).`);
}

/** Closes the store's connection (SQLite) or every connection of its pool (PostgreSQL). */
export async function closeStore(store: Store): Promise<void> {
  if (isPostgres(store)) await store.close();
  else await closeDatabase(store);
}

/**
 * Records a verifier of each configured master key the first time it is seen, and refuses
 * to start when a key does not match the verifier stored for its version: a wrong key
 * would otherwise only show up later as every read failing. On PostgreSQL every server runs
 * this at start, so a server given another key than its peers refuses to start.
 * `recordNew: false` (audit verify, which checks keys but must not bind one): a key is compared with the verifier stored
 * for its version, if any; nothing is recorded, so a key tried out with verify does not
 * become the one its version must have, and records under a version not configured are
 * the caller's to report.
 */
export async function checkMasterKeys(store: Store, keyring: Keyring, now: Date, options: { recordNew?: boolean } = {}): Promise<void> {
  const rows = isPostgres(store)
    ? await pgRows<{ version: number; check_value: string }>(store, "SELECT version, check_value FROM key_checks")
    : (store.$client.prepare("SELECT version, check_value FROM key_checks").all() as { version: number; check_value: string }[]);
  const stored = new Map(rows.map((r) => [r.version, r.check_value]));
  for (const version of keyring.versions()) {
    const actual = keyring.checkValue(version);
    let expected = stored.get(version);
    if (expected === undefined) {
      if (options.recordNew === false) continue;
      // Two processes starting together may both find the version new (servers on one
      // PostgreSQL, or a command and the server on one SQLite file): the first insert wins,
      // and the second compares its key with what the first stored.
      expected = await recordKeyCheck(store, version, actual, now.toISOString());
    }
    if (!safeEqual(expected, actual)) {
      const name = version === keyring.currentVersion ? "MASTER_KEY" : `MASTER_KEYS_PREVIOUS (version ${version})`;
      throw new ConfigError(keyMismatch(name, version));
    }
  }
  if (options.recordNew === false) return;
  const missing = (await createEncryptedRecordCounter(store).keyVersionsInUse()).filter((v) => !keyring.has(v));
  if (missing.length > 0) {
    throw new ConfigError(
      `Records are encrypted with master key version ${missing.join(", ")}, which is not configured. Add it to MASTER_KEYS_PREVIOUS as <version>:<base64>.`,
    );
  }
}

/** Records a key version's verifier unless one is there already; the one stored after. */
async function recordKeyCheck(store: Store, version: number, checkValue: string, createdAt: string): Promise<string> {
  if (isPostgres(store)) {
    await pgRun(store, "INSERT INTO key_checks (version, check_value, created_at) VALUES ($1, $2, $3) ON CONFLICT (version) DO NOTHING", [
      version,
      checkValue,
      createdAt,
    ]);
    return (await pgRows<{ check_value: string }>(store, "SELECT check_value FROM key_checks WHERE version = $1", [version]))[0]!
      .check_value;
  }
  const sqlite = store.$client;
  sqlite
    .prepare("INSERT INTO key_checks (version, check_value, created_at) VALUES (?, ?, ?) ON CONFLICT (version) DO NOTHING")
    .run(version, checkValue, createdAt);
  return sqlite.prepare("SELECT check_value FROM key_checks WHERE version = ?").pluck().get(version) as string;
}

function keyMismatch(name: string, version: number): string {
  return `${name} does not match the key version ${version} this database was encrypted with. Start with the right key; nothing was changed.`;
}
