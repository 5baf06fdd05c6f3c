import crypto from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import type { Logger } from "pino";
import { type Config, ConfigError, unusableDataDir } from "./config.ts";

const NONCE_BYTES = 12;
const TAG_BYTES = 16;
export const ALGORITHM = "AES-256-GCM";
/** HKDF info of the audit chain's MAC keys; a new purpose gets a new label, never this one. */
const AUDIT_MAC_INFO = "secrets-server audit chain mac v1";
/** HKDF info of the key that pseudonymises what is stored only to be matched again. */
const PSEUDONYM_INFO = "secrets-server pseudonyms v1";

/** URL-safe random text carrying `bytes` bytes of entropy. */
export function randomToken(bytes = 32): string {
  return crypto.randomBytes(bytes).toString("base64url");
}

/** Tokens are stored only as this hash; the plain value exists only in the response that issued it. */
export function hashToken(token: string): string {
  return crypto.createHash("sha256").update(token, "utf8").digest("hex");
}

/** Constant-time comparison: === would leak how many leading characters matched. */
export function safeEqual(a: string, b: string): boolean {
  const left = Buffer.from(a, "utf8");
  const right = Buffer.from(b, "utf8");
  if (left.length !== right.length) return false;
  return crypto.timingSafeEqual(left, right);
}

/** A 32-byte key for one purpose, derived from `secret` with HKDF-SHA256 under the label `info`: it opens nothing else. */
export function subkey(secret: Buffer | crypto.KeyObject, info: string): crypto.KeyObject {
  return crypto.createSecretKey(Buffer.from(crypto.hkdfSync("sha256", secret, Buffer.alloc(0), info, 32)));
}

/** AES-256-GCM with a fresh 96-bit nonce; the result is nonce | ciphertext | tag. */
export function seal(key: Buffer | crypto.KeyObject, plaintext: Buffer | string, aad: string): Buffer {
  const nonce = crypto.randomBytes(NONCE_BYTES);
  const cipher = crypto.createCipheriv("aes-256-gcm", key, nonce);
  cipher.setAAD(Buffer.from(aad, "utf8"));
  const body = Buffer.concat([cipher.update(plaintext), cipher.final()]);
  return Buffer.concat([nonce, body, cipher.getAuthTag()]);
}

/** Throws when the key, the AAD or any byte differs: a ciphertext moved to another row never opens. */
export function open(key: Buffer | crypto.KeyObject, sealed: Buffer, aad: string): Buffer {
  if (sealed.length < NONCE_BYTES + TAG_BYTES) throw new Error("ciphertext too short");
  const nonce = sealed.subarray(0, NONCE_BYTES);
  const tag = sealed.subarray(sealed.length - TAG_BYTES);
  const body = sealed.subarray(NONCE_BYTES, sealed.length - TAG_BYTES);
  const decipher = crypto.createDecipheriv("aes-256-gcm", key, nonce);
  decipher.setAAD(Buffer.from(aad, "utf8"));
  decipher.setAuthTag(tag);
  // GCM is a stream mode: update() gives every byte, and final() only checks the tag
  // (throwing when it does not match), so nothing is returned before that check.
  const plaintext = decipher.update(body);
  decipher.final();
  return plaintext;
}

/** The master keys this process holds: the current one and any older ones still needed to read. */
export class Keyring {
  private readonly auditMacKeys = new Map<number, crypto.KeyObject>();
  private pseudonymKey: crypto.KeyObject | undefined;

  readonly currentVersion: number;
  private readonly keys: ReadonlyMap<number, Buffer>;

  constructor(currentVersion: number, keys: ReadonlyMap<number, Buffer>) {
    this.currentVersion = currentVersion;
    this.keys = keys;
  }

  key(version: number): Buffer {
    const key = this.keys.get(version);
    if (!key) throw new Error(`master key version ${version} is not configured`);
    return key;
  }

  has(version: number): boolean {
    return this.keys.has(version);
  }

  versions(): number[] {
    return [...this.keys.keys()].sort((a, b) => a - b);
  }

  /**
   * The key that chains audit events written under this master key version (HMAC-SHA256).
   * Derived with HKDF under its own label, so the master key itself never MACs anything
   * and this key opens nothing else.
   */
  auditMacKey(version: number): crypto.KeyObject {
    let key = this.auditMacKeys.get(version);
    if (!key) {
      key = subkey(this.key(version), AUDIT_MAC_INFO);
      this.auditMacKeys.set(version, key);
    }
    return key;
  }

