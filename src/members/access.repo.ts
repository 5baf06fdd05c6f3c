import { hasImplicitEnvironmentAccess, type MemberRows, type Role, type ServiceAccountRows } from "../core/access.ts";
import { type Db, guard } from "../core/db.ts";
import { isPostgres, type Store } from "../core/store.ts";
import { createAccessRepoPg } from "./access.repo.pg.ts";

export type AccessRepo = ReturnType<typeof createAccessRepoSqlite>;

export function createAccessRepo(store: Store): AccessRepo {
  return isPostgres(store) ? createAccessRepoPg(store) : createAccessRepoSqlite(store);
}

/**
 * What the access guard (core/access.ts) reads on every project-scoped request: a
 * membership's role, its environment grants, the project's environments and whether a
 * user is disabled. Plain prepared statements, each one index seek: this is the hot path.
 */
function createAccessRepoSqlite(db: Db) {
  const sqlite = db.$client;
  const findRole = sqlite.prepare("SELECT role FROM memberships WHERE project_id = ? AND user_id = ?").pluck();
  const findEnvironments = sqlite.prepare("SELECT slug FROM project_environments WHERE project_id = ?").pluck();
  const findGrants = sqlite.prepare("SELECT environment FROM environment_grants WHERE project_id = ? AND user_id = ?").pluck();
  const isDisabled = sqlite.prepare("SELECT disabled_at IS NOT NULL FROM users WHERE id = ?").pluck();
  const findServiceAccount = sqlite.prepare(
    `SELECT a.project_id AS projectId, a.role, a.environments FROM service_tokens t
     JOIN service_accounts a ON a.id = t.service_account_id WHERE t.id = ?`,
  );
  // data_version changes whenever another connection (a CLI command on the same file) has
  // committed since this connection last asked; total_changes counts the rows this
  // connection has changed (every request of this process). Together: whether anything
  // may have changed since the last time.
  const dataVersion = sqlite.prepare("SELECT (SELECT data_version FROM pragma_data_version()) || ':' || total_changes()").pluck();

  const version = () => dataVersion.get() as string;

  /**
   * `read` in one read transaction when none is open: each statement on its own is a
   * transaction of its own, and each takes and releases SQLite's file and WAL locks (four
   * fcntl calls), which made the access check's three or four statements a tenth of a
   * secret read's CPU. Inside a caller's transaction, as it is.
   */
  function inOneRead<A extends unknown[], R>(read: (...args: A) => R): (...args: A) => R {
    const transaction = sqlite.transaction(read);
    return (...args) => (sqlite.inTransaction ? read(...args) : transaction(...args));
  }

  /**
   * Everything the guard needs about a person in a project, in one call: the version first,
   * so a commit that lands after it makes the next comparison fail rather than go unseen.
   */
  const member = inOneRead((projectId: string, userId: string, withDisabled?: boolean): MemberRows => {
    const at = version();
    const role = findRole.get(projectId, userId) as Role | undefined;
    if (!role) return { version: at, role, grants: [], environments: [], disabled: false };
    const disabled = withDisabled === true && isDisabled.get(userId) !== 0;
    const grants = hasImplicitEnvironmentAccess(role) ? [] : (findGrants.all(projectId, userId) as string[]);
    return { version: at, role, grants, environments: findEnvironments.all(projectId) as string[], disabled };
  });
  /** A project's environments, with the version read before them. */
  const environments = inOneRead((projectId: string): { version: string; environments: string[] } => {
    const at = version();
    return { version: at, environments: findEnvironments.all(projectId) as string[] };
  });

  /** A service account's credential now, with the project's environments and the version read first. */
  const serviceAccount = inOneRead((projectId: string, tokenId: string): ServiceAccountRows => {
    const at = version();
    const row = findServiceAccount.get(tokenId) as { projectId: string; role: "viewer" | "member"; environments: string } | undefined;
    return {
      version: at,
      environments: findEnvironments.all(projectId) as string[],
      account: row && { ...row, environments: JSON.parse(row.environments) as string[] },
    };
  });

  return guard(db, {
    member,
    environments,
    serviceAccount,
    role(projectId: string, userId: string): Role | undefined {
      return findRole.get(projectId, userId) as Role | undefined;
    },
    /** True for a disabled user and for one that does not exist. */
    isDisabled(userId: string): boolean {
      return isDisabled.get(userId) !== 0;
    },
    dataVersion: version,
  });
}
