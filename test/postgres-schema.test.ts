// The PostgreSQL schema (src/core/schema.pg.ts, migrations/postgres/) against SQLite's
// (src/core/schema.ts, migrations/): both sets of migrations are applied to fresh
// databases, and the two catalogs must describe the same tables, columns, keys, indexes and
// foreign keys, so that a column added to one schema and forgotten in the other fails here.
// The differences the rules of src/core/schema.pg.generate.ts list are the only ones
// allowed, and schema.pg.ts must be what that generator makes of schema.ts.
import assert from "node:assert/strict";
import crypto from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { after, before, test } from "node:test";
import { asc, gt, is, sql } from "drizzle-orm";
import { readMigrationFiles } from "drizzle-orm/migrator";
import { drizzle, type NodePgDatabase } from "drizzle-orm/node-postgres";
import { migrate } from "drizzle-orm/node-postgres/migrator";
import { getTableConfig, SQLiteTable } from "drizzle-orm/sqlite-core";
import pg from "pg";
import { type Db, openDatabase } from "../src/core/db.ts";
import { formattedPgSchema } from "../src/core/schema.pg.generate.ts";
import * as pgSchema from "../src/core/schema.pg.ts";
import * as sqliteSchema from "../src/core/schema.ts";
import { makeTempDir, ROOT } from "./helpers.ts";
import { createDatabase, usePostgres } from "./postgres.ts";

const PG_MIGRATIONS = path.join(ROOT, "migrations", "postgres");

interface Column {
  name: string;
  /** SQLite's storage class: text, blob, integer; "boolean" for schema.ts's mode: "boolean" integers. */
  kind: string;
  notNull: boolean;
  default: string | null;
}

interface Index {
  columns: string[];
  unique: boolean;
  partial: boolean;
}

interface Table {
  columns: Column[];
  primaryKey: string[];
  indexes: Record<string, Index>;
  /** "(a, b) -> other(x, y) on delete cascade on update no action", sorted. */
  foreignKeys: string[];
}

type Catalog = Record<string, Table>;

/** schema.ts's integers that drizzle reads as booleans, as "table.column". */
function booleanColumns(): Set<string> {
  const found = new Set<string>();
  for (const value of Object.values(sqliteSchema)) {
    if (!is(value, SQLiteTable)) continue;
    const config = getTableConfig(value);
    for (const column of config.columns) {
      if (column.columnType === "SQLiteBoolean") found.add(`${config.name}.${column.name}`);
    }
  }
  return found;
}

function foreignKey(from: string[], table: string, to: string[], onDelete: string, onUpdate: string): string {
  return `(${from.join(", ")}) -> ${table}(${to.join(", ")}) on delete ${onDelete.toLowerCase()} on update ${onUpdate.toLowerCase()}`;
}

function readSqlite(db: Db): { catalog: Catalog; rowidAliases: Map<string, string>; triggers: string[] } {
  const sqlite = db.$client;
  const booleans = booleanColumns();
  const catalog: Catalog = {};
  const rowidAliases = new Map<string, string>();
  const tables = sqlite
    .prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name <> '__drizzle_migrations'")
    .pluck()
    .all() as string[];
  for (const table of tables) {
    const info = sqlite.prepare(`PRAGMA table_info("${table}")`).all() as {
      name: string;
      type: string;
      notnull: number;
      dflt_value: string | null;
      pk: number;
    }[];
    const columns = info.map((c) => ({
      name: c.name,
      kind: booleans.has(`${table}.${c.name}`) ? "boolean" : c.type.toLowerCase(),
      notNull: c.notnull === 1,
      default: c.dflt_value,
    }));
    const primaryKey = info
      .filter((c) => c.pk > 0)
      .sort((a, b) => a.pk - b.pk)
      .map((c) => c.name);
    // An INTEGER PRIMARY KEY is the rowid, which every SQLite index holds as its last column.
    const only = info.filter((c) => c.pk > 0);
    if (only.length === 1 && only[0]!.type.toLowerCase() === "integer") rowidAliases.set(table, only[0]!.name);
    const indexes: Record<string, Index> = {};
    const list = sqlite.prepare(`PRAGMA index_list("${table}")`).all() as {
      name: string;
      unique: number;
      origin: string;
      partial: number;
    }[];
    for (const index of list.filter((i) => i.origin === "c")) {
      const columns = (sqlite.prepare(`PRAGMA index_info("${index.name}")`).all() as { seqno: number; name: string }[])
        .sort((a, b) => a.seqno - b.seqno)
        .map((c) => c.name);
      indexes[index.name] = { columns, unique: index.unique === 1, partial: index.partial === 1 };
    }
    const keys = new Map<number, { table: string; from: string[]; to: string[]; onDelete: string; onUpdate: string }>();
    const rows = sqlite.prepare(`PRAGMA foreign_key_list("${table}")`).all() as {
      id: number;
      seq: number;
      table: string;
      from: string;
      to: string;
      on_update: string;
      on_delete: string;
    }[];
    for (const row of rows.sort((a, b) => a.id - b.id || a.seq - b.seq)) {
      const key = keys.get(row.id) ?? { table: row.table, from: [], to: [], onDelete: row.on_delete, onUpdate: row.on_update };
      key.from.push(row.from);
      key.to.push(row.to);
      keys.set(row.id, key);
    }
    const foreignKeys = [...keys.values()].map((k) => foreignKey(k.from, k.table, k.to, k.onDelete, k.onUpdate)).sort();
    catalog[table] = { columns: sortByName(columns), primaryKey, indexes, foreignKeys };
  }
  const triggers = sqlite.prepare("SELECT name FROM sqlite_master WHERE type = 'trigger' ORDER BY name").pluck().all() as string[];
  return { catalog, rowidAliases, triggers };
}

