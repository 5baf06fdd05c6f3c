// Writes src/core/schema.pg.ts from src/core/schema.ts: the SQLite schema is the one source,
// and PostgreSQL's tables are derived from it by the rules below, so a column, index or key
// added to schema.ts reaches PostgreSQL by `npm run db:generate:pg` (this, then drizzle-kit's
// migration). test/postgres-schema.test.ts fails when schema.pg.ts is not what this makes of
// schema.ts, and compares the two databases' catalogs.
//
// The rules (what differs between the stores, and why):
// - Text compares byte by byte, as in SQLite (its BINARY collation): every text column is
//   `text COLLATE "C"`, whatever the database's default collation. A language collation
//   (en_US.UTF-8, the usual default) ignores punctuation and case at first, so ORDER BY key
//   would list AB_A before ABB where SQLite lists ABB first, and a keyset page boundary
//   compared with `>` would disagree with SQLite's. Timestamps are ISO 8601 text as in
//   SQLite, so they order and compare the same too. lower() of such a column folds ASCII
//   letters only, as SQLite's lower() does (invitations are matched on lower(email)).
// - Integers that schema.ts declares `mode: "boolean"` are `boolean`; the others stay
//   `integer` (SQLite's INTEGER is 64-bit, PostgreSQL's 32-bit: versions, counts and key
//   versions are far below 2^31).
// - An AUTOINCREMENT key (audit_events.seq, sign_in_failures.id) is `bigint generated
//   always as identity`, read as a number; a column that names an audit seq or counts
//   events over the log's lifetime (BIGINT_COLUMNS) is a bigint too. A copy of a SQLite
//   database inserts seq with OVERRIDING SYSTEM VALUE and then moves the identity past the
//   largest one.
// - SQLite keeps the rowid (an AUTOINCREMENT key is it) as the last column of every index,
//   so an index there named `…_seq` on (project_id, at) walks in (at, seq) order, the
//   chain's. PostgreSQL keeps no such column: an index whose name ends with the rowid
//   column's name gets that column appended.
// - Blobs are `bytea`, read as a Buffer as better-sqlite3 reads a blob.
// - Keys have names in PostgreSQL (SQLite's have none): drizzle-kit's, or a short one where
//   its name would pass PostgreSQL's 63 characters (SHORT_FOREIGN_KEY_NAMES). The ON
//   DELETE actions are the same.
// - Text enums narrow the TypeScript type only, on both stores (no CHECK, no enum type).
// - Every SQLite table has a rowid, PostgreSQL tables none: code that walks a table pages
//   by its primary key (src/secrets/rotate-key.ts).
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { type Column, getTableColumns, is } from "drizzle-orm";
import { getTableConfig, SQLiteTable } from "drizzle-orm/sqlite-core";
import * as sqliteSchema from "./schema.ts";

const TARGET = path.join(import.meta.dirname, "schema.pg.ts");

/**
 * Columns that hold an AUTOINCREMENT key's value without being one, or count its rows over
 * the log's lifetime (events pruned in all, bounded only by seq).
 */
const BIGINT_COLUMNS = new Set(["audit_checkpoint.seq", "audit_checkpoint.pruned_events"]);

/** PostgreSQL names at most 63 characters; drizzle-kit's name for these foreign keys is longer. */
const SHORT_FOREIGN_KEY_NAMES: Record<string, string> = {
  environment_grants_project_id_user_id_memberships_project_id_user_id_fk: "environment_grants_membership_fk",
  environment_grants_project_id_environment_project_environments_project_id_slug_fk: "environment_grants_environment_fk",
  secrets_project_id_environment_project_environments_project_id_slug_fk: "secrets_environment_fk",
  service_account_trusts_service_account_id_service_accounts_id_fk: "service_account_trusts_account_fk",
};

const MAX_NAME = 63;

const HEADER = `// GENERATED from src/core/schema.ts by src/core/schema.pg.generate.ts (npm run
// db:generate:pg): do not edit. The tables of schema.ts for PostgreSQL (DATABASE_URL), with
// the same columns, keys and index names and rows that read the same in JavaScript, so one
// set of repos serves both stores; the generator says where the two differ and why.
import { bigint, boolean, customType, foreignKey, index, integer, pgTable, primaryKey, uniqueIndex } from "drizzle-orm/pg-core";

/** \`text\` compared byte by byte, as SQLite's BINARY collation; the JavaScript value is a string. */
const binaryText = customType<{ data: string; driverData: string }>({
  dataType: () => 'text COLLATE "C"',
});

/** Like pg-core's text(): the enum only narrows the TypeScript type, as in schema.ts. */
function text<const E extends readonly [string, ...string[]] = [string]>(name: string, _config?: { enum: E }) {
  return binaryText(name).$type<E[number]>();
}

/** A blob, read as a Buffer (pg gives bytea as one). */
const bytea = customType<{ data: Buffer; driverData: Buffer }>({
  dataType: () => "bytea",
});
`;

interface TableInfo {
  exportName: string;
  table: SQLiteTable;
  columnJsName: Map<string, string>;
}

