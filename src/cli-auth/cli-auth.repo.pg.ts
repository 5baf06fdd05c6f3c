import { and, desc, eq, gt, isNull, lt, sql } from "drizzle-orm";
import type { PgStore } from "../core/postgres.ts";
import { cliSessions, cliTokens, deviceRequests, users } from "../core/schema.pg.ts";
import type { CliAuthRepo } from "./cli-auth.repo.ts";

/** cli-auth.repo.ts on PostgreSQL: the same rows, the same JavaScript values. */
export function createCliAuthRepoPg(store: PgStore): CliAuthRepo {
  const db = store.db();
  return {
    async insertDeviceRequest(row) {
      await db.insert(deviceRequests).values(row);
    },

    async deleteDeviceRequestsExpiredBefore(iso) {
      await db.delete(deviceRequests).where(lt(deviceRequests.expiresAt, iso));
    },

    async findDeviceRequestByDeviceCode(deviceCodeHash) {
      const [row] = await db.select().from(deviceRequests).where(eq(deviceRequests.deviceCodeHash, deviceCodeHash)).limit(1);
      return row;
    },

    async findPendingDeviceRequestByUserCode(userCodeHash, nowIso) {
      const [row] = await db
        .select()
        .from(deviceRequests)
        .where(
          and(eq(deviceRequests.userCodeHash, userCodeHash), eq(deviceRequests.status, "pending"), gt(deviceRequests.expiresAt, nowIso)),
        )
        .limit(1);
      return row;
    },

    async setDeviceRequestStatus(id, from, to, approvedBy) {
      const result = await db
        .update(deviceRequests)
        .set({ status: to, ...(approvedBy ? { approvedBy } : {}) })
        .where(and(eq(deviceRequests.id, id), eq(deviceRequests.status, from)));
      return result.rowCount === 1;
    },

    async setDeviceRequestPolledAt(id, iso) {
      await db.update(deviceRequests).set({ lastPolledAt: iso }).where(eq(deviceRequests.id, id));
    },

    async insertSession(row) {
      await db.insert(cliSessions).values(row);
    },

    async insertToken(row) {
      await db.insert(cliTokens).values(row);
    },

    async findTokenWithSession(tokenHash) {
      const [row] = await db
        .select({ token: cliTokens, session: cliSessions, userEmail: users.email, userDisabledAt: users.disabledAt })
        .from(cliTokens)
        .innerJoin(cliSessions, eq(cliSessions.id, cliTokens.sessionId))
        .innerJoin(users, eq(users.id, cliSessions.userId))
        .where(eq(cliTokens.tokenHash, tokenHash))
        .limit(1);
      return row;
    },

    async markTokenUsed(id, iso) {
      const result = await db
        .update(cliTokens)
        .set({ usedAt: iso })
        .where(and(eq(cliTokens.id, id), isNull(cliTokens.usedAt)));
      return result.rowCount === 1;
    },

    async extendSession(id, lastUsedAt, expiresAt) {
      await db.update(cliSessions).set({ lastUsedAt, expiresAt }).where(eq(cliSessions.id, id));
    },

    async revokeSession(id, iso) {
      const result = await db
        .update(cliSessions)
        .set({ revokedAt: iso })
        .where(and(eq(cliSessions.id, id), isNull(cliSessions.revokedAt)));
      return result.rowCount === 1;
    },

    async listActiveSessions(userId, nowIso) {
      return await db
        .select()
        .from(cliSessions)
        .where(and(eq(cliSessions.userId, userId), isNull(cliSessions.revokedAt), gt(cliSessions.expiresAt, nowIso)))
        .orderBy(desc(cliSessions.lastUsedAt), desc(cliSessions.id));
    },

    async denyUncollectedApprovals(userId) {
      await db
        .update(deviceRequests)
        .set({ status: "denied" })
        .where(and(eq(deviceRequests.approvedBy, userId), eq(deviceRequests.status, "approved")));
    },

    async revokeAllSessionsOf(userId, nowIso) {
      await this.denyUncollectedApprovals(userId);
      const result = await db
        .update(cliSessions)
        .set({ revokedAt: nowIso })
        .where(and(eq(cliSessions.userId, userId), isNull(cliSessions.revokedAt)));
      return result.rowCount ?? 0;
    },

    async revokeActiveSessions(userId, nowIso, sessionId) {
      const result = await db
        .update(cliSessions)
        .set({ revokedAt: nowIso })
        .where(
          and(
            eq(cliSessions.userId, userId),
            isNull(cliSessions.revokedAt),
            gt(cliSessions.expiresAt, nowIso),
            sessionId === undefined ? undefined : eq(cliSessions.id, sessionId),
          ),
        );
      return result.rowCount ?? 0;
    },

    async deleteDeadTokens(nowIso, keptUntilIso) {
      await db.delete(cliSessions).where(sql`${cliSessions.revokedAt} <= ${keptUntilIso} OR ${cliSessions.expiresAt} <= ${keptUntilIso}`);
      await db
        .delete(cliTokens)
        .where(
          sql`${cliTokens.sessionId} IN (SELECT ${cliSessions.id} FROM ${cliSessions} WHERE ${cliSessions.revokedAt} IS NOT NULL OR ${cliSessions.expiresAt} <= ${nowIso}) OR (${cliTokens.expiresAt} <= ${nowIso} AND (${cliTokens.kind} = 'access' OR ${cliTokens.usedAt} IS NULL))`,
        );
    },
  };
}
