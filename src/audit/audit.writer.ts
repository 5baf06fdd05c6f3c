import crypto, { type KeyObject } from "node:crypto";
import { isServiceAccount, type Principal } from "../core/caller.ts";
import type { Clock } from "../core/clock.ts";
import type { Keyring } from "../core/crypto.ts";
import type { Db } from "../core/db.ts";
import type { PgStore } from "../core/postgres.ts";
import { atNextCommit, inTransaction, isPostgres, type Store, writeTransaction } from "../core/store.ts";
import { redactTokens } from "../core/text.ts";
import { AUDIT_ACTIONS, type AuditAction } from "./audit.actions.ts";

export const GENESIS_HASH = "0".repeat(64);

type MetadataValue = string | number | boolean | null | string[] | Record<string, string>;
export type AuditMetadata = Record<string, MetadataValue | undefined>;

export interface AuditEntry {
  projectId: string | null;
  action: AuditAction;
  targetType: string;
  targetId: string;
  metadata?: AuditMetadata;
}

export interface StoredEventContent {
  id: string;
  projectId: string | null;
  at: string;
  action: string;
  category: string;
  actorUserId: string | null;
  targetType: string;
  targetId: string;
  metadata: string;
  /** The service account that caused the event; null for people and the server. */
  serviceAccountId?: string | null;
  serviceAccountName?: string | null;
}

/**
 * The chain link: each hash covers the previous hash and this event's content. With a MAC
 * key (the master key version's audit key) it is an HMAC-SHA256, which nobody without the
 * master key can recompute; with null it is the plain SHA-256 of events written before the
 * chain was keyed (mac_key_version null), kept only so those still verify.
 */
export function eventHash(prevHash: string, event: StoredEventContent, macKey: KeyObject | null): string {
  const content = JSON.stringify([
    event.id,
    event.projectId,
    event.at,
    event.action,
    event.category,
    event.actorUserId,
    event.targetType,
    event.targetId,
    event.metadata,
    // Only when set, so the hashes of events written before service accounts existed stay valid.
    ...(event.serviceAccountId == null ? [] : [event.serviceAccountId, event.serviceAccountName ?? null]),
  ]);
  const digest = macKey ? crypto.createHmac("sha256", macKey) : crypto.createHash("sha256");
  return digest.update(prevHash).update("\n").update(content).digest("hex");
}

const MAX_METADATA_TEXT = 500;
const MAX_CLOCK_STEP_BACK_MS = 1000;

/**
 * The last line of defence for text reaching metadata from user input (an e-mail, a name
 * from the identity provider): token-shaped runs are replaced and long text is cut, so no
 * input can make an audit write fail, and nothing token-like is ever stored.
 */
function cleanText(text: string): string {
  // A NUL or a lone surrogate (in a name, or a verified token's subject; or made by cutting
  // a pair in two) would be stored as a \u escape in the JSON, which PostgreSQL's ->>
  // refuses to decode: U+FFFD instead, as a text column would store it anyway.
  const redacted = redactTokens(text).replaceAll("\u0000", "\ufffd");
  return (redacted.length > MAX_METADATA_TEXT ? `${redacted.slice(0, MAX_METADATA_TEXT)}…` : redacted).toWellFormed();
}

function cleanValue(value: MetadataValue): MetadataValue {
  if (typeof value === "string") return cleanText(value);
  if (Array.isArray(value)) return value.map((item) => cleanText(String(item)));
  if (value !== null && typeof value === "object") {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [cleanText(k), cleanText(String(v))]));
  }
  return value;
}

/**
 * Event ids are UUIDv7-shaped and strictly increasing within this process. They do not
 * order the log: several processes may write it, and the list follows the chain, (at, seq).
 */
export function createEventIds(): () => string {
  let lastMs = 0;
  let counter = 0;
  return () => {
    let ms = Date.now();
    if (ms <= lastMs) {
      ms = lastMs;
      counter += 1;
      // 12 bits of counter per millisecond; past that, borrow the next millisecond.
      if (counter > 0xfff) {
        ms = lastMs + 1;
        counter = 0;
      }
    } else {
      counter = 0;
    }
    lastMs = ms;
    const bytes = crypto.randomBytes(16);
    bytes.writeUIntBE(ms, 0, 6);
    bytes[6] = 0x70 | (counter >> 8);
    bytes[7] = counter & 0xff;
    bytes[8] = 0x80 | (bytes[8]! & 0x3f);
    const hex = bytes.toString("hex");
    return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
  };
}

