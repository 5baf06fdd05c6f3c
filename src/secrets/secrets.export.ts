// GET …/export: every value of an environment, audited like a reveal.
import crypto from "node:crypto";
import type { Logger } from "pino";
import type { AuditWriter } from "../audit/audit.writer.ts";
import type { Environment } from "../core/access.ts";
import type { Principal } from "../core/caller.ts";
import { HttpError } from "../core/errors.ts";
import { allWritesDurable, readTransaction, type Store } from "../core/store.ts";
import { DecryptError } from "../core/vault.ts";
import type { ExportFormat } from "./export-formats.ts";
import type { ExportedValue, ExportMemo } from "./export-memo.ts";
import type { SecretValues } from "./secret-values.ts";
import type { SecretsRepo, SecretWithCiphertext } from "./secrets.repo.ts";

const NOT_DECRYPTED_SOME = "Some secrets could not be decrypted.";

/**
 * Changes with any create, update, rename, restore or delete in the environment, and with
 * the format. The rows come sorted by key, and keys are unique in an environment, so the
 * same rows always give the same text.
 */
function exportTag(rows: SecretWithCiphertext[], format: string): string {
  let text = format;
  for (let i = 0; i < rows.length; i++) {
    const row = rows[i]!;
    text += `\n${row.id} ${row.key} ${row.version} ${row.updatedAt}`;
  }
  const digest = crypto.createHash("sha256").update(text).digest("base64url");
  return `"${digest.slice(0, 27)}"`;
}

interface ExportDeps {
  db: Store;
  repo: SecretsRepo;
  audit: AuditWriter;
  values: SecretValues;
  memo: ExportMemo;
  log?: Pick<Logger, "error">;
}

export function createSecretsExport({ db, repo, audit, values, memo, log }: ExportDeps) {
  /** Every row opened, in order (the memo's copy when these very rows were opened before); throws DecryptError when any one does not open. */
  function openAll(projectId: string, environment: Environment, ticket: number, rows: SecretWithCiphertext[]): Promise<ExportedValue[]> {
    return memo.values(projectId, environment, ticket, rows, async () => {
      const open = await values.currentValueOpener(projectId, rows);
      const opened = new Array<ExportedValue>(rows.length);
      for (let i = 0; i < rows.length; i++) {
        const row = rows[i]!;
        opened[i] = { key: row.key, value: open(row) };
      }
      return opened;
    });
  }

  return {
    /**
     * Every value of the environment sorted by key, or a 500 when any one does not open.
     * Read and decrypted in a read snapshot, so no write waits on the decrypting; answers
     * only once the `secrets.exported` event is on disk, like a reveal. The ETag comes from
     * metadata only (ids, keys, versions, updatedAt) of the same rows: when `isUnchanged`
     * says the caller holds it, nothing is decrypted and nothing audited. Access is checked
     * first, so a caller who lost the environment gets 403, not 304.
     */
    async export(
      caller: Principal,
      projectId: string,
      environment: string,
      format: ExportFormat,
      isUnchanged?: (etag: string) => boolean,
    ): Promise<{ values: ExportedValue[]; etag: string } | { notModified: true; etag: string }> {
      // Before the rows are read: a change that lands after keeps what is opened out of the memo.
      const ticket = memo.ticket(projectId);
      const read = await readTransaction(db, async () => {
        const at = await values.requireAccess(caller, projectId, "secrets:read", environment);
        const rows = await repo.listWithCiphertext(projectId, at.environment);
        const etag = exportTag(rows, format);
        if (isUnchanged?.(etag)) return { notModified: true as const, etag };
        try {
          return { at, opened: await openAll(projectId, at.environment, ticket, rows), etag };
        } catch (error) {
          if (!(error instanceof DecryptError)) throw error;
          log?.error({ projectId, environment: at.environment }, "an exported secret value did not decrypt");
          throw new HttpError(500, NOT_DECRYPTED_SOME);
        }
      });
      if (read.notModified) return { notModified: true, etag: read.etag };
      const { at, opened, etag } = read;
      await audit.recordRead(caller, {
        projectId,
        action: "secrets.exported",
        targetType: "environment",
        targetId: `${projectId}/${at.environment}`,
        metadata: { environment: at.environment, count: opened.length, format },
      });
      return { values: opened, etag };
    },

    /**
     * For the sync engine: every value of an environment sorted by key, with no caller and
     * no checks. Throws DecryptError when any value does not open, never a partial list.
     */
    async readAllValues(projectId: string, environment: Environment): Promise<ExportedValue[]> {
      const ticket = memo.ticket(projectId);
      const rows = await repo.listWithCiphertext(projectId, environment);
      // The values leave for Vercel: a change committed a moment ago, by this process or
      // another on the same DATA_DIR, must be on disk first, or a power cut could leave
      // Vercel holding a value (and no event) the server lost.
      await allWritesDurable(db);
      return openAll(projectId, environment, ticket, rows);
    },
  };
}
