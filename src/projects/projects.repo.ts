import { and, eq, inArray, sql } from "drizzle-orm";
import type { Environment, Role } from "../core/access.ts";
import type { Db } from "../core/db.ts";
import { memberships, projectEnvironments, projects, secrets } from "../core/schema.ts";

export type ProjectRow = typeof projects.$inferSelect;

export interface ListedProjectRow extends Pick<ProjectRow, "id" | "name" | "description" | "createdAt" | "updatedAt"> {
  role: Role;
  /** The project's environment slugs. */
  environments: string[];
  /** The caller's environment grants (meaningful for members and viewers only). */
  grants: string[];
  /** Environment slug to count, for environments that hold secrets. */
  secretCounts: Record<string, number>;
}

interface RawListedProject {
  id: string;
  name: string;
  description: string | null;
  created_at: string;
  updated_at: string;
  role: Role;
  environments: string;
  grants: string;
  secret_counts: string;
}

export function createProjectsRepo(db: Db) {
  // Correlated subqueries: each walks its table's primary key or (project_id, environment, …)
  // index for one project, so the cost is that of the rows returned.
  const listForUser = db.$client.prepare(
    `SELECT p.id, p.name, p.description, p.created_at, p.updated_at, m.role,
       (SELECT json_group_array(pe.slug) FROM project_environments pe WHERE pe.project_id = p.id) AS environments,
       (SELECT json_group_array(g.environment) FROM environment_grants g
         WHERE g.project_id = p.id AND g.user_id = m.user_id) AS grants,
       (SELECT json_group_object(c.environment, c.n) FROM
         (SELECT s.environment, count(*) AS n FROM secrets s WHERE s.project_id = p.id GROUP BY s.environment) c) AS secret_counts
     FROM memberships m JOIN projects p ON p.id = m.project_id
     WHERE m.user_id = ?
     ORDER BY p.updated_at DESC, p.id DESC`,
  );

  return {
    findById(id: string): ProjectRow | undefined {
      return db.select().from(projects).where(eq(projects.id, id)).get();
    },

    /**
     * The caller's projects, most recently updated first, each with what its view needs: the
     * caller's role and grants, the project's environments and its secret counts. One
     * statement for any number of projects; it used to be two queries per project.
     */
    listForUser(userId: string): ListedProjectRow[] {
      return (listForUser.all(userId) as RawListedProject[]).map((row) => ({
        id: row.id,
        name: row.name,
        description: row.description,
        createdAt: row.created_at,
        updatedAt: row.updated_at,
        role: row.role,
        environments: JSON.parse(row.environments) as string[],
        grants: JSON.parse(row.grants) as string[],
        secretCounts: JSON.parse(row.secret_counts) as Record<string, number>,
      }));
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
