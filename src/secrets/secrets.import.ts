// POST …/import: many entries in one transaction, all or nothing.
import crypto from "node:crypto";
import type { AuditWriter } from "../audit/audit.writer.ts";
import type { Environment } from "../core/access.ts";
import type { Principal } from "../core/caller.ts";
import type { Clock } from "../core/clock.ts";
import { HttpError } from "../core/errors.ts";
import { type Store, writeTransaction } from "../core/store.ts";
import {
  CHANGED_BY_SOMEONE_ELSE,
  formatCount,
  MAX_SECRETS_PER_ENVIRONMENT,
  MAX_VERSIONS_PER_SECRET,
  type SecretValues,
} from "./secret-values.ts";
import type { SecretRow, SecretsRepo } from "./secrets.repo.ts";

const NO_OVERWRITE_PERMISSION = "You do not have permission to overwrite secrets.";

export interface ImportEntry {
  key: string;
  value: string;
  overwrite: boolean;
}

export type ImportStatus = "created" | "updated" | "unchanged" | "skipped" | "failed";

export interface ImportSummary {
  summary: Record<ImportStatus, number>;
  results: { key: string; status: ImportStatus }[];
}

function importOverLimit(existing: number, added: number): string {
  const most = formatCount(MAX_SECRETS_PER_ENVIRONMENT);
  return (
    `This import would add ${formatCount(added)} new ${added === 1 ? "secret" : "secrets"} to the ${formatCount(existing)} this environment holds, ` +
    `more than the ${most} it can hold. Nothing was imported: import fewer new keys, or delete secrets it no longer needs first.`
  );
}

interface ImportDeps {
  db: Store;
  repo: SecretsRepo;
  audit: AuditWriter;
  clock: Clock;
  values: SecretValues;
}

/**
 * One transaction for the whole import: the environment is listed once, each entry is
 * compared with the current value by its stored digest (nothing is decrypted unless a
 * version predates digests), each write is one run of a prepared statement, and one audit
 * event records the import.
 */
export function createSecretsImport({ db, repo, audit, clock, values }: ImportDeps) {
  return async function importEntries(
    caller: Principal,
    projectId: string,
    environment: string,
    entries: ImportEntry[],
  ): Promise<ImportSummary & { environment: Environment }> {
    return await writeTransaction(db, async () => {
      const at = await values.requireAccess(caller, projectId, "secrets:create", environment);
      // An overwrite needs secrets:update as well: checked on the keys alone, before any
      // stored value is read.
      if (!at.permissions.includes("secrets:update") && entries.some((e) => e.overwrite)) {
        const keys = new Set((await repo.listMeta(projectId, at.environment)).map((row) => row.key));
        if (entries.some((e) => e.overwrite && keys.has(e.key))) throw new HttpError(403, NO_OVERWRITE_PERMISSION);
      }
      const existing = new Map((await repo.listWithCiphertext(projectId, at.environment)).map((row) => [row.key, row]));
      let added = 0;
      for (const entry of entries) if (!existing.has(entry.key)) added++;
      if (existing.size + added > MAX_SECRETS_PER_ENVIRONMENT) throw new HttpError(409, importOverLimit(existing.size, added));
      // Loaded once: the loop below seals and compares without a turn of the event loop.
      const keys = await values.keysFor(projectId, existing.values());
      const now = clock.now().toISOString();
      const summary: Record<ImportStatus, number> = { created: 0, updated: 0, unchanged: 0, skipped: 0, failed: 0 };
      const results: { key: string; status: ImportStatus }[] = new Array(entries.length);
      // Every row is sealed and compared here, and written below in one repo call.
      const batch: Parameters<SecretsRepo["writeMany"]>[0] = { secrets: [], versions: [], moves: [], trims: [] };
      for (let i = 0; i < entries.length; i++) {
        const { key, value, overwrite } = entries[i]!;
        const row = existing.get(key);
        let status: ImportStatus;
        if (!row) {
          const created: SecretRow = {
            id: crypto.randomUUID(),
            projectId,
            environment: at.environment,
            key,
            version: 1,
            createdAt: now,
            updatedAt: now,
          };
          batch.secrets.push(created);
          batch.versions.push(values.versionRow(keys, caller, created, 1, value, "CREATED", now));
          status = "created";
        } else if (!overwrite) {
          status = "skipped";
        } else {
          // A version written before digests existed is compared (and given its digest) the slow way.
          const compared = values.byDigest(keys, row, value) ?? (await values.sameValue(row, value));
          if (compared.same) {
            status = "unchanged";
          } else {
            const version = row.version + 1;
            batch.versions.push(values.versionRow(keys, caller, row, version, value, "UPDATED", now, { digest: compared.digest }));
            batch.moves.push({ id: row.id, fromVersion: row.version, key, version, updatedAt: now });
            if (version > MAX_VERSIONS_PER_SECRET) batch.trims.push({ secretId: row.id, before: version - MAX_VERSIONS_PER_SECRET + 1 });
            status = "updated";
          }
        }
        summary[status]++;
        results[i] = { key, status };
      }
      if (!(await repo.writeMany(batch))) throw new HttpError(409, CHANGED_BY_SOMEONE_ELSE);
      await audit.record(caller, {
        projectId,
        action: "secrets.imported",
        targetType: "environment",
        targetId: `${projectId}/${at.environment}`,
        metadata: { environment: at.environment, ...summary },
      });
      return { environment: at.environment, summary, results };
    });
  };
}
