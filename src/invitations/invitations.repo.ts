import { and, desc, eq, gt, isNull, sql } from "drizzle-orm";
import { alias } from "drizzle-orm/sqlite-core";
import { type Db, guard } from "../core/db.ts";
import { invitations, projects, users } from "../core/schema.ts";
import { isPostgres, type Store } from "../core/store.ts";
import { createInvitationsRepoPg } from "./invitations.repo.pg.ts";

export type InvitationRow = typeof invitations.$inferSelect;
export type DeliveryStatus = "not_configured" | "sent" | "failed";

export interface InboxRow {
  id: string;
  projectId: string;
  projectName: string;
  role: "admin" | "member" | "viewer";
  environments: string;
  createdAt: string;
  expiresAt: string;
  inviterEmail: string | null;
  inviterName: string | null;
}

export type InvitationsRepo = ReturnType<typeof createInvitationsRepoSqlite>;

export function createInvitationsRepo(store: Store): InvitationsRepo {
  return isPostgres(store) ? createInvitationsRepoPg(store) : createInvitationsRepoSqlite(store);
}

/** Invitations: rows in, rows out. */
function createInvitationsRepoSqlite(db: Db) {
  const inviter = alias(users, "inviter");
  return guard(db, {
    /** Pending, unexpired invitations to this (lower-case) address, across projects, newest first. */
    listPendingFor(email: string, nowIso: string): InboxRow[] {
      return db
        .select({
          id: invitations.id,
          projectId: invitations.projectId,
          projectName: projects.name,
          role: invitations.role,
          environments: invitations.environments,
          createdAt: invitations.createdAt,
          expiresAt: invitations.expiresAt,
          inviterEmail: inviter.email,
          inviterName: inviter.name,
        })
        .from(invitations)
        .innerJoin(projects, eq(projects.id, invitations.projectId))
        .leftJoin(inviter, eq(inviter.id, invitations.invitedBy))
        .where(and(sql`lower(${invitations.email}) = ${email}`, isNull(invitations.acceptedAt), gt(invitations.expiresAt, nowIso)))
        .orderBy(desc(invitations.createdAt), desc(invitations.id))
        .all();
    },

    /** Not yet accepted invitations this user created in the project, expired ones included. */
    listOpenInvitationsBy(projectId: string, invitedBy: string): InvitationRow[] {
      return db
        .select()
        .from(invitations)
        .where(and(eq(invitations.projectId, projectId), eq(invitations.invitedBy, invitedBy), isNull(invitations.acceptedAt)))
        .orderBy(invitations.createdAt, invitations.id)
        .all();
    },

    findInvitation(id: string): InvitationRow | undefined {
      return db.select().from(invitations).where(eq(invitations.id, id)).get();
    },

    findInvitationByTokenHash(tokenHash: string): InvitationRow | undefined {
      return db.select().from(invitations).where(eq(invitations.tokenHash, tokenHash)).get();
    },

    /** Not yet accepted, expired ones included, newest first. */
    listOpenInvitations(projectId: string): InvitationRow[] {
      return db
        .select()
        .from(invitations)
        .where(and(eq(invitations.projectId, projectId), isNull(invitations.acceptedAt)))
        .orderBy(sql`${invitations.createdAt} DESC`, sql`${invitations.id} DESC`)
        .all();
    },

    /** The not yet accepted invitations of this project for this (lower-case) address. */
    listOpenInvitationsForEmail(projectId: string, email: string): InvitationRow[] {
      return db
        .select()
        .from(invitations)
        .where(and(eq(invitations.projectId, projectId), eq(invitations.email, email), isNull(invitations.acceptedAt)))
        .all();
    },

    /** A new token (hash), creation time and expiry for a not yet accepted invitation; false when it was used or is gone. */
    renewInvitationToken(id: string, tokenHash: string, createdAt: string, expiresAt: string): boolean {
      const result = db
        .update(invitations)
        .set({ tokenHash, createdAt, expiresAt, deliveryStatus: "not_configured" })
        .where(and(eq(invitations.id, id), isNull(invitations.acceptedAt)))
        .run();
      return result.changes > 0;
    },

    insertInvitation(row: typeof invitations.$inferInsert): void {
      db.insert(invitations).values(row).run();
    },

    deleteInvitation(id: string): void {
      db.delete(invitations).where(eq(invitations.id, id)).run();
    },

    /** Marks an invitation used; false when it already was (single use). */
    markInvitationAccepted(id: string, userId: string, now: string): boolean {
      const result = db
        .update(invitations)
        .set({ acceptedAt: now, acceptedBy: userId })
        .where(and(eq(invitations.id, id), isNull(invitations.acceptedAt)))
        .run();
      return result.changes > 0;
    },
    /** What became of the invitation e-mail (invitation-mail.ts). */
    setDeliveryStatus(id: string, status: DeliveryStatus): void {
      db.update(invitations).set({ deliveryStatus: status }).where(eq(invitations.id, id)).run();
    },

    /** Not accepted invitations of the project, by whether they expired (the security overview). */
    countOpen(projectId: string, nowIso: string): { pending: number; expired: number } {
      const row = db
        .select({
          pending: sql<number>`coalesce(sum(${invitations.expiresAt} > ${nowIso}), 0)`,
          expired: sql<number>`coalesce(sum(${invitations.expiresAt} <= ${nowIso}), 0)`,
        })
        .from(invitations)
        .where(and(eq(invitations.projectId, projectId), isNull(invitations.acceptedAt)))
        .get();
      return { pending: row?.pending ?? 0, expired: row?.expired ?? 0 };
    },
  });
}
