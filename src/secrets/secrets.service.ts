import type { Logger } from "pino";
import type { AuditWriter } from "../audit/audit.writer.ts";
import type { AccessGuard, Environment } from "../core/access.ts";
import { isServiceAccount, type Principal } from "../core/caller.ts";
import type { Clock } from "../core/clock.ts";
import { HttpError } from "../core/errors.ts";
import { SECRET_NOT_FOUND } from "../core/secret-rules.ts";
import { inTransaction, inWriteTransaction, readTransaction, type Store, writeTransaction } from "../core/store.ts";
import type { Vault } from "../core/vault.ts";
import type { ExportMemo } from "./export-memo.ts";
import {
  CHANGED_BY_SOMEONE_ELSE,
  createSecretValues,
  formatCount,
  MAX_SECRETS_PER_ENVIRONMENT,
  MAX_VERSIONS_PER_SECRET,
} from "./secret-values.ts";
import { createSecretsExport } from "./secrets.export.ts";
import { createSecretsImport, type ImportEntry, type ImportSummary } from "./secrets.import.ts";
import type { SecretRow, SecretsRepo, SecretWithCiphertext } from "./secrets.repo.ts";

export { NOT_DECRYPTED_ONE } from "./secret-values.ts";
export type { ImportSummary } from "./secrets.import.ts";

export const VERSION_NOT_FOUND = "Version not found.";
export const KEY_TAKEN = "A secret with this key already exists in this environment.";
const ALREADY_CURRENT = "This version is already the current value.";

const ENVIRONMENT_FULL = `This environment already holds ${formatCount(MAX_SECRETS_PER_ENVIRONMENT)} secrets, the most it can hold. Delete secrets it no longer needs, or keep new ones in another environment or project.`;

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

export type ChangeListener = (projectId: string, environment: Environment) => void | Promise<void>;

/**
 * Which of these users are members of the project now (a version's author who left is
 * shown as such). The members repo, passed in by app.ts: members write audit events and
 * need no secrets, so this is declared here rather than imported.
 */
export interface SecretsMemberships {
  membersAmong(projectId: string, userIds: string[]): Promise<Set<string>>;
}

