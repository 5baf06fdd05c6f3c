import crypto from "node:crypto";
import { and, eq } from "drizzle-orm";
import { type Clock, systemClock } from "./clock.ts";
import { type Keyring, open, seal, subkey } from "./crypto.ts";
import type { Db } from "./db.ts";
import { type PgStore, pgRow, pgRun } from "./postgres.ts";
import { projectKeys } from "./schema.ts";
import { currentWriteTransaction, inTransaction, inWriteTransaction, isPostgres, onRollback, type Store } from "./store.ts";

/** Raised when a stored ciphertext does not open: wrong row, wrong key, or tampered bytes. */
export class DecryptError extends Error {}

export interface Sealed {
  ciphertext: Buffer;
  keyVersion: number;
}

/** HKDF info of value digests; a new purpose gets a new label, never this one. */
const VALUE_DIGEST_INFO = "secrets-server value digest v1";

export type Vault = ReturnType<typeof createVault>;

/**
 * One project's keys, loaded: sealing and digests without a turn of the event loop, for
 * work that seals or compares many values in a row (an import of a thousand entries).
 */
export interface ProjectKeys {
  /** Seals under the project's data key of the current master key version. */
  seal(aad: string, plaintext: string): Sealed;
  /** vault.digest for a key version given to keysFor; throws what vault.digest would. */
  digest(keyVersion: number, plaintext: string): string;
}

