import { and, desc, eq, gt, isNull, lt, sql } from "drizzle-orm";
import { type Db, guard } from "../core/db.ts";
import { cliSessions, cliTokens, deviceRequests, users } from "../core/schema.ts";
import { isPostgres, type Store } from "../core/store.ts";
import { createCliAuthRepoPg } from "./cli-auth.repo.pg.ts";

export type DeviceRequestRow = typeof deviceRequests.$inferSelect;
export type CliSessionRow = typeof cliSessions.$inferSelect;
export type CliTokenRow = typeof cliTokens.$inferSelect;

/** A token with what decides whether it may still be used. */
export interface TokenWithSession {
  token: CliTokenRow;
  session: CliSessionRow;
  userEmail: string | null;
  userDisabledAt: string | null;
}

export type CliAuthRepo = ReturnType<typeof createCliAuthRepoSqlite>;

export function createCliAuthRepo(store: Store): CliAuthRepo {
  return isPostgres(store) ? createCliAuthRepoPg(store) : createCliAuthRepoSqlite(store);
}

function createCliAuthRepoSqlite(db: Db) {
  return guard(db, {
    insertDeviceRequest(row: typeof deviceRequests.$inferInsert): void {
      db.insert(deviceRequests).values(row).run();
    },

    /** Requests that ended more than a day ago are of no use to anyone. */
    deleteDeviceRequestsExpiredBefore(iso: string): void {
      db.delete(deviceRequests).where(lt(deviceRequests.expiresAt, iso)).run();
    },

    findDeviceRequestByDeviceCode(deviceCodeHash: string): DeviceRequestRow | undefined {
      return db.select().from(deviceRequests).where(eq(deviceRequests.deviceCodeHash, deviceCodeHash)).get();
    },

    /** The pending, unexpired request showing this user code (startDevice never gives out one in use). */
    findPendingDeviceRequestByUserCode(userCodeHash: string, nowIso: string): DeviceRequestRow | undefined {
      return db
        .select()
        .from(deviceRequests)
        .where(
          and(eq(deviceRequests.userCodeHash, userCodeHash), eq(deviceRequests.status, "pending"), gt(deviceRequests.expiresAt, nowIso)),
        )
        .get();
    },

    /** Moves a request on from `from`; answers whether it was still in that state. */
    setDeviceRequestStatus(id: string, from: DeviceRequestRow["status"], to: DeviceRequestRow["status"], approvedBy?: string): boolean {
      const result = db
        .update(deviceRequests)
        .set({ status: to, ...(approvedBy ? { approvedBy } : {}) })
        .where(and(eq(deviceRequests.id, id), eq(deviceRequests.status, from)))
        .run();
      return result.changes === 1;
    },

    setDeviceRequestPolledAt(id: string, iso: string): void {
      db.update(deviceRequests).set({ lastPolledAt: iso }).where(eq(deviceRequests.id, id)).run();
    },

    insertSession(row: typeof cliSessions.$inferInsert): void {
      db.insert(cliSessions).values(row).run();
    },

    insertToken(row: typeof cliTokens.$inferInsert): void {
      db.insert(cliTokens).values(row).run();
    },

    findTokenWithSession(tokenHash: string): TokenWithSession | undefined {
      return db
        .select({ token: cliTokens, session: cliSessions, userEmail: users.email, userDisabledAt: users.disabledAt })
        .from(cliTokens)
        .innerJoin(cliSessions, eq(cliSessions.id, cliTokens.sessionId))
        .innerJoin(users, eq(users.id, cliSessions.userId))
        .where(eq(cliTokens.tokenHash, tokenHash))
        .get();
    },

    /** Marks a refresh token exchanged; false when another request got there first. */
    markTokenUsed(id: string, iso: string): boolean {
      return (
        db
          .update(cliTokens)
          .set({ usedAt: iso })
          .where(and(eq(cliTokens.id, id), isNull(cliTokens.usedAt)))
          .run().changes === 1
      );
    },

    extendSession(id: string, lastUsedAt: string, expiresAt: string): void {
      db.update(cliSessions).set({ lastUsedAt, expiresAt }).where(eq(cliSessions.id, id)).run();
    },

    revokeSession(id: string, iso: string): boolean {
      return (
        db
          .update(cliSessions)
          .set({ revokedAt: iso })
          .where(and(eq(cliSessions.id, id), isNull(cliSessions.revokedAt)))
          .run().changes === 1
      );
    },

    listActiveSessions(userId: string, nowIso: string): CliSessionRow[] {
      return db
        .select()
        .from(cliSessions)
        .where(and(eq(cliSessions.userId, userId), isNull(cliSessions.revokedAt), gt(cliSessions.expiresAt, nowIso)))
        .orderBy(desc(cliSessions.lastUsedAt), desc(cliSessions.id))
        .all();
    },

    /**
     * Revokes every session of the user not revoked yet, expired ones included (a disabled
     * user), and denies the sign-ins they approved that no terminal has picked up yet, which
     * would otherwise become sessions afterwards (a password reset); answers how many sessions.
     */
    revokeAllSessionsOf(userId: string, nowIso: string): number {
      this.denyUncollectedApprovals(userId);
      return db
        .update(cliSessions)
        .set({ revokedAt: nowIso })
        .where(and(eq(cliSessions.userId, userId), isNull(cliSessions.revokedAt)))
        .run().changes;
    },

    /** Denies the sign-ins the user approved that no terminal has picked up yet: they would become sessions afterwards. */
    denyUncollectedApprovals(userId: string): void {
      db.update(deviceRequests)
        .set({ status: "denied" })
        .where(and(eq(deviceRequests.approvedBy, userId), eq(deviceRequests.status, "approved")))
        .run();
    },

    /** Revokes the user's active sessions (or just `sessionId`); answers how many. */
    revokeActiveSessions(userId: string, nowIso: string, sessionId?: string): number {
      return db
        .update(cliSessions)
        .set({ revokedAt: nowIso })
        .where(
          and(
            eq(cliSessions.userId, userId),
            isNull(cliSessions.revokedAt),
            gt(cliSessions.expiresAt, nowIso),
            sessionId === undefined ? undefined : eq(cliSessions.id, sessionId),
          ),
        )
        .run().changes;
    },

    /**
     * Token rows of ended sessions, and expired tokens of live ones (a session refreshed every
     * hour for a year would keep 17,000), are dead weight: presented, either answers 401 as an
     * unknown one does. Not a used refresh token of a live session: presented again, it must
     * still end the session, however old. The session row itself stays for the record
     * (device name, when it began and ended) until `keptUntilIso`: then it goes, or every
     * device start would scan all the sessions there ever were.
     */
    deleteDeadTokens(nowIso: string, keptUntilIso: string): void {
      db.delete(cliSessions).where(sql`${cliSessions.revokedAt} <= ${keptUntilIso} OR ${cliSessions.expiresAt} <= ${keptUntilIso}`).run();
      db.delete(cliTokens)
        .where(
          sql`${cliTokens.sessionId} IN (SELECT ${cliSessions.id} FROM ${cliSessions} WHERE ${cliSessions.revokedAt} IS NOT NULL OR ${cliSessions.expiresAt} <= ${nowIso}) OR (${cliTokens.expiresAt} <= ${nowIso} AND (${cliTokens.kind} = 'access' OR ${cliTokens.usedAt} IS NULL))`,
        )
        .run();
    },
  });
}
