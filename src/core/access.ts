import type { FastifyRequest } from "fastify";
import { CLI_SESSION_ENDED, isServiceAccount, NOT_SIGNED_IN, type Principal, SERVICE_TOKEN_INVALID } from "./caller.ts";
import { type Clock, systemClock } from "./clock.ts";
import { HttpError } from "./errors.ts";

export const ROLES = ["owner", "admin", "member", "viewer"] as const;
export type Role = (typeof ROLES)[number];

/** The roles a member can be given; there is exactly one owner, the project's creator. */
export const ASSIGNABLE_ROLES = ["admin", "member", "viewer"] as const;
export type AssignableRole = (typeof ASSIGNABLE_ROLES)[number];

export const ENVIRONMENTS = ["development", "staging", "production"] as const;
export type Environment = (typeof ENVIRONMENTS)[number];

export const PERMISSIONS = [
  "project:read",
  "project:update",
  "project:delete",
  "members:read",
  "members:update_role",
  "members:remove",
  "members:invite",
  "invitations:read",
  "invitations:revoke",
  "environments:manage",
  "secrets:read",
  "secrets:create",
  "secrets:update",
  "secrets:delete",
  "audit:read",
  "integrations:manage",
  "service_accounts:manage",
] as const;
export type Permission = (typeof PERMISSIONS)[number];

const SECRET_PERMISSIONS: Permission[] = ["secrets:read", "secrets:create", "secrets:update", "secrets:delete"];

/** The table of roles (README, "Members, invitations and environment access"), the only place roles become permissions. */
export const ROLE_PERMISSIONS: Record<Role, readonly Permission[]> = {
  owner: PERMISSIONS,
  admin: PERMISSIONS.filter((p) => p !== "project:delete"),
  member: ["project:read", "members:read", ...SECRET_PERMISSIONS],
  viewer: ["project:read", "members:read", "secrets:read"],
};

export function permissionsOf(role: Role): Permission[] {
  return [...ROLE_PERMISSIONS[role]];
}

export function secretPermissionsOf(role: Role): Permission[] {
  return ROLE_PERMISSIONS[role].filter((p) => p.startsWith("secrets:"));
}

/** Owners and admins reach every environment; members and viewers only those granted. */
export function hasImplicitEnvironmentAccess(role: Role): boolean {
  return role === "owner" || role === "admin";
}

export function isEnvironment(value: string): value is Environment {
  return (ENVIRONMENTS as readonly string[]).includes(value);
}

export interface ProjectAccess {
  projectId: string;
  role: Role;
  permissions: Permission[];
  /** The project's environments in canonical order. */
  projectEnvironments: Environment[];
  /** The environments this caller may use, in canonical order. */
  environments: Environment[];
  /** Set when the guard was asked about an environment in the path. */
  environment?: Environment;
}

export const PROJECT_NOT_FOUND = "Project not found.";

/**
 * A person's access from their membership rows: the guard reads them per request, the
 * projects list for every project at once; both decide here.
 */
export function memberAccess(projectId: string, role: Role, projectEnvironments: string[], grants: string[]): ProjectAccess {
  const ordered = ENVIRONMENTS.filter((e) => projectEnvironments.includes(e));
  const environments = hasImplicitEnvironmentAccess(role) ? ordered : ordered.filter((e) => grants.includes(e));
  return { projectId, role, permissions: permissionsOf(role), projectEnvironments: ordered, environments };
}

export type AccessGuard = ReturnType<typeof createAccessGuard>;

/**
 * The rows the guard reads on every request: the members feature's access repo
 * (members/access.repo.ts), passed in by whoever builds the guard, since core imports no
 * feature.
 */
/** A person's rows in a project, read together; `version` is the repo's dataVersion, read first. */
export interface MemberRows {
  version: string;
  role: Role | undefined;
  grants: string[];
  environments: string[];
  /** Read when asked for (`withDisabled`); false otherwise. */
  disabled: boolean;
}

/** A service account's credential as it is now, with its project's environments; `account` undefined once revoked or deleted. */
export interface ServiceAccountRows {
  version: string;
  environments: string[];
  account: { projectId: string; role: "viewer" | "member"; environments: string[] } | undefined;
}

export interface AccessRows {
  member(projectId: string, userId: string, withDisabled?: boolean): Promise<MemberRows>;
  environments(projectId: string): Promise<{ version: string; environments: string[] }>;
  role(projectId: string, userId: string): Promise<Role | undefined>;
  serviceAccount(projectId: string, tokenId: string): Promise<ServiceAccountRows>;
  /** True for a disabled user and for one that does not exist. */
  isDisabled(userId: string): Promise<boolean>;
  /** Changes whenever anything may have been written since it was last read (any connection, any request). */
  dataVersion(): Promise<string>;
}

/**
 * The one guard of every project-scoped request. Read fresh from the database on every
 * request, so a role change or revoked grant counts on the very next request.
 *
 * A request is checked twice: by the route's guard, before the body is looked at, and by
 * the service inside its transaction. The second check reuses the first one's rows when
 * nothing can have changed in between: the same caller (one object per request) and
 * project, and no write since, by this process or another (the repo's dataVersion, read
 * inside the transaction). Otherwise it reads them again.
 */