interface Deps {
  db: Store;
  repo: SecretsRepo;
  memberships: SecretsMemberships;
  access: AccessGuard;
  audit: AuditWriter;
  vault: Vault;
  /** Remembers exported values sealed, for the next export of the same rows (app.ts makes one per server). */
  exportMemo: ExportMemo;
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

export function createSecretsService({ db, repo, memberships, access, audit, vault, exportMemo, clock, log, afterLargeWrite }: Deps) {
  const listeners: ChangeListener[] = [];

  /**
   * After the commit, never inside it: a listener may read, and its failure is its own. Awaited
   * before the answer, so what a listener records (a pending sync) is there once the client
   * has its response.
   */
  async function changed(projectId: string, environment: Environment): Promise<void> {
    // A listener told inside a transaction would act on rows that may still roll back: a
    // caller writing in its own transaction uses the `…InTransaction` functions and calls
    // notifyChanged after its commit.
    if (inTransaction(db)) throw new Error("secret changes are announced after the commit, not inside a transaction");
    exportMemo.forget(projectId, environment);
    for (const listener of listeners) {
      try {
        await listener(projectId, environment);
      } catch (error) {
        log?.error({ err: error }, "secret change listener failed");
      }
    }
  }

  const values = createSecretValues({ repo, access, vault, log });
  const { openOrFail, writeVersion, advance, requireAccess } = values;
  const importEntries = createSecretsImport({ db, repo, audit, clock, values });
  const exporter = createSecretsExport({ db, repo, audit, values, memo: exportMemo, log });

  async function findOrFail(projectId: string, environment: Environment, secretId: string): Promise<SecretWithCiphertext> {
    const row = await repo.findWithCiphertext(projectId, environment, secretId);
    if (!row) throw new HttpError(404, SECRET_NOT_FOUND);
    return row;
  }

  async function createOne(
    caller: Principal,
    projectId: string,
    environment: Environment,
    key: string,
    value: string,
    now: string,
  ): Promise<SecretRow> {
    const row = await values.newRow(projectId, environment, key, now);
    await writeVersion(caller, row, 1, value, "CREATED", now);
    return row;
  }

  async function updateInTransaction(
    caller: Principal,
    projectId: string,
    environment: string,
    secretId: string,
    input: { key?: string; value?: string; expectedVersion?: number },
  ): Promise<{ row: SecretRow; isChanged: boolean }> {
    requireWriteTransaction();
    const at = await requireAccess(caller, projectId, "secrets:update", environment);
    const row = await findOrFail(projectId, at.environment, secretId);
    if (input.expectedVersion !== undefined && input.expectedVersion !== row.version) {
      throw new HttpError(409, CHANGED_BY_SOMEONE_ELSE);
    }
    const key = input.key ?? row.key;
    const keyChanged = key !== row.key;
    const compared = input.value === undefined ? undefined : await values.sameValue(row, input.value);
    const valueChanged = compared !== undefined && !compared.same;
    if (!keyChanged && !valueChanged) return { row, isChanged: false };
    if (keyChanged && (await repo.findByKey(projectId, at.environment, key))) throw new HttpError(409, KEY_TAKEN);

    const now = clock.now().toISOString();
    // A rename alone keeps the version: only a new value makes one.
    const version = valueChanged ? row.version + 1 : row.version;
    if (valueChanged) await writeVersion(caller, { ...row, key }, version, input.value!, "UPDATED", now, { digest: compared.digest });
    await advance(row, { key, version, updatedAt: now });
    await audit.record(caller, {
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
  }

  async function createInTransaction(
    caller: Principal,
    projectId: string,
    environment: string,
    input: { key: string; value: string },
  ): Promise<SecretRow> {
    requireWriteTransaction();
    const at = await requireAccess(caller, projectId, "secrets:create", environment);
    if (await repo.findByKey(projectId, at.environment, input.key)) throw new HttpError(409, KEY_TAKEN);
    // Counted inside the IMMEDIATE transaction: parallel creates cannot both take the last place.
    if ((await repo.countInEnvironment(projectId, at.environment)) >= MAX_SECRETS_PER_ENVIRONMENT)
      throw new HttpError(409, ENVIRONMENT_FULL);
    const created = await createOne(caller, projectId, at.environment, input.key, input.value, clock.now().toISOString());
    await audit.record(caller, {
      projectId,
      action: "secret.created",
      targetType: "secret",
      targetId: created.id,
      metadata: { key: created.key, environment: at.environment, version: 1 },
    });
    return created;
  }

  function requireWriteTransaction(): void {
    // The checks and the write must not be split by another writer (the environment's cap, expectedVersion).
    if (!inWriteTransaction(db)) throw new Error("a secret write must run inside a write transaction");
  }

  return {
    /** Subscribes to committed changes of an environment's secrets (the Vercel sync). */
    onChange(listener: ChangeListener): void {
      listeners.push(listener);
    },

    /** For a caller that wrote through this service inside its own transaction, once that committed. */
    notifyChanged: changed,

    async list(caller: Principal, projectId: string, environment: string): Promise<SecretMeta[]> {
      const at = await requireAccess(caller, projectId, "secrets:read", environment);
      return await repo.listMeta(projectId, at.environment);
    },

    async create(caller: Principal, projectId: string, environment: string, input: { key: string; value: string }): Promise<SecretMeta> {
      const row = await writeTransaction(db, () => createInTransaction(caller, projectId, environment, input));
      await changed(projectId, row.environment);
      return toMeta(row);
    },

    /** create's write, for a caller inside its own write transaction; it calls notifyChanged after its commit. */
    createInTransaction: async (...args: Parameters<typeof createInTransaction>) => toMeta(await createInTransaction(...args)),

    /** The only single-secret read that returns a value; audited in the same transaction. */
    /** Answers only once the `secret.revealed` event is on disk (reads share its commit). */
    async reveal(caller: Principal, projectId: string, environment: string, secretId: string): Promise<SecretWithValue> {
      const { at, row, value } = await readTransaction(db, async () => {
        const at = await requireAccess(caller, projectId, "secrets:read", environment);
        const row = await findOrFail(projectId, at.environment, secretId);
        return { at, row, value: await openOrFail(row, row.version) };
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

    async update(
      caller: Principal,
      projectId: string,
      environment: string,
      secretId: string,
      input: { key?: string; value?: string; expectedVersion?: number },
    ): Promise<SecretMeta> {
      // One IMMEDIATE transaction: the check of expectedVersion and the write cannot be
      // separated by another writer, so parallel PATCHes get one winner and 409s.
      const result = await writeTransaction(db, () => updateInTransaction(caller, projectId, environment, secretId, input));
      if (result.isChanged) await changed(projectId, result.row.environment);
      return toMeta(result.row);
    },

    /** update's write, for a caller inside its own write transaction; it calls notifyChanged after its commit when `isChanged`. */
    updateInTransaction: async (...args: Parameters<typeof updateInTransaction>) => {
      const result = await updateInTransaction(...args);
      return { secret: toMeta(result.row), isChanged: result.isChanged };
    },

    async delete(caller: Principal, projectId: string, environment: string, secretId: string): Promise<void> {
      const env = await writeTransaction(db, async () => {
        const at = await requireAccess(caller, projectId, "secrets:delete", environment);
        const row = await findOrFail(projectId, at.environment, secretId);
        await repo.delete(row.id);
        await audit.record(caller, {
          projectId,
          action: "secret.deleted",
          targetType: "secret",
          targetId: row.id,
          metadata: { key: row.key, environment: at.environment, version: row.version },
        });
        return at.environment;
      });
      await changed(projectId, env);
    },

    async versions(
      caller: Principal,
      projectId: string,
      environment: string,
      secretId: string,
    ): Promise<{ currentVersion: number; versions: VersionEntry[] }> {
      // One snapshot: a PATCH or a DELETE between the reads would list a current version
      // that is not the newest entry, or a deleted secret's empty history.
      const { secret, rows, members } = await readTransaction(db, async () => {
        const at = await requireAccess(caller, projectId, "secrets:read", environment);
        const secret = await repo.findById(projectId, at.environment, secretId);
        if (!secret) throw new HttpError(404, SECRET_NOT_FOUND);
        // Limited as well as pruned: a secret written before the limit existed keeps its older
        // versions until its next new value, and the list stays bounded meanwhile.
        const rows = await repo.listVersions(secret.id, MAX_VERSIONS_PER_SECRET);
        // One query for all the authors, not one per version.
        const authorIds = [...new Set(rows.flatMap((v) => (v.changedBy === null ? [] : [v.changedBy])))];
        return { secret, rows, members: await memberships.membersAmong(projectId, authorIds) };
      });
      const versions = rows.map(
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
                  isMember: members.has(v.changedBy),
                },
          ...(v.changedByServiceAccountId !== null
            ? { changedByServiceAccount: { id: v.changedByServiceAccountId, name: v.changedByServiceAccountName ?? "" } }
            : {}),
        }),
      );
      return { currentVersion: secret.version, versions };
    },

    async revealVersion(
      caller: Principal,
      projectId: string,
      environment: string,
      secretId: string,
      versionNumber: number,
    ): Promise<{ versionNumber: number; value: string }> {
      const { at, row, value } = await readTransaction(db, async () => {
        const at = await requireAccess(caller, projectId, "secrets:read", environment);
        const row = await findOrFail(projectId, at.environment, secretId);
        const version = await repo.findVersion(row.id, versionNumber);
        if (!version) throw new HttpError(404, VERSION_NOT_FOUND);
        return { at, row, value: await openOrFail(row, versionNumber, version.ciphertext, version.keyVersion) };
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
    async restore(
      caller: Principal,
      projectId: string,
      environment: string,
      secretId: string,
      versionNumber: number,
      expectedVersion?: number,
    ): Promise<SecretMeta> {
      const row = await writeTransaction(db, async () => {
        const at = await requireAccess(caller, projectId, "secrets:update", environment);
        const current = await findOrFail(projectId, at.environment, secretId);
        const version = await repo.findVersion(current.id, versionNumber);
        if (!version) throw new HttpError(404, VERSION_NOT_FOUND);
        if (expectedVersion !== undefined && expectedVersion !== current.version) throw new HttpError(409, CHANGED_BY_SOMEONE_ELSE);
        // Asked for the current version itself: nothing to decrypt (a damaged value answers this 400 too).
        if (versionNumber === current.version) throw new HttpError(400, ALREADY_CURRENT);
        const value = await openOrFail(current, versionNumber, version.ciphertext, version.keyVersion);
        if ((await values.sameValue(current, value)).same) throw new HttpError(400, ALREADY_CURRENT);
        const now = clock.now().toISOString();
        const next = current.version + 1;
        await writeVersion(caller, current, next, value, "ROLLED_BACK", now, { restoredFromVersion: versionNumber });
        await advance(current, { key: current.key, version: next, updatedAt: now });
        await audit.record(caller, {
          projectId,
          action: "secret.rolled_back",
          targetType: "secret",
          targetId: current.id,
          metadata: { key: current.key, environment: at.environment, restoredFromVersion: versionNumber, version: next },
        });
        return { ...current, version: next, updatedAt: now };
      });
      await changed(projectId, row.environment);
      return toMeta(row);
    },

    export: exporter.export,

    /** All or nothing: the request was validated whole; this is one transaction (secrets.import.ts). */
    async import(caller: Principal, projectId: string, environment: string, entries: ImportEntry[]): Promise<ImportSummary> {
      const result = await importEntries(caller, projectId, environment, entries);
      const written = result.summary.created + result.summary.updated;
      if (written > 0) await changed(projectId, result.environment);
      if (written >= LARGE_IMPORT_ENTRIES) afterLargeWrite?.();
      return { summary: result.summary, results: result.results };
    },

    readAllValues: exporter.readAllValues,
  };
}

export type SecretsService = ReturnType<typeof createSecretsService>;