/** Opens one project's values without a turn of the event loop: an export opens a thousand. */
export type ProjectOpener = (aad: string, sealed: Sealed) => string;

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
export function createVault(db: Store, keyring: Keyring, clock: Clock = systemClock) {
  // Unwrapped data keys, so a read costs one AES-GCM open and not two; held as KeyObjects,
  // which Node does not have to import again for every cipher.
  const dataKeys = new Map<string, crypto.KeyObject>();
  const digestKeys = new Map<string, crypto.KeyObject>();
  // Projects deleted while this process runs: their keys are never cached again. A request
  // whose read snapshot began before the deletion (PostgreSQL's REPEATABLE READ) still finds
  // the wrapped key, after forget(), and must not put it back. Ids are never reused.
  const deleted = new Set<string>();
  // Keys this process created or read inside a write transaction: if that transaction rolls back,
  // a wrapped row it wrote is gone, and a cached key would go on sealing values no restart
  // can open. Read ones too: another transaction's rollback (on PostgreSQL a read's, which
  // runs beside the write) may have made the writer read its own uncommitted row again.
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

  const keys = isPostgres(db) ? createProjectKeysPg(db) : createProjectKeysSqlite(db);
  // Per write transaction: the current version's keys sealKey found stored, or stored again.
  const storedIn = new WeakMap<object, Set<string>>();
  // Keys being created, so two calls of one transaction that both miss the cache insert one
  // row (better-sqlite3 needed none: its calls cannot interleave).
  const creating = new Map<string, Promise<crypto.KeyObject>>();

  /** The cached key, without a turn of the event loop; else read (or created) and cached. */
  function dataKey(projectId: string, keyVersion: number, createIfMissing: boolean): crypto.KeyObject | Promise<crypto.KeyObject> {
    const cacheKey = `${projectId}:${keyVersion}`;
    const cached = dataKeys.get(cacheKey);
    if (cached) return cached;
    if (!createIfMissing) return loadDataKey(projectId, keyVersion, false);
    let created = creating.get(cacheKey);
    if (!created) {
      created = loadDataKey(projectId, keyVersion, true).finally(() => creating.delete(cacheKey));
      creating.set(cacheKey, created);
    }
    return created;
  }

  /**
   * The data key to seal with. Inside a write transaction a cached one is checked to be still
   * stored: rotate-key, run with a newer master key, removes the old version's keys that no
   * record uses, while a server still on the old key (not restarted yet, or one of several)
   * seals with the key it holds. Without the row, what it seals would never open again; stored
   * anew, it stays readable, and rotate-key run again moves it. Writes are serialized, so
   * rotate-key's removal either sees this transaction's record or this one sees the removal.
   */
  async function sealKey(projectId: string): Promise<crypto.KeyObject> {
    const keyVersion = keyring.currentVersion;
    const cacheKey = `${projectId}:${keyVersion}`;
    const cached = dataKeys.get(cacheKey);
    if (!cached) return dataKey(projectId, keyVersion, true);
    const transaction = currentWriteTransaction(db);
    if (!transaction) return cached;
    // Once per transaction: what it has found (or stored) stays there until it ends.
    const checked = storedIn.get(transaction) ?? new Set<string>();
    if (checked.has(cacheKey)) return cached;
    storedIn.set(transaction, checked.add(cacheKey));
    if (!(await keys.exists(projectId, keyVersion))) {
      const key = cached.export();
      await storeKey(projectId, keyVersion, key);
      key.fill(0);
    }
    return cached;
  }

  /** Writes a data key, wrapped by its version's master key (inside the caller's write transaction). */
  async function storeKey(projectId: string, keyVersion: number, key: Buffer): Promise<void> {
    await keys.insert({
      projectId,
      keyVersion,
      wrappedKey: seal(keyring.key(keyVersion), key, wrapAad(projectId, keyVersion)),
      createdAt: clock.now().toISOString(),
    });
  }

  function sealWith(key: crypto.KeyObject, aad: string, plaintext: string): Sealed {
    return { ciphertext: seal(key, Buffer.from(plaintext, "utf8"), aad), keyVersion: keyring.currentVersion };
  }

  /** The HMAC key of value digests under one key version, derived once and cached. */
  async function digestKey(projectId: string, keyVersion: number): Promise<crypto.KeyObject> {
    const cacheKey = `${projectId}:${keyVersion}`;
    let key = digestKeys.get(cacheKey);
    if (!key) {
      const dataKeyObject = await dataKey(projectId, keyVersion, keyVersion === keyring.currentVersion);
      key = subkey(dataKeyObject, VALUE_DIGEST_INFO);
      if (!deleted.has(projectId)) digestKeys.set(cacheKey, key);
    }
    return key;
  }

  /**
   * A keyed hash of a value, to tell equal values apart from different ones without
   * decrypting either (import's "unchanged", the UI's environment comparison). The key is
   * derived from the project's data key of that version under its own HKDF label, so a
   * digest is comparable only within one project and one key version, opens nothing and
   * says nothing to anyone without the master key.
   */
  async function digest(projectId: string, keyVersion: number, plaintext: string): Promise<string> {
    return digestWith(digestKeys.get(`${projectId}:${keyVersion}`) ?? (await digestKey(projectId, keyVersion)), plaintext);
  }

  async function loadDataKey(projectId: string, keyVersion: number, createIfMissing: boolean): Promise<crypto.KeyObject> {
    const cacheKey = `${projectId}:${keyVersion}`;
    const wrappedKey = await keys.find(projectId, keyVersion);
    let key: Buffer;
    if (wrappedKey) {
      try {
        key = open(keyring.key(keyVersion), wrappedKey, wrapAad(projectId, keyVersion));
      } catch {
        throw new DecryptError("project data key does not open");
      }
      // Only a write transaction can see a row it has not committed.
      if (inWriteTransaction(db)) createdInTransaction.add(cacheKey);
    } else if (createIfMissing) {
      // Only inside a write transaction: no other writer runs meanwhile, and a rollback
      // tells this cache to forget the key (the listener above).
      if (!inTransaction(db)) throw new Error("a project data key is created only inside a write transaction");
      key = crypto.randomBytes(32);
      await storeKey(projectId, keyVersion, key);
      createdInTransaction.add(cacheKey);
    } else {
      throw new DecryptError("project data key missing");
    }
    const keyObject = crypto.createSecretKey(key);
    key.fill(0);
    if (!deleted.has(projectId)) dataKeys.set(cacheKey, keyObject);
    return keyObject;
  }

  return {
    currentKeyVersion: keyring.currentVersion,

    /** Call inside the caller's transaction when a project is created. */
    async createProjectKey(projectId: string): Promise<void> {
      await dataKey(projectId, keyring.currentVersion, true);
    },

    async seal(projectId: string, aad: string, plaintext: string): Promise<Sealed> {
      return sealWith(await sealKey(projectId), aad, plaintext);
    },

    /**
     * The project's keys for sealing (created if missing: call inside a write transaction)
     * and for digests under the current version and each of `keyVersions`. A version whose
     * key does not open fails only when its digest is asked for, as digest() would.
     */
    async keysFor(projectId: string, keyVersions: Iterable<number>): Promise<ProjectKeys> {
      const key = await sealKey(projectId);
      const digesters = new Map<number, { key: crypto.KeyObject } | { error: unknown }>();
      for (const keyVersion of new Set([keyring.currentVersion, ...keyVersions])) {
        try {
          digesters.set(keyVersion, { key: await digestKey(projectId, keyVersion) });
        } catch (error) {
          digesters.set(keyVersion, { error });
        }
      }
      return {
        seal: (aad, plaintext) => sealWith(key, aad, plaintext),
        digest(keyVersion, plaintext) {
          const digester = digesters.get(keyVersion);
          if (digester === undefined) throw new Error(`keysFor was not asked for key version ${keyVersion}`);
          if ("error" in digester) throw digester.error;
          return digestWith(digester.key, plaintext);
        },
      };
    },

    /** Throws DecryptError, never a partial or wrong value. */
    async open(projectId: string, aad: string, sealed: Sealed): Promise<string> {
      if (!keyring.has(sealed.keyVersion)) throw new DecryptError("master key version not configured");
      return openWith(
        dataKeys.get(`${projectId}:${sealed.keyVersion}`) ?? (await dataKey(projectId, sealed.keyVersion, false)),
        aad,
        sealed,
      );
    },

    /**
     * vault.open for many values of one project sealed under `keyVersions`: the keys are
     * loaded once, then each value opens synchronously. A version whose key is not
     * configured or does not open fails with its own DecryptError only when a value under
     * it is opened, as open() would.
     */
    async openerFor(projectId: string, keyVersions: Iterable<number>): Promise<ProjectOpener> {
      const loaded = new Map<number, crypto.KeyObject | DecryptError>();
      for (const keyVersion of new Set(keyVersions)) {
        try {
          if (!keyring.has(keyVersion)) throw new DecryptError("master key version not configured");
          loaded.set(keyVersion, await dataKey(projectId, keyVersion, false));
        } catch (error) {
          if (!(error instanceof DecryptError)) throw error;
          loaded.set(keyVersion, error);
        }
      }
      return (aad, sealed) => {
        const key = loaded.get(sealed.keyVersion);
        if (key === undefined) throw new Error(`openerFor was not asked for key version ${sealed.keyVersion}`);
        if (key instanceof DecryptError) throw key;
        return openWith(key, aad, sealed);
      };
    },

    digest,

    /** Drops a deleted project's cached keys, and keeps them from being cached again. */
    forget(projectId: string): void {
      deleted.add(projectId);
      for (const cacheKey of dataKeys.keys()) if (cacheKey.startsWith(`${projectId}:`)) dataKeys.delete(cacheKey);
      for (const cacheKey of digestKeys.keys()) if (cacheKey.startsWith(`${projectId}:`)) digestKeys.delete(cacheKey);
    },
  };
}