function sortByName<T extends { name: string }>(items: T[]): T[] {
  return [...items].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}

const PG_KINDS: Record<string, string> = { text: "text", bytea: "blob", integer: "integer", bigint: "integer", boolean: "boolean" };
const PG_ACTIONS: Record<string, string> = { a: "no action", r: "restrict", c: "cascade", n: "set null", d: "set default" };

interface PgCatalog {
  catalog: Catalog;
  /** "table.column" of text columns whose collation is not C. */
  textNotBinary: string[];
  triggers: string[];
}

async function readPostgres(client: pg.Client): Promise<PgCatalog> {
  const catalog: Catalog = {};
  const textNotBinary: string[] = [];
  const tables = await client.query<{ table_name: string }>(
    "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' AND table_type = 'BASE TABLE'",
  );
  for (const { table_name } of tables.rows) catalog[table_name] = { columns: [], primaryKey: [], indexes: {}, foreignKeys: [] };

  const columns = await client.query<{
    table_name: string;
    column_name: string;
    data_type: string;
    is_nullable: string;
    column_default: string | null;
    collation_name: string | null;
  }>(
    `SELECT table_name, column_name, data_type, is_nullable, column_default, collation_name
       FROM information_schema.columns WHERE table_schema = 'public'`,
  );
  for (const c of columns.rows) {
    if (c.data_type === "text" && c.collation_name !== "C") textNotBinary.push(`${c.table_name}.${c.column_name}`);
    catalog[c.table_name]!.columns.push({
      name: c.column_name,
      kind: PG_KINDS[c.data_type] ?? c.data_type,
      notNull: c.is_nullable === "NO",
      // '{}'::text reads '{}' as SQLite's default does.
      default: c.column_default?.replace(/::text$/, "") ?? null,
    });
  }
  for (const table of Object.values(catalog)) table.columns = sortByName(table.columns);

  const indexes = await client.query<{
    table: string;
    index: string;
    unique: boolean;
    primary: boolean;
    partial: boolean;
    columns: string[];
  }>(
    `SELECT t.relname AS table, i.relname AS index, x.indisunique AS unique, x.indisprimary AS primary,
            x.indpred IS NOT NULL AS partial,
            array(SELECT coalesce(a.attname::text, '(expression)')
                    FROM generate_series(0, x.indnkeyatts - 1) AS s(n)
                    LEFT JOIN pg_attribute a ON a.attrelid = x.indrelid AND a.attnum = x.indkey[s.n]
                   ORDER BY s.n)::text[] AS columns
       FROM pg_index x
       JOIN pg_class i ON i.oid = x.indexrelid
       JOIN pg_class t ON t.oid = x.indrelid
       JOIN pg_namespace ns ON ns.oid = t.relnamespace
      WHERE ns.nspname = 'public'`,
  );
  for (const index of indexes.rows) {
    const table = catalog[index.table]!;
    if (index.primary) table.primaryKey = index.columns;
    else table.indexes[index.index] = { columns: index.columns, unique: index.unique, partial: index.partial };
  }

  const keys = await client.query<{
    table: string;
    references: string;
    from: string[];
    to: string[];
    on_delete: string;
    on_update: string;
  }>(
    `SELECT t.relname AS table, r.relname AS references, c.confdeltype AS on_delete, c.confupdtype AS on_update,
            array(SELECT a.attname::text FROM unnest(c.conkey) WITH ORDINALITY AS k(attnum, n)
                    JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.attnum ORDER BY k.n)::text[] AS from,
            array(SELECT a.attname::text FROM unnest(c.confkey) WITH ORDINALITY AS k(attnum, n)
                    JOIN pg_attribute a ON a.attrelid = c.confrelid AND a.attnum = k.attnum ORDER BY k.n)::text[] AS to
       FROM pg_constraint c
       JOIN pg_class t ON t.oid = c.conrelid
       JOIN pg_class r ON r.oid = c.confrelid
       JOIN pg_namespace ns ON ns.oid = c.connamespace
      WHERE c.contype = 'f' AND ns.nspname = 'public'`,
  );
  for (const k of keys.rows) {
    catalog[k.table]!.foreignKeys.push(foreignKey(k.from, k.references, k.to, PG_ACTIONS[k.on_delete]!, PG_ACTIONS[k.on_update]!));
  }
  for (const table of Object.values(catalog)) table.foreignKeys.sort();

  const triggers = await client.query<{ tgname: string }>(
    `SELECT g.tgname FROM pg_trigger g JOIN pg_class t ON t.oid = g.tgrelid JOIN pg_namespace ns ON ns.oid = t.relnamespace
      WHERE NOT g.tgisinternal AND ns.nspname = 'public' ORDER BY g.tgname`,
  );
  return { catalog, textNotBinary, triggers: triggers.rows.map((r) => r.tgname) };
}

