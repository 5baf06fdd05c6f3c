import crypto from "node:crypto";
import type { Clock } from "../core/clock.ts";
import type { Caller } from "../core/caller.ts";
import type { Db } from "../core/db.ts";
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
}

/** The chain link: each hash covers the previous hash and this event's content. */
export function eventHash(prevHash: string, event: StoredEventContent): string {
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
  ]);
  return crypto.createHash("sha256").update(prevHash).update("\n").update(content).digest("hex");
}

export type AuditWriter = ReturnType<typeof createAuditWriter>;

/**
 * The single function that writes audit events. Call it inside the transaction of the
 * change it records (better-sqlite3 runs every statement of the connection in it).
 */
export function createAuditWriter(db: Db, clock: Clock) {
  const lastHash = db.$client.prepare("SELECT hash FROM audit_events ORDER BY seq DESC LIMIT 1").pluck();
  const insert = db.$client.prepare(
    `INSERT INTO audit_events (id, project_id, at, action, category, actor_user_id, target_type, target_id, metadata, prev_hash, hash)
     VALUES (@id, @projectId, @at, @action, @category, @actorUserId, @targetType, @targetId, @metadata, @prevHash, @hash)`,
  );

  return {
    /** `actor` is the caller, or null for the server's own actions (automatic sync). */
    record(actor: Caller | null, entry: AuditEntry): void {
      const definition = AUDIT_ACTIONS[entry.action];
      const allowed: readonly string[] = definition.metadata;
      const metadata: Record<string, MetadataValue> = {};
      for (const [name, value] of Object.entries(entry.metadata ?? {})) {
        if (value === undefined) continue;
        // A programming error, not user input: fail loudly so no test can miss it.
        if (!allowed.includes(name)) throw new Error(`audit metadata key "${name}" is not allowed for ${entry.action}`);
        metadata[name] = value;
      }
      if (actor?.via === "cli" && allowed.includes("via")) metadata.via = "cli";
      const content: StoredEventContent = {
        id: crypto.randomUUID(),
        projectId: entry.projectId,
        at: clock.now().toISOString(),
        action: entry.action,
        category: definition.category,
        actorUserId: actor?.userId ?? null,
        targetType: entry.targetType,
        targetId: entry.targetId,
        metadata: JSON.stringify(metadata),
      };
      const prevHash = (lastHash.get() as string | undefined) ?? GENESIS_HASH;
      insert.run({ ...content, prevHash, hash: eventHash(prevHash, content) });
    },
  };
}
