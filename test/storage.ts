// The one place tests touch the database: every other test reads and writes through the API,
// server commands or the audit log. What is here the API cannot show or do by design: what
// lands on disk (hashes, ciphertexts), tampering an attacker with file access could do, a
// failing write to prove atomicity, states no endpoint can reach, and counts no endpoint
// lists. Each function says why. The statements are plain SQL that PostgreSQL accepts too,
// except where a function says otherwise, so a PostgreSQL twin is one small change here.
import path from "node:path";
import Database from "better-sqlite3";
import { DATABASE_FILE } from "../src/core/db.ts";
import type { TestServer } from "./helpers.ts";

/** A running test server, or the data folder of a stopped one (or of a copy of it). */
export type Store = TestServer | string;

type Value = string | number | bigint | Buffer | null;
type Where = Record<string, Value>;
type Row = Record<string, unknown>;

function withDb<T>(store: Store, use: (db: Database.Database) => T): T {
  if (typeof store !== "string") return use(store.app.db.$client);
  const db = new Database(path.join(store, DATABASE_FILE), { fileMustExist: true });
  try {
    return use(db);
  } finally {
    db.close();
  }
}

function whereClause(where: Where): { sql: string; params: Value[] } {
  const names = Object.keys(where);
  if (names.length === 0) return { sql: "", params: [] };
  return {
    sql: ` WHERE ${names.map((name) => (where[name] === null ? `${name} IS NULL` : `${name} = ?`)).join(" AND ")}`,
    params: names.filter((name) => where[name] !== null).map((name) => where[name]!),
  };
}

function select(store: Store, table: string, columns: string, where: Where = {}, orderBy?: string): Row[] {
  const clause = whereClause(where);
  return withDb(store, (db) =>
    db.prepare(`SELECT ${columns} FROM ${table}${clause.sql}${orderBy ? ` ORDER BY ${orderBy}` : ""}`).all(...clause.params),
  ) as Row[];
}

function update(store: Store, table: string, set: Record<string, Value>, where: Where): number {
  const names = Object.keys(set);
  const clause = whereClause(where);
  return withDb(
    store,
    (db) =>
      db
        .prepare(`UPDATE ${table} SET ${names.map((name) => `${name} = ?`).join(", ")}${clause.sql}`)
        .run(...names.map((name) => set[name]!), ...clause.params).changes,
  );
}

/**
 * How many rows of `table` match `where` (every row without it). For "nothing was written"
 * across every project and user, and for tables no endpoint lists (sessions, failures,
 * tokens' hashes, the rows of a deleted project, events of no project).
 */
export function rowCount(store: Store, table: string, where: Where = {}): number {
  return Number(select(store, table, "count(*) AS n", where)[0]!.n);
}

/**
 * The audit table as stored, oldest first: with the chain's columns (seq, prev_hash, hash,
 * mac_key_version) and the events of deleted projects and of no project, none of which the
 * audit API shows.
 */
export function auditRows(store: Store, where: Where = {}): Record<string, any>[] {
  return select(store, "audit_events", "*", where, "seq");
}

/**
 * The environments a user holds a grant row for in a project. The API shows a non-member's
 * grants nowhere and an owner's or admin's access as implicit whatever rows exist, so that
 * grants went with a membership, or were never written for an admin, shows only here.
 */
export function grantRows(store: Store, projectId: string, userId: string): string[] {
  return select(store, "environment_grants", "environment", { project_id: projectId, user_id: userId }, "environment").map(
    (row) => row.environment as string,
  );
}

/**
 * A table's rows as stored, to prove what lands on disk (a hash and not the token, a
 * ciphertext and not the value), which the API by design never shows.
 */
export function storedRows(store: Store, table: string, where: Where = {}): Record<string, any>[] {
  return select(store, table, "*", where);
}

/**
 * Sets a user's e-mail address and whether it is verified. Both come from the identity
 * provider and no endpoint changes them; the development provider keys users by address and
 * always verifies it, so a changed, missing or unverified address cannot be made by signing in.
 */
export function setUserEmail(store: Store, userId: string, email: string | null, verified = true): void {
  update(store, "users", { email, email_verified: verified ? 1 : 0 }, { id: userId });
}

let failures = 0;

/**
 * Makes every insert into `table` (only those of `action`, for audit_events) fail as a full
 * disk would, to prove a request's writes are one transaction: no endpoint can make the
 * storage refuse a write. Returns the undo. SQLite-specific (a trigger); PostgreSQL needs a
 * trigger function instead.
 */
export function failWritesTo(store: TestServer, table: string, options: { action?: string; message?: string } = {}): () => void {
  const name = `test_fail_writes_${++failures}`;
  const quote = (text: string) => `'${text.replaceAll("'", "''")}'`;
  const when = options.action === undefined ? "" : ` WHEN NEW.action = ${quote(options.action)}`;
  withDb(store, (db) =>
    db.exec(
      `CREATE TRIGGER ${name} BEFORE INSERT ON ${table}${when} BEGIN SELECT RAISE(ABORT, ${quote(options.message ?? "disk full")}); END`,
    ),
  );
  return () => withDb(store, (db) => db.exec(`DROP TRIGGER ${name}`));
}
