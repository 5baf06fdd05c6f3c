import { and, eq, sql } from "drizzle-orm";
import type { Environment, Role } from "../core/access.ts";
import type { Db } from "../core/db.ts";
import { environmentGrants, memberships, users } from "../core/schema.ts";

export interface MemberRow {
  userId: string;
  email: string | null;
  name: string | null;
  role: Role;
  createdAt: string;
}

/** Memberships and environment grants: rows in, rows out. */
export function createMembersRepo(db: Db) {
  const memberColumns = {
    userId: memberships.userId,
    email: users.email,
    name: users.name,
    role: memberships.role,
    createdAt: memberships.createdAt,
  };

  return {
    /** Every member of the project: owner first, then admins, members, viewers; oldest first within a role. */
    listMembers(projectId: string): MemberRow[] {
      return db
        .select(memberColumns)
        .from(memberships)
        .innerJoin(users, eq(users.id, memberships.userId))
        .where(eq(memberships.projectId, projectId))
        .orderBy(
          sql`CASE ${memberships.role} WHEN 'owner' THEN 0 WHEN 'admin' THEN 1 WHEN 'member' THEN 2 ELSE 3 END`,
          memberships.createdAt,
          memberships.userId,
        )
        .all();
    },

    findMember(projectId: string, userId: string): MemberRow | undefined {
      return db
        .select(memberColumns)
        .from(memberships)
        .innerJoin(users, eq(users.id, memberships.userId))
        .where(and(eq(memberships.projectId, projectId), eq(memberships.userId, userId)))
        .get();
    },

    /** The projects this user is a member of, in any role. */
    listProjectIdsOf(userId: string): string[] {
      return db
        .select({ projectId: memberships.projectId })
        .from(memberships)
        .where(eq(memberships.userId, userId))
        .all()
        .map((row) => row.projectId);
    },

    /** Whether a member of the project has this e-mail address, ignoring case. */
    isMemberByEmail(projectId: string, email: string): boolean {
      const row = db
        .select({ userId: memberships.userId })
        .from(memberships)
        .innerJoin(users, eq(users.id, memberships.userId))
        .where(and(eq(memberships.projectId, projectId), sql`lower(${users.email}) = ${email.toLowerCase()}`))
        .get();
      return row !== undefined;
    },

    insertMember(projectId: string, userId: string, role: Role, now: string): void {
      db.insert(memberships).values({ projectId, userId, role, createdAt: now, updatedAt: now }).run();
    },

    updateRole(projectId: string, userId: string, role: Role, now: string): void {
      db.update(memberships)
        .set({ role, updatedAt: now })
        .where(and(eq(memberships.projectId, projectId), eq(memberships.userId, userId)))
        .run();
    },

    /** The membership's environment grants go with it through the foreign key's ON DELETE CASCADE. */
    deleteMember(projectId: string, userId: string): void {
      db.delete(memberships).where(and(eq(memberships.projectId, projectId), eq(memberships.userId, userId))).run();
    },

    /** Grants of every member of the project, as user id to granted environments. */
    listGrants(projectId: string): Map<string, Set<Environment>> {
      const grants = new Map<string, Set<Environment>>();
      const rows = db
        .select({ userId: environmentGrants.userId, environment: environmentGrants.environment })
        .from(environmentGrants)
        .where(eq(environmentGrants.projectId, projectId))
        .all();
      for (const row of rows) {
        const set = grants.get(row.userId) ?? new Set<Environment>();
        set.add(row.environment);
        grants.set(row.userId, set);
      }
      return grants;
    },

    /** Inserts a grant unless it exists; true when a row was added. */
    insertGrant(projectId: string, userId: string, environment: Environment, grantedBy: string, now: string): boolean {
      const result = db
        .insert(environmentGrants)
        .values({ projectId, userId, environment, grantedBy, createdAt: now })
        .onConflictDoNothing()
        .run();
      return result.changes > 0;
    },

    /** True when a grant was removed. */
    deleteGrant(projectId: string, userId: string, environment: Environment): boolean {
      const result = db
        .delete(environmentGrants)
        .where(
          and(
            eq(environmentGrants.projectId, projectId),
            eq(environmentGrants.userId, userId),
            eq(environmentGrants.environment, environment),
          ),
        )
        .run();
      return result.changes > 0;
    },

    deleteAllGrants(projectId: string, userId: string): void {
      db.delete(environmentGrants)
        .where(and(eq(environmentGrants.projectId, projectId), eq(environmentGrants.userId, userId)))
        .run();
    },

  };
}

export type MembersRepo = ReturnType<typeof createMembersRepo>;
