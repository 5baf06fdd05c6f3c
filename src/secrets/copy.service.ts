import type { AuditWriter } from "../audit/audit.writer.ts";
import type { AccessGuard, Environment } from "../core/access.ts";
import type { Principal } from "../core/caller.ts";
import { HttpError } from "../core/errors.ts";
import { SECRET_NOT_FOUND } from "../core/secret-rules.ts";
import { type Store, writeTransaction } from "../core/store.ts";
import { DecryptError, secretValueAad, type Vault } from "../core/vault.ts";
import type { SecretsRepo } from "./secrets.repo.ts";
import { KEY_TAKEN, NOT_DECRYPTED_ONE, type SecretMeta, type SecretsService } from "./secrets.service.ts";

const SAME_ENVIRONMENT = "Choose another environment to copy to: the secret is already in this one.";

type CopyResult = "created" | "updated" | "unchanged";

interface Deps {
  db: Store;
  repo: Pick<SecretsRepo, "findWithCiphertext" | "findByKey">;
  access: AccessGuard;
  audit: AuditWriter;
  vault: Vault;
  secrets: Pick<SecretsService, "createInTransaction" | "updateInTransaction" | "notifyChanged">;
}

/**
 * Copies (or promotes) one secret's current value to the same key in another environment.
 * The write goes through the secrets service, so the target's rules hold as for any create
 * or update (its permission and grant, the environment's cap, key rules, the version
 * compare-and-set, its own audit event and the Vercel sync); the source side is audited as
 * `secret.copied`. One transaction: the copy happens whole or not at all.
 */
export function createCopyService({ db, repo, access, audit, vault, secrets }: Deps) {
  return {
    async copy(
      caller: Principal,
      projectId: string,
      from: string,
      secretId: string,
      input: { to: Environment; overwrite: boolean },
    ): Promise<{ secret: SecretMeta; result: CopyResult }> {
      const copied = await writeTransaction(db, async () => {
        // Both environments are checked before the source value is read: read on the source,
        // create on the target (and update when an existing key is overwritten, below).
        // require() with an environment sets it (or throws).
        const source = (await access.require(caller, projectId, "secrets:read", from)).environment as Environment;
        await access.require(caller, projectId, "secrets:create", input.to);
        if (input.to === source) throw new HttpError(400, SAME_ENVIRONMENT);
        const row = await repo.findWithCiphertext(projectId, source, secretId);
        if (!row) throw new HttpError(404, SECRET_NOT_FOUND);
        const existing = await repo.findByKey(projectId, input.to, row.key);
        if (existing && !input.overwrite) throw new HttpError(409, KEY_TAKEN);
        // Overwriting is an update of the target: its right too, before the value is opened.
        if (existing) await access.require(caller, projectId, "secrets:update", input.to);
        let value: string;
        try {
          value = await vault.open(projectId, secretValueAad(projectId, source, row.id, row.version), row);
        } catch (error) {
          if (error instanceof DecryptError) throw new HttpError(500, NOT_DECRYPTED_ONE);
          throw error;
        }
        let secret: SecretMeta;
        let result: CopyResult;
        if (existing) {
          const updated = await secrets.updateInTransaction(caller, projectId, input.to, existing.id, {
            value,
            expectedVersion: existing.version,
          });
          secret = updated.secret;
          result = updated.isChanged ? "updated" : "unchanged";
        } else {
          secret = await secrets.createInTransaction(caller, projectId, input.to, { key: row.key, value });
          result = "created";
        }
        await audit.record(caller, {
          projectId,
          action: "secret.copied",
          targetType: "secret",
          targetId: row.id,
          metadata: { key: row.key, environment: source, version: row.version, toEnvironment: input.to, toVersion: secret.version, result },
        });
        return { secret, result };
      });
      // The target changed in the copy's transaction: its listeners (the Vercel sync) hear of it now it has committed.
      if (copied.result !== "unchanged") await secrets.notifyChanged(projectId, input.to);
      return copied;
    },
  };
}

export type CopyService = ReturnType<typeof createCopyService>;
