import { and, asc, eq, isNotNull, isNull, lt, or, sql } from "drizzle-orm";
import type { PgStore } from "../../core/postgres.ts";
import { integrations, integrationVars, users } from "../../core/schema.pg.ts";
import type { VercelRepo } from "./vercel.repo.ts";

/** vercel.repo.ts on PostgreSQL: the same rows, the same JavaScript values. */
export function createVercelRepoPg(store: PgStore): VercelRepo {
  const db = store.db();
  return {
    async find(projectId) {
      const [row] = await db.select().from(integrations).where(eq(integrations.projectId, projectId)).limit(1);
      return row;
    },

    async findHosting(projectId) {
      const [row] = await db
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
        .limit(1);
      return row;
    },

    async insert(row) {
      await db.insert(integrations).values(row);
    },

    async update(projectId, fields) {
      await db.update(integrations).set(fields).where(eq(integrations.projectId, projectId));
    },

    async forgetVars(projectId) {
      await db.delete(integrationVars).where(eq(integrationVars.projectId, projectId));
    },

    // The caller's transaction makes the two statements one, as on SQLite.
    async delete(projectId) {
      await this.forgetVars(projectId);
      const result = await db.delete(integrations).where(eq(integrations.projectId, projectId));
      return (result.rowCount ?? 0) > 0;
    },

    async tryLock(lease) {
      const free = or(
        isNull(integrations.syncStartedAt),
        and(isNull(integrations.syncOwner), lt(integrations.syncStartedAt, lease.ownerlessStaleBefore)),
        and(isNotNull(integrations.syncOwner), lt(integrations.syncHeartbeatAt, lease.staleBefore)),
      );
      const result = await db
        .update(integrations)
        .set({ syncStartedAt: lease.startedAt, syncOwner: lease.owner, syncHeartbeatAt: lease.startedAt, lastRun: lease.lastRun })
        .where(and(eq(integrations.projectId, lease.projectId), free));
      return result.rowCount === 1;
    },

    async heartbeat(projectId, owner, startedAt, now) {
      const result = await db
        .update(integrations)
        .set({ syncHeartbeatAt: now })
        .where(and(eq(integrations.projectId, projectId), eq(integrations.syncOwner, owner), eq(integrations.syncStartedAt, startedAt)));
      return result.rowCount === 1;
    },

    async finishRun(projectId, pendingConsumed, fields) {
      await db
        .update(integrations)
        .set({
          ...fields,
          syncStartedAt: null,
          syncOwner: null,
          syncHeartbeatAt: null,
          pending: sql`GREATEST(${integrations.pending} - ${pendingConsumed}::integer, 0)`,
        })
        .where(eq(integrations.projectId, projectId));
    },

    async incrementPending(projectId) {
      await db
        .update(integrations)
        .set({ pending: sql`${integrations.pending} + 1` })
        .where(eq(integrations.projectId, projectId));
    },

    // Ordered as SQLite walks the table (by rowid, which is insertion order), so runs recover in the same order.
    async listStale(staleBefore, ownerlessStaleBefore) {
      return await db
        .select()
        .from(integrations)
        .where(
          or(
            and(isNull(integrations.syncOwner), lt(integrations.syncStartedAt, ownerlessStaleBefore)),
            and(isNotNull(integrations.syncOwner), lt(integrations.syncHeartbeatAt, staleBefore)),
          ),
        )
        .orderBy(asc(integrations.createdAt), asc(integrations.projectId));
    },

    async listWithPending() {
      return await db
        .select()
        .from(integrations)
        .where(sql`${integrations.pending} > 0`)
        .orderBy(asc(integrations.createdAt), asc(integrations.projectId));
    },

    // SQLite reads these through the primary key's index: in (target, key) order.
    async listVars(projectId) {
      return await db
        .select()
        .from(integrationVars)
        .where(eq(integrationVars.projectId, projectId))
        .orderBy(asc(integrationVars.target), asc(integrationVars.key));
    },

    async saveVar(row) {
      await db
        .insert(integrationVars)
        .values(row)
        .onConflictDoUpdate({
          target: [integrationVars.projectId, integrationVars.target, integrationVars.key],
          set: { hostEnvId: row.hostEnvId, createdAt: row.createdAt },
        });
    },

    async deleteVar(projectId, target, key) {
      await db
        .delete(integrationVars)
        .where(and(eq(integrationVars.projectId, projectId), eq(integrationVars.target, target), eq(integrationVars.key, key)));
    },
  };
}
