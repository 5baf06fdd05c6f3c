// The last values exported from each environment, so that exporting the same rows again
// (a deploy job, `secrets run`, the Vercel sync, every few minutes) opens one sealed text
// instead of decrypting every value once more: AES-GCM through node:crypto costs about 5 µs
// a value, most of an export of a thousand.
import crypto from "node:crypto";
import { open, seal } from "../core/crypto.ts";
import type { SecretWithCiphertext } from "./secrets.repo.ts";

export interface ExportedValue {
  key: string;
  value: string;
}

/** Environments remembered, the least recently exported forgotten first. */
const MAX_ENTRIES = 32;
/** Bytes of sealed text remembered in all; a larger environment is not remembered at all. */
const MAX_BYTES = 16 * 1024 * 1024;

export type ExportMemo = ReturnType<typeof createExportMemo>;

/**
 * An entry is found by a digest of everything the values are opened from: each row's id,
 * key, version and key version (which make its AAD and pick its data key) and its sealed
 * bytes (nonce, ciphertext and tag). AES-GCM opens the same bytes under the same key and
 * AAD to the same value, so a hit is exactly what decrypting again would give, not a
 * cache that can go stale: a changed, restored, renamed, deleted, re-encrypted or
 * tampered row changes the digest, and the export decrypts every value again (and fails
 * as before when one does not open).
 *
 * The values are kept sealed under a key made for this process, which lives in native
 * memory (a KeyObject), so what the memo holds between requests opens nothing without it
 * (a heap snapshot does not hold it). A request still has its values in the clear while it
 * runs, as any export does. Access is checked before the memo is asked, and every export
 * is audited as before. An environment's entry goes when a secret in it changes, and a
 * project's when the project is deleted.
 */
export function createExportMemo() {
  const keyBytes = crypto.randomBytes(32);
  const memoKey = crypto.createSecretKey(keyBytes);
  keyBytes.fill(0);
  const entries = new Map<string, { digest: string; sealed: Buffer }>();
  let bytes = 0;
  // Bumped by forget(): values opened from rows read before a change (or a deletion) must
  // not be stored after it, so an export takes a ticket before it reads its rows. Deleted
  // projects are never stored again: a read snapshot older than the deletion still holds
  // their rows (PostgreSQL's REPEATABLE READ), and ids are never reused.
  const generations = new Map<string, number>();
  const deleted = new Set<string>();

  function drop(slot: string): void {
    const entry = entries.get(slot);
    if (!entry) return;
    bytes -= entry.sealed.length;
    entries.delete(slot);
  }

  function digestOf(projectId: string, environment: string, rows: readonly SecretWithCiphertext[]): string {
    let text = `${projectId}\n${environment}`;
    const sealed = new Array<Buffer>(rows.length);
    for (let i = 0; i < rows.length; i++) {
      const row = rows[i]!;
      text += `\n${row.id} ${row.key} ${row.version} ${row.keyVersion} ${row.ciphertext.length}`;
      sealed[i] = row.ciphertext;
    }
    // The text's length first: where the text ends and the sealed bytes begin is then part of what is hashed.
    return crypto.createHash("sha256").update(`${text.length}\n`).update(text).update(Buffer.concat(sealed)).digest("base64url");
  }

  return {
    /** Taken before the rows are read, and given to values(). */
    ticket(projectId: string): number {
      return generations.get(projectId) ?? 0;
    },

    /**
     * The rows' values, from the memo when these very rows were opened before, else from
     * `openAll`, then remembered unless the project changed since `ticket` was taken.
     */
    async values(
      projectId: string,
      environment: string,
      ticket: number,
      rows: readonly SecretWithCiphertext[],
      openAll: () => Promise<ExportedValue[]>,
    ): Promise<ExportedValue[]> {
      const slot = `${projectId}/${environment}`;
      const digest = digestOf(projectId, environment, rows);
      const aad = `${slot}/${digest}`;
      const entry = entries.get(slot);
      if (entry?.digest === digest) {
        // Most recently used last, so the first entry is the one to forget.
        entries.delete(slot);
        entries.set(slot, entry);
        const text = open(memoKey, entry.sealed, aad);
        try {
          return JSON.parse(text.toString("utf8")) as ExportedValue[];
        } finally {
          text.fill(0);
        }
      }
      const opened = await openAll();
      if ((generations.get(projectId) ?? 0) !== ticket || deleted.has(projectId)) return opened;
      drop(slot);
      const sealed = seal(memoKey, JSON.stringify(opened), aad);
      if (sealed.length > MAX_BYTES) return opened;
      entries.set(slot, { digest, sealed });
      bytes += sealed.length;
      for (const oldest of entries.keys()) {
        if (entries.size <= MAX_ENTRIES && bytes <= MAX_BYTES) break;
        drop(oldest);
      }
      return opened;
    },

    /**
     * Drops what is remembered of a project (deleted), or of one of its environments (a
     * secret in it changed: a deleted secret's value should not outlive it here either).
     */
    forget(projectId: string, environment?: string): void {
      generations.set(projectId, (generations.get(projectId) ?? 0) + 1);
      if (environment !== undefined) {
        drop(`${projectId}/${environment}`);
        return;
      }
      deleted.add(projectId);
      for (const slot of [...entries.keys()]) if (slot.startsWith(`${projectId}/`)) drop(slot);
    },
  };
}
