import { and, asc, eq, gt, isNull, lte } from "drizzle-orm";
import { type Db, guard } from "../core/db.ts";
import { accountLinks, signInFailures } from "../core/schema.ts";
import { isPostgres, type Store } from "../core/store.ts";
import { createLocalRepoPg } from "./local.repo.pg.ts";

export type AccountLinkRow = typeof accountLinks.$inferSelect;
export type LinkPurpose = AccountLinkRow["purpose"];

export type LocalRepo = ReturnType<typeof createLocalRepoSqlite>;

export function createLocalRepo(store: Store): LocalRepo {
  return isPostgres(store) ? createLocalRepoPg(store) : createLocalRepoSqlite(store);
}

/** One-time links of local accounts (first-run setup, `users add`, password reset). */
function createLocalRepoSqlite(db: Db) {
  return guard(db, {
    insertLink(row: AccountLinkRow): void {
      db.insert(accountLinks).values(row).run();
    },

    findLinkByTokenHash(tokenHash: string): AccountLinkRow | undefined {
      return db.select().from(accountLinks).where(eq(accountLinks.tokenHash, tokenHash)).get();
    },

    /** Marks a link used; false when it already was (a link works once). */
    markLinkUsed(id: string, now: Date): boolean {
      return (
        db
          .update(accountLinks)
          .set({ usedAt: now.toISOString() })
          .where(and(eq(accountLinks.id, id), isNull(accountLinks.usedAt)))
          .run().changes === 1
      );
    },

    /** Drops the unused links of one purpose (and user): a new link replaces the older ones. */
    /** Every unused link of the user, whatever its purpose (a disabled user). */
    deleteUnusedLinksOf(userId: string): void {
      db.delete(accountLinks)
        .where(and(eq(accountLinks.userId, userId), isNull(accountLinks.usedAt)))
        .run();
    },

    /** Unused setup links (they belong to no user yet): a new one replaces them. */
    deleteUnusedSetupLinks(): void {
      db.delete(accountLinks)
        .where(and(eq(accountLinks.purpose, "setup"), isNull(accountLinks.usedAt), isNull(accountLinks.userId)))
        .run();
    },

    /**
     * Times of the failures after `since`, oldest first: of one account, or of one account
     * from one client address when `addressHash` is given.
     */
    failuresSince(accountHash: string, addressHash: string | undefined, since: string): string[] {
      return db
        .select({ failedAt: signInFailures.failedAt })
        .from(signInFailures)
        .where(
          and(
            eq(signInFailures.accountHash, accountHash),
            addressHash === undefined ? undefined : eq(signInFailures.addressHash, addressHash),
            gt(signInFailures.failedAt, since),
          ),
        )
        .orderBy(asc(signInFailures.failedAt))
        .all()
        .map((r) => r.failedAt);
    },

    /** Records a failure and forgets every failure (of any account) at or before `staleBefore`. */
    recordFailure(accountHash: string, addressHash: string, failedAt: string, staleBefore: string): void {
      db.delete(signInFailures).where(lte(signInFailures.failedAt, staleBefore)).run();
      db.insert(signInFailures).values({ accountHash, addressHash, failedAt }).run();
    },

    /** Forgets the failures of one account from one client address. */
    clearPairFailures(accountHash: string, addressHash: string): void {
      db.delete(signInFailures)
        .where(and(eq(signInFailures.accountHash, accountHash), eq(signInFailures.addressHash, addressHash)))
        .run();
    },
  });
}