export function createAccessGuard(repo: AccessRows, clock: Clock = systemClock) {
  /**
   * The guard's answer for this request; `fresh`: whether a body came in before the guard
   * ran or comes in after it (a guard in preParsing), and so whether the service's check,
   * when it cannot reuse these rows, reads the credential again.
   */
  const checked = new WeakMap<Principal, { projectId: string; access: ProjectAccess; dataVersion: string; fresh: boolean }>();

  /**
   * The caller's access and the version it was read at (undefined access: not a member).
   * The credential was checked as the request arrived, before its body: `fresh` checks it
   * again for a check made after a body came in, or in the service's transaction, so
   * that what changed meanwhile counts (a slow body can take the request timeout). A
   * service account's credential is read again (revoked, account deleted or changed: 401
   * or the new role and environments); a person disabled meanwhile has no session left.
   */
  async function read(
    caller: Principal,
    projectId: string,
    fresh = false,
  ): Promise<{ access: ProjectAccess | undefined; version: string }> {
    if (isServiceAccount(caller)) {
      // A service account is a caller of its own project only, with its role's permissions and
      // its environments (read by the credential resolver for this request); viewer or member:
      // no implicit environments, so its environments act as a person's grants.
      if (!fresh) {
        const { version, environments } = await repo.environments(projectId);
        const access = caller.projectId === projectId ? memberAccess(projectId, caller.role, environments, caller.environments) : undefined;
        return { access, version };
      }
      const { version, environments, account } = await repo.serviceAccount(projectId, caller.tokenId);
      const expired = caller.expiresAt !== null && Date.parse(caller.expiresAt) <= clock.now().getTime();
      if (!account || expired) throw new HttpError(401, SERVICE_TOKEN_INVALID);
      const access =
        account.projectId === projectId && caller.projectId === projectId
          ? memberAccess(projectId, account.role, environments, account.environments)
          : undefined;
      return { access, version };
    }
    const rows = await repo.member(projectId, caller.userId, fresh);
    if (rows.disabled) throw new HttpError(401, caller.via === "cli" ? CLI_SESSION_ENDED : NOT_SIGNED_IN);
    if (!rows.role) return { access: undefined, version: rows.version };
    return { access: memberAccess(projectId, rows.role, rows.environments, rows.grants), version: rows.version };
  }

  async function find(caller: Principal, projectId: string): Promise<ProjectAccess | undefined> {
    return (await read(caller, projectId)).access;
  }

  /**
   * The guard's rows of this very request when still current (see above), else new ones,
   * with the credential read again as the guard did (a request without a body was resolved
   * a moment before its guard ran; without a guard, always).
   */
  async function findAgain(caller: Principal, projectId: string): Promise<ProjectAccess | undefined> {
    const last = checked.get(caller);
    if (last) {
      checked.delete(caller);
      if (last.projectId === projectId && last.dataVersion === (await repo.dataVersion()))
        return { ...last.access, environment: undefined };
    }
    return (await read(caller, projectId, last?.fresh ?? true)).access;
  }

  return {
    /** Membership, or undefined; for listings that must not throw. */
    find,

    /**
     * The check of a service, inside its transaction: the same answers as the route guard
     * (404, 403), from the guard's rows when they are still current.
     */
    async require(caller: Principal, projectId: string, permission?: Permission, environment?: string): Promise<ProjectAccess> {
      return decide(await findAgain(caller, projectId), permission, environment);
    },

    /**
     * Whether someone other than the caller still holds a permission here right now: an
     * enabled user (a disabled or deleted one holds nothing) who is a member with it. For
     * authority that outlives a request: the inviter behind an invitation, the person whose
     * token a Vercel connection uses.
     */
    async holds(userId: string, projectId: string, permission: Permission): Promise<boolean> {
      if (await repo.isDisabled(userId)) return false;
      // The role decides a permission; environments and grants play no part here.
      const role = await repo.role(projectId, userId);
      return role !== undefined && permissionsOf(role).includes(permission);
    },

    /**
     * preHandler form of require(), for project-scoped routes: runs after the credential
     * check and before the handler validates the body, so a non-member learns nothing, not
     * even whether the body was valid (malformed JSON is refused earlier, by Fastify's
     * parser, which says nothing about the project). Reads :projectId and :env.
     */
    route(permission?: Permission, options: { environment?: boolean; beforeBody?: boolean } = {}) {
      return async (req: FastifyRequest): Promise<void> => {
        const params = req.params as Record<string, string | undefined>;
        if (!req.caller) throw new HttpError(401, NOT_SIGNED_IN);
        const projectId = params.projectId ?? "";
        // A body may have taken long to arrive; a request without one was resolved just now.
        const fresh = req.body !== undefined;
        const { access, version } = await read(req.caller, projectId, fresh);
        decide(access, permission, options.environment ? (params.env ?? "") : undefined);
        // A guard run before the body (preParsing, `beforeBody`) leaves the body's arrival, which
        // can take the request timeout, between itself and the service: a person disabled or a
        // token revoked meanwhile must count there.
        checked.set(req.caller, { projectId, access: access!, dataVersion: version, fresh: fresh || options.beforeBody === true });
      };
    },
  };

  /**
   * Membership first (404, so ids can't be probed), then the permission (403), then,
   * when the path names one, the environment: unknown to the project 404, not granted 403.
   */
  function decide(access: ProjectAccess | undefined, permission?: Permission, environment?: string): ProjectAccess {
    if (!access) throw new HttpError(404, PROJECT_NOT_FOUND);
    if (permission && !access.permissions.includes(permission)) {
      throw new HttpError(403, "You do not have permission to do this in this project.");
    }
    if (environment !== undefined) {
      if (!isEnvironment(environment) || !access.projectEnvironments.includes(environment)) {
        throw new HttpError(404, "Environment not found.");
      }
      if (!access.environments.includes(environment)) {
        throw new HttpError(403, `You do not have access to the ${environment} environment of this project.`);
      }
      access.environment = environment;
    }
    return access;
  }
}
