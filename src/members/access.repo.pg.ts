import crypto from "node:crypto";
import { hasImplicitEnvironmentAccess, type Role } from "../core/access.ts";
import { type PgStore, pgRow, pgRows } from "../core/postgres.ts";
import type { AccessRepo } from "./access.repo.ts";

/**
 * access.repo.ts on PostgreSQL. There is no data_version to tell whether another server
 * committed since the last read, so the version never repeats: core/access.ts then never
 * serves its cached access and reads the rows again on every request. Being that hot, a
 * member's rows come in one statement (one round trip, one snapshot); the arrays are
 * ordered as SQLite's primary-key walks return them.
 */
export function createAccessRepoPg(store: PgStore): AccessRepo {
  const version = () => crypto.randomUUID();
  const findEnvironments = async (projectId: string) =>
    (await pgRows<{ slug: string }>(store, "SELECT slug FROM project_environments WHERE project_id = $1 ORDER BY slug", [projectId])).map(
      (r) => r.slug,
    );

  return {
    async member(projectId, userId, withDisabled) {
      const at = version();
      // Whether the person is disabled comes in the same statement, when asked for: no round trip of its own.
      const disabledColumn = withDisabled
        ? "coalesce((SELECT u.disabled_at IS NOT NULL FROM users u WHERE u.id = m.user_id), true)"
        : "false";
      const row = await pgRow<{ role: Role; grants: string[]; environments: string[]; disabled: boolean }>(
        store,
        `SELECT m.role,
           ${disabledColumn} AS disabled,
           ARRAY(SELECT g.environment FROM environment_grants g
                 WHERE g.project_id = m.project_id AND g.user_id = m.user_id ORDER BY g.environment) AS grants,
           ARRAY(SELECT pe.slug FROM project_environments pe WHERE pe.project_id = m.project_id ORDER BY pe.slug) AS environments
         FROM memberships m WHERE m.project_id = $1 AND m.user_id = $2`,
        [projectId, userId],
      );
      if (!row) return { version: at, role: undefined, grants: [], environments: [], disabled: false };
      return {
        version: at,
        role: row.role,
        grants: hasImplicitEnvironmentAccess(row.role) ? [] : row.grants,
        environments: row.environments,
        disabled: row.disabled,
      };
    },
    async environments(projectId) {
      const at = version();
      return { version: at, environments: await findEnvironments(projectId) };
    },
    async role(projectId, userId) {
      return (
        await pgRow<{ role: Role }>(store, "SELECT role FROM memberships WHERE project_id = $1 AND user_id = $2", [projectId, userId])
      )?.role;
    },
    async isDisabled(userId) {
      const row = await pgRow<{ disabled: boolean }>(store, "SELECT disabled_at IS NOT NULL AS disabled FROM users WHERE id = $1", [
        userId,
      ]);
      return row?.disabled !== false;
    },
    async serviceAccount(projectId, tokenId) {
      const at = version();
      // The project's environments come in the same statement: one round trip, one snapshot.
      const row = await pgRow<{
        projectEnvironments: string[];
        projectId: string | null;
        role: "viewer" | "member" | null;
        environments: string | null;
      }>(
        store,
        `SELECT ARRAY(SELECT pe.slug FROM project_environments pe WHERE pe.project_id = $1 ORDER BY pe.slug) AS "projectEnvironments",
           a.project_id AS "projectId", a.role, a.environments
         FROM (SELECT 1) AS one
         LEFT JOIN service_tokens t ON t.id = $2
         LEFT JOIN service_accounts a ON a.id = t.service_account_id`,
        [projectId, tokenId],
      );
      const account =
        row?.projectId && row.role && row.environments !== null
          ? { projectId: row.projectId, role: row.role, environments: JSON.parse(row.environments) as string[] }
          : undefined;
      return { version: at, environments: row?.projectEnvironments ?? [], account };
    },
    dataVersion: async () => version(),
  };
}
