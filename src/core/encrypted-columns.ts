import { type Db, type Guarded, guard } from "./db.ts";
import { type PgStore, pgRow, pgRows } from "./postgres.ts";
import { isPostgres, type Store } from "./store.ts";

/** Which AAD a column's ciphertext is sealed with (the vault's secretValueAad, integrationAad, wrapAad). */
export type EncryptedColumnAad =
  | { kind: "secret value"; binds: "project id, environment, secret id, version number" }
  | { kind: "project data key"; binds: "project id, key version" }
  | { kind: "integration"; binds: "project id, field"; field: "token" | "deploy-hook" };

/**
 * One column that holds ciphertext under a master key version, and the column that says
 * which version. Every such column is one kind of "encrypted record".
 */
export interface EncryptedColumn {
  /** How rotate-key and its errors name one record of this kind. */
  name: string;
  table: string;
  ciphertext: string;
  keyVersion: string;
  /** Every encrypted record belongs to one project (its data key, or the data key itself). */
  projectId: "project_id";
  /** A null ciphertext is no record (a Vercel connection without a deploy hook). */
  isNullable: boolean;
  /**
   * What the additional authenticated data binds the ciphertext to, so a ciphertext copied
   * into another row fails to open; core/vault.ts builds it.
   */
  aad: EncryptedColumnAad;
  /**
   * `project data key`: sealed with the project's data key and re-encrypted in place by
   * rotate-key. `master key`: a project data key wrapped by the master key itself, which
   * rotate-key replaces with a new one and deletes once no record of its project needs it.
   */
  sealedWith: "project data key" | "master key";
}

/**
 * Every ciphertext the database holds. The master-key check at start (core/db.ts), rotate-key
 * and the security overview all count from this one list, so they agree by construction: a
 * new encrypted column is added here or it is invisible to all three.
 */
export const ENCRYPTED_COLUMNS: readonly EncryptedColumn[] = [
  {
    name: "secret value",
    table: "secret_versions",
    ciphertext: "ciphertext",
    keyVersion: "key_version",
    projectId: "project_id",
    isNullable: false,
    aad: { kind: "secret value", binds: "project id, environment, secret id, version number" },
    sealedWith: "project data key",
  },
  {
    name: "project data key",
    table: "project_keys",
    ciphertext: "wrapped_key",
    keyVersion: "key_version",
    projectId: "project_id",
    isNullable: false,
    aad: { kind: "project data key", binds: "project id, key version" },
    sealedWith: "master key",
  },
  {
    name: "integration token",
    table: "integrations",
    ciphertext: "token_ciphertext",
    keyVersion: "token_key_version",
    projectId: "project_id",
    isNullable: false,
    aad: { kind: "integration", binds: "project id, field", field: "token" },
    sealedWith: "project data key",
  },
  {
    name: "integration deploy hook",
    table: "integrations",
    ciphertext: "hook_ciphertext",
    keyVersion: "hook_key_version",
    projectId: "project_id",
    isNullable: true,
    aad: { kind: "integration", binds: "project id, field", field: "deploy-hook" },
    sealedWith: "project data key",
  },
];

/** `SELECT <key version> AS v FROM <table> [WHERE ...]`, one per column, for UNION ALL. */
function keyVersionSelects(columns: readonly EncryptedColumn[], where?: (column: EncryptedColumn) => string): string[] {
  return columns.map((column) => {
    const conditions = [...(column.isNullable ? [`${column.ciphertext} IS NOT NULL`] : []), ...(where ? [where(column)] : [])];
    return `SELECT ${column.keyVersion} AS v FROM ${column.table}${conditions.length ? ` WHERE ${conditions.join(" AND ")}` : ""}`;
  });
}

export interface EncryptedRecordCounts {
  total: number;
  onCurrentKeyVersion: number;
  other: number;
}

export type EncryptedRecordCounter = Guarded<ReturnType<typeof createEncryptedRecordCounterSqlite>>;

/** Counts of encrypted records by key version, on either store. */
export function createEncryptedRecordCounter(store: Store): EncryptedRecordCounter {
  return isPostgres(store) ? createEncryptedRecordCounterPg(store) : guard(store, createEncryptedRecordCounterSqlite(store));
}

