import type { Statement } from "better-sqlite3";
import { type Db, guard } from "../core/db.ts";
import { createEncryptedRecordCounterSqlite, type EncryptedRecordCounts } from "../core/encrypted-columns.ts";
import { isPostgres, type Store } from "../core/store.ts";
import { createAuditRepoPg } from "./audit.repo.pg.ts";

export interface AuditFilter {
  projectId: string;
  category?: string;
  action?: string;
  actorUserId?: string;
  /** Events caused by this service account (exclusive with actorUserId). */
  serviceAccountId?: string;
  /** metadata.environment equals this. */
  environment?: string;
  /** metadata.key equals this. */
  key?: string;
  /** Inclusive lower bound, ISO text. */
  fromAt?: string;
  /** Upper bound, ISO text; exclusive when `toExclusive` (a date-only `to`). */
  toAt?: string;
  toExclusive?: boolean;
  /** Keyset position: only events listed after this one (older by (at, seq)). */
  before?: { at: string; id: string };
  limit: number;
}

export interface AuditEventRow {
  id: string;
  at: string;
  action: string;
  category: string;
  target_type: string;
  target_id: string;
  metadata: string;
  actor_user_id: string | null;
  actor_email: string | null;
  service_account_id: string | null;
  service_account_name: string | null;
}

export interface StoredEventRow {
  seq: number;
  id: string;
  project_id: string | null;
  at: string;
  action: string;
  category: string;
  actor_user_id: string | null;
  target_type: string;
  target_id: string;
  metadata: string;
  service_account_id: string | null;
  service_account_name: string | null;
  prev_hash: string;
  hash: string;
  /** null: chained with plain SHA-256, before the chain was keyed. */
  mac_key_version: number | null;
}

/** The signed start of the chain once retention pruned its oldest events (audit.retention.ts). */
export interface CheckpointRow {
  seq: number;
  hash: string;
  at: string;
  is_keyed: number;
  pruned_before: string;
  pruned_events: number;
  mac_key_version: number;
  mac: string;
}

/**
 * The index whose leading columns are exactly the filter's equality columns, followed by
 * (at, seq): the page is then one seek and a walk of `limit` entries, whatever the data.
 * Named rather than left to the planner, which without statistics may pick the time index
 * for actor + dates and scan every event of the period.
 */
function indexFor(filter: AuditFilter): string {
  // A service account's events are few next to people's: one index serves all its filters.
  if (filter.serviceAccountId !== undefined) return "audit_events_project_service_account_at_seq";
  const kind = filter.action !== undefined ? "action" : filter.category !== undefined ? "category" : undefined;
  if (filter.actorUserId !== undefined) return kind ? `audit_events_project_actor_${kind}_at_seq` : "audit_events_project_actor_at_seq";
  return kind ? `audit_events_project_${kind}_at_seq` : "audit_events_project_at_seq";
}

export type AuditRepo = ReturnType<typeof createAuditRepoSqlite>;

/** One event's new place in a rewritten chain. */
export interface ChainLink {
  seq: number;
  prevHash: string;
  hash: string;
}

export function createAuditRepo(store: Store): AuditRepo {
  return isPostgres(store) ? createAuditRepoPg(store) : createAuditRepoSqlite(store);
}

/**
 * Audit events, the retention checkpoint, and the Vercel hosting row the security overview shows.
 * Raw SQL so each filter combination is one prepared statement that walks one index.
 */
