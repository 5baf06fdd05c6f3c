import { and, count, desc, eq, inArray, sql } from "drizzle-orm";
import type { Environment } from "../core/access.ts";
import { type Db, guard } from "../core/db.ts";
import { secrets, secretVersions, users } from "../core/schema.ts";
import { isPostgres, type Store } from "../core/store.ts";
import { createSecretsRepoPg } from "./secrets.repo.pg.ts";

export type SecretRow = typeof secrets.$inferSelect;
export type SecretVersionRow = typeof secretVersions.$inferSelect;

/** A secret with the sealed value of its current version and that value's digest (null on old versions). */
export interface SecretWithCiphertext extends SecretRow {
  ciphertext: Buffer;
  keyVersion: number;
  digest: string | null;
}

/** A secret's metadata as the list answers it. */
export interface SecretListRow {
  id: string;
  key: string;
  version: number;
  createdAt: string;
  updatedAt: string;
}

export interface NewVersion {
  secretId: string;
  versionNumber: number;
  projectId: string;
  key: string;
  changeType: SecretVersionRow["changeType"];
  restoredFromVersion: number | null;
  ciphertext: Buffer;
  keyVersion: number;
  digest: string;
  changedBy: string | null;
  changedByServiceAccountId: string | null;
  changedByServiceAccountName: string | null;
  createdAt: string;
}

export interface VersionListRow {
  versionNumber: number;
  changeType: SecretVersionRow["changeType"];
  key: string;
  restoredFromVersion: number | null;
  createdAt: string;
  changedBy: string | null;
  changedByEmail: string | null;
  changedByServiceAccountId: string | null;
  changedByServiceAccountName: string | null;
}

export type SecretsRepo = ReturnType<typeof createSecretsRepoSqlite>;

export function createSecretsRepo(store: Store): SecretsRepo {
  return isPostgres(store) ? createSecretsRepoPg(store) : createSecretsRepoSqlite(store);
}

