import type { AuditWriter } from "../audit/audit.writer.ts";
import {
  type AccessGuard,
  type AssignableRole,
  ENVIRONMENTS,
  type Environment,
  hasImplicitEnvironmentAccess,
  type Role,
} from "../core/access.ts";
import type { Caller } from "../core/caller.ts";
import type { Clock } from "../core/clock.ts";
import { HttpError } from "../core/errors.ts";
import type { LostRights, LostRightsListener } from "../core/lost-rights.ts";
import { type Store, writeTransaction } from "../core/store.ts";
import type { MemberRow, MembersRepo } from "./members.repo.ts";

export interface MemberView {
  userId: string;
  email?: string;
  name?: string;
  role: Role;
  isYou: boolean;
  createdAt: string;
}

// Declared in core so invitations and routes share them without importing this feature.
export { ASSIGNABLE_ROLES } from "../core/access.ts";

export const MEMBER_NOT_FOUND = "Member not found.";

interface Deps {
  db: Store;
  repo: MembersRepo;
  access: AccessGuard;
  audit: AuditWriter;
  clock: Clock;
}

function toMemberView(row: MemberRow, caller: Caller): MemberView {
  return {
    userId: row.userId,
    ...(row.email ? { email: row.email } : {}),
    ...(row.name ? { name: row.name } : {}),
    role: row.role,
    isYou: row.userId === caller.userId,
    createdAt: row.createdAt,
  };
}

export function createMembersService({ db, repo, access, audit, clock }: Deps) {
  const lostRightsListeners: LostRightsListener[] = [];

  // The one place that hears "this person just lost rights in this project": every path that
  // lowers or ends a membership calls it, so no listener can miss one of them.
  async function rightsLost(lost: LostRights): Promise<void> {
    for (const listener of lostRightsListeners) await listener(lost);
  }

  return {
    /** Registered once, in app.ts and in the users command (see src/lost-rights.ts). */
    onRightsLost(listener: LostRightsListener): void {
      lostRightsListeners.push(listener);
    },

    /**
     * A user was disabled: in each of their projects they now hold nothing, though the
     * membership stays (enabling them again restores it, not what was voided). Call inside
     * the transaction that disabled them.
     */
    async userDisabled(userId: string): Promise<void> {
      for (const projectId of await repo.listProjectIdsOf(userId)) await rightsLost({ projectId, userId, cause: "disabled", actor: null });
    },

    async list(caller: Caller, projectId: string): Promise<MemberView[]> {
      await access.require(caller, projectId, "members:read");
      return (await repo.listMembers(projectId)).map((row) => toMemberView(row, caller));
    },

    changeRole(
      caller: Caller,
      projectId: string,
      userId: string,
      role: AssignableRole,
    ): Promise<{ userId: string; email?: string; role: Role }> {
      return writeTransaction(db, async () => {
        await access.require(caller, projectId, "members:update_role");
        if (userId === caller.userId) throw new HttpError(400, "You cannot change your own role.");
        const member = await repo.findMember(projectId, userId);
        if (!member) throw new HttpError(404, MEMBER_NOT_FOUND);
        if (member.role === "owner") throw new HttpError(403, "The owner's role cannot be changed.");
        if (member.role !== role) {
          await repo.updateRole(projectId, userId, role, clock.now().toISOString());
          // Grants only mean something for members and viewers. Dropping them whenever a
          // member crosses the admin line means a demoted admin starts with no environment
          // rather than with whatever they were granted before a promotion.
          let dropped: Environment[] = [];
          if (hasImplicitEnvironmentAccess(member.role) !== hasImplicitEnvironmentAccess(role)) {
            dropped = await repo.deleteAllGrants(projectId, userId);
          }
          await audit.record(caller, {
            projectId,
            action: "member.role_changed",
            targetType: "member",
            targetId: userId,
            metadata: { email: member.email ?? undefined, from: member.role, to: role },
          });
          // Access changes are audited one by one, as a revoke by hand would be.
          for (const environment of ENVIRONMENTS.filter((e) => dropped.includes(e))) {
            await audit.record(caller, {
              projectId,
              action: "environment_access.revoked",
              targetType: "member",
              targetId: userId,
              metadata: { email: member.email ?? undefined, environment },
            });
          }
          // Every change, promotions included: the listeners compare with the rights as they are now.
          await rightsLost({ projectId, userId, cause: "role_changed", actor: caller });
        }
        return { userId, ...(member.email ? { email: member.email } : {}), role };
      });
    },

    /** Removes another member (members:remove), or, when `userId` is the caller, leaves the project. */
    async remove(caller: Caller, projectId: string, userId: string): Promise<void> {
      await writeTransaction(db, async () => {
        const isLeaving = userId === caller.userId;
        // Leaving needs only membership; removing someone else needs the permission, checked
        // before the target is looked up so a member cannot probe who else belongs.
        const callerAccess = await access.require(caller, projectId, isLeaving ? undefined : "members:remove");
        if (isLeaving) {
          if (callerAccess.role === "owner") throw new HttpError(403, "The owner cannot leave the project.");
        }
        const member = await repo.findMember(projectId, userId);
        if (!member) throw new HttpError(404, MEMBER_NOT_FOUND);
        if (!isLeaving && member.role === "owner") throw new HttpError(403, "The owner cannot be removed.");
        await repo.deleteMember(projectId, userId);
        await audit.record(caller, {
          projectId,
          action: isLeaving ? "member.left" : "member.removed",
          targetType: "member",
          targetId: userId,
          metadata: { email: member.email ?? undefined, role: member.role },
        });
        await rightsLost({ projectId, userId, cause: isLeaving ? "left" : "removed", actor: caller });
      });
    },
  };
}

export type MembersService = ReturnType<typeof createMembersService>;
