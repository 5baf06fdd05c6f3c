import crypto from "node:crypto";
import type { AuditWriter } from "../audit/audit.writer.ts";
import { type AccessGuard, type AssignableRole, ENVIRONMENTS, type Environment } from "../core/access.ts";
import type { Caller } from "../core/caller.ts";
import type { Clock } from "../core/clock.ts";
import type { Config } from "../core/config.ts";
import { hashToken, randomToken } from "../core/crypto.ts";
import { HttpError } from "../core/errors.ts";
import type { LostRights } from "../core/lost-rights.ts";
import { type Store, writeTransaction } from "../core/store.ts";
import { foldEmail } from "../core/text.ts";
import type { InvitationMailer } from "./invitation-mail.ts";
import type { InvitationRow, InvitationsRepo } from "./invitations.repo.ts";

export interface InvitationView {
  id: string;
  email: string;
  role: AssignableRole;
  environments: Environment[];
  createdAt: string;
  expiresAt: string;
  expired: boolean;
  /** Only when SMTP_URL is set: whether the invitation e-mail reached the mail server. */
  delivery?: "sent" | "failed";
}

/** What a link shows before sign-in (POST /api/invitations/preview): the token is the credential. */
export interface InvitationPreview {
  projectName: string;
  invitedBy: { name?: string; email: string } | null;
  role: AssignableRole;
  environments: Environment[];
  expiresAt: string;
}

export interface NewInvitation {
  /** Already trimmed and lower-cased. */
  email: string;
  role: AssignableRole;
  environments?: Environment[];
}

const INVITATION_LIFETIME_DAYS = 7;
const DAY_MS = 24 * 60 * 60 * 1000;
// 32 random bytes: the token is the only thing standing between a link and a membership.
const TOKEN_BYTES = 32;

export const INVITATION_NOT_FOUND = "Invitation not found.";
const INVITATION_UNUSABLE = "This invitation is invalid, expired, or already used.";
const INVITATION_OTHER_EMAIL = "This invitation was sent to a different email address.";
const ALREADY_MEMBER_ON_ACCEPT = "You are already a member of this project.";

/**
 * What invitations need of the members feature: accepting one writes a membership and its
 * grants in the same transaction. The members repo, passed in by app.ts; declared here so
 * this feature does not import the members folder (which hosts the invitation routes).
 */
export interface Memberships {
  findMember(projectId: string, userId: string): Promise<unknown>;
  isMemberByEmail(projectId: string, email: string): Promise<boolean>;
  insertMember(projectId: string, userId: string, role: AssignableRole, now: string): Promise<void>;
  insertGrant(projectId: string, userId: string, environment: Environment, grantedBy: string, now: string): Promise<boolean>;
  listProjectIdsOf(userId: string): Promise<string[]>;
}

/** The project's name and the inviter, for the link's preview and the e-mail; read by app.ts from their owners. */
export type InvitationContext = (
  projectId: string,
  invitedBy: string | null,
) => Promise<{ projectName: string | undefined; inviter: { email: string | null; name: string | null } | undefined }>;

/** The context from the projects and users features' lookups (their repos, or anything shaped so). */
export function describeInvitation(
  projects: { findById(id: string): Promise<{ name: string } | undefined> },
  users: { findById(id: string): Promise<{ email: string | null; name: string | null } | undefined> },
): InvitationContext {
  return async (projectId, invitedBy) => {
    const inviter = invitedBy ? await users.findById(invitedBy) : undefined;
    return { projectName: (await projects.findById(projectId))?.name, inviter: inviter && { email: inviter.email, name: inviter.name } };
  };
}

interface Deps {
  db: Store;
  repo: InvitationsRepo;
  memberships: Memberships;
  context: InvitationContext;
  access: AccessGuard;
  audit: AuditWriter;
  clock: Clock;
  config: Pick<Config, "isProduction" | "appUrl">;
  /** Present when SMTP_URL is set: e-mails each new invitation's accept link. */
  mailer?: InvitationMailer;
}

function environmentsOf(row: InvitationRow): Environment[] {
  const stored = JSON.parse(row.environments) as string[];
  return ENVIRONMENTS.filter((e) => stored.includes(e));
}

