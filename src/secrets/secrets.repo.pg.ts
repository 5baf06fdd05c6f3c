import { type PgStore, pgRow, pgRows, pgRun } from "../core/postgres.ts";
import type {
  NewVersion,
  SecretListRow,
  SecretRow,
  SecretsRepo,
  SecretVersionRow,
  SecretWithCiphertext,
  VersionListRow,
} from "./secrets.repo.ts";

const SECRET_COLUMNS = `id, project_id AS "projectId", environment, key, version, created_at AS "createdAt", updated_at AS "updatedAt"`;
const WITH_CIPHERTEXT_COLUMNS = `s.id, s.project_id AS "projectId", s.environment, s.key, s.version, s.created_at AS "createdAt",
  s.updated_at AS "updatedAt", v.ciphertext, v.key_version AS "keyVersion", v.digest`;
const VERSION_COLUMNS = `secret_id AS "secretId", version_number AS "versionNumber", project_id AS "projectId", key,
  change_type AS "changeType", restored_from_version AS "restoredFromVersion", ciphertext, key_version AS "keyVersion", digest,
  changed_by AS "changedBy", changed_by_service_account_id AS "changedByServiceAccountId",
  changed_by_service_account_name AS "changedByServiceAccountName", created_at AS "createdAt"`;

/*
 * The writes of an import go as one statement per kind of row, whatever their number: each
 * column is sent as one array and unnest() turns the arrays back into rows. One round trip
 * each, where a statement per row would cost one per row while holding the write lock.
 */
const INSERT_SECRETS = `INSERT INTO secrets (id, project_id, environment, key, version, created_at, updated_at)
  SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::int[], $6::text[], $7::text[])`;
const INSERT_VERSIONS = `INSERT INTO secret_versions (secret_id, version_number, project_id, key, change_type, restored_from_version,
    ciphertext, key_version, digest, changed_by, changed_by_service_account_id, changed_by_service_account_name, created_at)
  SELECT * FROM unnest($1::text[], $2::int[], $3::text[], $4::text[], $5::text[], $6::int[], $7::bytea[], $8::int[], $9::text[],
    $10::text[], $11::text[], $12::text[], $13::text[])`;

const secretValues = (r: SecretRow): unknown[] => [r.id, r.projectId, r.environment, r.key, r.version, r.createdAt, r.updatedAt];

const versionValues = (r: NewVersion): unknown[] => [
  r.secretId,
  r.versionNumber,
  r.projectId,
  r.key,
  r.changeType,
  r.restoredFromVersion,
  r.ciphertext,
  r.keyVersion,
  r.digest,
  r.changedBy,
  r.changedByServiceAccountId,
  r.changedByServiceAccountName,
  r.createdAt,
];

/** The rows' values column by column: one array per parameter of unnest(). */
function columnsOf<R>(rows: R[], values: (row: R) => unknown[]): unknown[][] {
  const columns: unknown[][] = [];
  for (const row of rows) {
    values(row).forEach((value, i) => {
      (columns[i] ??= []).push(value);
    });
  }
  return columns;
}

