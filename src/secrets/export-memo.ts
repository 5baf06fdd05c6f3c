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
 * memory (a KeyObject), so the JavaScript heap, and a heap snapshot of it, holds no value
 * in the clear once the request that used them is over. Access is checked before the memo
 * is asked, and every export is audited as before.
 */
export function createExportMemo() {
  const memoKey = crypto.createSecretKey(crypto.randomBytes(32));
  const entries = new Map<string, { digest: string; sealed: Buffer }>();
  let bytes = 0;

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
    return crypto.createHash("sha256").update(text).update(Buffer.concat(sealed)).digest("base64url");
  }

  return {
    /** The rows' values, from the memo when these very rows were opened before, else from `openAll` (then remembered). */
    async values(
      projectId: string,
      environment: string,
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
        return JSON.parse(open(memoKey, entry.sealed, aad).toString("utf8")) as ExportedValue[];
      }
      const opened = await openAll();
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

    /** A deleted project's values leave memory with it. */
    forget(projectId: string): void {
      for (const slot of [...entries.keys()]) if (slot.startsWith(`${projectId}/`)) drop(slot);
    },
  };
}
