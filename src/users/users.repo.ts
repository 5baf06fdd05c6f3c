import crypto from "node:crypto";
import { and, asc, eq, sql } from "drizzle-orm";
import { type Db, guard } from "../core/db.ts";
import { users } from "../core/schema.ts";
import { isPostgres, type Store } from "../core/store.ts";
import { foldEmail } from "../core/text.ts";
import { createUsersRepoPg } from "./users.repo.pg.ts";

export type UserRow = typeof users.$inferSelect;

export interface Identity {
  issuer: string;
  subject: string;
  email: string | null;
  emailVerified: boolean;
  name: string | null;
}

export type UsersRepo = ReturnType<typeof createUsersRepoSqlite>;

export function createUsersRepo(store: Store): UsersRepo {
  return isPostgres(store) ? createUsersRepoPg(store) : createUsersRepoSqlite(store);
}

function createUsersRepoSqlite(db: Db) {
  return guard(db, {
    findById(id: string): UserRow | undefined {
      return db.select().from(users).where(eq(users.id, id)).get();
    },

    findByIdentity(issuer: string, subject: string): UserRow | undefined {
      return db
        .select()
        .from(users)
        .where(and(eq(users.authIssuer, issuer), eq(users.authSubject, subject)))
        .get();
    },

    /** Creates the user of an identity, or refreshes e-mail and name of the existing one. */
    upsertIdentity(identity: Identity, now: Date): UserRow {
      const nowIso = now.toISOString();
      const existing = this.findByIdentity(identity.issuer, identity.subject);
      if (existing) {
        db.update(users)
          .set({ email: identity.email, emailVerified: identity.emailVerified, name: identity.name ?? existing.name, updatedAt: nowIso })
          .where(eq(users.id, existing.id))
          .run();
        return this.findById(existing.id)!;
      }
      const row = {
        id: crypto.randomUUID(),
        email: identity.email,
        emailVerified: identity.emailVerified,
        name: identity.name,
        authIssuer: identity.issuer,
        authSubject: identity.subject,
        createdAt: nowIso,
        updatedAt: nowIso,
      };
      db.insert(users).values(row).run();
      return this.findById(row.id)!;
    },

    listAll(): UserRow[] {
      return db.select().from(users).orderBy(asc(users.createdAt), asc(users.id)).all();
    },

    /** Every user with this e-mail (case-insensitive), whichever provider vouched for it. */
    listByEmail(email: string): UserRow[] {
      return db
        .select()
        .from(users)
        .where(sql`lower(${users.email}) = ${foldEmail(email)}`)
        .orderBy(asc(users.createdAt), asc(users.id))
        .all();
    },

    countByIssuer(issuer: string): number {
      return db.select({ n: sql<number>`count(*)` }).from(users).where(eq(users.authIssuer, issuer)).get()!.n;
    },

    setPassword(userId: string, passwordHash: string, name: string | null, now: Date): void {
      db.update(users)
        .set({ passwordHash, emailVerified: true, ...(name ? { name } : {}), updatedAt: now.toISOString() })
        .where(eq(users.id, userId))
        .run();
    },

    /** The same password hashed again: written only if the hash is still `from` (no reset came between). */
    replacePasswordHash(userId: string, from: string, to: string, now: Date): boolean {
      return (
        db
          .update(users)
          .set({ passwordHash: to, updatedAt: now.toISOString() })
          .where(and(eq(users.id, userId), eq(users.passwordHash, from)))
          .run().changes === 1
      );
    },

    setDisabled(userId: string, disabledAt: Date | null, now: Date): void {
      db.update(users)
        .set({ disabledAt: disabledAt?.toISOString() ?? null, updatedAt: now.toISOString() })
        .where(eq(users.id, userId))
        .run();
    },
  });
}
