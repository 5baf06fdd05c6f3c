import { and, eq, isNotNull, isNull, lt, or, sql } from "drizzle-orm";
import type { Db } from "../../core/db.ts";
import { integrations, integrationVars, users } from "../../core/schema.ts";

export type IntegrationRow = typeof integrations.$inferSelect;
export type IntegrationVarRow = typeof integrationVars.$inferSelect;

export function createVercelRepo(db: Db) {
  return {
    find(projectId: string): IntegrationRow | undefined {
      return db.select().from(integrations).where(eq(integrations.projectId, projectId)).get();
    },

    /** The e-mail of the person who connected, for the connection view (read only). */
    findUserEmail(userId: string): string | undefined {
      return db.select({ email: users.email }).from(users).where(eq(users.id, userId)).get()?.email ?? undefined;
    },

    insert(row: typeof integrations.$inferInsert): void {
      db.insert(integrations).values(row).run();
    },

    update(projectId: string, fields: Partial<IntegrationRow>): void {
      db.update(integrations).set(fields).where(eq(integrations.projectId, projectId)).run();
    },

    /** Removes the connection and what it knows about the vars it created. */
    delete(projectId: string): boolean {
      db.delete(integrationVars).where(eq(integrationVars.projectId, projectId)).run();
      return db.delete(integrations).where(eq(integrations.projectId, projectId)).run().changes > 0;
    },

    /**
     * Takes the one-sync-at-a-time lock: only one conditional UPDATE can find the column
     * empty, in this process or any other on the same file.
     */
    tryLock(projectId: string, startedAt: string, lastRun: string, staleBefore?: string): boolean {
      const free = staleBefore
        ? or(isNull(integrations.syncStartedAt), lt(integrations.syncStartedAt, staleBefore))
        : isNull(integrations.syncStartedAt);
      const result = db
        .update(integrations)
        .set({ syncStartedAt: startedAt, lastRun })
        .where(and(eq(integrations.projectId, projectId), free))
        .run();
      return result.changes === 1;
    },

    /** Releases the lock and subtracts the changes this run picked up from `pending`. */
    finishRun(projectId: string, pendingConsumed: number, fields: Partial<IntegrationRow>): void {
      db.update(integrations)
        .set({ ...fields, syncStartedAt: null, pending: sql`max(${integrations.pending} - ${pendingConsumed}, 0)` })
        .where(eq(integrations.projectId, projectId))
        .run();
    },

    incrementPending(projectId: string): void {
      db.update(integrations)
        .set({ pending: sql`${integrations.pending} + 1` })
        .where(eq(integrations.projectId, projectId))
        .run();
    },

    /** Connections whose sync_started_at is set: at start-up, syncs a dead process left. */
    listLocked(): IntegrationRow[] {
      return db.select().from(integrations).where(isNotNull(integrations.syncStartedAt)).all();
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
  };
}

export type VercelRepo = ReturnType<typeof createVercelRepo>;
