// Group commit for the server's own SQLite connection at SQLITE_SYNCHRONOUS=full.
//
// SQLite's FULL fsyncs the WAL inside every COMMIT, on the event loop: while the disk
// answers, no other request runs, and every write pays its own fsync. Instead the server's
// connection runs at NORMAL (a commit writes its WAL frames and returns) and whoever wrote
// waits here, off the event loop, for an fdatasync of the WAL that started after the write:
// the writes made while one sync runs share the next. A write is still answered only once
// it is on disk, as at FULL; what changes is that the connection serves others meanwhile.
//
// WAL recovery keeps every frame up to the last valid commit frame, so frames written and
// then fdatasynced are as durable as SQLite's own sync would make them. Checkpoints are
// unchanged: at NORMAL SQLite still syncs the WAL before one and the database after it.
import fs from "node:fs";
import path from "node:path";
import type Database from "better-sqlite3";

/** The code of the error every write meets once a sync has failed. */
export const WAL_SYNC_FAILED = "WAL_SYNC_FAILED";

export interface GroupCommitOptions {
  /** Runs before each sync; tests hold it to see that answers wait for the disk. */
  beforeSync?: () => Promise<void>;
}

export interface GroupCommit {
  /** How many writes the connection has made (statements that may write, and commits). */
  readonly writes: number;
  /** Counts a commit made with exec (BEGIN … COMMIT), which the statement count cannot see. */
  noteCommit(): void;
  /**
   * Runs fn when the sync under way ends, just before the next one starts; on the next turn
   * of the event loop when none is under way. Writes that would only wait for the next sync
   * anyway (the events of reads) are made then, all in one commit.
   */
  whenSyncEnds(fn: () => void): void;
  /** Throws the error of a failed sync, if one failed: a write about to start is refused. */
  refuseAfterFailure(): void;
  /** Settles once every write made so far is on disk; rejects with the error of a failed sync. */
  durable(): Promise<void>;
  /** Waits for the sync under way, then closes the WAL's descriptor. */
  close(): Promise<void>;
}

interface Waiter {
  resolve: () => void;
  reject: (error: Error) => void;
}

interface Batch {
  /** `writes` when the sync started: it covers every write counted up to then. */
  mark: number;
  waiters: Waiter[];
  done: Promise<void>;
}

/**
 * Starts group commit on `sqlite`, whose WAL is `walFile`: sets the connection to NORMAL and
 * counts its writes. Statements prepared on it from now on are counted, so call this before
 * the repos prepare theirs.
 */
export function startGroupCommit(sqlite: Database.Database, walFile: string, options: GroupCommitOptions = {}): GroupCommit {
  const fd = fs.openSync(walFile, "r");
  let writes = 0;
  // The mark of the last sync that succeeded: nothing to wait for while `writes` equals it.
  let syncedMark = 0;
  let inFlight: Batch | undefined;
  let next: Waiter[] = [];
  const atSyncEnd: (() => void)[] = [];
  // A failed fsync leaves the kernel free to drop the pages it could not write, and a later
  // fsync may then succeed without them (PostgreSQL's "fsyncgate"): nothing is acknowledged
  // after one, until the server restarts and SQLite recovers from what is on disk.
  let failure: Error | undefined;
  // The WAL may have been created by this open; its directory entry must reach the disk too.
  let directorySynced = false;

  countWrites(sqlite, () => {
    writes += 1;
  });
  sqlite.pragma("synchronous = NORMAL");

  async function syncWal(): Promise<void> {
    await options.beforeSync?.();
    await new Promise<void>((resolve, reject) => fs.fdatasync(fd, (error) => (error ? reject(error) : resolve())));
    if (!directorySynced) {
      const directory = await fs.promises.open(path.dirname(walFile), "r");
      try {
        await directory.sync();
      } finally {
        await directory.close();
      }
      directorySynced = true;
    }
  }

  function start(): void {
    const waiters = next;
    next = [];
    const mark = writes;
    const batch: Batch = {
      mark,
      waiters,
      done: syncWal().then(
        () => {
          if (failure === undefined) syncedMark = Math.max(syncedMark, mark);
        },
        (error: unknown) => {
          // storage.ts answers this code with 503 and tells the operator to restart.
          failure ??= Object.assign(new Error("fsync of the database's WAL failed"), { code: WAL_SYNC_FAILED, cause: error });
        },
      ),
    };
    inFlight = batch;
    void batch.done.then(() => {
      inFlight = undefined;
      for (const waiter of batch.waiters) settle(waiter);
      for (const fn of atSyncEnd.splice(0)) fn();
      if (next.length === 0) return;
      if (failure === undefined) start();
      else for (const waiter of next.splice(0)) settle(waiter);
    });
  }

  function settle(waiter: Waiter): void {
    if (failure === undefined) waiter.resolve();
    else waiter.reject(failure);
  }

  return {
    get writes() {
      return writes;
    },
    noteCommit() {
      writes += 1;
    },
    refuseAfterFailure() {
      if (failure !== undefined) throw failure;
    },
    whenSyncEnds(fn) {
      if (inFlight) atSyncEnd.push(fn);
      else setImmediate(fn);
    },
    durable() {
      if (failure !== undefined) return Promise.reject(failure);
      if (writes === syncedMark) return Promise.resolve();
      return new Promise((resolve, reject) => {
        const waiter = { resolve, reject };
        // A sync that started after the last write covers it; else the next one does.
        if (inFlight && inFlight.mark === writes) inFlight.waiters.push(waiter);
        else {
          next.push(waiter);
          if (!inFlight) start();
        }
      });
    },
    async close() {
      while (inFlight) await inFlight.done;
      fs.closeSync(fd);
    },
  };
}

type Statement = Database.Statement<unknown[], unknown>;
// Not `iterate`: it runs lazily, after it returns; none of our writes is run that way.
const EXECUTING_METHODS = ["run", "get", "all"] as const;

/**
 * Calls `counted` after each run of a statement that may write (better-sqlite3's `readonly`
 * is false: INSERT, UPDATE, DELETE, DDL, most pragmas). Reads stay untouched, so the hot
 * path's SELECTs cost nothing more. Drizzle prepares through the same `prepare`.
 */
function countWrites(sqlite: Database.Database, counted: () => void): void {
  const prepare = sqlite.prepare.bind(sqlite);
  sqlite.prepare = ((source: string) => {
    const statement = prepare(source) as Statement;
    if (statement.readonly) return statement;
    for (const name of EXECUTING_METHODS) {
      const method = statement[name] as (...args: unknown[]) => unknown;
      Object.defineProperty(statement, name, {
        value(this: Statement, ...args: unknown[]) {
          try {
            return method.apply(this, args);
          } finally {
            counted();
          }
        },
      });
    }
    return statement;
  }) as typeof sqlite.prepare;
}
