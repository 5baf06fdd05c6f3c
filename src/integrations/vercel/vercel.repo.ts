import { and, eq, isNotNull, isNull, lt, or, sql } from "drizzle-orm";
import { type Db, guard } from "../../core/db.ts";
import { integrations, integrationVars, users } from "../../core/schema.ts";
import { isPostgres, type Store } from "../../core/store.ts";
import { createVercelRepoPg } from "./vercel.repo.pg.ts";

export type IntegrationRow = typeof integrations.$inferSelect;
export type IntegrationVarRow = typeof integrationVars.$inferSelect;

export interface Hosting
  extends Pick<IntegrationRow, "provider" | "status" | "lastSyncAt" | "lastSyncStatus" | "pausedAt" | "pausedReason" | "connectedBy"> {
  connectedByEmail: string | null;
}

export type VercelRepo = ReturnType<typeof createVercelRepoSqlite>;

export function createVercelRepo(store: Store): VercelRepo {
  return isPostgres(store) ? createVercelRepoPg(store) : createVercelRepoSqlite(store);
}

function createVercelRepoSqlite(db: Db) {
  return guard(db, {
    find(projectId: string): IntegrationRow | undefined {
      return db.select().from(integrations).where(eq(integrations.projectId, projectId)).get();
    },

    /** What the security overview shows of the connection, with the e-mail of whoever connected. */
    findHosting(projectId: string): Hosting | undefined {
      return db
        .select({
          provider: integrations.provider,
          status: integrations.status,
          lastSyncAt: integrations.lastSyncAt,
          lastSyncStatus: integrations.lastSyncStatus,
          pausedAt: integrations.pausedAt,
          pausedReason: integrations.pausedReason,
          connectedBy: integrations.connectedBy,
          connectedByEmail: users.email,
        })
        .from(integrations)
        .leftJoin(users, eq(users.id, integrations.connectedBy))
        .where(eq(integrations.projectId, projectId))
        .get();
    },

    insert(row: typeof integrations.$inferInsert): void {
      db.insert(integrations).values(row).run();
    },

    update(projectId: string, fields: Partial<IntegrationRow>): void {
      db.update(integrations).set(fields).where(eq(integrations.projectId, projectId)).run();
    },

    /** Forgets the vars the connection created: they were another linked project's. */
    forgetVars(projectId: string): void {
      db.delete(integrationVars).where(eq(integrationVars.projectId, projectId)).run();
    },

    /** Removes the connection and what it knows about the vars it created. */
    delete(projectId: string): boolean {
      this.forgetVars(projectId);
      return db.delete(integrations).where(eq(integrations.projectId, projectId)).run().changes > 0;
    },

    /**
     * Takes the one-sync-at-a-time lease: only one conditional UPDATE can find it free, in
     * this process or any other on the same file. Free: not held, held by a process whose
     * heartbeat is older than `staleBefore`, or held without an owner (by a version before
     * leases) since before `ownerlessStaleBefore`.
     */
    tryLock(lease: {
      projectId: string;
      startedAt: string;
      owner: string;
      lastRun: string;
      staleBefore: string;
      ownerlessStaleBefore: string;
    }): boolean {
      const free = or(
        isNull(integrations.syncStartedAt),
        and(isNull(integrations.syncOwner), lt(integrations.syncStartedAt, lease.ownerlessStaleBefore)),
        and(isNotNull(integrations.syncOwner), lt(integrations.syncHeartbeatAt, lease.staleBefore)),
      );
      const result = db
        .update(integrations)
        .set({ syncStartedAt: lease.startedAt, syncOwner: lease.owner, syncHeartbeatAt: lease.startedAt, lastRun: lease.lastRun })
        .where(and(eq(integrations.projectId, lease.projectId), free))
        .run();
      return result.changes === 1;
    },

    /** Renews a run's lease; false when it is no longer this run's (taken over, or the connection is gone). */
    heartbeat(projectId: string, owner: string, startedAt: string, now: string): boolean {
      return (
        db
          .update(integrations)
          .set({ syncHeartbeatAt: now })
          .where(and(eq(integrations.projectId, projectId), eq(integrations.syncOwner, owner), eq(integrations.syncStartedAt, startedAt)))
          .run().changes === 1
      );
    },

    /** Releases the lease and subtracts the changes this run picked up from `pending`. */
    finishRun(projectId: string, pendingConsumed: number, fields: Partial<IntegrationRow>): void {
      db.update(integrations)
        .set({
          ...fields,
          syncStartedAt: null,
          syncOwner: null,
          syncHeartbeatAt: null,
          pending: sql`max(${integrations.pending} - ${pendingConsumed}, 0)`,
        })
        .where(eq(integrations.projectId, projectId))
        .run();
    },

    incrementPending(projectId: string): void {
      db.update(integrations)
        .set({ pending: sql`${integrations.pending} + 1` })
        .where(eq(integrations.projectId, projectId))
        .run();
    },

    /** Syncs whose process is gone: a lease free by the rules of tryLock. */
    listStale(staleBefore: string, ownerlessStaleBefore: string): IntegrationRow[] {
      return db
        .select()
        .from(integrations)
        .where(
          or(
            and(isNull(integrations.syncOwner), lt(integrations.syncStartedAt, ownerlessStaleBefore)),
            and(isNotNull(integrations.syncOwner), lt(integrations.syncHeartbeatAt, staleBefore)),
          ),
        )
        .all();
    },

    listWithPending(): IntegrationRow[] {
      return db.select().from(integrations).where(sql`${integrations.pending} > 0`).all();
    },

    listVars(projectId: string): IntegrationVarRow[] {
      return db.select().from(integrationVars).where(eq(integrationVars.projectId, projectId)).all();
    },

    saveVar(row: IntegrationVarRow): void {
      db.insert(integrationVars)
        .values(row)
        .onConflictDoUpdate({
          target: [integrationVars.projectId, integrationVars.target, integrationVars.key],
          set: { hostEnvId: row.hostEnvId, createdAt: row.createdAt },
        })
        .run();
    },

    deleteVar(projectId: string, target: string, key: string): void {
      db.delete(integrationVars)
        .where(and(eq(integrationVars.projectId, projectId), eq(integrationVars.target, target), eq(integrationVars.key, key)))
        .run();
    },
  });
}