/** Drops a trailing rowid alias from each index: SQLite holds it there without naming it (the rules in schema.pg.generate.ts). */
function withoutRowid(indexes: Record<string, Index>, rowid: string | undefined): Record<string, Index> {
  return Object.fromEntries(
    Object.entries(indexes).map(([name, index]) => [
      name,
      { ...index, columns: rowid && index.columns.at(-1) === rowid ? index.columns.slice(0, -1) : index.columns },
    ]),
  );
}

let sqlite: ReturnType<typeof readSqlite>;
let postgres: PgCatalog;
let client: pg.Client;
let liteDb: Db;
let pgDb: NodePgDatabase<typeof pgSchema>;

const dataDir = makeTempDir("secrets-pg-schema-");

before(async () => {
  liteDb = openDatabase({ dataDir, sqliteSynchronous: "normal" }, { warn: () => {} });
  sqlite = readSqlite(liteDb);
  client = new pg.Client({ connectionString: await createDatabase() });
  await client.connect();
  pgDb = drizzle(client, { schema: pgSchema });
  await migrate(pgDb, { migrationsFolder: PG_MIGRATIONS });
  postgres = await readPostgres(client);
});

after(async () => {
  await client?.end();
  liteDb?.$client.close();
  fs.rmSync(dataDir, { recursive: true, force: true });
});
usePostgres();

test("schema.pg.ts is what its generator makes of schema.ts: one schema source (edit schema.ts, then npm run db:generate:pg)", () => {
  const generated = formattedPgSchema();
  assert.equal(fs.readFileSync(path.join(ROOT, "src", "core", "schema.pg.ts"), "utf8"), generated);
  // The rules reach the output: byte order for text, booleans, identities, the appended seq.
  assert.match(generated, /dataType: \(\) => 'text COLLATE "C"'/);
  assert.match(generated, /emailVerified: boolean\("email_verified"\)\.notNull\(\)\.default\(false\)/);
  assert.match(generated, /seq: bigint\("seq", \{ mode: "number" \}\)\.primaryKey\(\)\.generatedAlwaysAsIdentity\(\)/);
  assert.match(generated, /index\("audit_events_project_at_seq"\)\.on\(t\.projectId, t\.at, t\.seq\)/);
});

test("the PostgreSQL migrations create the same tables as SQLite's", () => {
  assert.ok(Object.keys(sqlite.catalog).length > 20, "the SQLite catalog was read");
  assert.deepEqual(Object.keys(postgres.catalog).sort(), Object.keys(sqlite.catalog).sort());
});

