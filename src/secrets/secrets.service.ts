import crypto from "node:crypto";
import type { Logger } from "pino";
import type { AuditWriter } from "../audit/audit.writer.ts";
import type { AccessGuard, Environment, ProjectAccess } from "../core/access.ts";
import { isServiceAccount, type Principal } from "../core/caller.ts";
import type { Clock } from "../core/clock.ts";
import { readTransaction, writeTransaction, type Db } from "../core/db.ts";
import { HttpError } from "../core/errors.ts";
import { DecryptError, secretValueAad, type Vault } from "../core/vault.ts";
import type { ExportFormat } from "./export-formats.ts";
import type { SecretRow, SecretsRepo, SecretWithCiphertext } from "./secrets.repo.ts";

export const SECRET_NOT_FOUND = "Secret not found.";
export const VERSION_NOT_FOUND = "Version not found.";
export const KEY_TAKEN = "A secret with this key already exists in this environment.";
export const CHANGED_BY_SOMEONE_ELSE = "This secret was changed by someone else. Reload and try again.";
export const ALREADY_CURRENT = "This version is already the current value.";
export const NO_OVERWRITE_PERMISSION = "You do not have permission to overwrite secrets.";
export const NOT_DECRYPTED_ONE = "This secret could not be decrypted. Nothing partial is returned.";
export const NOT_DECRYPTED_SOME = "Some secrets could not be decrypted.";

/**
 * The most secrets one environment holds. It bounds every read of a whole environment (the
 * list, export, the Vercel sync) to the size the README's benchmark measures (an export of
 * 1,000 costs about 11 ms of server CPU), far above what one application's configuration needs.
 */
const MAX_SECRETS_PER_ENVIRONMENT = 1_000;
/** The versions kept per secret, the current one included; a new value drops the oldest (like Vault's max_versions). */
const MAX_VERSIONS_PER_SECRET = 100;

const MAX_SECRETS_TEXT = MAX_SECRETS_PER_ENVIRONMENT.toLocaleString("en-US");
const ENVIRONMENT_FULL = `This environment already holds ${MAX_SECRETS_TEXT} secrets, the most it can hold. Delete secrets it no longer needs, or keep new ones in another environment or project.`;

function importOverLimit(existing: number, added: number): string {
  return (
    `This import would add ${added.toLocaleString("en-US")} new ${added === 1 ? "secret" : "secrets"} to the ${existing.toLocaleString("en-US")} this environment holds, ` +
    `more than the ${MAX_SECRETS_TEXT} it can hold. Nothing was imported: import fewer new keys, or delete secrets it no longer needs first.`
  );
}

export interface SecretMeta {
  id: string;
  key: string;
  version: number;
  createdAt: string;
  updatedAt: string;
}

export interface SecretWithValue {
  id: string;
  key: string;
  value: string;
  version: number;
  updatedAt: string;
}

export interface VersionEntry {
  versionNumber: number;
  changeType: "CREATED" | "UPDATED" | "ROLLED_BACK" | "BASELINE";
  key: string;
  isCurrent: boolean;
  restoredFromVersion?: number;
  createdAt: string;
  changedBy: { userId: string; email: string | null; isYou: boolean; isMember: boolean } | null;
  /** Present (with changedBy null) on versions a service account wrote. */
  changedByServiceAccount?: { id: string; name: string };
}

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

export type ChangeListener = (projectId: string, environment: Environment) => void;

interface Deps {
  db: Db;
  repo: SecretsRepo;
  access: AccessGuard;
  audit: AuditWriter;
  vault: Vault;
  clock: Clock;
  log?: Pick<Logger, "error">;
  /** Called after an import that wrote many entries (the WAL's space is given back then). */
  afterLargeWrite?: () => void;
}

/** Imports writing at least this many entries count as large (see afterLargeWrite). */
const LARGE_IMPORT_ENTRIES = 100;

function toMeta(row: SecretRow): SecretMeta {
  return { id: row.id, key: row.key, version: row.version, createdAt: row.createdAt, updatedAt: row.updatedAt };
}

