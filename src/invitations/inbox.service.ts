import type { Caller } from "../core/caller.ts";
import type { Clock } from "../core/clock.ts";
import { HttpError } from "../core/errors.ts";
import { foldEmail } from "../core/text.ts";
import type { InvitationsRepo } from "./invitations.repo.ts";
import { INVITATION_NOT_FOUND, type InvitationsService, type Memberships } from "./invitations.service.ts";

export interface InboxInvitation {
  id: string;
  project: { id: string; name: string };
  role: "admin" | "member" | "viewer";
  environments: string[];
  invitedBy: { email: string | null; name: string | null } | null;
  createdAt: string;
  expiresAt: string;
}

interface Deps {
  repo: Pick<InvitationsRepo, "listPendingFor">;
  memberships: Pick<Memberships, "listProjectIdsOf">;
  invitations: InvitationsService;
  clock: Clock;
}

export type InboxService = ReturnType<typeof createInboxService>;

/**
 * Invitations that reach people without a link: a signed-in user whose VERIFIED e-mail is
 * the invited address sees the invitation and can accept it by id. Acceptance goes through
 * the invitations service's single acceptInvitation, so the rules are exactly the token's.
 */
export function createInboxService({ repo, memberships, invitations, clock }: Deps) {
  function verifiedEmail(caller: Caller): string | undefined {
    const email = caller.email ? foldEmail(caller.email) : undefined;
    return caller.emailVerified && email ? email : undefined;
  }

  return {
    async list(caller: Caller): Promise<{ invitations: InboxInvitation[]; emailVerified: boolean }> {
      const email = verifiedEmail(caller);
      if (!email) return { invitations: [], emailVerified: false };
      // Not for projects the caller is already in: accepting would only answer 409.
      const joined = new Set(await memberships.listProjectIdsOf(caller.userId));
      const rows = (await repo.listPendingFor(email, clock.now().toISOString())).filter((r) => !joined.has(r.projectId));
      return {
        emailVerified: true,
        invitations: rows.map((r) => ({
          id: r.id,
          project: { id: r.projectId, name: r.projectName },
          role: r.role,
          environments: JSON.parse(r.environments) as string[],
          invitedBy: r.inviterEmail === null && r.inviterName === null ? null : { email: r.inviterEmail, name: r.inviterName },
          createdAt: r.createdAt,
          expiresAt: r.expiresAt,
        })),
      };
    },

    async accept(caller: Caller, invitationId: string): Promise<{ projectId: string; role: string }> {
      const row = await invitations.findInvitation(invitationId);
      const email = verifiedEmail(caller);
      // Someone else's invitation looks like no invitation: ids cannot be probed.
      if (!row || !email || foldEmail(row.email) !== email) throw new HttpError(404, INVITATION_NOT_FOUND);
      return invitations.acceptInvitation(caller, row);
    },
  };
}
