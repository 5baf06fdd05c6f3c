// The WAL file grows with every write until a checkpoint can run to its end, and SQLite's
// automatic checkpoints never shrink it: after a large import or a prune it can stay tens
// of megabytes. `wal_checkpoint(TRUNCATE)` copies it into the database and empties it; it
// runs off the request path (on a timer, after the response) and never waits for a lock.
// PostgreSQL manages its own write-ahead log (checkpoints, recycling): nothing to do there.
import type { Logger } from "pino";
import { BUSY_TIMEOUT_MS, type Db, isConnectionBusy } from "./db.ts";
import { isPostgres, type Store } from "./store.ts";

export interface WalMaintenanceOptions {
  /** How long without requests counts as idle (60 s). */
  idleMs?: number;
  /** Where a failed checkpoint goes (a full disk is the storage monitor's to report); the log by default. */
  onError?: (error: unknown, what: string) => void;
}

export type WalMaintenance = ReturnType<typeof createWalMaintenanceSqlite>;

export function createWalMaintenance(
  store: Store,
  log: Pick<Logger, "debug" | "error">,
  options: WalMaintenanceOptions = {},
): WalMaintenance {
  if (!isPostgres(store)) return createWalMaintenanceSqlite(store, log, options);
  return {
    // No WAL of this server's to empty: done, as after a truncation.
    truncate: () => true,
    noteRequest() {},
    afterLargeWrite() {},
    start() {},
    stop() {},
  };
}

function createWalMaintenanceSqlite(db: Db, log: Pick<Logger, "debug" | "error">, options: WalMaintenanceOptions) {
  const sqlite = db.$client;
  const onError = options.onError ?? ((error: unknown, what: string) => log.error({ err: error }, what));
  const idleMs = options.idleMs ?? 60_000;
  let lastRequestMs = Date.now();
  // Whether anything may have been written since the last truncation.
  let hasWrites = true;
  let soon: NodeJS.Timeout | undefined;
  let idleTimer: NodeJS.Timeout | undefined;

  /** True when the WAL was emptied; false when a reader or writer (another process) was in the way. */
  function truncate(): boolean {
    if (isConnectionBusy(db)) {
      log.debug("WAL checkpoint skipped: a transaction holds the connection");
      return false;
    }
    // No waiting: busy means someone is using the file, and the next idle moment will do.
    sqlite.pragma("busy_timeout = 0");
    try {
      const [result] = sqlite.pragma("wal_checkpoint(TRUNCATE)") as { busy: number; log: number; checkpointed: number }[];
      const isDone = result?.busy === 0;
      if (isDone) hasWrites = false;
      else log.debug("WAL checkpoint skipped: the database is in use");
      return isDone;
    } catch (error) {
      onError(error, "WAL checkpoint failed");
      return false;
    } finally {
      sqlite.pragma(`busy_timeout = ${BUSY_TIMEOUT_MS}`);
    }
  }

  return {
    truncate,
    /** For every request: the WAL is left alone while requests keep coming. */
    noteRequest(): void {
      lastRequestMs = Date.now();
      hasWrites = true;
    },
    /** After a large write (an import of many entries, a prune): truncate once it is answered. */
    afterLargeWrite(): void {
      hasWrites = true;
      if (soon) return;
      soon = setTimeout(() => {
        soon = undefined;
        truncate();
      }, 100);
      soon.unref();
    },
    start(): void {
      idleTimer = setInterval(
        () => {
          if (hasWrites && Date.now() - lastRequestMs >= idleMs) truncate();
        },
        Math.max(1000, idleMs / 2),
      );
      idleTimer.unref();
    },
    stop(): void {
      clearTimeout(soon);
      clearInterval(idleTimer);
    },
  };
}
