import type { Role } from "../core/access.ts";
import { type Db, guard } from "../core/db.ts";

/**
 * What the access guard (core/access.ts) reads on every project-scoped request: a
 * membership's role, its environment grants, the project's environments and whether a
 * user is disabled. Plain prepared statements, each one index seek: this is the hot path.
 */
export function createAccessRepo(db: Db) {
  const sqlite = db.$client;
  const findRole = sqlite.prepare("SELECT role FROM memberships WHERE project_id = ? AND user_id = ?").pluck();
  const findEnvironments = sqlite.prepare("SELECT slug FROM project_environments WHERE project_id = ?").pluck();
  const findGrants = sqlite.prepare("SELECT environment FROM environment_grants WHERE project_id = ? AND user_id = ?").pluck();
  const isDisabled = sqlite.prepare("SELECT disabled_at IS NOT NULL FROM users WHERE id = ?").pluck();
  // data_version changes whenever another connection (a CLI command on the same file) has
  // committed since this connection last asked; total_changes counts the rows this
  // connection has changed (every request of this process). Together: whether anything
  // may have changed since the last time.
  const dataVersion = sqlite.prepare("SELECT (SELECT data_version FROM pragma_data_version()) || ':' || total_changes()").pluck();

  return guard(db, {
    role(projectId: string, userId: string): Role | undefined {
      return findRole.get(projectId, userId) as Role | undefined;
    },
    grants(projectId: string, userId: string): string[] {
      return findGrants.all(projectId, userId) as string[];
    },
    environments(projectId: string): string[] {
      return findEnvironments.all(projectId) as string[];
    },
    /** True for a disabled user and for one that does not exist. */
    isDisabled(userId: string): boolean {
      return isDisabled.get(userId) !== 0;
    },
    dataVersion(): string {
      return dataVersion.get() as string;
    },
  });
}

export type AccessRepo = ReturnType<typeof createAccessRepo>;
