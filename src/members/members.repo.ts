import { and, eq, sql } from "drizzle-orm";
import type { Environment, Role } from "../core/access.ts";
import { type Db, guard } from "../core/db.ts";
import { environmentGrants, memberships, users } from "../core/schema.ts";
import { isPostgres, type Store } from "../core/store.ts";
import { foldEmail } from "../core/text.ts";
import { createMembersRepoPg } from "./members.repo.pg.ts";

export interface MemberRow {
  userId: string;
  email: string | null;
  name: string | null;
  role: Role;
  createdAt: string;
}

/** Memberships and environment grants: rows in, rows out. */
export interface EnvironmentGrantCount {
  environment: string;
  members: number;
  viewers: number;
}

export type MembersRepo = ReturnType<typeof createMembersRepoSqlite>;

export function createMembersRepo(store: Store): MembersRepo {
  return isPostgres(store) ? createMembersRepoPg(store) : createMembersRepoSqlite(store);
}

function createMembersRepoSqlite(db: Db) {
  // The security overview's counts, prepared once: it is read on every visit of its page.
  const sqlite = db.$client;
  const countRoles = sqlite.prepare("SELECT role, count(*) AS n FROM memberships WHERE project_id = ? GROUP BY role");
  const countGrantsPerEnvironment = sqlite.prepare(
    `SELECT g.environment, coalesce(sum(m.role = 'member'), 0) AS members, coalesce(sum(m.role = 'viewer'), 0) AS viewers
     FROM environment_grants g JOIN memberships m ON m.project_id = g.project_id AND m.user_id = g.user_id
     WHERE g.project_id = ? GROUP BY g.environment`,
  );
  const countUngranted = sqlite
    .prepare(
      `SELECT count(*) FROM memberships m
       WHERE m.project_id = ? AND m.role IN ('member', 'viewer')
         AND NOT EXISTS (SELECT 1 FROM environment_grants g WHERE g.project_id = m.project_id AND g.user_id = m.user_id)`,
    )
    .pluck();
  const listMembershipsOf = sqlite.prepare(
    `SELECT m.project_id AS projectId, m.role,
       (SELECT json_group_array(g.environment) FROM environment_grants g
         WHERE g.project_id = m.project_id AND g.user_id = m.user_id) AS grants
     FROM memberships m WHERE m.user_id = ?`,
  );
  const membersAmong = sqlite
    .prepare("SELECT user_id FROM memberships WHERE project_id = ? AND user_id IN (SELECT value FROM json_each(?))")
    .pluck();

  const memberColumns = {
    userId: memberships.userId,
    email: users.email,
    name: users.name,
    role: memberships.role,
    createdAt: memberships.createdAt,
  };

  return guard(db, {
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

    /** Every membership of the user, with its grants (meaningful for members and viewers only). */
    listMembershipsOf(userId: string): { projectId: string; role: Role; grants: Environment[] }[] {
      return (listMembershipsOf.all(userId) as { projectId: string; role: Role; grants: string }[]).map((row) => ({
        projectId: row.projectId,
        role: row.role,
        grants: JSON.parse(row.grants) as Environment[],
      }));
    },

    /** Which of these users are members of the project now (the audit log marks former members). */
    membersAmong(projectId: string, userIds: string[]): Set<string> {
      if (userIds.length === 0) return new Set();
      return new Set(membersAmong.all(projectId, JSON.stringify(userIds)) as string[]);
    },

    countRoles(projectId: string): Record<Role, number> {
      const counts: Record<Role, number> = { owner: 0, admin: 0, member: 0, viewer: 0 };
      for (const row of countRoles.all(projectId) as { role: Role; n: number }[]) counts[row.role] = row.n;
      return counts;
    },

    /** Per environment someone holds a grant to, the members and viewers holding one (admins need none). */
    countGrantsPerEnvironment(projectId: string): EnvironmentGrantCount[] {
      return countGrantsPerEnvironment.all(projectId) as EnvironmentGrantCount[];
    },

    /** Members and viewers holding no grant at all: they can see the project but no secret. */
    countUngranted(projectId: string): number {
      return countUngranted.get(projectId) as number;
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
        .where(and(eq(memberships.projectId, projectId), sql`lower(${users.email}) = ${foldEmail(email)}`))
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
      db.delete(memberships)
        .where(and(eq(memberships.projectId, projectId), eq(memberships.userId, userId)))
        .run();
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

    /** Removes the member's grants and says which environments they were. */
    deleteAllGrants(projectId: string, userId: string): Environment[] {
      return db
        .delete(environmentGrants)
        .where(and(eq(environmentGrants.projectId, projectId), eq(environmentGrants.userId, userId)))
        .returning({ environment: environmentGrants.environment })
        .all()
        .map((r) => r.environment);
    },
  });
}