test("every table has the same columns, types, nullability and defaults on both", () => {
  for (const [name, table] of Object.entries(sqlite.catalog)) {
    assert.deepEqual(postgres.catalog[name]?.columns, table.columns, `columns of ${name}`);
  }
});

test("text columns compare byte by byte on PostgreSQL, as SQLite's do", () => {
  assert.deepEqual(postgres.textNotBinary, []);
});

test("every table has the same primary key on both", () => {
  for (const [name, table] of Object.entries(sqlite.catalog)) {
    assert.deepEqual(postgres.catalog[name]?.primaryKey, table.primaryKey, `primary key of ${name}`);
  }
});

test("every index has the same name, columns and uniqueness on both", () => {
  for (const [name, table] of Object.entries(sqlite.catalog)) {
    const rowid = sqlite.rowidAliases.get(name);
    assert.deepEqual(withoutRowid(postgres.catalog[name]?.indexes ?? {}, rowid), withoutRowid(table.indexes, rowid), `indexes of ${name}`);
  }
});

test("the audit list indexes end with seq on PostgreSQL, where no rowid orders them", () => {
  const indexes = Object.entries(postgres.catalog.audit_events!.indexes);
  assert.ok(indexes.length > 0);
  for (const [name, index] of indexes) assert.equal(index.columns.at(-1), "seq", name);
});

test("every foreign key has the same columns and ON DELETE on both", () => {
  for (const [name, table] of Object.entries(sqlite.catalog)) {
    assert.deepEqual(postgres.catalog[name]?.foreignKeys, table.foreignKeys, `foreign keys of ${name}`);
  }
});

test("neither store has a trigger the other lacks", () => {
  assert.deepEqual(postgres.triggers, sqlite.triggers);
});

test("the PostgreSQL migrations apply a second time as a no-op", async () => {
  await migrate(drizzle(client), { migrationsFolder: PG_MIGRATIONS });
  assert.deepEqual(await readPostgres(client), postgres);
  const applied = await client.query<{ count: string }>("SELECT count(*) AS count FROM drizzle.__drizzle_migrations");
  assert.equal(Number(applied.rows[0]!.count), readMigrationFiles({ migrationsFolder: PG_MIGRATIONS }).length);
});

