import crypto from "node:crypto";
import { and, asc, eq, sql } from "drizzle-orm";
import type { PgStore } from "../core/postgres.ts";
import { users } from "../core/schema.pg.ts";
import { foldEmail } from "../core/text.ts";
import type { UsersRepo } from "./users.repo.ts";

/** users.repo.ts on PostgreSQL: the same statements through drizzle, the same rows. */
export function createUsersRepoPg(store: PgStore): UsersRepo {
  const db = store.db();
  return {
    async findById(id) {
      return (await db.select().from(users).where(eq(users.id, id)))[0];
    },

    async findByIdentity(issuer, subject) {
      return (
        await db
          .select()
          .from(users)
          .where(and(eq(users.authIssuer, issuer), eq(users.authSubject, subject)))
      )[0];
    },

    /**
     * One statement: on SQLite the look-up and the write cannot interleave with another
     * request, here two first sign-ins of one identity (on two servers) may race, and the
     * unique identity index turns the second insert into the update.
     */
    async upsertIdentity(identity, now) {
      const nowIso = now.toISOString();
      const [row] = await db
        .insert(users)
        .values({
          id: crypto.randomUUID(),
          email: identity.email,
          emailVerified: identity.emailVerified,
          name: identity.name,
          authIssuer: identity.issuer,
          authSubject: identity.subject,
          createdAt: nowIso,
          updatedAt: nowIso,
        })
        .onConflictDoUpdate({
          target: [users.authIssuer, users.authSubject],
          set: {
            email: identity.email,
            emailVerified: identity.emailVerified,
            name: sql`coalesce(${identity.name}::text, ${users.name})`,
            updatedAt: nowIso,
          },
        })
        .returning();
      return row!;
    },

    async listAll() {
      return db.select().from(users).orderBy(asc(users.createdAt), asc(users.id));
    },

    async listByEmail(email) {
      // lower() of a "C" column folds ASCII only, as SQLite's does.
      return db
        .select()
        .from(users)
        .where(sql`lower(${users.email}) = ${foldEmail(email)}`)
        .orderBy(asc(users.createdAt), asc(users.id));
    },

    async countByIssuer(issuer) {
      // ::int: drizzle reads a bigint (count's type) as a string.
      const [row] = await db.select({ n: sql<number>`count(*)::int` }).from(users).where(eq(users.authIssuer, issuer));
      return row!.n;
    },

    async setPassword(userId, passwordHash, name, now) {
      await db
        .update(users)
        .set({ passwordHash, emailVerified: true, ...(name ? { name } : {}), updatedAt: now.toISOString() })
        .where(eq(users.id, userId));
    },

    async replacePasswordHash(userId, from, to, now) {
      const updated = await db
        .update(users)
        .set({ passwordHash: to, updatedAt: now.toISOString() })
        .where(and(eq(users.id, userId), eq(users.passwordHash, from)))
        .returning({ id: users.id });
      return updated.length === 1;
    },

    async setDisabled(userId, disabledAt, now) {
      await db
        .update(users)
        .set({ disabledAt: disabledAt?.toISOString() ?? null, updatedAt: now.toISOString() })
        .where(eq(users.id, userId));
    },
  };
}
