import type { AuditWriter } from "../audit/audit.writer.ts";
import {
  type AccessGuard,
  type Environment,
  hasImplicitEnvironmentAccess,
  type Permission,
  type Role,
  secretPermissionsOf,
} from "../core/access.ts";
import type { Caller } from "../core/caller.ts";
import type { Clock } from "../core/clock.ts";
import { HttpError } from "../core/errors.ts";
import { type Store, writeTransaction } from "../core/store.ts";
import type { MembersRepo } from "./members.repo.ts";
import { MEMBER_NOT_FOUND } from "./members.service.ts";

export type EnvironmentAccessLevel = "implicit" | "granted" | "none";

export interface AccessMatrix {
  environments: Environment[];
  members: {
    userId: string;
    email?: string;
    role: Role;
    isYou: boolean;
    secretPermissions: Permission[];
    access: Record<string, EnvironmentAccessLevel>;
  }[];
}

const IMPLICIT_ACCESS = "Owners and admins already have access to every environment.";

interface Deps {
  db: Store;
  repo: MembersRepo;
  access: AccessGuard;
  audit: AuditWriter;
  clock: Clock;
}

export function createEnvironmentAccessService({ db, repo, access, audit, clock }: Deps) {
  /**
   * Grant and revoke share their checks: environments:manage, an environment of the
   * project (404), a member (404), and one whose access is not implicit (400).
   */
  async function requireGrantable(caller: Caller, projectId: string, environment: string, userId: string) {
    const projectAccess = await access.require(caller, projectId, "environments:manage", environment);
    const member = await repo.findMember(projectId, userId);
    if (!member) throw new HttpError(404, MEMBER_NOT_FOUND);
    if (hasImplicitEnvironmentAccess(member.role)) throw new HttpError(400, IMPLICIT_ACCESS);
    return { member, environment: projectAccess.environment! };
  }

  return {
    async matrix(caller: Caller, projectId: string): Promise<AccessMatrix> {
      const projectAccess = await access.require(caller, projectId, "environments:manage");
      const environments = projectAccess.projectEnvironments;
      const grants = await repo.listGrants(projectId);
      return {
        environments,
        members: (await repo.listMembers(projectId)).map((member) => {
          const granted = grants.get(member.userId);
          const implicit = hasImplicitEnvironmentAccess(member.role);
          return {
            userId: member.userId,
            ...(member.email ? { email: member.email } : {}),
            role: member.role,
            isYou: member.userId === caller.userId,
            secretPermissions: secretPermissionsOf(member.role),
            access: Object.fromEntries(
              environments.map((e) => [e, implicit ? "implicit" : granted?.has(e) ? "granted" : "none"]),
            ) as Record<string, EnvironmentAccessLevel>,
          };
        }),
      };
    },

    /** Idempotent: granting twice leaves one grant and writes one audit event. */
    async grant(caller: Caller, projectId: string, environment: string, userId: string): Promise<void> {
      await writeTransaction(db, async () => {
        const target = await requireGrantable(caller, projectId, environment, userId);
        const now = clock.now().toISOString();
        if (!(await repo.insertGrant(projectId, userId, target.environment, caller.userId, now))) return;
        await audit.record(caller, {
          projectId,
          action: "environment_access.granted",
          targetType: "member",
          targetId: userId,
          metadata: { email: target.member.email ?? undefined, environment: target.environment },
        });
      });
    },

    /** Takes effect on the member's next request: the access guard reads grants on every call. */
    async revoke(caller: Caller, projectId: string, environment: string, userId: string): Promise<void> {
      await writeTransaction(db, async () => {
        const target = await requireGrantable(caller, projectId, environment, userId);
        if (!(await repo.deleteGrant(projectId, userId, target.environment))) return;
        await audit.record(caller, {
          projectId,
          action: "environment_access.revoked",
          targetType: "member",
          targetId: userId,
          metadata: { email: target.member.email ?? undefined, environment: target.environment },
        });
      });
    },
  };
}

export type EnvironmentAccessService = ReturnType<typeof createEnvironmentAccessService>;