/** secrets.repo.ts on PostgreSQL: the same rows, the same JavaScript values. */
export function createSecretsRepoPg(store: PgStore): SecretsRepo {
  // The read of a value is the hottest path: named statements, parsed once per connection.
  const query = async <T>(name: string, text: string, values: unknown[]): Promise<T[]> =>
    (await store.client().query({ name, text, values })).rows as T[];

  return {
    listMeta: (projectId, environment) =>
      query<SecretListRow>(
        "secrets-list-meta",
        `SELECT id, key, version, created_at AS "createdAt", updated_at AS "updatedAt" FROM secrets
         WHERE project_id = $1 AND environment = $2 ORDER BY updated_at DESC, id DESC`,
        [projectId, environment],
      ),

    listWithCiphertext: (projectId, environment) =>
      query<SecretWithCiphertext>(
        "secrets-list-with-values",
        `SELECT ${WITH_CIPHERTEXT_COLUMNS}
         FROM secrets s JOIN secret_versions v ON v.secret_id = s.id AND v.version_number = s.version
         WHERE s.project_id = $1 AND s.environment = $2
         ORDER BY s.key`,
        [projectId, environment],
      ),

    async countInEnvironment(projectId, environment) {
      const row = await pgRow<{ n: number }>(store, "SELECT count(*) AS n FROM secrets WHERE project_id = $1 AND environment = $2", [
        projectId,
        environment,
      ]);
      return row?.n ?? 0;
    },

    async countPerEnvironment(projectId, environments) {
      const counts: Record<string, number> = Object.fromEntries(environments.map((e) => [e, 0]));
      if (environments.length === 0) return counts;
      const rows = await pgRows<{ environment: string; count: number }>(
        store,
        "SELECT environment, count(*) AS count FROM secrets WHERE project_id = $1 AND environment = ANY($2::text[]) GROUP BY environment",
        [projectId, environments],
      );
      for (const row of rows) counts[row.environment] = row.count;
      return counts;
    },

    async countPerEnvironmentOf(projectIds) {
      const counts = new Map<string, Record<string, number>>();
      const rows = await pgRows<{ projectId: string; environment: string; n: number }>(
        store,
        `SELECT project_id AS "projectId", environment, count(*) AS n FROM secrets
         WHERE project_id = ANY($1::text[]) GROUP BY project_id, environment`,
        [projectIds],
      );
      for (const row of rows) {
        const ofProject = counts.get(row.projectId) ?? {};
        ofProject[row.environment] = row.n;
        counts.set(row.projectId, ofProject);
      }
      return counts;
    },

    async findById(projectId, environment, id) {
      const [row] = await query<SecretRow>(
        "secrets-find-by-id",
        `SELECT ${SECRET_COLUMNS} FROM secrets WHERE id = $1 AND project_id = $2 AND environment = $3`,
        [id, projectId, environment],
      );
      return row;
    },

    async findWithCiphertext(projectId, environment, id) {
      const [row] = await query<SecretWithCiphertext>(
        "secrets-find-with-value",
        `SELECT ${WITH_CIPHERTEXT_COLUMNS}
         FROM secrets s JOIN secret_versions v ON v.secret_id = s.id AND v.version_number = s.version
         WHERE s.id = $1 AND s.project_id = $2 AND s.environment = $3`,
        [id, projectId, environment],
      );
      return row;
    },

    findByKey: (projectId, environment, key) =>
      pgRow<SecretRow>(store, `SELECT ${SECRET_COLUMNS} FROM secrets WHERE project_id = $1 AND environment = $2 AND key = $3`, [
        projectId,
        environment,
        key,
      ]),

    // $2::bigint: the route takes up to 15 digits, and a number past PostgreSQL's integer then
    // finds no row (404, as on SQLite) instead of failing the statement.
    findVersion: (secretId, versionNumber) =>
      pgRow<SecretVersionRow>(
        store,
        `SELECT ${VERSION_COLUMNS} FROM secret_versions WHERE secret_id = $1 AND version_number = $2::bigint`,
        [secretId, versionNumber],
      ),

    listVersions: (secretId, limit) =>
      pgRows<VersionListRow>(
        store,
        `SELECT v.version_number AS "versionNumber", v.change_type AS "changeType", v.key, v.restored_from_version AS "restoredFromVersion",
           v.created_at AS "createdAt", v.changed_by AS "changedBy", u.email AS "changedByEmail",
           v.changed_by_service_account_id AS "changedByServiceAccountId", v.changed_by_service_account_name AS "changedByServiceAccountName"
         FROM secret_versions v LEFT JOIN users u ON u.id = v.changed_by
         WHERE v.secret_id = $1
         ORDER BY v.version_number DESC
         LIMIT $2`,
        [secretId, limit],
      ),

    async insertSecret(row) {
      await pgRun(
        store,
        `INSERT INTO secrets (id, project_id, environment, key, version, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
        secretValues(row),
      );
    },

    async insertVersion(row) {
      await pgRun(
        store,
        `INSERT INTO secret_versions (secret_id, version_number, project_id, key, change_type, restored_from_version, ciphertext,
           key_version, digest, changed_by, changed_by_service_account_id, changed_by_service_account_name, created_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)`,
        versionValues(row),
      );
    },

    async writeMany(batch) {
      if (batch.secrets.length > 0) await pgRun(store, INSERT_SECRETS, columnsOf(batch.secrets, secretValues));
      if (batch.versions.length > 0) await pgRun(store, INSERT_VERSIONS, columnsOf(batch.versions, versionValues));
      if (batch.moves.length > 0) {
        // Each move is a compare-and-set: fewer rows changed than moves means one moved on.
        const moved = await pgRun(
          store,
          `UPDATE secrets s SET key = m.key, version = m.version, updated_at = m.updated_at
           FROM unnest($1::text[], $2::int[], $3::text[], $4::int[], $5::text[]) AS m(id, from_version, key, version, updated_at)
           WHERE s.id = m.id AND s.version = m.from_version`,
          [
            batch.moves.map((m) => m.id),
            batch.moves.map((m) => m.fromVersion),
            batch.moves.map((m) => m.key),
            batch.moves.map((m) => m.version),
            batch.moves.map((m) => m.updatedAt),
          ],
        );
        if (moved !== batch.moves.length) return false;
      }
      if (batch.trims.length > 0) {
        await pgRun(
          store,
          `DELETE FROM secret_versions v USING unnest($1::text[], $2::int[]) AS t(secret_id, before)
           WHERE v.secret_id = t.secret_id AND v.version_number < t.before`,
          [batch.trims.map((t) => t.secretId), batch.trims.map((t) => t.before)],
        );
      }
      return true;
    },

    async deleteVersionsBefore(secretId, versionNumber) {
      await pgRun(store, "DELETE FROM secret_versions WHERE secret_id = $1 AND version_number < $2", [secretId, versionNumber]);
    },

    async update(id, fromVersion, fields) {
      const changed = await pgRun(store, "UPDATE secrets SET key = $1, version = $2, updated_at = $3 WHERE id = $4 AND version = $5", [
        fields.key,
        fields.version,
        fields.updatedAt,
        id,
        fromVersion,
      ]);
      return changed === 1;
    },

    async setDigest(secretId, versionNumber, keyVersion, digest) {
      await pgRun(store, "UPDATE secret_versions SET digest = $1 WHERE secret_id = $2 AND version_number = $3 AND key_version = $4", [
        digest,
        secretId,
        versionNumber,
        keyVersion,
      ]);
    },

    async delete(id) {
      await pgRun(store, "DELETE FROM secrets WHERE id = $1", [id]);
    },
  };
}
