import { and, desc, eq, gt, isNull, sql } from "drizzle-orm";
import { alias } from "drizzle-orm/pg-core";
import type { PgStore } from "../core/postgres.ts";
import { invitations, projects, users } from "../core/schema.pg.ts";
import type { InvitationsRepo } from "./invitations.repo.ts";

/** invitations.repo.ts on PostgreSQL: the same statements through drizzle, the same rows. */
export function createInvitationsRepoPg(store: PgStore): InvitationsRepo {
  const db = store.db();
  const inviter = alias(users, "inviter");
  return {
    async listPendingFor(email, nowIso) {
      return (
        db
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
          // lower() of a "C" column folds ASCII only, as SQLite's does.
          .where(and(sql`lower(${invitations.email}) = ${email}`, isNull(invitations.acceptedAt), gt(invitations.expiresAt, nowIso)))
          .orderBy(desc(invitations.createdAt), desc(invitations.id))
      );
    },

    async listOpenInvitationsBy(projectId, invitedBy) {
      return db
        .select()
        .from(invitations)
        .where(and(eq(invitations.projectId, projectId), eq(invitations.invitedBy, invitedBy), isNull(invitations.acceptedAt)))
        .orderBy(invitations.createdAt, invitations.id);
    },

    async findInvitation(id) {
      return (await db.select().from(invitations).where(eq(invitations.id, id)))[0];
    },

    async findInvitationByTokenHash(tokenHash) {
      return (await db.select().from(invitations).where(eq(invitations.tokenHash, tokenHash)))[0];
    },

    async listOpenInvitations(projectId) {
      return db
        .select()
        .from(invitations)
        .where(and(eq(invitations.projectId, projectId), isNull(invitations.acceptedAt)))
        .orderBy(desc(invitations.createdAt), desc(invitations.id));
    },

    async listOpenInvitationsForEmail(projectId, email) {
      return db
        .select()
        .from(invitations)
        .where(and(eq(invitations.projectId, projectId), eq(invitations.email, email), isNull(invitations.acceptedAt)));
    },

    async renewInvitationToken(id, tokenHash, createdAt, expiresAt) {
      const result = await db
        .update(invitations)
        .set({ tokenHash, createdAt, expiresAt, deliveryStatus: "not_configured" })
        .where(and(eq(invitations.id, id), isNull(invitations.acceptedAt)));
      return (result.rowCount ?? 0) > 0;
    },

    async insertInvitation(row) {
      await db.insert(invitations).values(row);
    },

    async deleteInvitation(id) {
      await db.delete(invitations).where(eq(invitations.id, id));
    },

    async markInvitationAccepted(id, userId, now) {
      const result = await db
        .update(invitations)
        .set({ acceptedAt: now, acceptedBy: userId })
        .where(and(eq(invitations.id, id), isNull(invitations.acceptedAt)));
      return (result.rowCount ?? 0) > 0;
    },

    async setDeliveryStatus(id, status) {
      await db.update(invitations).set({ deliveryStatus: status }).where(eq(invitations.id, id));
    },

    async countOpen(projectId, nowIso) {
      // ::int: drizzle reads a bigint (count's type) as a string.
      const [row] = await db
        .select({
          pending: sql<number>`(count(*) FILTER (WHERE ${invitations.expiresAt} > ${nowIso}))::int`,
          expired: sql<number>`(count(*) FILTER (WHERE ${invitations.expiresAt} <= ${nowIso}))::int`,
        })
        .from(invitations)
        .where(and(eq(invitations.projectId, projectId), isNull(invitations.acceptedAt)));
      return { pending: row?.pending ?? 0, expired: row?.expired ?? 0 };
    },
  };
}
