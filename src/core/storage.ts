import fs from "node:fs";
import path from "node:path";
import type pg from "pg";
import type { Logger } from "pino";
import { isConnectionBusy, probeDatabaseWrite, sqliteWritesDurable } from "./db.ts";
import { errorCode, rootMessage } from "./error-text.ts";
import { WAL_SYNC_FAILED } from "./group-commit.ts";
import { DatabaseUnavailableError, holdConnection, isDatabaseUnavailable, type PgStore } from "./postgres.ts";
import { isPostgres, type Store } from "./store.ts";

/**
 * What a failed write to DATA_DIR says about the storage under it. These are conditions of
 * the machine, not of the request: the request was fine and may be retried once the
 * operator has acted, so they answer 503 with Retry-After (the CLI's `--fallback` engages)
 * instead of the generic 500, and they are logged once a minute instead of per request.
 */
export type StorageCondition = "full" | "io" | "unsynced" | "stalled" | "readonly" | "busy" | "unreachable";

interface ConditionText {
  /** For the client: what is wrong and when to retry. */
  message: string;
  /** For the operator's log: what to do. */
  operator: string;
  /** The same on PostgreSQL, whose disk and locks are the database server's, not DATA_DIR's. */
  operatorPostgres?: string;
  retryAfterSeconds: number;
}

const CONDITIONS: Record<StorageCondition, ConditionText> = {
  full: {
    message:
      "The server's disk is full: nothing was saved, and nothing that must be audited can be read. Try again after the operator frees space.",
    operator: "The disk holding DATA_DIR is full: writes, reveals and exports answer 503 until space is freed (no restart needed).",
    operatorPostgres:
      "The PostgreSQL server of DATABASE_URL is out of disk space: writes, reveals and exports answer 503 until space is freed there (no restart needed).",
    retryAfterSeconds: 60,
  },
  io: {
    message:
      "The server cannot write to its disk (I/O error): nothing was saved, and nothing that must be audited can be read. Try again later.",
    operator:
      "Writing the database in DATA_DIR fails with an I/O error: check the disk and the kernel log. Writes, reveals and exports answer 503 meanwhile.",
    operatorPostgres:
      "The PostgreSQL server of DATABASE_URL reports an I/O error: check its disk and its log. Writes, reveals and exports answer 503 meanwhile.",
    retryAfterSeconds: 60,
  },
  unsynced: {
    message:
      "The server's disk failed to confirm a write (I/O error): the last changes may not have been saved, and nothing more is saved, and no value shown, until the server restarts.",
    operator:
      "fsync of the database's WAL failed: nothing is written or acknowledged until the server restarts, and SQLite then recovers from what reached the disk. Check the disk and the kernel log, then restart.",
    retryAfterSeconds: 60,
  },
  // Never an error of a request: /healthz's probe only, which stops waiting for the disk (the requests keep waiting, as at FULL).
  stalled: {
    message:
      "The server's disk has not confirmed a write for 2 seconds: saving and showing values wait for it. Try again in a few seconds.",
    operator:
      "An fsync in DATA_DIR (the database's WAL, or /healthz's probe file) has not finished in 2 seconds: writes, reveals and exports wait for the disk meanwhile. Check the disk (iostat, the kernel log).",
    retryAfterSeconds: 5,
  },
  readonly: {
    message:
      "The server's database is read-only: nothing was saved, and nothing that must be audited can be read. Try again after the operator makes it writable.",
    operator:
      "The database in DATA_DIR is read-only (file mode, owner, or a file system remounted read-only): writes, reveals and exports answer 503 until it is writable again.",
    operatorPostgres:
      "The PostgreSQL database of DATABASE_URL accepts no writes (a standby after a failover, or default_transaction_read_only): writes, reveals and exports answer 503 until it does.",
    retryAfterSeconds: 60,
  },
  busy: {
    message: "The server's database is locked by another process: nothing was saved. Try again in a few seconds.",
    operator:
      "The database in DATA_DIR stayed locked by another process past the busy timeout (a long backup, rotate-key or a second server on the same folder?): writes answer 503 meanwhile.",
    operatorPostgres:
      "Writes waited for another server's write past the lock timeout (a long rotate-key or copy-database?), or requests for one of this server's pooled connections past the connection timeout (slow statements holding them all? DATABASE_POOL_SIZE; or connections still trying to reach a database that does not answer): they answer 503 meanwhile.",
    retryAfterSeconds: 5,
  },
  unreachable: {
    message:
      "The server cannot reach its database: nothing was saved, and nothing that must be audited can be read. Try again in a few seconds.",
    operator:
      "The PostgreSQL database of DATABASE_URL cannot be reached (stopped, restarting, failing over, or the network): requests answer 503 until it answers again, and the server reconnects by itself (no restart needed).",
    retryAfterSeconds: 5,
  },
};

