import type { AuditWriter } from "../audit/audit.writer.ts";
import { type AccessGuard, type AssignableRole, hasImplicitEnvironmentAccess, type Role } from "../core/access.ts";
import type { Caller } from "../core/caller.ts";
import type { Clock } from "../core/clock.ts";
import { type Db, writeTransaction } from "../core/db.ts";
import { HttpError } from "../core/errors.ts";
import type { LostRights, LostRightsListener } from "../core/lost-rights.ts";
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
export { ASSIGNABLE_ROLES, type AssignableRole } from "../core/access.ts";
export type { LostRights, LostRightsCause, LostRightsListener } from "../core/lost-rights.ts";

export const MEMBER_NOT_FOUND = "Member not found.";

interface Deps {
  db: Db;
  repo: MembersRepo;
  access: AccessGuard;
  audit: AuditWriter;
  clock: Clock;
}

export function toMemberView(row: MemberRow, caller: Caller): MemberView {
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
  function rightsLost(lost: LostRights): void {
    for (const listener of lostRightsListeners) listener(lost);
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
    userDisabled(userId: string): void {
      for (const projectId of repo.listProjectIdsOf(userId)) rightsLost({ projectId, userId, cause: "disabled", actor: null });
    },

    list(caller: Caller, projectId: string): MemberView[] {
      access.require(caller, projectId, "members:read");
      return repo.listMembers(projectId).map((row) => toMemberView(row, caller));
    },

    changeRole(caller: Caller, projectId: string, userId: string, role: AssignableRole): { userId: string; email?: string; role: Role } {
      return writeTransaction(db, () => {
        access.require(caller, projectId, "members:update_role");
        if (userId === caller.userId) throw new HttpError(400, "You cannot change your own role.");
        const member = repo.findMember(projectId, userId);
        if (!member) throw new HttpError(404, MEMBER_NOT_FOUND);
        if (member.role === "owner") throw new HttpError(403, "The owner's role cannot be changed.");
        if (member.role !== role) {
          repo.updateRole(projectId, userId, role, clock.now().toISOString());
          // Grants only mean something for members and viewers. Dropping them whenever a
          // member crosses the admin line means a demoted admin starts with no environment
          // rather than with whatever they were granted before a promotion.
          if (hasImplicitEnvironmentAccess(member.role) !== hasImplicitEnvironmentAccess(role)) {
            repo.deleteAllGrants(projectId, userId);
          }
          audit.record(caller, {
            projectId,
            action: "member.role_changed",
            targetType: "member",
            targetId: userId,
            metadata: { email: member.email ?? undefined, from: member.role, to: role },
          });
          // Every change, promotions included: the listeners compare with the rights as they are now.
          rightsLost({ projectId, userId, cause: "role_changed", actor: caller });
        }
        return { userId, ...(member.email ? { email: member.email } : {}), role };
      });
    },

    /** Removes another member (members:remove), or, when `userId` is the caller, leaves the project. */
    remove(caller: Caller, projectId: string, userId: string): void {
      writeTransaction(db, () => {
        const isLeaving = userId === caller.userId;
        // Leaving needs only membership; removing someone else needs the permission, checked
        // before the target is looked up so a member cannot probe who else belongs.
        const callerAccess = access.require(caller, projectId, isLeaving ? undefined : "members:remove");
        if (isLeaving) {
          if (callerAccess.role === "owner") throw new HttpError(403, "The owner cannot leave the project.");
        }
        const member = repo.findMember(projectId, userId);
        if (!member) throw new HttpError(404, MEMBER_NOT_FOUND);
        if (!isLeaving && member.role === "owner") throw new HttpError(403, "The owner cannot be removed.");
        repo.deleteMember(projectId, userId);
        audit.record(caller, {
          projectId,
          action: isLeaving ? "member.left" : "member.removed",
          targetType: "member",
          targetId: userId,
          metadata: { email: member.email ?? undefined, role: member.role },
        });
        rightsLost({ projectId, userId, cause: isLeaving ? "left" : "removed", actor: caller });
      });
    },
  };
}

export type MembersService = ReturnType<typeof createMembersService>;
