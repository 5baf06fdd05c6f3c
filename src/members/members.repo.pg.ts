import type { Environment, Role } from "../core/access.ts";
import { type PgStore, pgRow, pgRows, pgRun } from "../core/postgres.ts";
import { foldEmail } from "../core/text.ts";
import type { EnvironmentGrantCount, MemberRow, MembersRepo } from "./members.repo.ts";

const MEMBER_COLUMNS = `m.user_id AS "userId", u.email, u.name, m.role, m.created_at AS "createdAt"`;

/**
 * members.repo.ts on PostgreSQL: the same rows, the same JavaScript values. Lists that
 * SQLite returns in its primary key's order without saying so are ordered here.
 */
export function createMembersRepoPg(store: PgStore): MembersRepo {
  return {
    listMembers: (projectId) =>
      pgRows<MemberRow>(
        store,
        `SELECT ${MEMBER_COLUMNS} FROM memberships m JOIN users u ON u.id = m.user_id
         WHERE m.project_id = $1
         ORDER BY CASE m.role WHEN 'owner' THEN 0 WHEN 'admin' THEN 1 WHEN 'member' THEN 2 ELSE 3 END, m.created_at, m.user_id`,
        [projectId],
      ),

    findMember: (projectId, userId) =>
      pgRow<MemberRow>(
        store,
        `SELECT ${MEMBER_COLUMNS} FROM memberships m JOIN users u ON u.id = m.user_id WHERE m.project_id = $1 AND m.user_id = $2`,
        [projectId, userId],
      ),

    listMembershipsOf: (userId) =>
      pgRows<{ projectId: string; role: Role; grants: Environment[] }>(
        store,
        `SELECT m.project_id AS "projectId", m.role,
           ARRAY(SELECT g.environment FROM environment_grants g
                 WHERE g.project_id = m.project_id AND g.user_id = m.user_id ORDER BY g.environment) AS grants
         FROM memberships m WHERE m.user_id = $1`,
        [userId],
      ),

    async membersAmong(projectId, userIds) {
      if (userIds.length === 0) return new Set();
      const rows = await pgRows<{ user_id: string }>(
        store,
        "SELECT user_id FROM memberships WHERE project_id = $1 AND user_id = ANY($2::text[])",
        [projectId, userIds],
      );
      return new Set(rows.map((r) => r.user_id));
    },

    async countRoles(projectId) {
      const counts: Record<Role, number> = { owner: 0, admin: 0, member: 0, viewer: 0 };
      const rows = await pgRows<{ role: Role; n: number }>(
        store,
        "SELECT role, count(*) AS n FROM memberships WHERE project_id = $1 GROUP BY role",
        [projectId],
      );
      for (const row of rows) counts[row.role] = row.n;
      return counts;
    },

    countGrantsPerEnvironment: (projectId) =>
      pgRows<EnvironmentGrantCount>(
        store,
        `SELECT g.environment, count(*) FILTER (WHERE m.role = 'member') AS members, count(*) FILTER (WHERE m.role = 'viewer') AS viewers
         FROM environment_grants g JOIN memberships m ON m.project_id = g.project_id AND m.user_id = g.user_id
         WHERE g.project_id = $1 GROUP BY g.environment ORDER BY g.environment`,
        [projectId],
      ),

    async countUngranted(projectId) {
      const row = await pgRow<{ n: number }>(
        store,
        `SELECT count(*) AS n FROM memberships m
         WHERE m.project_id = $1 AND m.role IN ('member', 'viewer')
           AND NOT EXISTS (SELECT 1 FROM environment_grants g WHERE g.project_id = m.project_id AND g.user_id = m.user_id)`,
        [projectId],
      );
      return row!.n;
    },

    async listProjectIdsOf(userId) {
      const rows = await pgRows<{ project_id: string }>(store, "SELECT project_id FROM memberships WHERE user_id = $1", [userId]);
      return rows.map((r) => r.project_id);
    },

    async isMemberByEmail(projectId, email) {
      // lower() of a "C" column folds ASCII only, as SQLite's does.
      const row = await pgRow(
        store,
        "SELECT 1 FROM memberships m JOIN users u ON u.id = m.user_id WHERE m.project_id = $1 AND lower(u.email) = $2 LIMIT 1",
        [projectId, foldEmail(email)],
      );
      return row !== undefined;
    },

    async insertMember(projectId, userId, role, now) {
      await pgRun(store, "INSERT INTO memberships (project_id, user_id, role, created_at, updated_at) VALUES ($1, $2, $3, $4, $4)", [
        projectId,
        userId,
        role,
        now,
      ]);
    },

    async updateRole(projectId, userId, role, now) {
      await pgRun(store, "UPDATE memberships SET role = $3, updated_at = $4 WHERE project_id = $1 AND user_id = $2", [
        projectId,
        userId,
        role,
        now,
      ]);
    },

    async deleteMember(projectId, userId) {
      await pgRun(store, "DELETE FROM memberships WHERE project_id = $1 AND user_id = $2", [projectId, userId]);
    },

    async listGrants(projectId) {
      const grants = new Map<string, Set<Environment>>();
      const rows = await pgRows<{ user_id: string; environment: Environment }>(
        store,
        "SELECT user_id, environment FROM environment_grants WHERE project_id = $1 ORDER BY user_id, environment",
        [projectId],
      );
      for (const row of rows) {
        const set = grants.get(row.user_id) ?? new Set<Environment>();
        set.add(row.environment);
        grants.set(row.user_id, set);
      }
      return grants;
    },

    async insertGrant(projectId, userId, environment, grantedBy, now) {
      const added = await pgRun(
        store,
        `INSERT INTO environment_grants (project_id, user_id, environment, granted_by, created_at) VALUES ($1, $2, $3, $4, $5)
         ON CONFLICT DO NOTHING`,
        [projectId, userId, environment, grantedBy, now],
      );
      return added > 0;
    },

    async deleteGrant(projectId, userId, environment) {
      return (
        (await pgRun(store, "DELETE FROM environment_grants WHERE project_id = $1 AND user_id = $2 AND environment = $3", [
          projectId,
          userId,
          environment,
        ])) > 0
      );
    },

    async deleteAllGrants(projectId, userId) {
      const rows = await pgRows<{ environment: Environment }>(
        store,
        "DELETE FROM environment_grants WHERE project_id = $1 AND user_id = $2 RETURNING environment",
        [projectId, userId],
      );
      return rows.map((r) => r.environment);
    },
  };
}