function openWith(key: crypto.KeyObject, aad: string, sealed: Sealed): string {
  try {
    return open(key, sealed.ciphertext, aad).toString("utf8");
  } catch {
    throw new DecryptError("value does not open");
  }
}

function digestWith(key: crypto.KeyObject, plaintext: string): string {
  return crypto.createHmac("sha256", key).update(plaintext, "utf8").digest("base64url");
}

interface ProjectKeyRow {
  projectId: string;
  keyVersion: number;
  wrappedKey: Buffer;
  createdAt: string;
}

/** The wrapped data key of a project and version; SQLite's answers at once. */
interface WrappedKeys {
  find(projectId: string, keyVersion: number): Buffer | undefined | Promise<Buffer | undefined>;
  exists(projectId: string, keyVersion: number): boolean | Promise<boolean>;
  insert(row: ProjectKeyRow): void | Promise<void>;
}

/**
 * The vault's reads and writes of project_keys. SQLite's run at once on the connection,
 * outside the repos' gate as the vault always did: a key row never changes once written,
 * and is written only inside the caller's write transaction.
 */
function createProjectKeysSqlite(db: Db): WrappedKeys {
  // Prepared once: it runs in every write that seals.
  const exists = db.$client.prepare("SELECT 1 FROM project_keys WHERE project_id = ? AND key_version = ?").pluck();
  return {
    find(projectId, keyVersion) {
      return db
        .select({ wrappedKey: projectKeys.wrappedKey })
        .from(projectKeys)
        .where(and(eq(projectKeys.projectId, projectId), eq(projectKeys.keyVersion, keyVersion)))
        .get()?.wrappedKey;
    },
    exists(projectId, keyVersion) {
      return exists.get(projectId, keyVersion) !== undefined;
    },
    insert(row) {
      db.insert(projectKeys).values(row).run();
    },
  };
}

function createProjectKeysPg(store: PgStore): WrappedKeys {
  return {
    async find(projectId, keyVersion) {
      const row = await pgRow<{ wrapped_key: Buffer }>(
        store,
        "SELECT wrapped_key FROM project_keys WHERE project_id = $1 AND key_version = $2",
        [projectId, keyVersion],
      );
      return row?.wrapped_key;
    },
    async exists(projectId, keyVersion) {
      return (
        (await pgRow(store, "SELECT 1 FROM project_keys WHERE project_id = $1 AND key_version = $2", [projectId, keyVersion])) !== undefined
      );
    },
    async insert(row) {
      await pgRun(store, "INSERT INTO project_keys (project_id, key_version, wrapped_key, created_at) VALUES ($1, $2, $3, $4)", [
        row.projectId,
        row.keyVersion,
        row.wrappedKey,
        row.createdAt,
      ]);
    },
  };
}
