import { and, asc, eq, gt, isNull, lte } from "drizzle-orm";
import type { PgStore } from "../core/postgres.ts";
import { accountLinks, signInFailures } from "../core/schema.pg.ts";
import type { LocalRepo } from "./local.repo.ts";

/** local.repo.ts on PostgreSQL: the same statements through drizzle, the same rows. */
export function createLocalRepoPg(store: PgStore): LocalRepo {
  const db = store.db();
  return {
    async insertLink(row) {
      await db.insert(accountLinks).values(row);
    },

    async findLinkByTokenHash(tokenHash) {
      return (await db.select().from(accountLinks).where(eq(accountLinks.tokenHash, tokenHash)))[0];
    },

    async markLinkUsed(id, now) {
      const result = await db
        .update(accountLinks)
        .set({ usedAt: now.toISOString() })
        .where(and(eq(accountLinks.id, id), isNull(accountLinks.usedAt)));
      return result.rowCount === 1;
    },

    async deleteUnusedLinksOf(userId) {
      await db.delete(accountLinks).where(and(eq(accountLinks.userId, userId), isNull(accountLinks.usedAt)));
    },

    async deleteUnusedSetupLinks() {
      await db.delete(accountLinks).where(and(eq(accountLinks.purpose, "setup"), isNull(accountLinks.usedAt), isNull(accountLinks.userId)));
    },

    async failuresSince(accountHash, addressHash, since) {
      const rows = await db
        .select({ failedAt: signInFailures.failedAt })
        .from(signInFailures)
        .where(
          and(
            eq(signInFailures.accountHash, accountHash),
            addressHash === undefined ? undefined : eq(signInFailures.addressHash, addressHash),
            gt(signInFailures.failedAt, since),
          ),
        )
        .orderBy(asc(signInFailures.failedAt));
      return rows.map((r) => r.failedAt);
    },

    /** Two statements: the caller's transaction makes them one, as on SQLite. */
    async recordFailure(accountHash, addressHash, failedAt, staleBefore) {
      await db.delete(signInFailures).where(lte(signInFailures.failedAt, staleBefore));
      await db.insert(signInFailures).values({ accountHash, addressHash, failedAt });
    },

    async clearPairFailures(accountHash, addressHash) {
      await db.delete(signInFailures).where(and(eq(signInFailures.accountHash, accountHash), eq(signInFailures.addressHash, addressHash)));
    },
  };
}