export type AuditWriter = ReturnType<typeof createAuditWriter>;

/** An event ready to append: its content and its link in the chain. */
interface ChainedEvent extends StoredEventContent {
  prevHash: string;
  hash: string;
}

/**
 * The single function that writes audit events. Call it inside the transaction of the
 * change it records (better-sqlite3 runs every statement of the connection in it; on
 * PostgreSQL the repos find the transaction's connection themselves).
 */
export function createAuditWriter(db: Store, clock: Clock, keyring: Keyring) {
  const nextId = createEventIds();
  // New events are always keyed with the current master key version; rotate-key moves older
  // ones onto it.
  const macKeyVersion = keyring.currentVersion;
  const macKey = keyring.auditMacKey(macKeyVersion);

  /**
   * The events chained onto the head: each names the previous one's hash, and takes its
   * time from the clock unless that went back (see chainTime).
   */
  function chain(head: ChainHead, pending: StoredEventContent[]): ChainedEvent[] {
    let prevHash = head.hash ?? GENESIS_HASH;
    let previousAt = head.at;
    return pending.map((event) => {
      const content = { ...event, at: chainTime(previousAt) };
      const hash = eventHash(prevHash, content, macKey);
      const chained = { ...content, prevHash, hash };
      prevHash = hash;
      previousAt = content.at;
      return chained;
    });
  }
  /**
   * The event's time, read under the write lock that also assigns its seq: processes on one
   * host share the clock, so times never go backwards along the chain and the list's order,
   * (at, seq), is the chain's. A clock stepped back by up to a second keeps the previous
   * event's time; a larger step is believed, so the log shows it.
   */
  function chainTime(previousAt: string | null): string {
    const now = clock.now().toISOString();
    if (previousAt === null || previousAt <= now || Date.parse(previousAt) - Date.parse(now) > MAX_CLOCK_STEP_BACK_MS) return now;
    return previousAt;
  }
  // Reading the last hash and appending must be one step (a write transaction), or two
  // processes writing the same database (the server and a CLI command, or two servers on
  // PostgreSQL, whose write transactions hold one cluster-wide lock) could both chain onto
  // the same event.
  const append: (pending: StoredEventContent[]) => void | Promise<void> = isPostgres(db)
    ? createPgAppend(db, macKeyVersion, chain)
    : createSqliteAppend(db, macKeyVersion, chain);

  // Events of reads waiting for the next flush (see recordRead).
  let pendingReads: { content: StoredEventContent; settle: (error?: unknown) => void }[] = [];

  async function flushReads(): Promise<void> {
    const batch = pendingReads;
    pendingReads = [];
    try {
      await writeTransaction(db, () => append(batch.map((item) => item.content)));
    } catch (error) {
      for (const item of batch) item.settle(error);
      return;
    }
    for (const item of batch) item.settle();
  }

  function toContent(actor: Principal | null, entry: AuditEntry): StoredEventContent {
    const definition = AUDIT_ACTIONS[entry.action];
    if (!definition) throw new Error(`unknown audit action "${entry.action}"`);
    const allowed: readonly string[] = definition.metadata;
    const metadata: Record<string, MetadataValue> = {};
    for (const [name, value] of Object.entries(entry.metadata ?? {})) {
      if (value === undefined) continue;
      // A programming error, not user input: fail loudly so no test can miss it.
      if (!allowed.includes(name)) throw new Error(`audit metadata key "${name}" is not allowed for ${entry.action}`);
      metadata[name] = cleanValue(value);
    }
    if (actor && actor.via !== "browser" && allowed.includes("via")) metadata.via = actor.via;
    const serviceAccount = actor && isServiceAccount(actor) ? actor : null;
    return {
      id: nextId(),
      projectId: entry.projectId,
      at: clock.now().toISOString(),
      action: entry.action,
      category: definition.category,
      // A service account is not a person: the event names it instead of an actor.
      actorUserId: actor && !isServiceAccount(actor) ? actor.userId : null,
      targetType: entry.targetType,
      targetId: entry.targetId,
      metadata: JSON.stringify(metadata),
      serviceAccountId: serviceAccount?.serviceAccountId ?? null,
      serviceAccountName: serviceAccount?.serviceAccountName ?? null,
    };
  }

  return {
    /**
     * The event of a read that changes nothing (a value revealed). There is no change to
     * commit it with, and committing each alone would cost one fsync per read: events of
     * reads arriving together are written in one transaction, on the next turn of the event
     * loop or, while the disk syncs earlier writes, when that sync ends (atNextCommit). The
     * promise settles once the event is durable, and the caller must not answer before: a
     * value is never shown without its event on disk.
     */
    recordRead(actor: Principal | null, entry: AuditEntry): Promise<void> {
      const content = toContent(actor, entry);
      return new Promise((resolve, reject) => {
        // flushReads settles every waiting read itself, error or not.
        if (pendingReads.length === 0) atNextCommit(db, () => void flushReads());
        pendingReads.push({ content, settle: (error) => (error === undefined ? resolve() : reject(error)) });
      });
    },

    /** `actor` is the caller, or null for the server's own actions (automatic sync). */
    async record(actor: Principal | null, entry: AuditEntry): Promise<void> {
      const content = toContent(actor, entry);
      if (inTransaction(db)) await append([content]);
      else await writeTransaction(db, () => append([content]));
    },
  };
}