/** The TypeScript source of schema.pg.ts, before formatting. */
export function pgSchemaSource(): string {
  const tables: TableInfo[] = (Object.entries(sqliteSchema) as [string, unknown][])
    .filter((entry): entry is [string, SQLiteTable] => is(entry[1], SQLiteTable))
    .map(([exportName, table]) => ({
      exportName,
      table,
      columnJsName: new Map(Object.entries(getTableColumns(table)).map(([jsName, column]) => [column.name, jsName])),
    }));
  const byName = new Map(tables.map((info) => [getTableConfig(info.table).name, info]));
  return [HEADER, ...tables.map((info) => tableSource(info, byName))].join("\n");
}

function tableSource(info: TableInfo, byName: Map<string, TableInfo>): string {
  const config = getTableConfig(info.table);
  const columns = Object.entries(getTableColumns(info.table));
  const rowid = columns.find(([, column]) => isAutoIncrement(column))?.[1].name;
  const ref = (columnName: string) => `t.${info.columnJsName.get(columnName)}`;

  const columnLines = columns.map(([jsName, column]) => `${jsName}: ${columnSource(config.name, column)},`);
  const extras: string[] = [];
  for (const key of config.primaryKeys) {
    extras.push(`primaryKey({ columns: [${key.columns.map((c) => ref(c.name)).join(", ")}] })`);
  }
  for (const idx of config.indexes) {
    const names = idx.config.columns.map((c) => (c as Column).name);
    if (rowid !== undefined && idx.config.name.endsWith(`_${rowid}`) && !names.includes(rowid)) names.push(rowid);
    extras.push(`${idx.config.unique ? "uniqueIndex" : "index"}(${JSON.stringify(idx.config.name)}).on(${names.map(ref).join(", ")})`);
  }
  for (const key of config.foreignKeys) {
    const reference = key.reference();
    const foreign = byName.get(getTableConfig(reference.foreignTable).name);
    if (!foreign) throw new Error(`${config.name}: a foreign key to a table schema.ts does not export`);
    const name = SHORT_FOREIGN_KEY_NAMES[key.getName()] ?? key.getName();
    if (name.length > MAX_NAME) throw new Error(`${config.name}: name the foreign key ${key.getName()} in SHORT_FOREIGN_KEY_NAMES`);
    const foreignColumns = reference.foreignColumns.map((c) => `${foreign.exportName}.${foreign.columnJsName.get(c.name)}`);
    let line = `foreignKey({ name: ${JSON.stringify(name)}, columns: [${reference.columns.map((c) => ref(c.name)).join(", ")}], foreignColumns: [${foreignColumns.join(", ")}] })`;
    if (key.onDelete && key.onDelete !== "no action") line += `.onDelete(${JSON.stringify(key.onDelete)})`;
    if (key.onUpdate && key.onUpdate !== "no action") line += `.onUpdate(${JSON.stringify(key.onUpdate)})`;
    extras.push(line);
  }
  const body = `{\n${columnLines.join("\n")}\n}`;
  const tail = extras.length > 0 ? `, (t) => [${extras.join(", ")}]` : "";
  return `export const ${info.exportName} = pgTable(${JSON.stringify(config.name)}, ${body}${tail});\n`;
}

function isAutoIncrement(column: Column): boolean {
  return (column as Column & { autoIncrement?: boolean }).autoIncrement === true;
}

function columnSource(table: string, column: Column): string {
  const name = JSON.stringify(column.name);
  let source: string;
  switch (column.columnType) {
    case "SQLiteText":
      source = column.enumValues?.length ? `text(${name}, { enum: ${JSON.stringify(column.enumValues)} })` : `text(${name})`;
      break;
    case "SQLiteBoolean":
      source = `boolean(${name})`;
      break;
    case "SQLiteInteger":
      source =
        isAutoIncrement(column) || BIGINT_COLUMNS.has(`${table}.${column.name}`)
          ? `bigint(${name}, { mode: "number" })`
          : `integer(${name})`;
      break;
    case "SQLiteBlobBuffer":
      source = `bytea(${name})`;
      break;
    default:
      throw new Error(`${table}.${column.name}: no PostgreSQL type for ${column.columnType}; add one to the generator`);
  }
  if (column.primary) source += ".primaryKey()";
  if (isAutoIncrement(column)) return `${source}.generatedAlwaysAsIdentity()`;
  if (column.notNull && !column.primary) source += ".notNull()";
  // An INTEGER PRIMARY KEY "has a default" in drizzle's eyes (the rowid) without a value.
  if (column.hasDefault && column.default !== undefined) {
    if (typeof column.default === "object") {
      throw new Error(`${table}.${column.name}: only literal defaults are carried over`);
    }
    source += `.default(${JSON.stringify(column.default)})`;
  }
  return source;
}

/** The formatted schema.pg.ts (Biome's layout, as the repository is checked with it). */
export function formattedPgSchema(): string {
  const biome = path.join(import.meta.dirname, "..", "..", "node_modules", ".bin", "biome");
  return execFileSync(biome, ["format", `--stdin-file-path=${TARGET}`], { input: pgSchemaSource(), encoding: "utf8" });
}

if (process.argv[1] && path.resolve(process.argv[1]) === path.resolve(import.meta.filename)) {
  fs.writeFileSync(TARGET, formattedPgSchema());
  console.log(`wrote ${path.relative(process.cwd(), TARGET)}`);
}