export function createInvitationsService({ db, repo, memberships, context, access, audit, clock, config, mailer }: Deps) {
  function isExpired(row: InvitationRow): boolean {
    return Date.parse(row.expiresAt) <= clock.now().getTime();
  }

  /**
   * An invitation is the inviter's authority, used later by someone else: it stands only while
   * the inviter still holds members:invite here (and environments:manage when it grants
   * environments). One whose inviter is gone, disabled or demoted is void.
   */
  async function isBackedByInviter(row: InvitationRow): Promise<boolean> {
    if (!row.invitedBy) return false;
    if (!(await access.holds(row.invitedBy, row.projectId, "members:invite"))) return false;
    return environmentsOf(row).length === 0 || (await access.holds(row.invitedBy, row.projectId, "environments:manage"));
  }

  function toView(row: InvitationRow): InvitationView {
    return {
      id: row.id,
      email: row.email,
      role: row.role,
      environments: environmentsOf(row),
      createdAt: row.createdAt,
      expiresAt: row.expiresAt,
      expired: isExpired(row),
      ...(row.deliveryStatus === "sent" || row.deliveryStatus === "failed" ? { delivery: row.deliveryStatus } : {}),
    };
  }

  /**
   * THE acceptance of an invitation, whatever route found the row (the token link today, an
   * invitation id from the caller's own list later). All the rules live here: the caller's
   * verified e-mail must be the invited one, the invitation must still exist, be unused and
   * unexpired, and the membership, its grants, the used mark and the audit event are written
   * in one transaction.
   */
  function acceptInvitation(
    caller: Caller,
    invitation: InvitationRow,
    /** Found by this link's token: a renewal since then (a new token) ends the old link. */
    byTokenHash?: string,
  ): Promise<{ projectId: string; role: AssignableRole }> {
    return writeTransaction(db, async () => {
      // The e-mail check comes first: someone else learns nothing about the invitation's state.
      const callerEmail = caller.email ? foldEmail(caller.email) : undefined;
      if (!caller.emailVerified || !callerEmail || callerEmail !== foldEmail(invitation.email)) {
        throw new HttpError(403, INVITATION_OTHER_EMAIL);
      }
      // Read again inside the write lock: a concurrent accept or a revoke may have won.
      const row = await repo.findInvitation(invitation.id);
      if (!row || row.acceptedAt !== null || isExpired(row)) throw new HttpError(410, INVITATION_UNUSABLE);
      if (byTokenHash !== undefined && row.tokenHash !== byTokenHash) throw new HttpError(410, INVITATION_UNUSABLE);
      // Checked at acceptance as well as voided when the inviter loses the right: this also
      // refuses invitations created before voiding existed.
      if (!(await isBackedByInviter(row))) throw new HttpError(410, INVITATION_UNUSABLE);
      // An invitation never changes an existing membership (it could otherwise demote the owner).
      if (await memberships.findMember(row.projectId, caller.userId)) throw new HttpError(409, ALREADY_MEMBER_ON_ACCEPT);

      const now = clock.now().toISOString();
      if (!(await repo.markInvitationAccepted(row.id, caller.userId, now))) throw new HttpError(410, INVITATION_UNUSABLE);
      await memberships.insertMember(row.projectId, caller.userId, row.role, now);
      const environments = row.role === "admin" ? [] : environmentsOf(row);
      const projectEnvironments = (await access.find(caller, row.projectId))?.projectEnvironments ?? [];
      const granted = environments.filter((e) => projectEnvironments.includes(e));
      for (const environment of granted) {
        await memberships.insertGrant(row.projectId, caller.userId, environment, row.invitedBy ?? caller.userId, now);
      }
      await audit.record(caller, {
        projectId: row.projectId,
        action: "invitation.accepted",
        targetType: "member",
        targetId: caller.userId,
        metadata: { email: row.email, role: row.role, environments: granted, invitationId: row.id },
      });
      return { projectId: row.projectId, role: row.role };
    });
  }

  return {
    async list(caller: Caller, projectId: string): Promise<InvitationView[]> {
      await access.require(caller, projectId, "invitations:read");
      return (await repo.listOpenInvitations(projectId)).map(toView);
    },

    /**
     * Creates a pending invitation. The token exists in plain text only in what this returns
     * (devAcceptUrl outside production); the database keeps its hash.
     */
    async create(caller: Caller, projectId: string, input: NewInvitation): Promise<{ invitation: InvitationView; devAcceptUrl?: string }> {
      const token = randomToken(TOKEN_BYTES);
      const row = await writeTransaction(db, async () => {
        const projectAccess = await access.require(caller, projectId, "members:invite");
        const environments = input.environments ?? [];
        // Given at all (even empty), the list is an access decision.
        if (input.environments !== undefined) {
          await access.require(caller, projectId, "environments:manage");
          if (input.role === "admin") {
            throw new HttpError(400, "Admins already have access to every environment. Invite them without environments.");
          }
          if (environments.some((e) => !projectAccess.projectEnvironments.includes(e))) {
            throw new HttpError(404, "Environment not found.");
          }
        }
        if (await memberships.isMemberByEmail(projectId, input.email)) throw new HttpError(409, "This person is already a member.");
        const open = await repo.listOpenInvitationsForEmail(projectId, input.email);
        if (open.some((r) => !isExpired(r))) throw new HttpError(409, "An invitation for this email is already pending.");
        // An expired invitation for the same address is replaced, so the list shows one entry per
        // person; its end is audited as any revocation is.
        for (const expired of open) {
          await repo.deleteInvitation(expired.id);
          await audit.record(caller, {
            projectId,
            action: "invitation.revoked",
            targetType: "invitation",
            targetId: expired.id,
            metadata: { email: expired.email, role: expired.role, reason: "replaced" },
          });
        }

        const now = clock.now();
        const inserted: InvitationRow = {
          id: crypto.randomUUID(),
          projectId,
          email: input.email,
          role: input.role,
          environments: JSON.stringify(ENVIRONMENTS.filter((e) => environments.includes(e))),
          tokenHash: hashToken(token),
          invitedBy: caller.userId,
          createdAt: now.toISOString(),
          expiresAt: new Date(now.getTime() + INVITATION_LIFETIME_DAYS * DAY_MS).toISOString(),
          acceptedAt: null,
          acceptedBy: null,
          deliveryStatus: "not_configured",
        };
        await repo.insertInvitation(inserted);
        // Never the token: the audit log is readable by every admin.
        await audit.record(caller, {
          projectId,
          action: "invitation.created",
          targetType: "invitation",
          targetId: inserted.id,
          metadata: { email: inserted.email, role: inserted.role, environments: environmentsOf(inserted) },
        });
        return inserted;
      });
      // After the transaction: the network call must not hold the write lock.
      if (mailer) row.deliveryStatus = await mailer.deliver(row, `${config.appUrl}/invite#${token}`);
      const invitation = toView(row);
      // In production the link is never returned: only the invitee's mailbox may see it.
      if (config.isProduction) return { invitation };
      return { invitation, devAcceptUrl: `${config.appUrl}/invite#${token}` };
    },

    async revoke(caller: Caller, projectId: string, invitationId: string): Promise<void> {
      await writeTransaction(db, async () => {
        await access.require(caller, projectId, "invitations:revoke");
        const row = await repo.findInvitation(invitationId);
        if (!row || row.projectId !== projectId || row.acceptedAt !== null) throw new HttpError(404, INVITATION_NOT_FOUND);
        await repo.deleteInvitation(row.id);
        await audit.record(caller, {
          projectId,
          action: "invitation.revoked",
          targetType: "invitation",
          targetId: row.id,
          metadata: { email: row.email, role: row.role },
        });
      });
    },

    /**
     * A members:rights-lost listener: deletes (as a revocation does) the open invitations this
     * person created that their rights no longer back, audited with the reason.
     */
    async voidForLostRights(lost: LostRights): Promise<void> {
      for (const row of await repo.listOpenInvitationsBy(lost.projectId, lost.userId)) {
        if (await isBackedByInviter(row)) continue;
        await repo.deleteInvitation(row.id);
        await audit.record(lost.actor, {
          projectId: lost.projectId,
          action: "invitation.revoked",
          targetType: "invitation",
          targetId: row.id,
          metadata: { email: row.email, role: row.role, reason: "inviter_lost_access", inviter: lost.userId, cause: lost.cause },
        });
      }
    },

    /**
     * A new link for an open invitation: a new token replaces the old one's hash (so the old
     * link stops working) and the 7 days start again. It is created anew: `createdAt` is now,
     * as api.md has an invitation expire 7 days after its creation. Like create, the token
     * leaves only in the e-mail (SMTP_URL) and, outside production, in devAcceptUrl.
     */
    async renewLink(
      caller: Caller,
      projectId: string,
      invitationId: string,
    ): Promise<{ invitation: InvitationView; devAcceptUrl?: string }> {
      const token = randomToken(TOKEN_BYTES);
      const row = await writeTransaction(db, async () => {
        await access.require(caller, projectId, "members:invite");
        const found = await repo.findInvitation(invitationId);
        if (!found || found.projectId !== projectId || found.acceptedAt !== null) throw new HttpError(404, INVITATION_NOT_FOUND);
        // Renewing re-issues the grant of environments: the caller must be allowed to give them.
        if (environmentsOf(found).length > 0) await access.require(caller, projectId, "environments:manage");
        const now = clock.now();
        const createdAt = now.toISOString();
        const expiresAt = new Date(now.getTime() + INVITATION_LIFETIME_DAYS * DAY_MS).toISOString();
        if (!(await repo.renewInvitationToken(found.id, hashToken(token), createdAt, expiresAt))) {
          throw new HttpError(404, INVITATION_NOT_FOUND);
        }
        // Never the token: the audit log is readable by every admin.
        await audit.record(caller, {
          projectId,
          action: "invitation.link_renewed",
          targetType: "invitation",
          targetId: found.id,
          metadata: { email: found.email, role: found.role, expiresAt },
        });
        return { ...found, createdAt, expiresAt, deliveryStatus: "not_configured" };
      });
      if (mailer) row.deliveryStatus = await mailer.deliver(row, `${config.appUrl}/invite#${token}`);
      const invitation = toView(row);
      if (config.isProduction) return { invitation };
      return { invitation, devAcceptUrl: `${config.appUrl}/invite#${token}` };
    },

    /**
     * POST /api/invitations/preview: who invited the link's holder to which project, before
     * they sign in. Reads only. Anything but a usable invitation answers acceptance's 410, so
     * a token's state (used, expired, revoked, never issued) cannot be told apart.
     */
    async preview(token: string): Promise<InvitationPreview> {
      const row = await repo.findInvitationByTokenHash(hashToken(token));
      if (!row || row.acceptedAt !== null || isExpired(row) || !(await isBackedByInviter(row))) {
        throw new HttpError(410, INVITATION_UNUSABLE);
      }
      const { projectName, inviter } = await context(row.projectId, row.invitedBy);
      if (projectName === undefined) throw new HttpError(410, INVITATION_UNUSABLE);
      return {
        projectName,
        invitedBy: inviter?.email ? { ...(inviter.name ? { name: inviter.name } : {}), email: inviter.email } : null,
        role: row.role,
        environments: row.role === "admin" ? [] : environmentsOf(row),
        expiresAt: row.expiresAt,
      };
    },

    /** POST /api/invitations/accept: the token from the link's fragment. */
    async acceptToken(caller: Caller, token: string): Promise<{ projectId: string; role: AssignableRole }> {
      const tokenHash = hashToken(token);
      const row = await repo.findInvitationByTokenHash(tokenHash);
      if (!row) throw new HttpError(410, INVITATION_UNUSABLE);
      return acceptInvitation(caller, row, tokenHash);
    },

    acceptInvitation,

    /** An invitation by id, for routes that accept by id; undefined when there is none. */
    findInvitation(invitationId: string): Promise<InvitationRow | undefined> {
      return repo.findInvitation(invitationId);
    },

    toView,
  };
}

export type InvitationsService = ReturnType<typeof createInvitationsService>;