  /**
   * A keyed hash of something stored only to be matched again (the e-mail and the client
   * network of a failed sign-in). A plain SHA-256 of an IPv4 address or of an e-mail is
   * undone by hashing every candidate; this cannot be without the master key. Under the
   * current key: a rotation starts such counts again.
   */
  pseudonym(text: string): string {
    this.pseudonymKey ??= subkey(this.key(this.currentVersion), PSEUDONYM_INFO);
    return crypto.createHmac("sha256", this.pseudonymKey).update(text, "utf8").digest("hex");
  }

  /** A value that proves which key this is without revealing it (HMAC of a fixed label). */
  checkValue(version: number): string {
    return crypto.createHmac("sha256", this.key(version)).update("secrets-server key check v1").digest("hex");
  }
}

function decodeKey(name: string, text: string): Buffer {
  const trimmed = text.trim();
  if (!/^[A-Za-z0-9+/_-]+={0,2}$/.test(trimmed)) throw new ConfigError(`${name} must be base64 of 32 random bytes.`);
  const key = Buffer.from(trimmed, "base64");
  if (key.length !== 32) {
    throw new ConfigError(`${name} must decode to 32 bytes (it decodes to ${key.length}); make one with: openssl rand -base64 32`);
  }
  return key;
}

/**
 * MASTER_KEY is the current key (version MASTER_KEY_VERSION). MASTER_KEYS_PREVIOUS holds
 * older keys as `<version>:<base64>` separated by commas, kept until rotate-key has moved
 * every record off them. In development without MASTER_KEY, a key is generated once into
 * DATA_DIR/master.key.
 */
export function loadKeyring(config: Config, log?: Pick<Logger, "warn">): Keyring {
  // The older keys are checked first: a mistake there must not leave a generated key file.
  const previous = new Map<number, Buffer>();
  for (const entry of config.previousMasterKeys
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean)) {
    const match = entry.match(/^(\d+):(.+)$/);
    if (!match) throw new ConfigError("MASTER_KEYS_PREVIOUS must be a comma-separated list of <version>:<base64 key>.");
    const version = Number(match[1]);
    if (version === config.masterKeyVersion) {
      throw new ConfigError(
        `MASTER_KEYS_PREVIOUS holds key version ${version}, the version of MASTER_KEY: give the new MASTER_KEY a higher MASTER_KEY_VERSION.`,
      );
    }
    if (previous.has(version)) throw new ConfigError(`MASTER_KEYS_PREVIOUS holds key version ${version} twice.`);
    previous.set(version, decodeKey(`MASTER_KEYS_PREVIOUS (version ${version})`, match[2]!));
  }
  let current: Buffer;
  if (config.masterKey) {
    current = decodeKey("MASTER_KEY", config.masterKey);
  } else if (config.isProduction) {
    throw new ConfigError("MASTER_KEY is required in production: base64 of 32 random bytes (openssl rand -base64 32).");
  } else {
    current = loadOrCreateDevKey(config.dataDir, log);
  }
  const keys = new Map<number, Buffer>([[config.masterKeyVersion, current], ...previous]);
  return new Keyring(config.masterKeyVersion, keys);
}

function loadOrCreateDevKey(dataDir: string, log?: Pick<Logger, "warn">): Buffer {
  const file = path.join(dataDir, "master.key");
  try {
    return readOrCreateDevKey(dataDir, file, log);
  } catch (error) {
    if (error instanceof ConfigError) throw error;
    // A file in the way, or a folder or key file this user may not use.
    throw unusableDataDir(dataDir, error);
  }
}

function readOrCreateDevKey(dataDir: string, file: string, log?: Pick<Logger, "warn">): Buffer {
  fs.mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  if (!fs.existsSync(file)) {
    // "wx": never overwrite a key another process wrote a moment ago.
    try {
      fs.writeFileSync(file, `${crypto.randomBytes(32).toString("base64")}\n`, { mode: 0o600, flag: "wx" });
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
    }
    log?.warn(
      { file },
      "MASTER_KEY is not set: generated a development key file. Set MASTER_KEY in production and keep it out of backups of the data folder.",
    );
  } else {
    log?.warn({ file }, "MASTER_KEY is not set: using the development key file.");
  }
  return decodeKey(`the key file ${file}`, fs.readFileSync(file, "utf8"));
}