/**
 * The storage condition behind an error, if any. better-sqlite3 throws SqliteError with the
 * extended code (SQLITE_IOERR_FSYNC, SQLITE_READONLY_DBMOVED, ...); drizzle wraps it in
 * DrizzleQueryError with the original as `cause`. Node's own file errors (the health
 * probe's file) map by errno. PostgreSQL's own conditions map by SQLSTATE, and one that
 * cannot be reached is a condition of the machine too.
 */
export function storageCondition(error: unknown): StorageCondition | undefined {
  for (let current = error, depth = 0; current && depth < 5; current = (current as { cause?: unknown }).cause, depth++) {
    const code = (current as { code?: unknown }).code;
    if (typeof code !== "string") continue;
    // 53100 disk_full, 58030 io_error, 25006 read_only_sql_transaction (a standby, or a database set read-only).
    if (code === WAL_SYNC_FAILED) return "unsynced";
    if (code === "SQLITE_FULL" || code === "ENOSPC" || code === "EDQUOT" || code === "53100") return "full";
    if (code.startsWith("SQLITE_IOERR") || code === "EIO" || code === "58030") return "io";
    if (code.startsWith("SQLITE_READONLY") || code === "EROFS" || code === "25006") return "readonly";
    // 55P03 (lock_not_available): a PostgreSQL write waited for the write lock past its timeout (core/postgres.ts).
    // 57014: PostgreSQL cancelled the statement (statement_timeout), as a busy timeout ends a wait.
    // DATABASE_POOL_BUSY: every connection of this server's pool stayed taken (core/postgres.ts).
    if (code.startsWith("SQLITE_BUSY") || code.startsWith("SQLITE_LOCKED") || code === "55P03" || code === "57014") return "busy";
    if (code === "DATABASE_POOL_BUSY" || code === "DATABASE_WRITE_QUEUE_BUSY") return "busy";
    // core/postgres.ts's DatabaseUnavailableError, by its code like the others (drizzle may wrap it).
    // 53300 too_many_connections: every connection PostgreSQL allows is taken (by all servers together).
    if (code === "DATABASE_UNAVAILABLE" || code === "53300") return "unreachable";
  }
  return undefined;
}

export function storageMessage(condition: StorageCondition): { message: string; retryAfterSeconds: number } {
  const { message, retryAfterSeconds } = CONDITIONS[condition];
  return { message, retryAfterSeconds };
}

/** One log line per condition per minute; the failures in between are counted into the next line. */
const LOG_INTERVAL_MS = 60_000;
/** A request that hit a condition this recently keeps /healthz degraded (the probe is tiny, a secret write is not). */
const RECENT_FAILURE_MS = 5_000;
/** /healthz is polled by load balancers and monitors: the probe runs at most this often. */
const PROBE_CACHE_MS = 1_000;
/** The probe must not hold the event loop for the requests' busy timeout (nor wait that long for PostgreSQL's locks). */
const PROBE_BUSY_TIMEOUT_MS = 100;
/**
 * /healthz must answer, not hang: a PostgreSQL that has not answered the probe by then
 * counts as unreachable, and a disk that has not finished the probe's fsyncs as stalled.
 */
const PROBE_TIMEOUT_MS = 2_000;
const PROBE_FILE = ".healthz-probe";
const PROBE_BYTES = Buffer.alloc(4096, 0x2e);

export interface Health {
  ok: boolean;
  reason?: string;
  retryAfterSeconds?: number;
}

export interface StorageMonitor {
  /** Records a failure of this condition; logs it unless it was logged less than a minute ago. */
  report(condition: StorageCondition, error: unknown): void;
  /** The write probe behind /healthz (cached for a second). */
  health(): Promise<Health>;
}