function createSecretsRepoSqlite(db: Db) {
  // A secret by id, only within its own project and environment.
  const idInEnvironment = and(
    eq(secrets.id, sql.placeholder("id")),
    eq(secrets.projectId, sql.placeholder("projectId")),
    eq(secrets.environment, sql.placeholder("environment")),
  );

  // Reading a value is the hottest path of the server: plain SQL prepared once, its rows
  // straight from better-sqlite3 (no mapping), and CAST parameters (see "Joins with
  // parameters" in core/db.ts).
  const sqlite = db.$client;
  const withCiphertextColumns = `s.id, s.project_id AS projectId, s.environment, s.key, s.version, s.created_at AS createdAt,
    s.updated_at AS updatedAt, v.ciphertext, v.key_version AS keyVersion, v.digest`;
  const findWithValue = sqlite.prepare(
    `SELECT ${withCiphertextColumns}
     FROM secrets s JOIN secret_versions v ON v.secret_id = s.id AND v.version_number = s.version
     WHERE s.id = CAST(? AS TEXT) AND s.project_id = CAST(? AS TEXT) AND s.environment = CAST(? AS TEXT)`,
  );
  // A list's sealed values come as hex text, decoded here: better-sqlite3 copies each blob
  // into a Buffer of its own (a malloc and a finalizer each), while a string is made on
  // V8's heap and decodes into Node's pooled buffer memory. For an export of a thousand,
  // about half a millisecond of the server's CPU.
  const listWithValues = sqlite.prepare(
    `SELECT s.id, s.project_id AS projectId, s.environment, s.key, s.version, s.created_at AS createdAt,
       s.updated_at AS updatedAt, hex(v.ciphertext) AS ciphertext, v.key_version AS keyVersion, v.digest
     FROM secrets s JOIN secret_versions v ON v.secret_id = s.id AND v.version_number = s.version
     WHERE s.project_id = CAST(? AS TEXT) AND s.environment = CAST(? AS TEXT)
     ORDER BY s.key`,
  );
  const listMeta = sqlite.prepare(
    `SELECT id, key, version, created_at AS createdAt, updated_at AS updatedAt FROM secrets
     WHERE project_id = ? AND environment = ? ORDER BY updated_at DESC, id DESC`,
  );
  // Writes, one prepared statement per kind of row: an import of 500 runs them 500 times.
  const insertSecret = sqlite.prepare(
    `INSERT INTO secrets (id, project_id, environment, key, version, created_at, updated_at)
     VALUES (@id, @projectId, @environment, @key, @version, @createdAt, @updatedAt)`,
  );
  const insertVersion = sqlite.prepare(
    `INSERT INTO secret_versions (secret_id, version_number, project_id, key, change_type, restored_from_version, ciphertext,
       key_version, digest, changed_by, changed_by_service_account_id, changed_by_service_account_name, created_at)
     VALUES (@secretId, @versionNumber, @projectId, @key, @changeType, @restoredFromVersion, @ciphertext,
       @keyVersion, @digest, @changedBy, @changedByServiceAccountId, @changedByServiceAccountName, @createdAt)`,
  );
  const deleteVersionsBefore = sqlite.prepare("DELETE FROM secret_versions WHERE secret_id = ? AND version_number < ?");
  const advance = sqlite.prepare("UPDATE secrets SET key = ?, version = ?, updated_at = ? WHERE id = ? AND version = ?");
  const setDigest = sqlite.prepare("UPDATE secret_versions SET digest = ? WHERE secret_id = ? AND version_number = ? AND key_version = ?");

  const findById = db.select().from(secrets).where(idInEnvironment).prepare();
  const countsOfProjects = sqlite.prepare(
    `SELECT project_id AS projectId, environment, count(*) AS n FROM secrets
     WHERE project_id IN (SELECT value FROM json_each(?)) GROUP BY project_id, environment`,
  );

  return guard(db, {
    /**
     * Metadata of every secret of an environment, most recently updated first, in the API's
     * shape: better-sqlite3's row objects go out as they are, with no copy per row.
     */
    listMeta(projectId: string, environment: Environment): SecretListRow[] {
      return listMeta.all(projectId, environment) as SecretListRow[];
    },

    /** Every secret of an environment with its current sealed value, sorted by key. */
    listWithCiphertext(projectId: string, environment: Environment): SecretWithCiphertext[] {
      const rows = listWithValues.all(projectId, environment) as (Omit<SecretWithCiphertext, "ciphertext"> & {
        ciphertext: string | Buffer;
      })[];
      for (let i = 0; i < rows.length; i++) rows[i]!.ciphertext = Buffer.from(rows[i]!.ciphertext as string, "hex");
      return rows as SecretWithCiphertext[];
    },

    /** How many secrets an environment holds (the secrets_env_key index answers it). */
    countInEnvironment(projectId: string, environment: Environment): number {
      const row = db
        .select({ n: count() })
        .from(secrets)
        .where(and(eq(secrets.projectId, projectId), eq(secrets.environment, environment)))
        .get();
      return row?.n ?? 0;
    },

    /** How many secrets each of these environments holds (0 for one that holds none). */
    countPerEnvironment(projectId: string, environments: Environment[]): Record<string, number> {
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

    /**
     * For each of these projects, environment slug to count, for environments that hold
     * secrets. One statement for any number of projects (the secrets_env_key index answers it).
     */
    countPerEnvironmentOf(projectIds: string[]): Map<string, Record<string, number>> {
      const counts = new Map<string, Record<string, number>>();
      for (const row of countsOfProjects.all(JSON.stringify(projectIds)) as { projectId: string; environment: string; n: number }[]) {
        const ofProject = counts.get(row.projectId) ?? {};
        ofProject[row.environment] = row.n;
        counts.set(row.projectId, ofProject);
      }
      return counts;
    },

    findById(projectId: string, environment: Environment, id: string): SecretRow | undefined {
      return findById.get({ id, projectId, environment });
    },

    findWithCiphertext(projectId: string, environment: Environment, id: string): SecretWithCiphertext | undefined {
      return findWithValue.get(id, projectId, environment) as SecretWithCiphertext | undefined;
    },

    findByKey(projectId: string, environment: Environment, key: string): SecretRow | undefined {
      return db
        .select()
        .from(secrets)
        .where(and(eq(secrets.projectId, projectId), eq(secrets.environment, environment), eq(secrets.key, key)))
        .get();
    },

    findVersion(secretId: string, versionNumber: number): SecretVersionRow | undefined {
      return db
        .select()
        .from(secretVersions)
        .where(and(eq(secretVersions.secretId, secretId), eq(secretVersions.versionNumber, versionNumber)))
        .get();
    },

    /** The newest `limit` versions, newest first, with who made each change. */
    listVersions(secretId: string, limit: number): VersionListRow[] {
      return db
        .select({
          versionNumber: secretVersions.versionNumber,
          changeType: secretVersions.changeType,
          key: secretVersions.key,
          restoredFromVersion: secretVersions.restoredFromVersion,
          createdAt: secretVersions.createdAt,
          changedBy: secretVersions.changedBy,
          changedByEmail: users.email,
          changedByServiceAccountId: secretVersions.changedByServiceAccountId,
          changedByServiceAccountName: secretVersions.changedByServiceAccountName,
        })
        .from(secretVersions)
        .leftJoin(users, eq(users.id, secretVersions.changedBy))
        .where(eq(secretVersions.secretId, secretId))
        .orderBy(desc(secretVersions.versionNumber))
        .limit(limit)
        .all();
    },

    insertSecret(row: SecretRow): void {
      insertSecret.run(row);
    },

    insertVersion(row: NewVersion): void {
      insertVersion.run(row);
    },

    /**
     * An import's writes in one call: new secrets, their versions, the compare-and-set moves
     * of existing ones, and the versions that fall out of the kept window. One call rather than
     * one per row: an import of 500 entries is one step for the caller, whatever the store.
     * Returns false, having stopped, when a secret moved on meanwhile (the caller rolls back).
     */
    writeMany(batch: {
      secrets: SecretRow[];
      versions: NewVersion[];
      moves: { id: string; fromVersion: number; key: string; version: number; updatedAt: string }[];
      trims: { secretId: string; before: number }[];
    }): boolean {
      for (const row of batch.secrets) insertSecret.run(row);
      for (const row of batch.versions) insertVersion.run(row);
      for (const move of batch.moves) {
        if (advance.run(move.key, move.version, move.updatedAt, move.id, move.fromVersion).changes !== 1) return false;
      }
      for (const trim of batch.trims) deleteVersionsBefore.run(trim.secretId, trim.before);
      return true;
    },

    /** Drops a secret's versions numbered below `versionNumber`. */
    deleteVersionsBefore(secretId: string, versionNumber: number): void {
      deleteVersionsBefore.run(secretId, versionNumber);
    },

    /** Compare-and-set on the version: returns false when the secret moved on meanwhile. */
    update(id: string, fromVersion: number, fields: Pick<SecretRow, "key" | "version" | "updatedAt">): boolean {
      return advance.run(fields.key, fields.version, fields.updatedAt, id, fromVersion).changes === 1;
    },

    /** Fills in the digest of a version written before digests existed (for the key version it was computed with). */
    setDigest(secretId: string, versionNumber: number, keyVersion: number, digest: string): void {
      setDigest.run(digest, secretId, versionNumber, keyVersion);
    },

    /** The versions go with it (foreign key cascade). */
    delete(id: string): void {
      db.delete(secrets).where(eq(secrets.id, id)).run();
    },
  });
}
