import crypto from "node:crypto";
import { createEncryptedRecordCounter } from "../core/encrypted-columns.ts";
import { type PgStore, pgRow, pgRows, pgRun } from "../core/postgres.ts";
import type { AuditEventRow, AuditFilter, AuditRepo, CheckpointRow, StoredEventRow } from "./audit.repo.ts";

const CHAIN_COLUMNS =
  "seq, id, project_id, at, action, category, actor_user_id, target_type, target_id, metadata, service_account_id, service_account_name, prev_hash, hash, mac_key_version";

/** Rows per page of iterateChain: a verify walks the log in these steps, holding one page. */
const CHAIN_PAGE = 5000;

/**
 * An event's metadata as json that ->> can read. Events written before their text was made
 * well-formed may hold a NUL or a lone surrogate as a \u escape, which PostgreSQL refuses to
 * decode (for any key of the row, not only the one read), and the hash chain forbids
 * mending them. A row with any \u escape is read with each made "?", escaped backslashes
 * first so that a text "\\u0000" stays text. Only environments and keys are read this way,
 * and neither ever holds an escape; rows without one (nearly all) are read as they are.
 */
const METADATA_JSON = `(CASE WHEN strpos(e.metadata, '\\u') = 0 THEN e.metadata
  ELSE regexp_replace(regexp_replace(e.metadata, '\\\\\\\\', '/', 'g'), '\\\\u[0-9a-fA-F]{4}', '?', 'g') END)::json`;

/**
 * The page query of a filter with its parameters, as audit.repo.ts builds it for SQLite.
 * PostgreSQL takes no index hint: its audit indexes end with (at, seq), so the planner finds
 * the one whose leading columns are the filter's equalities.
 */
function pageQuery(filter: AuditFilter): { text: string; values: unknown[] } {
  const values: unknown[] = [];
  const param = (value: unknown) => {
    values.push(value);
    return `$${values.length}`;
  };
  const projectId = param(filter.projectId);
  const where = [`e.project_id = ${projectId}`];
  // action takes precedence: with both, category is not part of the query at all.
  if (filter.action !== undefined) where.push(`e.action = ${param(filter.action)}`);
  else if (filter.category !== undefined) where.push(`e.category = ${param(filter.category)}`);
  if (filter.actorUserId !== undefined) where.push(`e.actor_user_id = ${param(filter.actorUserId)}`);
  if (filter.serviceAccountId !== undefined) where.push(`e.service_account_id = ${param(filter.serviceAccountId)}`);
  // json, not jsonb: one key read from each row the index walks, no need to build a jsonb.
  if (filter.environment !== undefined) where.push(`(${METADATA_JSON} ->> 'environment') = ${param(filter.environment)}`);
  if (filter.key !== undefined) where.push(`(${METADATA_JSON} ->> 'key') = ${param(filter.key)}`);
  if (filter.fromAt !== undefined) where.push(`e.at >= ${param(filter.fromAt)}`);
  const isToImplied =
    filter.before !== undefined &&
    filter.toAt !== undefined &&
    (filter.toExclusive ? filter.before.at < filter.toAt : filter.before.at <= filter.toAt);
  if (filter.toAt !== undefined && !isToImplied) where.push(`e.at ${filter.toExclusive ? "<" : "<="} ${param(filter.toAt)}`);
  if (filter.before !== undefined) {
    const beforeAt = param(filter.before.at);
    where.push(
      `(e.at, e.seq) < (${beforeAt}, (SELECT c.seq FROM audit_events c
         WHERE c.project_id = ${projectId} AND c.at = ${beforeAt} AND c.id = ${param(filter.before.id)}))`,
    );
  }
  const text = `SELECT e.id, e.at, e.action, e.category, e.target_type, e.target_id, e.metadata, e.actor_user_id,
      e.service_account_id, e.service_account_name, u.email AS actor_email
    FROM audit_events e
    LEFT JOIN users u ON u.id = e.actor_user_id
    WHERE ${where.join(" AND ")}
    ORDER BY e.at DESC, e.seq DESC
    LIMIT ${param(filter.limit)}`;
  return { text, values };
}

