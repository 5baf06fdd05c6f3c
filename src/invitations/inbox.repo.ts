import { and, desc, eq, gt, isNull, notExists, sql } from "drizzle-orm";
import { alias } from "drizzle-orm/sqlite-core";
import type { Db } from "../core/db.ts";
import { invitations, memberships, projects, users } from "../core/schema.ts";

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

/** The invitations addressed to one person, across projects (read-only). */
export function createInboxRepo(db: Db) {
  const inviter = alias(users, "inviter");
  return {
    /** Pending, unexpired invitations to this (lower-case) address, for projects the user is not in. */
    listPendingFor(email: string, userId: string, nowIso: string): InboxRow[] {
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
        .where(
          and(
            sql`lower(${invitations.email}) = ${email}`,
            isNull(invitations.acceptedAt),
            gt(invitations.expiresAt, nowIso),
            notExists(
              db
                .select({ one: sql`1` })
                .from(memberships)
                .where(and(eq(memberships.projectId, invitations.projectId), eq(memberships.userId, userId))),
            ),
          ),
        )
        .orderBy(desc(invitations.createdAt), desc(invitations.id))
        .all();
    },
  };
}

export type InboxRepo = ReturnType<typeof createInboxRepo>;