function createAuditRepoSqlite(db: Db) {
  const sqlite = db.$client;
  const pageStatements = new Map<string, Statement>();

  // The statement depends only on which filters are present, so there are at most a few
  // dozen shapes; each is prepared once.
  function pageStatement(filter: AuditFilter): Statement {
    const where = ["e.project_id = @projectId"];
    // action takes precedence: with both, category is not part of the query at all.
    if (filter.action !== undefined) where.push("e.action = @action");
    else if (filter.category !== undefined) where.push("e.category = @category");
    if (filter.actorUserId !== undefined) where.push("e.actor_user_id = @actorUserId");
    if (filter.serviceAccountId !== undefined) where.push("e.service_account_id = @serviceAccountId");
    // No index covers metadata: these two filter the rows the chosen index walks, so a rare
    // environment or key may walk many events to fill a page. Fine at today's sizes; a
    // generated column with an index is the way out if it is not.
    if (filter.environment !== undefined) where.push("json_extract(e.metadata, '$.environment') = @environment");
    if (filter.key !== undefined) where.push("json_extract(e.metadata, '$.key') = @key");
    if (filter.fromAt !== undefined) where.push("e.at >= @fromAt");
    // A cursor older than `to` makes `to` redundant; dropping it leaves SQLite one upper
    // bound, the cursor, so a deep page seeks straight to it instead of scanning from `to`.
    const isToImplied =
      filter.before !== undefined &&
      filter.toAt !== undefined &&
      (filter.toExclusive ? filter.before.at < filter.toAt : filter.before.at <= filter.toAt);
    if (filter.toAt !== undefined && !isToImplied) where.push(filter.toExclusive ? "e.at < @toAt" : "e.at <= @toAt");
    // A row-value comparison is a single range on the (…, at, seq) indexes. The cursor names
    // the event by id, not by seq, which would tell how busy other projects are; its seq is
    // found among the project's events of that millisecond (one seek, there is no id index).
    // An event pruned since leaves the events of its own millisecond out, nothing more.
    if (filter.before !== undefined) {
      where.push(
        `(e.at, e.seq) < (@beforeAt, (SELECT c.seq FROM audit_events c INDEXED BY audit_events_project_at_seq
           WHERE c.project_id = @projectId AND c.at = @beforeAt AND c.id = @beforeId))`,
      );
    }
    const sql = `SELECT e.id, e.at, e.action, e.category, e.target_type, e.target_id, e.metadata, e.actor_user_id,
        e.service_account_id, e.service_account_name, u.email AS actor_email
      FROM audit_events e INDEXED BY ${indexFor(filter)}
      LEFT JOIN users u ON u.id = e.actor_user_id
      WHERE ${where.join(" AND ")}
      ORDER BY e.at DESC, e.seq DESC
      LIMIT @limit`;
    let statement = pageStatements.get(sql);
    if (!statement) {
      statement = sqlite.prepare(sql);
      pageStatements.set(sql, statement);
    }
    return statement;
  }

  const hasServiceAccountEvents = sqlite
    .prepare(
      "SELECT 1 FROM audit_events INDEXED BY audit_events_project_service_account_at_seq WHERE project_id = ? AND service_account_id = ? LIMIT 1",
    )
    .pluck();
  const countProjectEvents = sqlite.prepare("SELECT count(*) FROM audit_events WHERE project_id = ?").pluck();
  const encryptedRecords = createEncryptedRecordCounterSqlite(db);
  const chainColumns =
    "seq, id, project_id, at, action, category, actor_user_id, target_type, target_id, metadata, service_account_id, service_account_name, prev_hash, hash, mac_key_version";
  const allEvents = sqlite.prepare(`SELECT ${chainColumns} FROM audit_events ORDER BY seq`);
  const chainPage = sqlite.prepare(`SELECT ${chainColumns} FROM audit_events WHERE seq > ? ORDER BY seq LIMIT ?`);
  const relink = sqlite.prepare("UPDATE audit_events SET prev_hash = ?, hash = ?, mac_key_version = ? WHERE seq = ?");
  const countNotKeyedWith = sqlite.prepare(
    `SELECT count(*) AS total, coalesce(sum(mac_key_version IS NOT @version), 0) AS other,
       coalesce(sum(mac_key_version IS NULL), 0) AS hashOnly,
       coalesce((SELECT mac_key_version <> @version FROM audit_checkpoint WHERE id = 1), 0) AS isCheckpointStale
     FROM audit_events`,
  );
  const startsHashOnly = sqlite.prepare("SELECT mac_key_version IS NULL FROM audit_events ORDER BY seq LIMIT 1").pluck();
  const findCheckpoint = sqlite.prepare(
    "SELECT seq, hash, at, is_keyed, pruned_before, pruned_events, mac_key_version, mac FROM audit_checkpoint WHERE id = 1",
  );
  const saveCheckpoint = sqlite.prepare(
    `INSERT INTO audit_checkpoint (id, seq, hash, at, is_keyed, pruned_before, pruned_events, mac_key_version, mac)
     VALUES (1, @seq, @hash, @at, @is_keyed, @pruned_before, @pruned_events, @mac_key_version, @mac)
     ON CONFLICT (id) DO UPDATE SET seq = excluded.seq, hash = excluded.hash, at = excluded.at, is_keyed = excluded.is_keyed,
       pruned_before = excluded.pruned_before, pruned_events = excluded.pruned_events,
       mac_key_version = excluded.mac_key_version, mac = excluded.mac`,
  );
  const deleteThrough = sqlite.prepare("DELETE FROM audit_events WHERE seq <= ?");

  return guard(db, {
    /** One page, newest first by (at, seq), the chain's order; asks for limit rows (the service asks one extra). */
    page(filter: AuditFilter): AuditEventRow[] {
      return pageStatement(filter).all(pageParameters(filter)) as AuditEventRow[];
    },

    /** For tests and the benchmark: the plan SQLite picks for a filter. */
    explainPage(filter: AuditFilter): string[] {
      const statement = pageStatement(filter);
      const plan = sqlite.prepare(`EXPLAIN QUERY PLAN ${statement.source}`).all(pageParameters(filter)) as { detail: string }[];
      return plan.map((r) => r.detail);
    },

    /** Whether a service account with this id (deleted or not) caused any event of the project. */
    hasServiceAccountEvents(projectId: string, serviceAccountId: string): boolean {
      return hasServiceAccountEvents.get(projectId, serviceAccountId) !== undefined;
    },

    countProjectEvents(projectId: string): number {
      return countProjectEvents.get(projectId) as number;
    },

    /** The project's encrypted records, counted as rotate-key and the key check count them. */
    countRecords(projectId: string, currentKeyVersion: number): EncryptedRecordCounts {
      return encryptedRecords.count(currentKeyVersion, projectId);
    },

    /**
     * Every event in chain order, streamed: the verifier must not hold a million rows. Call
     * inside a read transaction. PostgreSQL's is asynchronous (pages read in the snapshot).
     */
    iterateChain(): Iterable<StoredEventRow> | AsyncIterable<StoredEventRow> {
      return allEvents.iterate() as IterableIterator<StoredEventRow>;
    },

    /** Events in chain order after `afterSeq`, for a walk that also writes (iterate() would block it). */
    chainPage(afterSeq: number, limit: number): StoredEventRow[] {
      return chainPage.all(afterSeq, limit) as StoredEventRow[];
    },

    /** Rewrites links of the chain (rotate-key's re-keying, after verifying them). */
    relink(links: readonly ChainLink[], macKeyVersion: number): void {
      for (const link of links) relink.run(link.prevHash, link.hash, macKeyVersion, link.seq);
    },

    /**
     * All events, and how many are not keyed with `version` (hash-only ones included); and
     * whether the retention checkpoint is signed with another version.
     */
    /** `other` counts every event not on `version`, the hash-only ones (also in `hashOnly`) included. */
    countNotKeyedWith(version: number): { total: number; other: number; hashOnly: number; isCheckpointStale: boolean } {
      const row = countNotKeyedWith.get({ version }) as { total: number; other: number; hashOnly: number; isCheckpointStale: number };
      return { total: row.total, other: row.other, hashOnly: row.hashOnly, isCheckpointStale: row.isCheckpointStale === 1 };
    },

    /**
     * Whether the log starts with events chained by hash only. They can only ever stand at
     * its start (verify refuses one after a keyed event), so the first event tells.
     */
    startsHashOnly(): boolean {
      return startsHashOnly.get() === 1;
    },

    findCheckpoint(): CheckpointRow | undefined {
      return findCheckpoint.get() as CheckpointRow | undefined;
    },

    saveCheckpoint(row: CheckpointRow): void {
      saveCheckpoint.run(row);
    },

    /** Removes the oldest events up to and including `seq` (retention, after checking them). */
    deleteThrough(seq: number): void {
      deleteThrough.run(seq);
    },
  });
}

/** The named parameters of a page query; the ones a filter leaves out are not bound at all. */
function pageParameters(filter: AuditFilter): Record<string, string | number> {
  const all = {
    projectId: filter.projectId,
    action: filter.action,
    category: filter.category,
    actorUserId: filter.actorUserId,
    serviceAccountId: filter.serviceAccountId,
    environment: filter.environment,
    key: filter.key,
    fromAt: filter.fromAt,
    toAt: filter.toAt,
    beforeAt: filter.before?.at,
    beforeId: filter.before?.id,
    limit: filter.limit,
  };
  return Object.fromEntries(Object.entries(all).filter(([, v]) => v !== undefined)) as Record<string, string | number>;
}