export function createStorageMonitor(store: Store, dataDir: string, log: Logger): StorageMonitor {
  const lastLoggedAt = new Map<StorageCondition, number>();
  const suppressed = new Map<StorageCondition, number>();
  let lastFailure: { condition: StorageCondition; at: number } | undefined;
  // The promise: callers within the second share one probe, the one under way included.
  let cached: { health: Promise<Health>; at: number } | undefined;
  const operatorText = (condition: StorageCondition) => {
    const text = CONDITIONS[condition];
    return isPostgres(store) ? (text.operatorPostgres ?? text.operator) : text.operator;
  };

  function report(condition: StorageCondition, error: unknown): void {
    const now = Date.now();
    lastFailure = { condition, at: now };
    const last = lastLoggedAt.get(condition);
    if (last !== undefined && now - last < LOG_INTERVAL_MS) {
      suppressed.set(condition, (suppressed.get(condition) ?? 0) + 1);
      return;
    }
    const more = suppressed.get(condition) ?? 0;
    lastLoggedAt.set(condition, now);
    suppressed.set(condition, 0);
    // The code and the database's sentence only: drizzle's wrapper carries the statement and
    // its parameters (ciphertext, hashes), which have no place in a log line. No stack: the
    // cause is the machine, not the code.
    log.error(
      { storage: condition, code: errorCode(error), cause: rootMessage(error), failuresSinceLastLine: more },
      operatorText(condition) + (more > 0 ? ` ${more} more failures of this kind in the last minute.` : ""),
    );
  }

  async function probe(): Promise<Health> {
    // Whether the database answered a write just now: proof that it can be reached again.
    let wrote = false;
    try {
      if (isPostgres(store)) {
        // A write transaction on the database server; DATA_DIR holds nothing of the store.
        wrote = await probePostgresWrite(store);
      } else {
        // 1. A real write through SQLite: an UPDATE of a row to itself in an IMMEDIATE
        // transaction appends a WAL frame, then waits for its sync as a request does (a
        // rolled-back or empty transaction would write nothing), so it fails as the requests
        // do: full, read-only, I/O error, a failed sync.
        // 2. A 4 KiB file in DATA_DIR, fsynced and removed: the WAL may still have room in
        // pages it reuses while the disk has none left for the database to grow.
        // A transaction holding the connection is normal traffic (as a busy lock is, below);
        // the write probe would run inside it and prove nothing.
        // In libuv's threads, not on the event loop: a disk that stops answering must leave
        // the server answering (and /healthz saying so, below).
        if (!isConnectionBusy(store)) {
          probeDatabaseWrite(store, PROBE_BUSY_TIMEOUT_MS);
          await sqliteWritesDurable(store);
        }
        const file = path.join(dataDir, PROBE_FILE);
        const handle = await fs.promises.open(file, "w", 0o600);
        try {
          await handle.write(PROBE_BYTES);
          await handle.sync();
        } finally {
          await handle.close();
          await fs.promises.rm(file, { force: true });
        }
      }
    } catch (error) {
      const condition = storageCondition(error);
      // A writer holding the lock for the probe's 100 ms is normal traffic, not a fault.
      if (condition === "busy") return { ok: true };
      if (condition === undefined) throw error;
      report(condition, error);
      return degraded(condition);
    }
    // Requests that found PostgreSQL gone a moment ago say nothing more once it took a write.
    const recent = lastFailure && Date.now() - lastFailure.at < RECENT_FAILURE_MS && !(wrote && lastFailure.condition === "unreachable");
    if (recent && lastFailure) return degraded(lastFailure.condition);
    return { ok: true };
  }

  // SQLite's probe under way, which may outlast its answer: while the disk does not finish
  // it, /healthz says so without starting another (each would hold one of libuv's threads).
  let underWay: { health: Promise<Health>; startedAt: number; reported: boolean } | undefined;

  function probeWithDeadline(): Promise<Health> {
    // probePostgresWrite stops waiting by itself, and answers unreachable.
    if (isPostgres(store)) return probe();
    if (!underWay) {
      const entry = { health: probe(), startedAt: Date.now(), reported: false };
      underWay = entry;
      const done = () => {
        if (underWay === entry) underWay = undefined;
      };
      entry.health.then(done, done);
    }
    const entry = underWay;
    // Logged once per stuck probe, not at every poll: the polls are not failures of their own.
    const stalled = (): Health => {
      if (!entry.reported) {
        entry.reported = true;
        report("stalled", new Error(`the storage probe has not finished in ${PROBE_TIMEOUT_MS} ms`));
      }
      return degraded("stalled");
    };
    const left = entry.startedAt + PROBE_TIMEOUT_MS - Date.now();
    // Past its deadline nothing more is attached to the stuck probe, however long it lasts.
    if (left <= 0) return Promise.resolve(stalled());
    return new Promise<Health>((resolve, reject) => {
      const timer = setTimeout(() => resolve(stalled()), left);
      timer.unref();
      entry.health.then(
        (answer) => {
          clearTimeout(timer);
          resolve(answer);
        },
        (error: unknown) => {
          clearTimeout(timer);
          reject(error);
        },
      );
    });
  }

  return {
    report,
    health() {
      const now = Date.now();
      if (!cached || now - cached.at >= PROBE_CACHE_MS) {
        const entry = { health: probeWithDeadline(), at: now };
        cached = entry;
        // A database found unreachable is asked again at the next call, once this probe has
        // answered: it comes back all at once (restarted, failed over), and a load balancer
        // should see that at once. The probe fails fast meanwhile (or shares the one waiting).
        entry.health.then(
          (health) => {
            if (!health.ok && health.reason === CONDITIONS.unreachable.message) entry.at = Number.NEGATIVE_INFINITY;
          },
          () => {},
        );
      }
      return cached.health;
    },
  };
}

