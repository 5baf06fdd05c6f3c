import { and, eq, isNull } from "drizzle-orm";
import type { Db } from "../core/db.ts";
import { accountLinks } from "../core/schema.ts";

export type AccountLinkRow = typeof accountLinks.$inferSelect;
export type LinkPurpose = AccountLinkRow["purpose"];

/** One-time links of local accounts (first-run setup, `users add`, password reset). */
export function createLocalRepo(db: Db) {
  return {
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
    deleteUnusedLinks(purpose: LinkPurpose, userId: string | null): void {
      db.delete(accountLinks)
        .where(
          and(
            eq(accountLinks.purpose, purpose),
            isNull(accountLinks.usedAt),
            userId === null ? isNull(accountLinks.userId) : eq(accountLinks.userId, userId),
          ),
        )
        .run();
    },
  };
}

export type LocalRepo = ReturnType<typeof createLocalRepo>;