/**
 * Counts of encrypted records by key version, prepared once (the overview asks per request).
 * Synchronous, for a SQLite repo that counts inside its own call (audit.repo.ts).
 */
export function createEncryptedRecordCounterSqlite(db: Db) {
  const sqlite = db.$client;
  const countSql = (selects: string[]) =>
    `SELECT count(*) AS total, coalesce(sum(v = @current), 0) AS onCurrent FROM (${selects.join(" UNION ALL ")})`;
  const countAll = sqlite.prepare(countSql(keyVersionSelects(ENCRYPTED_COLUMNS)));
  const countProject = sqlite.prepare(countSql(keyVersionSelects(ENCRYPTED_COLUMNS, (c) => `${c.projectId} = @projectId`)));
  // DISTINCT per column first: the key_version indexes answer it without reading the rows.
  const versionsInUse = sqlite
    .prepare(
      ENCRYPTED_COLUMNS.map(
        (c) => `SELECT DISTINCT ${c.keyVersion} FROM ${c.table}${c.isNullable ? ` WHERE ${c.ciphertext} IS NOT NULL` : ""}`,
      ).join(" UNION "),
    )
    .pluck();
  const pendingByColumn = ENCRYPTED_COLUMNS.map((column) => ({
    column,
    statement: sqlite.prepare(`SELECT count(*) FROM (${keyVersionSelects([column])[0]}) WHERE v <> ?`).pluck(),
  }));

  function counts(row: { total: number; onCurrent: number }): EncryptedRecordCounts {
    return { total: row.total, onCurrentKeyVersion: row.onCurrent, other: row.total - row.onCurrent };
  }

  return {
    /** Every encrypted record of the database, or of one project. */
    count(currentKeyVersion: number, projectId?: string): EncryptedRecordCounts {
      const row =
        projectId === undefined
          ? countAll.get({ current: currentKeyVersion })
          : countProject.get({ current: currentKeyVersion, projectId });
      return counts(row as { total: number; onCurrent: number });
    },

    /** The master key versions some record is encrypted with. */
    keyVersionsInUse(): number[] {
      return versionsInUse.all() as number[];
    },

    /** Records not on `currentKeyVersion`, per column. */
    pendingByColumn(currentKeyVersion: number): { column: EncryptedColumn; pending: number }[] {
      return pendingByColumn.map(({ column, statement }) => ({ column, pending: statement.get(currentKeyVersion) as number }));
    },
  };
}

function createEncryptedRecordCounterPg(store: PgStore): EncryptedRecordCounter {
  const countSql = (selects: string[]) =>
    `SELECT count(*) AS total, count(*) FILTER (WHERE v = $1) AS "onCurrent" FROM (${selects.join(" UNION ALL ")}) AS records`;
  const countAll = countSql(keyVersionSelects(ENCRYPTED_COLUMNS));
  const countProject = countSql(keyVersionSelects(ENCRYPTED_COLUMNS, (c) => `${c.projectId} = $2`));
  const versionsInUse = `${ENCRYPTED_COLUMNS.map(
    (c) => `SELECT DISTINCT ${c.keyVersion} AS v FROM ${c.table}${c.isNullable ? ` WHERE ${c.ciphertext} IS NOT NULL` : ""}`,
  ).join(" UNION ")} ORDER BY v`;

  async function counts(text: string, values: unknown[]): Promise<EncryptedRecordCounts> {
    const row = (await pgRow<{ total: number; onCurrent: number }>(store, text, values))!;
    return { total: row.total, onCurrentKeyVersion: row.onCurrent, other: row.total - row.onCurrent };
  }

  return {
    count: (currentKeyVersion, projectId) =>
      projectId === undefined ? counts(countAll, [currentKeyVersion]) : counts(countProject, [currentKeyVersion, projectId]),

    keyVersionsInUse: async () => (await pgRows<{ v: number }>(store, versionsInUse)).map((r) => r.v),

    pendingByColumn: (currentKeyVersion) =>
      Promise.all(
        ENCRYPTED_COLUMNS.map(async (column) => {
          const row = await pgRow<{ n: number }>(
            store,
            `SELECT count(*) AS n FROM (${keyVersionSelects([column])[0]}) AS records WHERE v <> $1`,
            [currentKeyVersion],
          );
          return { column, pending: row!.n };
        }),
      ),
  };
}
