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
  /**
   * Told once, when a sync fails. The server stops at once then (see app.ts): after a failed
   * fsync nothing may touch the database again, not even SQLite's checkpoint at close.
   */
  onFailure?: (error: Error) => void;
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
  /** Settles once every write made so far is on disk; rejects with the error of a failed sync. */
  durable(): Promise<void>;
  /**
   * Settles once everything in the WAL up to now is on disk, other processes' commits
   * included (several servers may share a DATA_DIR): a sync that starts after this call,
   * even when this process wrote nothing since its last one.
   */
  durableWithOthers(): Promise<void>;
  /** Waits for the sync under way, then closes the WAL's descriptor; durable() refuses after. */
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
  // fsync may then succeed without them (PostgreSQL's "fsyncgate"): nothing is written or
  // acknowledged after one, until the server restarts and SQLite recovers from the disk.
  let failure: Error | undefined;
  let closed = false;
  // The WAL may have been created by this open; its directory entry must reach the disk too.
  let directorySynced = false;
  // What the WAL holds already may never have been synced: a process killed between its
  // commit and its sync left it in the page cache, where this process reads it as committed.
  // It is made durable before anything is served from it.
  fs.fdatasyncSync(fd);

  countWrites(
    sqlite,
    () => {
      if (failure !== undefined) throw failure;
    },
    () => {
      writes += 1;
    },
  );
  sqlite.pragma("synchronous = NORMAL");

  async function syncWal(): Promise<void> {
    await options.beforeSync?.();
    await new Promise<void>((resolve, reject) => fs.fdatasync(fd, (error) => (error ? reject(error) : resolve())));
    if (!directorySynced) {
      directorySynced = true;
      await syncFolder(path.dirname(walFile));
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
          // Syncs run one at a time and marks only grow.
          if (failure === undefined) syncedMark = mark;
        },
        (error: unknown) => {
          if (failure !== undefined) return;
          // storage.ts answers this code with 503 and tells the operator to restart.
          failure = Object.assign(new Error("fsync of the database's WAL failed"), { code: WAL_SYNC_FAILED, cause: error });
          options.onFailure?.(failure);
        },
      ),
    };
    inFlight = batch;
    void batch.done.then(() => {
      inFlight = undefined;
      for (const waiter of batch.waiters) settle(waiter);
      const callbacks = atSyncEnd.splice(0);
      if (failure !== undefined) {
        for (const waiter of next.splice(0)) settle(waiter);
      } else if (callbacks.length === 0) {
        if (next.length > 0) start();
      } else {
        // The reads' events commit a few microtasks from now, and their durable() starts the
        // next sync with them in it; starting now would leave them for the one after.
        // setImmediate only starts it if nothing did by then.
        setImmediate(() => {
          if (inFlight === undefined && !closed && next.length > 0) start();
        });
      }
      // After a failure too: the reads' flush then refuses them (503) instead of leaving them
      // waiting. Each on its own microtask, so one that throws cannot keep the others back.
      for (const fn of callbacks) queueMicrotask(fn);
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
    whenSyncEnds(fn) {
      if (inFlight && failure === undefined) atSyncEnd.push(fn);
      else setImmediate(fn);
    },
    durable() {
      if (failure !== undefined) return Promise.reject(failure);
      if (closed) return Promise.reject(new Error("the database is closed"));
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
    durableWithOthers() {
      if (failure !== undefined) return Promise.reject(failure);
      if (closed) return Promise.reject(new Error("the database is closed"));
      // A waiter of the next batch: its sync starts after this call, whatever this process wrote.
      return new Promise((resolve, reject) => {
        next.push({ resolve, reject });
        if (!inFlight) start();
      });
    },
    async close() {
      closed = true;
      // Waiters of the writes made up to now are answered first; no sync starts after this.
      while (inFlight !== undefined || (next.length > 0 && failure === undefined)) {
        if (inFlight === undefined) start();
        await inFlight?.done;
      }
      for (const waiter of next.splice(0)) settle(waiter);
      fs.closeSync(fd);
    },
  };
}

/**
 * fsyncs a folder, so that a file created in it keeps its name after a power cut. As SQLite
 * does, a folder that cannot be opened or fsynced (FUSE, 9p, CIFS mounts; a folder without
 * read permission) is no failure: only the file's own sync counts.
 */
export async function syncFolder(folder: string): Promise<void> {
  await fs.promises
    .open(folder, "r")
    .then(
      (directory) => directory.sync().finally(() => directory.close()),
      () => {},
    )
    .catch(() => {});
}

type Statement = Database.Statement<unknown[], unknown>;
type Execute = (this: Statement, ...args: unknown[]) => unknown;

/**
 * Wraps each run of a statement that may write (better-sqlite3's `readonly` is false:
 * INSERT, UPDATE, DELETE, DDL, most pragmas): `before` may refuse it, `counted` follows it.
 * Such a statement gets one prototype, made once per connection, so a prepare (drizzle
 * prepares at every query) costs one assignment; reads stay untouched, so the hot path's
 * SELECTs cost nothing more. `iterate` runs lazily, after it returns, so a write cannot be
 * counted that way: it is refused, loudly.
 */
function countWrites(sqlite: Database.Database, before: () => void, counted: () => void): void {
  const prepare = sqlite.prepare.bind(sqlite);
  const statementPrototype = Object.getPrototypeOf(prepare("SELECT 1")) as Record<"run" | "get" | "all", Execute>;
  const counting = (method: Execute): Execute =>
    function (this: Statement, ...args: unknown[]) {
      before();
      try {
        return method.apply(this, args);
      } finally {
        counted();
      }
    };
  const writing = Object.create(statementPrototype, {
    run: { value: counting(statementPrototype.run) },
    get: { value: counting(statementPrototype.get) },
    all: { value: counting(statementPrototype.all) },
    iterate: {
      value(this: Statement) {
        throw new Error(`a statement that writes is run with run, get or all, not iterate: ${this.source}`);
      },
    },
  });
  sqlite.prepare = ((source: string) => {
    const statement = prepare(source);
    if (!statement.readonly) Object.setPrototypeOf(statement, writing);
    return statement;
  }) as typeof sqlite.prepare;
}