/** Changes with any create, update, rename, restore or delete in the environment, and with the format. */
function exportTag(rows: SecretRow[], format: string): string {
  const lines = rows.map((row) => `${row.id} ${row.key} ${row.version} ${row.updatedAt}`).sort();
  const digest = crypto.createHash("sha256").update(`${format}\n${lines.join("\n")}`).digest("base64url");
  return `"${digest.slice(0, 27)}"`;
}

export function createSecretsService({ db, repo, access, audit, vault, clock, log, afterLargeWrite }: Deps) {
  const listeners: ChangeListener[] = [];

  /** After the commit, never inside it: a listener may read, and its failure is its own. */
  function changed(projectId: string, environment: Environment): void {
    for (const listener of listeners) {
      try {
        const result = listener(projectId, environment) as unknown;
        if (result instanceof Promise) result.catch((error: unknown) => log?.error({ err: error }, "secret change listener failed"));
      } catch (error) {
        log?.error({ err: error }, "secret change listener failed");
      }
    }
  }

  function open(row: { projectId: string; environment: string; id: string; ciphertext: Buffer; keyVersion: number }, versionNumber: number): string {
    return vault.open(row.projectId, secretValueAad(row.projectId, row.environment, row.id, versionNumber), {
      ciphertext: row.ciphertext,
      keyVersion: row.keyVersion,
    });
  }

  /** One value for a response: a failure is a 500 with the spec's sentence, never part of a value. */
  function openOrFail(row: SecretWithCiphertext, versionNumber: number, ciphertext = row.ciphertext, keyVersion = row.keyVersion): string {
    try {
      return open({ ...row, ciphertext, keyVersion }, versionNumber);
    } catch (error) {
      if (!(error instanceof DecryptError)) throw error;
      log?.error({ secretId: row.id, versionNumber }, "a secret value did not decrypt");
      throw new HttpError(500, NOT_DECRYPTED_ONE);
    }
  }

  /** For comparisons only: a value that no longer opens counts as different, so it can be replaced. */
  function currentValueOrUndefined(row: SecretWithCiphertext): string | undefined {
    try {
      return open(row, row.version);
    } catch (error) {
      if (error instanceof DecryptError) return undefined;
      throw error;
    }
  }

  function findOrFail(projectId: string, environment: Environment, secretId: string): SecretWithCiphertext {
    const row = repo.findWithCiphertext(projectId, environment, secretId);
    if (!row) throw new HttpError(404, SECRET_NOT_FOUND);
    return row;
  }

  /**
   * Writes version `versionNumber` of a secret, sealed for exactly that row, and drops the
   * versions that fall out of the newest MAX_VERSIONS_PER_SECRET. The current version is
   * always the newest number (restore writes a new one), so it is never dropped.
   */
  function writeVersion(
    caller: Principal,
    secret: { id: string; projectId: string; environment: Environment; key: string },
    versionNumber: number,
    value: string,
    changeType: "CREATED" | "UPDATED" | "ROLLED_BACK",
    now: string,
    restoredFromVersion?: number,
  ): void {
    const sealed = vault.seal(secret.projectId, secretValueAad(secret.projectId, secret.environment, secret.id, versionNumber), value);
    repo.insertVersion({
      secretId: secret.id,
      versionNumber,
      projectId: secret.projectId,
      key: secret.key,
      changeType,
      restoredFromVersion: restoredFromVersion ?? null,
      ciphertext: sealed.ciphertext,
      keyVersion: sealed.keyVersion,
      // A service account is not a user: its versions name it in their own columns.
      changedBy: isServiceAccount(caller) ? null : caller.userId,
      changedByServiceAccountId: isServiceAccount(caller) ? caller.serviceAccountId : null,
      changedByServiceAccountName: isServiceAccount(caller) ? caller.serviceAccountName : null,
      createdAt: now,
    });
    if (versionNumber > MAX_VERSIONS_PER_SECRET) repo.deleteVersionsBefore(secret.id, versionNumber - MAX_VERSIONS_PER_SECRET + 1);
  }

  /** Moves the secret to a new version; the compare-and-set makes a lost update impossible. */
  function advance(row: SecretRow, fields: { key: string; version: number; updatedAt: string }): void {
    if (!repo.update(row.id, row.version, fields)) throw new HttpError(409, CHANGED_BY_SOMEONE_ELSE);
  }

  function requireAccess(caller: Principal, projectId: string, permission: Parameters<AccessGuard["require"]>[2], environment: string): ProjectAccess & { environment: Environment } {
    return access.require(caller, projectId, permission, environment) as ProjectAccess & { environment: Environment };
  }

  function createOne(caller: Principal, projectId: string, environment: Environment, key: string, value: string, now: string): SecretRow {
    const row: SecretRow = { id: crypto.randomUUID(), projectId, environment, key, version: 1, createdAt: now, updatedAt: now };
    repo.insertSecret(row);
    writeVersion(caller, row, 1, value, "CREATED", now);
    return row;
  }

  return {
    /** Subscribes to committed changes of an environment's secrets (the Vercel sync). */
    onChange(listener: ChangeListener): void {
      listeners.push(listener);
    },

    list(caller: Principal, projectId: string, environment: string): SecretMeta[] {
      const at = requireAccess(caller, projectId, "secrets:read", environment);
      return repo.list(projectId, at.environment).map(toMeta);
    },

    create(caller: Principal, projectId: string, environment: string, input: { key: string; value: string }): SecretMeta {
      const row = writeTransaction(db, () => {
        const at = requireAccess(caller, projectId, "secrets:create", environment);
        if (repo.findByKey(projectId, at.environment, input.key)) throw new HttpError(409, KEY_TAKEN);
        // Counted inside the IMMEDIATE transaction: parallel creates cannot both take the last place.
        if (repo.countInEnvironment(projectId, at.environment) >= MAX_SECRETS_PER_ENVIRONMENT) throw new HttpError(409, ENVIRONMENT_FULL);
        const created = createOne(caller, projectId, at.environment, input.key, input.value, clock.now().toISOString());
        audit.record(caller, {
          projectId,
          action: "secret.created",
          targetType: "secret",
          targetId: created.id,
          metadata: { key: created.key, environment: at.environment, version: 1 },
        });
        return created;
      });
      changed(projectId, row.environment);
      return toMeta(row);
    },

    /** The only single-secret read that returns a value; audited in the same transaction. */
    /** Answers only once the `secret.revealed` event is on disk (reads share its commit). */
    async reveal(caller: Principal, projectId: string, environment: string, secretId: string): Promise<SecretWithValue> {
      const { at, row, value } = readTransaction(db, () => {
        const at = requireAccess(caller, projectId, "secrets:read", environment);
        const row = findOrFail(projectId, at.environment, secretId);
        return { at, row, value: openOrFail(row, row.version) };
      });
      await audit.recordRead(caller, {
        projectId,
        action: "secret.revealed",
        targetType: "secret",
        targetId: row.id,
        metadata: { key: row.key, environment: at.environment, version: row.version },
      });
      return { id: row.id, key: row.key, value, version: row.version, updatedAt: row.updatedAt };
    },

    update(
      caller: Principal,
      projectId: string,
      environment: string,
      secretId: string,
      input: { key?: string; value?: string; expectedVersion?: number },
    ): SecretMeta {
      // One IMMEDIATE transaction: the check of expectedVersion and the write cannot be
      // separated by another writer, so parallel PATCHes get one winner and 409s.
      const result = writeTransaction(db, () => {
        const at = requireAccess(caller, projectId, "secrets:update", environment);
        const row = findOrFail(projectId, at.environment, secretId);
        if (input.expectedVersion !== undefined && input.expectedVersion !== row.version) {
          throw new HttpError(409, CHANGED_BY_SOMEONE_ELSE);
        }
        const key = input.key ?? row.key;
        const keyChanged = key !== row.key;
        const valueChanged = input.value !== undefined && input.value !== currentValueOrUndefined(row);
        if (!keyChanged && !valueChanged) return { row, isChanged: false };
        if (keyChanged && repo.findByKey(projectId, at.environment, key)) throw new HttpError(409, KEY_TAKEN);

        const now = clock.now().toISOString();
        // A rename alone keeps the version: only a new value makes one.
        const version = valueChanged ? row.version + 1 : row.version;
        if (valueChanged) writeVersion(caller, { ...row, key }, version, input.value!, "UPDATED", now);
        advance(row, { key, version, updatedAt: now });
        audit.record(caller, {
          projectId,
          action: "secret.updated",
          targetType: "secret",
          targetId: row.id,
          metadata: {
            key,
            environment: at.environment,
            previousKey: keyChanged ? row.key : undefined,
            keyChanged,
            valueChanged,
            version,
          },
        });
        return { row: { ...row, key, version, updatedAt: now }, isChanged: true };
      });
      if (result.isChanged) changed(projectId, result.row.environment);
      return toMeta(result.row);
    },

    delete(caller: Principal, projectId: string, environment: string, secretId: string): void {
      const env = writeTransaction(db, () => {
        const at = requireAccess(caller, projectId, "secrets:delete", environment);
        const row = findOrFail(projectId, at.environment, secretId);
        repo.delete(row.id);
        audit.record(caller, {
          projectId,
          action: "secret.deleted",
          targetType: "secret",
          targetId: row.id,
          metadata: { key: row.key, environment: at.environment, version: row.version },
        });
        return at.environment;
      });
      changed(projectId, env);
    },

    versions(caller: Principal, projectId: string, environment: string, secretId: string): { currentVersion: number; versions: VersionEntry[] } {
      const at = requireAccess(caller, projectId, "secrets:read", environment);
      const secret = repo.findById(projectId, at.environment, secretId);
      if (!secret) throw new HttpError(404, SECRET_NOT_FOUND);
      // Limited as well as pruned: a secret written before the limit existed keeps its older
      // versions until its next new value, and the list stays bounded meanwhile.
      const versions = repo.listVersions(projectId, secret.id, MAX_VERSIONS_PER_SECRET).map(
        (v): VersionEntry => ({
          versionNumber: v.versionNumber,
          changeType: v.changeType,
          key: v.key,
          isCurrent: v.versionNumber === secret.version,
          ...(v.restoredFromVersion !== null ? { restoredFromVersion: v.restoredFromVersion } : {}),
          createdAt: v.createdAt,
          changedBy:
            v.changeType === "BASELINE" || v.changedBy === null
              ? null
              : {
                  userId: v.changedBy,
                  email: v.changedByEmail,
                  isYou: !isServiceAccount(caller) && v.changedBy === caller.userId,
                  isMember: v.changedByIsMember,
                },
          ...(v.changedByServiceAccountId !== null
            ? { changedByServiceAccount: { id: v.changedByServiceAccountId, name: v.changedByServiceAccountName ?? "" } }
            : {}),
        }),
      );
      return { currentVersion: secret.version, versions };
    },

    async revealVersion(caller: Principal, projectId: string, environment: string, secretId: string, versionNumber: number): Promise<{ versionNumber: number; value: string }> {
      const { at, row, value } = readTransaction(db, () => {
        const at = requireAccess(caller, projectId, "secrets:read", environment);
        const row = findOrFail(projectId, at.environment, secretId);
        const version = repo.findVersion(row.id, versionNumber);
        if (!version) throw new HttpError(404, VERSION_NOT_FOUND);
        return { at, row, value: openOrFail(row, versionNumber, version.ciphertext, version.keyVersion) };
      });
      await audit.recordRead(caller, {
        projectId,
        action: "secret.version_revealed",
        targetType: "secret",
        targetId: row.id,
        metadata: { key: row.key, environment: at.environment, versionNumber },
      });
      return { versionNumber, value };
    },

    /** Writes version N's value as a new version rather than rewinding. */
    restore(caller: Principal, projectId: string, environment: string, secretId: string, versionNumber: number, expectedVersion?: number): SecretMeta {
      const row = writeTransaction(db, () => {
        const at = requireAccess(caller, projectId, "secrets:update", environment);
        const current = findOrFail(projectId, at.environment, secretId);
        const version = repo.findVersion(current.id, versionNumber);
        if (!version) throw new HttpError(404, VERSION_NOT_FOUND);
        if (expectedVersion !== undefined && expectedVersion !== current.version) throw new HttpError(409, CHANGED_BY_SOMEONE_ELSE);
        const value = openOrFail(current, versionNumber, version.ciphertext, version.keyVersion);
        if (versionNumber === current.version || value === currentValueOrUndefined(current)) {
          throw new HttpError(400, ALREADY_CURRENT);
        }
        const now = clock.now().toISOString();
        const next = current.version + 1;
        writeVersion(caller, current, next, value, "ROLLED_BACK", now, versionNumber);
        advance(current, { key: current.key, version: next, updatedAt: now });
        audit.record(caller, {
          projectId,
          action: "secret.rolled_back",
          targetType: "secret",
          targetId: current.id,
          metadata: { key: current.key, environment: at.environment, restoredFromVersion: versionNumber, version: next },
        });
        return { ...current, version: next, updatedAt: now };
      });
      changed(projectId, row.environment);
      return toMeta(row);
    },

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
    ): Promise<{ values: { key: string; value: string }[]; etag: string } | { notModified: true; etag: string }> {
      const read = readTransaction(db, () => {
        const at = requireAccess(caller, projectId, "secrets:read", environment);
        const rows = repo.listWithCiphertext(projectId, at.environment);
        const etag = exportTag(rows, format);
        if (isUnchanged?.(etag)) return { notModified: true as const, etag };
        try {
          return { at, values: rows.map((row) => ({ key: row.key, value: open(row, row.version) })), etag };
        } catch (error) {
          if (!(error instanceof DecryptError)) throw error;
          log?.error({ projectId, environment: at.environment }, "an exported secret value did not decrypt");
          throw new HttpError(500, NOT_DECRYPTED_SOME);
        }
      });
      if ("notModified" in read) return read;
      const { at, values, etag } = read;
      await audit.recordRead(caller, {
        projectId,
        action: "secrets.exported",
        targetType: "environment",
        targetId: `${projectId}/${at.environment}`,
        metadata: { environment: at.environment, count: values.length, format },
      });
      return { values, etag };
    },

    /** All or nothing: the request was validated whole; this is one transaction. */
    import(caller: Principal, projectId: string, environment: string, entries: ImportEntry[]): ImportSummary {
      const result = writeTransaction(db, () => {
        const at = requireAccess(caller, projectId, "secrets:create", environment);
        const existing = new Map(repo.listWithCiphertext(projectId, at.environment).map((row) => [row.key, row]));
        // Before anything is written: an overwrite needs secrets:update as well.
        if (!at.permissions.includes("secrets:update") && entries.some((e) => e.overwrite && existing.has(e.key))) {
          throw new HttpError(403, NO_OVERWRITE_PERMISSION);
        }
        const added = entries.filter((e) => !existing.has(e.key)).length;
        if (existing.size + added > MAX_SECRETS_PER_ENVIRONMENT) throw new HttpError(409, importOverLimit(existing.size, added));
        const now = clock.now().toISOString();
        const results = entries.map(({ key, value, overwrite }): { key: string; status: ImportStatus } => {
          const row = existing.get(key);
          if (!row) {
            createOne(caller, projectId, at.environment, key, value, now);
            return { key, status: "created" };
          }
          if (!overwrite) return { key, status: "skipped" };
          if (currentValueOrUndefined(row) === value) return { key, status: "unchanged" };
          writeVersion(caller, row, row.version + 1, value, "UPDATED", now);
          advance(row, { key, version: row.version + 1, updatedAt: now });
          return { key, status: "updated" };
        });
        const summary: Record<ImportStatus, number> = { created: 0, updated: 0, unchanged: 0, skipped: 0, failed: 0 };
        for (const r of results) summary[r.status]++;
        audit.record(caller, {
          projectId,
          action: "secrets.imported",
          targetType: "environment",
          targetId: `${projectId}/${at.environment}`,
          metadata: { environment: at.environment, ...summary },
        });
        return { environment: at.environment, summary, results };
      });
      const written = result.summary.created + result.summary.updated;
      if (written > 0) changed(projectId, result.environment);
      if (written >= LARGE_IMPORT_ENTRIES) afterLargeWrite?.();
      return { summary: result.summary, results: result.results };
    },

    /**
     * For the sync engine: every value of an environment sorted by key, with no caller and
     * no checks. Throws DecryptError when any value does not open, never a partial list.
     */
    readAllValues(projectId: string, environment: Environment): { key: string; value: string }[] {
      return repo.listWithCiphertext(projectId, environment).map((row) => ({ key: row.key, value: open(row, row.version) }));
    },
  };
}

export type SecretsService = ReturnType<typeof createSecretsService>;
