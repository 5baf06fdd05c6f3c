// Work that one server process at a time may do, when several share one database: the
// holder of a named lease renews its heartbeat, and another process takes the lease over
// only once that heartbeat is stale (the holder stopped or hangs).
import crypto from "node:crypto";
import type { Clock } from "./clock.ts";
import { type Db, guard } from "./db.ts";
import { type PgStore, pgRun } from "./postgres.ts";
import { isPostgres, type Store } from "./store.ts";

/** This process's name in leases: random, so a restarted process is a new owner. */
export function newOwnerId(): string {
  return `${process.pid}-${crypto.randomBytes(6).toString("hex")}`;
}

export interface Lease {
  /** Takes the lease when free or stale, renews it when held; true while this process holds it. */
  renew(): Promise<boolean>;
  /** Gives it up at a clean stop, so another process need not wait for it to go stale. */
  release(): Promise<void>;
}

interface LeaseOptions {
  name: string;
  owner: string;
  staleMs: number;
}

export function createLease(store: Store, clock: Clock, options: LeaseOptions): Lease {
  return isPostgres(store) ? createLeasePg(store, clock, options) : createLeaseSqlite(store, clock, options);
}

function createLeaseSqlite(db: Db, clock: Clock, options: LeaseOptions): Lease {
  const sqlite = db.$client;
  // One statement: of two processes renewing together, the second finds the row held.
  const take = sqlite.prepare(
    `INSERT INTO leases (name, owner, heartbeat_at) VALUES (@name, @owner, @now)
     ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, heartbeat_at = excluded.heartbeat_at
       WHERE leases.owner = excluded.owner OR leases.heartbeat_at < @staleBefore`,
  );
  const release = sqlite.prepare("DELETE FROM leases WHERE name = ? AND owner = ?");
  // One statement each, atomic on its own: no transaction needed.
  return guard(db, {
    renew(): boolean {
      const now = clock.now();
      const params = {
        name: options.name,
        owner: options.owner,
        now: now.toISOString(),
        staleBefore: new Date(now.getTime() - options.staleMs).toISOString(),
      };
      return take.run(params).changes === 1;
    },
    release(): void {
      release.run(options.name, options.owner);
    },
  });
}

function createLeasePg(store: PgStore, clock: Clock, options: LeaseOptions): Lease {
  return {
    // One statement, as on SQLite: the row lock of ON CONFLICT makes the second of two
    // renewals re-check the WHERE against the first one's row, and find it held.
    async renew() {
      const now = clock.now();
      const taken = await pgRun(
        store,
        `INSERT INTO leases (name, owner, heartbeat_at) VALUES ($1, $2, $3)
         ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, heartbeat_at = excluded.heartbeat_at
           WHERE leases.owner = excluded.owner OR leases.heartbeat_at < $4`,
        [options.name, options.owner, now.toISOString(), new Date(now.getTime() - options.staleMs).toISOString()],
      );
      return taken === 1;
    },
    async release() {
      await pgRun(store, "DELETE FROM leases WHERE name = $1 AND owner = $2", [options.name, options.owner]);
    },
  };
}
