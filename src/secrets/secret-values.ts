// Sealing, opening and comparing secret values, and writing their versions: what the
// secrets service, import and export share.
import crypto from "node:crypto";
import type { Logger } from "pino";
import type { AccessGuard, Environment, ProjectAccess } from "../core/access.ts";
import { isServiceAccount, type Principal } from "../core/caller.ts";
import { HttpError } from "../core/errors.ts";
import { DecryptError, type ProjectKeys, secretValueAad, type Vault } from "../core/vault.ts";
import type { NewVersion, SecretRow, SecretsRepo, SecretWithCiphertext } from "./secrets.repo.ts";

export const CHANGED_BY_SOMEONE_ELSE = "This secret was changed by someone else. Reload and try again.";
export const NOT_DECRYPTED_ONE = "This secret could not be decrypted. Nothing partial is returned.";

/**
 * The most secrets one environment holds. It bounds every read of a whole environment (the
 * list, export, the Vercel sync) to the size the README's benchmark measures, far above
 * what one application's configuration needs.
 */
export const MAX_SECRETS_PER_ENVIRONMENT = 1_000;

/**
 * A count with thousands separators, as toLocaleString("en-US") writes it, without ICU:
 * its first use loads ICU's number data, which cost 25 ms of every start when a message
 * was built at load time.
 */
export function formatCount(n: number): string {
  return String(n).replace(/\B(?=(\d{3})+(?!\d))/g, ",");
}
/** The versions kept per secret, the current one included; a new value drops the oldest (like Vault's max_versions). */
export const MAX_VERSIONS_PER_SECRET = 100;

export type SecretAccess = ProjectAccess & { environment: Environment };

export interface ValuesDeps {
  repo: SecretsRepo;
  access: AccessGuard;
  vault: Vault;
  log?: Pick<Logger, "error">;
}

export type SecretValues = ReturnType<typeof createSecretValues>;

