import { eq } from "drizzle-orm";
import { type PgStore, pgRow, pgRows, pgRun } from "../core/postgres.ts";
import { projectEnvironments, projects } from "../core/schema.pg.ts";
import { nameKey } from "../core/text.ts";
import type { ListedProjectRow, ProjectRow, ProjectsRepo } from "./projects.repo.ts";

const PROJECT_COLUMNS = `id, name, description, created_by AS "createdBy", created_at AS "createdAt", updated_at AS "updatedAt"`;

/** projects.repo.ts on PostgreSQL: the same rows, the same JavaScript values. */
export function createProjectsRepoPg(store: PgStore): ProjectsRepo {
  return {
    findById: (id) => pgRow<ProjectRow>(store, `SELECT ${PROJECT_COLUMNS} FROM projects WHERE id = $1`, [id]),

    // Environments in slug order, as SQLite's subquery walks project_environments' primary key.
    listByIds: (ids) =>
      pgRows<ListedProjectRow>(
        store,
        `SELECT p.id, p.name, p.description, p.created_at AS "createdAt", p.updated_at AS "updatedAt",
           ARRAY(SELECT pe.slug FROM project_environments pe WHERE pe.project_id = p.id ORDER BY pe.slug) AS environments
         FROM projects p
         WHERE p.id = ANY($1::text[])
         ORDER BY p.updated_at DESC, p.id DESC`,
        [ids],
      ),

    async isNameTakenAmong(ids, name) {
      // Compared here, as on SQLite, so that names fold the same ("Ärger" vs "ärger").
      const wanted = nameKey(name);
      const rows = await pgRows<{ name: string }>(store, "SELECT name FROM projects WHERE id = ANY($1::text[])", [ids]);
      return rows.some((row) => nameKey(row.name) === wanted);
    },

    async insert(row, environments) {
      // The caller's transaction makes the two statements one, as on SQLite.
      await store.db().insert(projects).values(row);
      await store
        .db()
        .insert(projectEnvironments)
        .values(environments.map((slug) => ({ projectId: row.id, slug, createdAt: row.createdAt })));
    },

    async update(id, fields) {
      await store.db().update(projects).set(fields).where(eq(projects.id, id));
    },

    async delete(id) {
      await pgRun(store, "DELETE FROM projects WHERE id = $1", [id]);
    },
  };
}
