// Work that one server process at a time may do, when several share one database: the
// holder of a named lease renews its heartbeat, and another process takes the lease over
// only once that heartbeat is stale (the holder stopped or hangs).
import crypto from "node:crypto";
import type { Clock } from "./clock.ts";
import { type Db, guard } from "./db.ts";

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

export function createLease(db: Db, clock: Clock, options: { name: string; owner: string; staleMs: number }): Lease {
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