export function createSecretValues({ repo, access, vault, log }: ValuesDeps) {
  function aadOf(row: { projectId: string; environment: string; id: string }, versionNumber: number): string {
    return secretValueAad(row.projectId, row.environment, row.id, versionNumber);
  }

  function open(
    row: { projectId: string; environment: string; id: string; ciphertext: Buffer; keyVersion: number },
    versionNumber: number,
  ): Promise<string> {
    return vault.open(row.projectId, aadOf(row, versionNumber), {
      ciphertext: row.ciphertext,
      keyVersion: row.keyVersion,
    });
  }

  /**
   * open() for many current values of one project (an export, the Vercel sync): the keys
   * are loaded once and each value opens without a turn of the event loop.
   */
  async function currentValueOpener(
    projectId: string,
    rows: readonly SecretWithCiphertext[],
  ): Promise<(row: SecretWithCiphertext) => string> {
    const opener = await vault.openerFor(
      projectId,
      rows.map((row) => row.keyVersion),
    );
    return (row) => opener(aadOf(row, row.version), row);
  }

  /** For comparisons only: a value that no longer opens counts as different, so it can be replaced. */
  async function currentValueOrUndefined(row: SecretWithCiphertext): Promise<string | undefined> {
    try {
      return await open(row, row.version);
    } catch (error) {
      if (error instanceof DecryptError) return undefined;
      throw error;
    }
  }

  /** sameValue's answer when the row has its digest (no database call), else undefined. */
  function byDigest(keys: ProjectKeys, row: SecretWithCiphertext, value: string): { same: boolean; digest?: string } | undefined {
    if (row.digest === null) return undefined;
    let digest: string;
    try {
      digest = keys.digest(row.keyVersion, value);
    } catch (error) {
      // As when the value itself no longer opens: different, so it can be replaced.
      if (error instanceof DecryptError) return { same: false };
      throw error;
    }
    return { same: digest === row.digest, digest: row.keyVersion === vault.currentKeyVersion ? digest : undefined };
  }

  /** Version `versionNumber` of a secret as it is stored: sealed for exactly that row, with its digest. */
  function versionRow(
    keys: ProjectKeys,
    caller: Principal,
    secret: { id: string; projectId: string; environment: Environment; key: string },
    versionNumber: number,
    value: string,
    changeType: "CREATED" | "UPDATED" | "ROLLED_BACK",
    now: string,
    options: { restoredFromVersion?: number; digest?: string } = {},
  ): NewVersion {
    const sealed = keys.seal(aadOf(secret, versionNumber), value);
    return {
      secretId: secret.id,
      versionNumber,
      projectId: secret.projectId,
      key: secret.key,
      changeType,
      restoredFromVersion: options.restoredFromVersion ?? null,
      ciphertext: sealed.ciphertext,
      keyVersion: sealed.keyVersion,
      digest: options.digest ?? keys.digest(sealed.keyVersion, value),
      // A service account is not a user: its versions name it in their own columns.
      changedBy: isServiceAccount(caller) ? null : caller.userId,
      changedByServiceAccountId: isServiceAccount(caller) ? caller.serviceAccountId : null,
      changedByServiceAccountName: isServiceAccount(caller) ? caller.serviceAccountName : null,
      createdAt: now,
    };
  }

  return {
    open,
    currentValueOpener,
    currentValueOrUndefined,
    byDigest,
    versionRow,

    /** The project's keys for versionRow and byDigest, for rows sealed under these rows' key versions. */
    keysFor(projectId: string, rows: Iterable<{ keyVersion: number }>): Promise<ProjectKeys> {
      return vault.keysFor(
        projectId,
        Array.from(rows, (row) => row.keyVersion),
      );
    },

    /** One value for a response: a failure is a 500 with the spec's sentence, never part of a value. */
    async openOrFail(
      row: SecretWithCiphertext,
      versionNumber: number,
      ciphertext = row.ciphertext,
      keyVersion = row.keyVersion,
    ): Promise<string> {
      try {
        return await open({ ...row, ciphertext, keyVersion }, versionNumber);
      } catch (error) {
        if (!(error instanceof DecryptError)) throw error;
        log?.error({ secretId: row.id, versionNumber }, "a secret value did not decrypt");
        throw new HttpError(500, NOT_DECRYPTED_ONE);
      }
    },

    /**
     * Whether `value` is the secret's current value, by the keyed digest stored beside the
     * ciphertext: nothing is decrypted. A version written before digests existed is opened
     * once and gets its digest (call inside a write transaction). Returns the new value's
     * digest too when it is computed under the current key version, for writeVersion.
     */
    async sameValue(row: SecretWithCiphertext, value: string): Promise<{ same: boolean; digest?: string }> {
      const compared = byDigest(await vault.keysFor(row.projectId, [row.keyVersion]), row, value);
      if (compared !== undefined) return compared;
      const current = await currentValueOrUndefined(row);
      if (current === undefined) return { same: false };
      await repo.setDigest(row.id, row.version, row.keyVersion, await vault.digest(row.projectId, row.keyVersion, current));
      return { same: current === value };
    },

    async requireAccess(
      caller: Principal,
      projectId: string,
      permission: Parameters<AccessGuard["require"]>[2],
      environment: string,
    ): Promise<SecretAccess> {
      return (await access.require(caller, projectId, permission, environment)) as SecretAccess;
    },

    /**
     * Writes version `versionNumber` of a secret, sealed for exactly that row, with its
     * digest, and drops the versions that fall out of the newest MAX_VERSIONS_PER_SECRET.
     * The current version is always the newest number (restore writes a new one), so it is
     * never dropped.
     */
    async writeVersion(
      caller: Principal,
      secret: { id: string; projectId: string; environment: Environment; key: string },
      versionNumber: number,
      value: string,
      changeType: "CREATED" | "UPDATED" | "ROLLED_BACK",
      now: string,
      options: { restoredFromVersion?: number; digest?: string } = {},
    ): Promise<void> {
      const keys = await vault.keysFor(secret.projectId, []);
      await repo.insertVersion(versionRow(keys, caller, secret, versionNumber, value, changeType, now, options));
      if (versionNumber > MAX_VERSIONS_PER_SECRET) await repo.deleteVersionsBefore(secret.id, versionNumber - MAX_VERSIONS_PER_SECRET + 1);
    },

    /** Moves the secret to a new version; the compare-and-set makes a lost update impossible. */
    async advance(row: SecretRow, fields: { key: string; version: number; updatedAt: string }): Promise<void> {
      if (!(await repo.update(row.id, row.version, fields))) throw new HttpError(409, CHANGED_BY_SOMEONE_ELSE);
    },

    /** A new secret row (version 1 is written by the caller with writeVersion). */
    async newRow(projectId: string, environment: Environment, key: string, now: string): Promise<SecretRow> {
      const row: SecretRow = { id: crypto.randomUUID(), projectId, environment, key, version: 1, createdAt: now, updatedAt: now };
      await repo.insertSecret(row);
      return row;
    },
  };
}
