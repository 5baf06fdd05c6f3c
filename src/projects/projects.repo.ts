import { eq } from "drizzle-orm";
import type { Environment } from "../core/access.ts";
import { type Db, guard } from "../core/db.ts";
import { projectEnvironments, projects } from "../core/schema.ts";
import { isPostgres, type Store } from "../core/store.ts";
import { nameKey } from "../core/text.ts";
import { createProjectsRepoPg } from "./projects.repo.pg.ts";

export type ProjectRow = typeof projects.$inferSelect;

export interface ListedProjectRow extends Pick<ProjectRow, "id" | "name" | "description" | "createdAt" | "updatedAt"> {
  /** The project's environment slugs. */
  environments: string[];
}

interface RawListedProject {
  id: string;
  name: string;
  description: string | null;
  created_at: string;
  updated_at: string;
  environments: string;
}

export type ProjectsRepo = ReturnType<typeof createProjectsRepoSqlite>;

export function createProjectsRepo(store: Store): ProjectsRepo {
  return isPostgres(store) ? createProjectsRepoPg(store) : createProjectsRepoSqlite(store);
}

function createProjectsRepoSqlite(db: Db) {
  // A correlated subquery: it walks project_environments' primary key for one project, so
  // the cost is that of the rows returned.
  const listByIds = db.$client.prepare(
    `SELECT p.id, p.name, p.description, p.created_at, p.updated_at,
       (SELECT json_group_array(pe.slug) FROM project_environments pe WHERE pe.project_id = p.id) AS environments
     FROM projects p
     WHERE p.id IN (SELECT value FROM json_each(?))
     ORDER BY p.updated_at DESC, p.id DESC`,
  );
  const listNames = db.$client.prepare("SELECT id, name FROM projects WHERE id IN (SELECT value FROM json_each(?))");

  return guard(db, {
    findById(id: string): ProjectRow | undefined {
      return db.select().from(projects).where(eq(projects.id, id)).get();
    },

    /** These projects, most recently updated first, each with its environments. One statement for any number of projects. */
    listByIds(ids: string[]): ListedProjectRow[] {
      return (listByIds.all(JSON.stringify(ids)) as RawListedProject[]).map((row) => ({
        id: row.id,
        name: row.name,
        description: row.description,
        createdAt: row.created_at,
        updatedAt: row.updated_at,
        environments: JSON.parse(row.environments) as string[],
      }));
    },

    /** Whether one of these projects has this name, as nameKey compares names. */
    isNameTakenAmong(ids: string[], name: string): boolean {
      // Compared here, not with SQLite's lower(), which folds only ASCII ("Ärger" vs "ärger").
      const wanted = nameKey(name);
      return (listNames.all(JSON.stringify(ids)) as { name: string }[]).some((row) => nameKey(row.name) === wanted);
    },

    insert(row: typeof projects.$inferInsert, environments: Environment[]): void {
      db.insert(projects).values(row).run();
      db.insert(projectEnvironments)
        .values(environments.map((slug) => ({ projectId: row.id, slug, createdAt: row.createdAt })))
        .run();
    },

    update(id: string, fields: Partial<Pick<ProjectRow, "name" | "description" | "updatedAt">>): void {
      db.update(projects).set(fields).where(eq(projects.id, id)).run();
    },

    /** Foreign keys cascade to everything of the project; audit events have none and stay. */
    delete(id: string): void {
      db.delete(projects).where(eq(projects.id, id)).run();
    },
  });
}
