// `secrets-server copy-database --to <DATABASE_URL>`: moves a SQLite DATA_DIR to PostgreSQL.
// Every row is copied as stored (ciphertext, wrapped keys, the audit chain's hashes): the
// same MASTER_KEY opens it there. The target must be empty; the copy is one transaction, so
// a failure leaves it empty again. Before it reports success it compares every table's row
// count and verifies the audit chain on the copy.
import type Database from "better-sqlite3";
import { getTableConfig, PgTable } from "drizzle-orm/pg-core";
import { verifyAuditChain } from "../audit/audit.verify.ts";
import { ConfigError, isPostgresUrl, loadConfig } from "../core/config.ts";
import { loadKeyring } from "../core/crypto.ts";
import { openDatabase, requireDatabaseFile } from "../core/db.ts";
import { migratePostgres, openPostgres, type PgStore, pgRows, pgRun, pgWriteTransaction } from "../core/postgres.ts";
import * as pgSchema from "../core/schema.pg.ts";
import { checkMasterKeys, closeStore } from "../core/store.ts";

const USAGE = `Usage: secrets-server copy-database --to <DATABASE_URL>

Copies the SQLite database in DATA_DIR into an empty PostgreSQL database, every record as
stored, then checks row counts and the audit chain. Stop the server first: what it writes
after the copy starts is not copied. MASTER_KEY (and MASTER_KEYS_PREVIOUS) as the server's.
`;

/** Rows sent per INSERT: well under PostgreSQL's 65,535 parameters for the widest table. */
const BATCH_ROWS = 500;

interface TablePlan {
  name: string;
  columns: { name: string; boolean: boolean }[];
  /** An identity column (audit_events.seq, sign_in_failures.id): inserted as it is, then the sequence moved past it. */
  identity?: string;
}

/** The tables in an order where every foreign key's target is copied before the rows that name it. */
function tablesInCopyOrder(): TablePlan[] {
  const tables = (Object.values(pgSchema) as unknown[]).filter((value): value is PgTable => value instanceof PgTable);
  const configs = new Map(tables.map((table) => [getTableConfig(table).name, getTableConfig(table)]));
  const ordered: TablePlan[] = [];
  const placed = new Set<string>();
  const place = (name: string) => {
    if (placed.has(name)) return;
    placed.add(name);
    const config = configs.get(name)!;
    for (const fk of config.foreignKeys) place(getTableConfig(fk.reference().foreignTable).name);
    ordered.push({
      name,
      columns: config.columns.map((column) => ({ name: column.name, boolean: column.columnType === "PgBoolean" })),
      identity: config.columns.find((column) => (column as { generatedIdentity?: unknown }).generatedIdentity !== undefined)?.name,
    });
  };
  for (const name of [...configs.keys()].sort()) place(name);
  return ordered;
}

export async function copyDatabaseCommand(args: string[]): Promise<number> {
  // main.ts passes ["help"] for a help flag.
  if (args.length === 1 && args[0] === "help") {
    process.stdout.write(USAGE);
    return 0;
  }
  const toIndex = args.indexOf("--to");
  const url = toIndex === -1 ? undefined : args[toIndex + 1];
  const extra = args.filter((_arg, i) => i !== toIndex && i !== toIndex + 1);
  if (!url || extra.length > 0) {
    process.stderr.write(USAGE);
    return 2;
  }
  if (!isPostgresUrl(url)) throw new ConfigError("--to must be a postgres:// or postgresql:// URL.");
  // The source is DATA_DIR's SQLite, whatever DATABASE_URL says.
  const config = { ...loadConfig({ ...process.env, DATABASE_URL: undefined }), database: undefined };
  requireDatabaseFile(config);
  const keyring = loadKeyring(config);
  const source = openDatabase(config);
  // The servers' CA file, when the target is reached as they reach it.
  const target = await openPostgres(url, { caFile: process.env.DATABASE_CA_FILE || undefined });
  try {
    await checkMasterKeys(source, keyring, new Date());
    // Before anything is copied: a chain that does not verify here would not on the copy
    // either, and the target would be left full (a second run refuses a target with rows).
    const sourceChain = await verifyAuditChain(source, keyring);
    if (!sourceChain.ok) {
      process.stderr.write(
        `The audit chain does not verify in DATA_DIR (event #${sourceChain.brokenAt.seq}); run "secrets-server audit verify" and find out what happened to the log. Nothing was copied.\n`,
      );
      return 1;
    }
    const plan = tablesInCopyOrder();
    let full: string | undefined;
    try {
      // Before the migrations: a live database of an older version would otherwise be
      // upgraded and only then refused, and its servers would no longer start on it.
      full = await tableWithRows(target, plan);
      if (full === undefined) await migratePostgres(target);
    } catch (error) {
      throw new ConfigError(`The database at --to cannot be used: ${(error as Error).message}`);
    }
    if (full !== undefined) throw notEmpty(full);
    const counts = await copyRows(source.$client, target, plan);
    // The copy as the server will read it: the master key matches and the chain is whole.
    await checkMasterKeys(target, keyring, new Date());
    for (const table of plan) {
      const [row] = await pgRows<{ n: number }>(target, `SELECT count(*) AS n FROM ${table.name}`);
      if (row?.n !== counts.get(table.name)) {
        throw new Error(`${table.name}: ${counts.get(table.name)} rows read, ${row?.n} found in the copy`);
      }
    }
    const chain = await verifyAuditChain(target, keyring);
    if (!chain.ok) {
      process.stderr.write(
        `The audit chain does not verify on the copy (event #${chain.brokenAt.seq}); run "secrets-server audit verify" on DATA_DIR. The copy is left in place.\n`,
      );
      return 1;
    }
    const total = [...counts.values()].reduce((a, b) => a + b, 0);
    process.stdout.write(
      `Copied ${total} rows in ${plan.length} tables from ${config.dataDir} to DATABASE_URL; every table's row count matches and the audit chain verifies (${chain.events} events).\n` +
        "Start the servers with DATABASE_URL set to it and the same MASTER_KEY; keep the SQLite folder until you are satisfied.\n",
    );
    return 0;
  } finally {
    await closeStore(source);
    await target.close();
  }
}