function degraded(condition: StorageCondition): Health {
  return { ok: false, reason: CONDITIONS[condition].message, retryAfterSeconds: CONDITIONS[condition].retryAfterSeconds };
}

/**
 * PostgreSQL's twin of db.ts's probeDatabaseWrite: the first key_checks row updated to
 * itself in a transaction of its own, which writes a row version and flushes a commit
 * record, so it fails as the requests do (disk full, a read-only standby, unreachable).
 * Short timeouts all along: a row lock held longer than 100 ms is answered as busy (normal
 * traffic), and a database that answers nothing within two seconds as unreachable. Not
 * under the write lock of core/postgres.ts, so it never queues behind the writers. False
 * when it did not run: every connection of the pool is at work and requests wait for one,
 * which is traffic (as SQLite's busy connection), and the probe would wait behind them.
 */
async function probePostgresWrite(store: PgStore): Promise<boolean> {
  const pool = store.pool;
  if (pool.waitingCount > 0 || (pool.idleCount === 0 && pool.totalCount >= (pool.options.max ?? 10))) return false;
  const work = (async () => {
    let client: pg.PoolClient;
    try {
      client = await pool.connect();
    } catch (error) {
      throw isDatabaseUnavailable(error) ? new DatabaseUnavailableError(error) : error;
    }
    const connection = holdConnection(client);
    try {
      // One round trip (the simple protocol runs them in order); query_timeout ends a wait on a hung server.
      await client.query({
        text: `BEGIN; SET LOCAL lock_timeout = ${PROBE_BUSY_TIMEOUT_MS}; SET LOCAL statement_timeout = ${PROBE_TIMEOUT_MS};
               UPDATE key_checks SET check_value = check_value WHERE version = (SELECT min(version) FROM key_checks); COMMIT`,
        query_timeout: PROBE_TIMEOUT_MS,
      } as pg.QueryConfig);
      connection.release();
    } catch (error) {
      // Left in a failed transaction or waiting on a hung server: not given back to the pool.
      connection.release(error ?? true);
      throw error;
    }
  })();
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new DatabaseUnavailableError(new Error(`no answer within ${PROBE_TIMEOUT_MS} ms`))), PROBE_TIMEOUT_MS);
  });
  // The connection attempt may end after the timeout: its client is released above, its error dropped here.
  work.catch(() => {});
  try {
    await Promise.race([work, timeout]);
  } finally {
    clearTimeout(timer);
  }
  return true;
}
