import { and, eq, inArray, sql } from "drizzle-orm";
import type { Environment, Role } from "../core/access.ts";
import type { Db } from "../core/db.ts";
import { memberships, projectEnvironments, projects, secrets } from "../core/schema.ts";

export type ProjectRow = typeof projects.$inferSelect;

export function createProjectsRepo(db: Db) {
  return {
    findById(id: string): ProjectRow | undefined {
      return db.select().from(projects).where(eq(projects.id, id)).get();
    },

    /** The caller's projects with their role, most recently updated first. */
    listForUser(userId: string): (ProjectRow & { role: Role })[] {
      return db
        .select({ project: projects, role: memberships.role })
        .from(memberships)
        .innerJoin(projects, eq(projects.id, memberships.projectId))
        .where(eq(memberships.userId, userId))
        .orderBy(sql`${projects.updatedAt} DESC`, sql`${projects.id} DESC`)
        .all()
        .map((r) => ({ ...r.project, role: r.role }));
    },

    /** Whether one of the user's projects (other than `exceptId`) has this name, ignoring case. */
    isNameTakenForUser(userId: string, name: string, exceptId?: string): boolean {
      // Compared here, not with SQLite's lower(), which folds only ASCII ("Ärger" vs "ärger").
      const wanted = name.toLowerCase();
      return db
        .select({ id: projects.id, name: projects.name })
        .from(memberships)
        .innerJoin(projects, eq(projects.id, memberships.projectId))
        .where(and(eq(memberships.userId, userId), exceptId ? sql`${projects.id} <> ${exceptId}` : undefined))
        .all()
        .some((row) => row.name.toLowerCase() === wanted);
    },

    insert(row: typeof projects.$inferInsert, environments: Environment[], ownerId: string): void {
      db.insert(projects).values(row).run();
      db.insert(projectEnvironments)
        .values(environments.map((slug) => ({ projectId: row.id, slug, createdAt: row.createdAt })))
        .run();
      db.insert(memberships)
        .values({ projectId: row.id, userId: ownerId, role: "owner", createdAt: row.createdAt, updatedAt: row.createdAt })
        .run();
    },

    update(id: string, fields: Partial<Pick<ProjectRow, "name" | "description" | "updatedAt">>): void {
      db.update(projects).set(fields).where(eq(projects.id, id)).run();
    },

    /** Foreign keys cascade to everything of the project; audit events have none and stay. */
    delete(id: string): void {
      db.delete(projects).where(eq(projects.id, id)).run();
    },

    secretCounts(projectId: string, environments: Environment[]): Record<string, number> {
      const counts: Record<string, number> = Object.fromEntries(environments.map((e) => [e, 0]));
      if (environments.length === 0) return counts;
      const rows = db
        .select({ environment: secrets.environment, count: sql<number>`count(*)` })
        .from(secrets)
        .where(and(eq(secrets.projectId, projectId), inArray(secrets.environment, environments)))
        .groupBy(secrets.environment)
        .all();
      for (const row of rows) counts[row.environment] = row.count;
      return counts;
    },
  };
}

export type ProjectsRepo = ReturnType<typeof createProjectsRepo>;
