import crypto from "node:crypto";
import { and, eq } from "drizzle-orm";
import { type Clock, systemClock } from "./clock.ts";
import { type Keyring, open, seal } from "./crypto.ts";
import { type Db, inTransaction, onRollback } from "./db.ts";
import { projectKeys } from "./schema.ts";

/** Raised when a stored ciphertext does not open: wrong row, wrong key, or tampered bytes. */
export class DecryptError extends Error {}

export interface Sealed {
  ciphertext: Buffer;
  keyVersion: number;
}

/** HKDF info of value digests; a new purpose gets a new label, never this one. */
const VALUE_DIGEST_INFO = "secrets-server value digest v1";

export type Vault = ReturnType<typeof createVault>;

/** AAD of a secret value: a ciphertext copied into any other row fails to open. */
export function secretValueAad(projectId: string, environment: string, secretId: string, versionNumber: number): string {
  return `secret-value|${projectId}|${environment}|${secretId}|${versionNumber}`;
}

/** AAD of an integration credential (`token` or `deploy-hook`). */
export function integrationAad(projectId: string, field: "token" | "deploy-hook"): string {
  return `integration|${projectId}|${field}`;
}

/**
 * Envelope encryption. Each project has a random 256-bit data key per master key version,
 * wrapped by that master key; values are sealed with the project's data key of the
 * current version and carry that version, so rotation can move them one by one.
 */
export function createVault(db: Db, keyring: Keyring, clock: Clock = systemClock) {
  // Unwrapped data keys, so a read costs one AES-GCM open and not two; held as KeyObjects,
  // which Node does not have to import again for every cipher.
  const dataKeys = new Map<string, crypto.KeyObject>();
  const digestKeys = new Map<string, crypto.KeyObject>();
  // Keys this process created inside a transaction: if that transaction rolls back, the
  // wrapped row is gone, and a cached key would go on sealing values no restart can open.
  // Forgetting them on any rollback is always safe: a committed key is simply read again.
  const createdInTransaction = new Set<string>();
  onRollback(db, () => {
    for (const cacheKey of createdInTransaction) {
      dataKeys.delete(cacheKey);
      digestKeys.delete(cacheKey);
    }
    createdInTransaction.clear();
  });

  function wrapAad(projectId: string, keyVersion: number): string {
    return `project-data-key|${projectId}|${keyVersion}`;
  }

  function dataKey(projectId: string, keyVersion: number, createIfMissing: boolean): crypto.KeyObject {
    const cacheKey = `${projectId}:${keyVersion}`;
    const cached = dataKeys.get(cacheKey);
    if (cached) return cached;
    const row = db
      .select({ wrappedKey: projectKeys.wrappedKey })
      .from(projectKeys)
      .where(and(eq(projectKeys.projectId, projectId), eq(projectKeys.keyVersion, keyVersion)))
      .get();
    let key: Buffer;
    if (row) {
      try {
        key = open(keyring.key(keyVersion), row.wrappedKey, wrapAad(projectId, keyVersion));
      } catch {
        throw new DecryptError("project data key does not open");
      }
    } else if (createIfMissing) {
      // Only inside a write transaction: the gate then keeps other requests out of it, and a
      // rollback tells this cache to forget the key (the listener above).
      if (!inTransaction(db)) throw new Error("a project data key is created only inside a write transaction");
      key = crypto.randomBytes(32);
      db.insert(projectKeys)
        .values({
          projectId,
          keyVersion,
          wrappedKey: seal(keyring.key(keyVersion), key, wrapAad(projectId, keyVersion)),
          createdAt: clock.now().toISOString(),
        })
        .run();
      createdInTransaction.add(cacheKey);
    } else {
      throw new DecryptError("project data key missing");
    }
    const keyObject = crypto.createSecretKey(key);
    key.fill(0);
    dataKeys.set(cacheKey, keyObject);
    return keyObject;
  }

  return {
    currentKeyVersion: keyring.currentVersion,

    /** Call inside the caller's transaction when a project is created. */
    createProjectKey(projectId: string): void {
      dataKey(projectId, keyring.currentVersion, true);
    },

    seal(projectId: string, aad: string, plaintext: string): Sealed {
      const key = dataKey(projectId, keyring.currentVersion, true);
      return { ciphertext: seal(key, Buffer.from(plaintext, "utf8"), aad), keyVersion: keyring.currentVersion };
    },

    /** Throws DecryptError, never a partial or wrong value. */
    open(projectId: string, aad: string, sealed: Sealed): string {
      if (!keyring.has(sealed.keyVersion)) throw new DecryptError("master key version not configured");
      const key = dataKey(projectId, sealed.keyVersion, false);
      try {
        return open(key, sealed.ciphertext, aad).toString("utf8");
      } catch {
        throw new DecryptError("value does not open");
      }
    },

    /**
     * A keyed hash of a value, to tell equal values apart from different ones without
     * decrypting either (import's "unchanged", the UI's environment comparison). The key is
     * derived from the project's data key of that version under its own HKDF label, so a
     * digest is comparable only within one project and one key version, opens nothing and
     * says nothing to anyone without the master key.
     */
    digest(projectId: string, keyVersion: number, plaintext: string): string {
      const cacheKey = `${projectId}:${keyVersion}`;
      let key = digestKeys.get(cacheKey);
      if (!key) {
        const dataKeyObject = dataKey(projectId, keyVersion, keyVersion === keyring.currentVersion);
        key = crypto.createSecretKey(Buffer.from(crypto.hkdfSync("sha256", dataKeyObject, Buffer.alloc(0), VALUE_DIGEST_INFO, 32)));
        digestKeys.set(cacheKey, key);
      }
      return crypto.createHmac("sha256", key).update(plaintext, "utf8").digest("base64url");
    },

    /** Drops cached data keys of a project (after deletion or rotation). */
    forget(projectId: string): void {
      for (const cacheKey of dataKeys.keys()) if (cacheKey.startsWith(`${projectId}:`)) dataKeys.delete(cacheKey);
      for (const cacheKey of digestKeys.keys()) if (cacheKey.startsWith(`${projectId}:`)) digestKeys.delete(cacheKey);
    },
  };
}