/** audit.repo.ts on PostgreSQL: the same rows, the same JavaScript values. */
export function createAuditRepoPg(store: PgStore): AuditRepo {
  const encryptedRecords = createEncryptedRecordCounter(store);
  // Each filter shape is one named statement, parsed once per connection (a few dozen shapes at most).
  const statementNames = new Map<string, string>();
  const chainPage = (afterSeq: number, limit: number) =>
    pgRows<StoredEventRow>(store, `SELECT ${CHAIN_COLUMNS} FROM audit_events WHERE seq > $1 ORDER BY seq LIMIT $2`, [afterSeq, limit]);

  return {
    async page(filter) {
      const { text, values } = pageQuery(filter);
      let name = statementNames.get(text);
      if (name === undefined) {
        // Named by the text itself: pg keeps named statements per connection, which every repo on the pool shares.
        name = `audit-page-${crypto.createHash("sha256").update(text).digest("hex").slice(0, 16)}`;
        statementNames.set(text, name);
      }
      return (await store.client().query({ name, text, values })).rows as AuditEventRow[];
    },

    async explainPage(filter) {
      const { text, values } = pageQuery(filter);
      const rows = await pgRows<{ "QUERY PLAN": string }>(store, `EXPLAIN ${text}`, values);
      return rows.map((r) => r["QUERY PLAN"]);
    },

    async hasServiceAccountEvents(projectId, serviceAccountId) {
      const row = await pgRow(store, "SELECT 1 FROM audit_events WHERE project_id = $1 AND service_account_id = $2 LIMIT 1", [
        projectId,
        serviceAccountId,
      ]);
      return row !== undefined;
    },

    async countProjectEvents(projectId) {
      return (await pgRow<{ n: number }>(store, "SELECT count(*) AS n FROM audit_events WHERE project_id = $1", [projectId]))!.n;
    },

    countRecords: (projectId, currentKeyVersion) => encryptedRecords.count(currentKeyVersion, projectId),

    // A read transaction's snapshot keeps the pages one consistent log; a page at a time, by seq.
    async iterateChain() {
      return (async function* () {
        let afterSeq = 0;
        for (;;) {
          const rows = await chainPage(afterSeq, CHAIN_PAGE);
          yield* rows;
          if (rows.length < CHAIN_PAGE) return;
          afterSeq = rows.at(-1)!.seq;
        }
      })();
    },

    chainPage,

    // One statement for a page of links: one round trip each made re-keying a long log hold
    // the other servers' writes past their lock timeout.
    async relink(links, macKeyVersion) {
      if (links.length === 0) return;
      await pgRun(
        store,
        `UPDATE audit_events AS e SET prev_hash = l.prev_hash, hash = l.hash, mac_key_version = $4
         FROM unnest($1::bigint[], $2::text[], $3::text[]) AS l(seq, prev_hash, hash)
         WHERE e.seq = l.seq`,
        [links.map((l) => l.seq), links.map((l) => l.prevHash), links.map((l) => l.hash), macKeyVersion],
      );
    },

    async countNotKeyedWith(version) {
      const row = (await pgRow<{ total: number; other: number; hashOnly: number; isCheckpointStale: boolean }>(
        store,
        `SELECT count(*) AS total, count(*) FILTER (WHERE mac_key_version IS DISTINCT FROM $1::int) AS other,
           count(*) FILTER (WHERE mac_key_version IS NULL) AS "hashOnly",
           coalesce((SELECT mac_key_version <> $1::int FROM audit_checkpoint WHERE id = 1), false) AS "isCheckpointStale"
         FROM audit_events`,
        [version],
      ))!;
      return { total: row.total, other: row.other, hashOnly: row.hashOnly, isCheckpointStale: row.isCheckpointStale };
    },

    async startsHashOnly() {
      const row = await pgRow<{ isHashOnly: boolean }>(
        store,
        `SELECT mac_key_version IS NULL AS "isHashOnly" FROM audit_events ORDER BY seq LIMIT 1`,
      );
      return row?.isHashOnly === true;
    },

    findCheckpoint: () =>
      pgRow<CheckpointRow>(
        store,
        `SELECT seq, hash, at, is_keyed::int AS is_keyed, pruned_before, pruned_events, mac_key_version, mac
         FROM audit_checkpoint WHERE id = 1`,
      ),

    async saveCheckpoint(row) {
      await pgRun(
        store,
        `INSERT INTO audit_checkpoint (id, seq, hash, at, is_keyed, pruned_before, pruned_events, mac_key_version, mac)
         VALUES (1, $1, $2, $3, $4, $5, $6, $7, $8)
         ON CONFLICT (id) DO UPDATE SET seq = excluded.seq, hash = excluded.hash, at = excluded.at, is_keyed = excluded.is_keyed,
           pruned_before = excluded.pruned_before, pruned_events = excluded.pruned_events,
           mac_key_version = excluded.mac_key_version, mac = excluded.mac`,
        [row.seq, row.hash, row.at, row.is_keyed !== 0, row.pruned_before, row.pruned_events, row.mac_key_version, row.mac],
      );
    },

    async deleteThrough(seq) {
      await pgRun(store, "DELETE FROM audit_events WHERE seq <= $1", [seq]);
    },
  };
}