test("rows written through drizzle read back the same from both stores, in the same order", async () => {
  const at = "2026-01-02T03:04:05.678Z";
  const user = {
    id: "u1",
    email: "Ärger.A@example.test",
    name: "A",
    authIssuer: "local",
    authSubject: "a@example.test",
    createdAt: at,
    updatedAt: at,
  };
  const project = { id: "p1", name: "api", createdBy: "u1", createdAt: at, updatedAt: at };
  const environment = { projectId: "p1", slug: "production" as const, createdAt: at };
  const projectKey = { projectId: "p1", keyVersion: 1, wrappedKey: Buffer.from([0, 1, 0x7f, 0x80, 0xfe, 0xff]), createdAt: at };
  // A language collation (the test database's en-US) lists AB_A before ABB and abc before Z;
  // byte order, SQLite's, the other way round.
  const secretRows = ["abc", "AB_A", "Z", "ABB"].map((key, i) => ({
    id: `s${i}`,
    projectId: "p1",
    environment: "production" as const,
    key,
    version: 1,
    createdAt: at,
    updatedAt: at,
  }));
  const versionRows = secretRows.map((secret) => ({
    secretId: secret.id,
    versionNumber: 1,
    projectId: "p1",
    key: secret.key,
    changeType: "CREATED" as const,
    ciphertext: crypto.randomBytes(44),
    keyVersion: 1,
    createdAt: at,
  }));
  const events = [1, 2, 3].map((n) => ({
    id: `e${n}`,
    projectId: "p1",
    at,
    action: "secret.created",
    category: "secrets",
    targetType: "secret",
    targetId: `s${n}`,
    prevHash: `h${n - 1}`,
    hash: `h${n}`,
    macKeyVersion: 1,
  }));
  const integration = {
    projectId: "p1",
    status: "connected" as const,
    tokenCiphertext: crypto.randomBytes(30),
    tokenKeyVersion: 1,
    createdAt: at,
    updatedAt: at,
  };
  // A seq past 2^32, and a lifetime count of pruned events past 2^31: bigints that must still read as numbers.
  const checkpoint = {
    id: 1,
    seq: 2 ** 40,
    hash: "h0",
    at,
    isKeyed: true,
    prunedBefore: at,
    prunedEvents: 2 ** 33,
    macKeyVersion: 1,
    mac: "m",
  };

  const l = sqliteSchema;
  liteDb.insert(l.users).values(user).run();
  liteDb.insert(l.projects).values(project).run();
  liteDb.insert(l.projectEnvironments).values(environment).run();
  liteDb.insert(l.projectKeys).values(projectKey).run();
  liteDb.insert(l.secrets).values(secretRows).run();
  liteDb.insert(l.secretVersions).values(versionRows).run();
  liteDb.insert(l.auditEvents).values(events).run();
  liteDb.insert(l.integrations).values(integration).run();
  liteDb.insert(l.auditCheckpoint).values(checkpoint).run();
  const p = pgSchema;
  await pgDb.insert(p.users).values(user);
  await pgDb.insert(p.projects).values(project);
  await pgDb.insert(p.projectEnvironments).values(environment);
  await pgDb.insert(p.projectKeys).values(projectKey);
  await pgDb.insert(p.secrets).values(secretRows);
  await pgDb.insert(p.secretVersions).values(versionRows);
  await pgDb.insert(p.auditEvents).values(events);
  await pgDb.insert(p.integrations).values(integration);
  await pgDb.insert(p.auditCheckpoint).values(checkpoint);

  const fromSqlite = {
    users: liteDb.select().from(l.users).all(),
    lowerEmail: liteDb
      .select({ email: sql<string>`lower(${l.users.email})` })
      .from(l.users)
      .all(),
    projectKeys: liteDb.select().from(l.projectKeys).all(),
    secrets: liteDb.select().from(l.secrets).orderBy(asc(l.secrets.key)).all(),
    after: liteDb.select({ key: l.secrets.key }).from(l.secrets).where(gt(l.secrets.key, "AB_A")).orderBy(asc(l.secrets.key)).all(),
    versions: liteDb.select().from(l.secretVersions).orderBy(asc(l.secretVersions.key)).all(),
    events: liteDb.select().from(l.auditEvents).orderBy(asc(l.auditEvents.seq)).all(),
    integrations: liteDb.select().from(l.integrations).all(),
    checkpoint: liteDb.select().from(l.auditCheckpoint).all(),
  };
  const fromPostgres = {
    users: await pgDb.select().from(p.users),
    lowerEmail: await pgDb.select({ email: sql<string>`lower(${p.users.email})` }).from(p.users),
    projectKeys: await pgDb.select().from(p.projectKeys),
    secrets: await pgDb.select().from(p.secrets).orderBy(asc(p.secrets.key)),
    after: await pgDb.select({ key: p.secrets.key }).from(p.secrets).where(gt(p.secrets.key, "AB_A")).orderBy(asc(p.secrets.key)),
    versions: await pgDb.select().from(p.secretVersions).orderBy(asc(p.secretVersions.key)),
    events: await pgDb.select().from(p.auditEvents).orderBy(asc(p.auditEvents.seq)),
    integrations: await pgDb.select().from(p.integrations),
    checkpoint: await pgDb.select().from(p.auditCheckpoint),
  };
  assert.deepEqual(
    fromSqlite.secrets.map((s) => s.key),
    ["ABB", "AB_A", "Z", "abc"],
  );
  assert.deepEqual(fromSqlite.after, [{ key: "Z" }, { key: "abc" }]);
  assert.deepEqual(fromSqlite.lowerEmail, [{ email: "Ärger.a@example.test" }]);
  assert.deepEqual(
    fromSqlite.events.map((e) => e.seq),
    [1, 2, 3],
  );
  assert.ok(Buffer.isBuffer(fromPostgres.projectKeys[0]?.wrappedKey));
  assert.deepEqual(fromPostgres, fromSqlite);
});

// Rows read alike in TypeScript on both stores, table by table (checked by tsc, which
// npm test runs): a repo may then read either store's rows with the same code.
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
type RowsAlike = {
  [K in keyof typeof sqliteSchema]: K extends keyof typeof pgSchema
    ? Same<(typeof sqliteSchema)[K]["$inferSelect"], (typeof pgSchema)[K]["$inferSelect"]>
    : false;
};
const rowsAlike: { [K in keyof RowsAlike]: true } = {} as RowsAlike;

test("both schemas export the same tables under the same names", () => {
  assert.deepEqual(Object.keys(pgSchema).sort(), Object.keys(sqliteSchema).sort());
  assert.ok(rowsAlike);
});
