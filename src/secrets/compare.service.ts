import type { AuditWriter } from "../audit/audit.writer.ts";
import { type AccessGuard, ENVIRONMENTS, type Environment } from "../core/access.ts";
import type { Principal } from "../core/caller.ts";
import { HttpError } from "../core/errors.ts";
import { readTransaction, type Store, writeTransaction } from "../core/store.ts";
import { DecryptError, secretValueAad, type Vault } from "../core/vault.ts";
import type { SecretsRepo, SecretWithCiphertext } from "./secrets.repo.ts";

/** One key in one environment: enough to tell same from different, never the value. */
export interface ComparedEntry {
  secretId: string;
  version: number;
  updatedAt: string;
  /** Keyed digest of the value (vault.digest); null when the stored value does not open. */
  digest: string | null;
}

interface ComparedKey {
  key: string;
  /** Every compared environment: its entry, or null where the key is missing. */
  environments: Partial<Record<Environment, ComparedEntry | null>>;
}

export interface Comparison {
  environments: Environment[];
  keys: ComparedKey[];
}

interface Deps {
  db: Store;
  repo: Pick<SecretsRepo, "listWithCiphertext">;
  access: AccessGuard;
  audit: AuditWriter;
  vault: Vault;
}

const NO_ENVIRONMENT_TO_COMPARE = "Name at least one environment to compare, separated by commas.";

/**
 * Keys × environments with keyed digests of the values, so the UI can show present,
 * missing, same and different without a value leaving the server. A digest stored beside
 * the value is used as it is; a value without one of the right key version is decrypted
 * here to be digested, which is a comparison (`secrets.compared`), not a reveal.
 */
export function createCompareService({ db, repo, access, audit, vault }: Deps) {
  /** The environments asked for (all the caller may read when none are named), in canonical order. */
  async function chosenEnvironments(caller: Principal, projectId: string, asked: string | undefined): Promise<Environment[]> {
    // Membership and permission first, with no environment: a non-member gets 404 whatever the query says.
    const project = await access.require(caller, projectId, "secrets:read");
    if (asked === undefined) return project.environments;
    const names = [
      ...new Set(
        asked
          .split(",")
          .map((name) => name.trim())
          .filter(Boolean),
      ),
    ];
    if (names.length === 0) throw new HttpError(400, NO_ENVIRONMENT_TO_COMPARE);
    // Each one checked as a path's environment would be: unknown 404, not granted 403.
    for (const name of names) await access.require(caller, projectId, "secrets:read", name);
    return ENVIRONMENTS.filter((env) => names.includes(env));
  }

  async function plaintextOf(row: SecretWithCiphertext): Promise<string | undefined> {
    try {
      return await vault.open(row.projectId, secretValueAad(row.projectId, row.environment, row.id, row.version), row);
    } catch (error) {
      if (error instanceof DecryptError) return undefined;
      throw error;
    }
  }

  /** The digest stored beside the value when it is of that key version (nothing decrypted); else the value opened and digested. */
  async function digestOf(row: SecretWithCiphertext, keyVersion: number): Promise<string | null> {
    if (row.digest !== null && row.keyVersion === keyVersion) return row.digest;
    const plaintext = await plaintextOf(row);
    return plaintext === undefined ? null : vault.digest(row.projectId, keyVersion, plaintext);
  }

  /** Each key's row per environment, digested so that equal values compare equal (see digestOf). */
  async function digestAll(
    byKey: Map<string, Map<Environment, SecretWithCiphertext>>,
    environments: Environment[],
  ): Promise<ComparedKey[]> {
    const compared: ComparedKey[] = [];
    // One at a time: the first digest may create the project's data key, which the next reuses.
    for (const [key, present] of [...byKey.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
      const versions = new Set([...present.values()].map((row) => row.keyVersion));
      // Digests compare only within one key version: mixed versions are digested under the current one.
      const [only] = versions;
      const keyVersion = versions.size === 1 && only !== undefined ? only : vault.currentKeyVersion;
      const out: ComparedKey["environments"] = {};
      for (const env of environments) {
        const row = present.get(env);
        if (!row) {
          out[env] = null;
          continue;
        }
        out[env] = { secretId: row.id, version: row.version, updatedAt: row.updatedAt, digest: await digestOf(row, keyVersion) };
      }
      compared.push({ key, environments: out });
    }
    return compared;
  }

  return {
    async compare(caller: Principal, projectId: string, asked: string | undefined): Promise<Comparison> {
      const { environments, rows } = await readTransaction(db, async () => {
        const environments = await chosenEnvironments(caller, projectId, asked);
        const rows: { env: Environment; rows: SecretWithCiphertext[] }[] = [];
        for (const env of environments) rows.push({ env, rows: await repo.listWithCiphertext(projectId, env) });
        return { environments, rows };
      });
      const byKey = new Map<string, Map<Environment, SecretWithCiphertext>>();
      for (const { env, rows: inEnv } of rows) {
        for (const row of inEnv) {
          const entry = byKey.get(row.key) ?? new Map<Environment, SecretWithCiphertext>();
          entry.set(env, row);
          byKey.set(row.key, entry);
        }
      }
      // Digested in a write transaction of its own, after the read snapshot: a digest under the
      // current key version may have to create the project's data key for it. Usually nothing
      // is written, and a commit with no change writes nothing.
      const keys = await writeTransaction(db, () => digestAll(byKey, environments));
      await audit.recordRead(caller, {
        projectId,
        action: "secrets.compared",
        targetType: "project",
        targetId: projectId,
        metadata: { environments, count: keys.length },
      });
      return { environments, keys };
    },
  };
}

export type CompareService = ReturnType<typeof createCompareService>;