/** The first of our tables that exists in the target and holds a row (a database of an older version may lack some). */
async function tableWithRows(target: PgStore, plan: TablePlan[]): Promise<string | undefined> {
  for (const table of plan) {
    const [found] = await pgRows<{ t: string | null }>(target, "SELECT to_regclass($1)::text AS t", [table.name]);
    if (found?.t == null) continue;
    const [row] = await pgRows<{ has_rows: boolean }>(target, `SELECT EXISTS (SELECT 1 FROM ${table.name}) AS has_rows`);
    if (row?.has_rows) return table.name;
  }
  return undefined;
}

function notEmpty(table: string): ConfigError {
  return new ConfigError(`The database at --to is not empty (${table} has rows): copy into a new, empty database.`);
}

/** Copies every table in one transaction on the target; refuses a target that holds any row. */
async function copyRows(sqlite: Database.Database, target: PgStore, plan: TablePlan[]): Promise<Map<string, number>> {
  return pgWriteTransaction(target, async () => {
    const full = await tableWithRows(target, plan);
    if (full !== undefined) throw notEmpty(full);
    const counts = new Map<string, number>();
    // One snapshot of the source for every table.
    sqlite.exec("BEGIN");
    try {
      for (const table of plan) {
        const names = table.columns.map((c) => c.name);
        const select = sqlite.prepare(`SELECT ${names.map((n) => `"${n}"`).join(", ")} FROM ${table.name}`).raw();
        let batch: unknown[][] = [];
        let n = 0;
        const flush = async () => {
          if (batch.length === 0) return;
          const values: unknown[] = [];
          const tuples = batch.map((row) => {
            const slots = row.map((value, i) => {
              values.push(table.columns[i]!.boolean && value !== null ? value === 1 : value);
              return `$${values.length}`;
            });
            return `(${slots.join(", ")})`;
          });
          const overriding = table.identity ? " OVERRIDING SYSTEM VALUE" : "";
          await pgRun(target, `INSERT INTO ${table.name} (${names.join(", ")})${overriding} VALUES ${tuples.join(", ")}`, values);
          batch = [];
        };
        for (const row of select.iterate() as IterableIterator<unknown[]>) {
          batch.push(row);
          n++;
          if (batch.length >= BATCH_ROWS) await flush();
        }
        await flush();
        counts.set(table.name, n);
        if (table.identity) {
          // The next row the server writes must not reuse a number SQLite ever gave out:
          // AUTOINCREMENT remembers the largest, even when retention pruned every event since.
          const used = Number(
            (sqlite.prepare("SELECT seq FROM sqlite_sequence WHERE name = ?").pluck().get(table.name) as number | undefined) ?? 0,
          );
          await pgRun(
            target,
            `SELECT setval(pg_get_serial_sequence('${table.name}', '${table.identity}'), GREATEST(COALESCE((SELECT max(${table.identity}) FROM ${table.name}), 0), $1::bigint, 1), GREATEST(COALESCE((SELECT max(${table.identity}) FROM ${table.name}), 0), $1::bigint) > 0)`,
            [used],
          );
        }
      }
    } finally {
      sqlite.exec("COMMIT");
    }
    return counts;
  });
}