type ChainHead = { hash: string | null; at: string | null };
type Chain = (head: ChainHead, pending: StoredEventContent[]) => ChainedEvent[];

// With every event pruned under retention, the chain goes on from the checkpoint.
const CHAIN_HEAD = `SELECT coalesce((SELECT hash FROM audit_events ORDER BY seq DESC LIMIT 1),
                     (SELECT hash FROM audit_checkpoint WHERE id = 1)) AS hash,
            (SELECT at FROM audit_events ORDER BY seq DESC LIMIT 1) AS at`;

/** Each event on its own: better-sqlite3's statements cost microseconds, with no round trip. */
function createSqliteAppend(db: Db, macKeyVersion: number, chain: Chain) {
  const sqlite = db.$client;
  const chainHead = sqlite.prepare(CHAIN_HEAD);
  const insert = sqlite.prepare(
    `INSERT INTO audit_events (id, project_id, at, action, category, actor_user_id, target_type, target_id, metadata,
       service_account_id, service_account_name, prev_hash, hash, mac_key_version)
     VALUES (@id, @projectId, @at, @action, @category, @actorUserId, @targetType, @targetId, @metadata,
       @serviceAccountId, @serviceAccountName, @prevHash, @hash, @macKeyVersion)`,
  );
  return (pending: StoredEventContent[]): void => {
    for (const content of pending) {
      const event = chain(chainHead.get() as ChainHead, [content])[0]!;
      insert.run({
        ...event,
        serviceAccountId: event.serviceAccountId ?? null,
        serviceAccountName: event.serviceAccountName ?? null,
        macKeyVersion,
      });
    }
  };
}

/**
 * The head read once and the events inserted in one statement: two round trips for a batch
 * of reveals, under the write lock every server's writes wait for. A multi-row VALUES list
 * is inserted in its order, so seq (an identity column) follows the chain.
 */
// PostgreSQL takes at most 65535 parameters per statement; an event has 14.
const PG_INSERT_ROWS = 1000;
const PG_INSERT_COLUMNS = 14;

function createPgAppend(store: PgStore, macKeyVersion: number, chain: Chain) {
  return async (pending: StoredEventContent[]): Promise<void> => {
    const head = (await store.client().query({ name: "audit-chain-head", text: CHAIN_HEAD })).rows[0] as ChainHead;
    const events = chain(head, pending);
    for (let start = 0; start < events.length; start += PG_INSERT_ROWS) await insert(events.slice(start, start + PG_INSERT_ROWS));
  };

  async function insert(events: ChainedEvent[]): Promise<void> {
    const values: unknown[] = [];
    const rows: string[] = [];
    for (const event of events) {
      const at = values.length;
      rows.push(`(${Array.from({ length: PG_INSERT_COLUMNS }, (_, i) => `$${at + i + 1}`).join(", ")})`);
      values.push(
        event.id,
        event.projectId,
        event.at,
        event.action,
        event.category,
        event.actorUserId,
        event.targetType,
        event.targetId,
        event.metadata,
        event.serviceAccountId ?? null,
        event.serviceAccountName ?? null,
        event.prevHash,
        event.hash,
        macKeyVersion,
      );
    }
    const text = `INSERT INTO audit_events (id, project_id, at, action, category, actor_user_id, target_type, target_id, metadata,
       service_account_id, service_account_name, prev_hash, hash, mac_key_version)
     VALUES ${rows.join(", ")}`;
    // The usual single event is a named statement; a batch's shape varies with its size.
    await store.client().query(events.length === 1 ? { name: "audit-insert", text, values } : { text, values });
  }
}
