import crypto from "node:crypto";
import { promisify } from "node:util";
import { HttpError } from "../core/errors.ts";
import { limitConcurrency } from "../core/limit-concurrency.ts";

const scrypt = promisify(crypto.scrypt) as (
  password: crypto.BinaryLike,
  salt: crypto.BinaryLike,
  keylen: number,
  options: crypto.ScryptOptions,
) => Promise<Buffer>;

/**
 * scrypt parameters (documented in the README): N = 2^15, r = 8, p = 3, a 16-byte random
 * salt and a 32-byte result: one of OWASP's equivalents of N = 2^17, p = 1, at a quarter of
 * its memory (32 MiB, where 2^17 would hold 128 MiB per hash on a small VM) for the same
 * work, some 150-250 ms per hash. They are stored with each hash; a hash made with weaker
 * ones is made again at the account's next sign-in (isCurrentHash).
 */
const SCRYPT_LOG_N = 15;
const SCRYPT_R = 8;
const SCRYPT_P = 3;
const KEY_BYTES = 32;
const SALT_BYTES = 16;
const MAX_MEMORY = 64 * 1024 * 1024;

/**
 * Hashes computed at once; the others queue. Each holds one of libuv's four threads for
 * its 150-250 ms, and 32 MiB: a burst of sign-ins must leave threads for the WAL syncs
 * every write waits for (core/group-commit.ts) and for file and DNS work, and must not add
 * 128 MiB of memory at once. Real and dummy hashes queue alike, so the wait tells nothing.
 */
const MAX_HASHES_AT_ONCE = 2;
const queueHash = limitConcurrency(MAX_HASHES_AT_ONCE);

/**
 * Sign-ins and password changes under way at once, their hash running or waiting: beyond
 * this, some 10-15 s of hashing, a new one is refused before anything is recorded. Sign-ins
 * from many addresses at once (each address has its own limit) would otherwise queue
 * without end, each hashed long after its client gave up, a real person's behind them all.
 */
export const MAX_PASSWORD_WORK = 128;
export const PASSWORDS_BUSY = "Too many sign-ins at once. Try again in a few seconds.";
let passwordWork = 0;

/** Runs `work` (which hashes a password once) when there is room, else answers 503 with Retry-After. */
export async function withPasswordCapacity<T>(work: () => Promise<T>): Promise<T> {
  if (passwordWork >= MAX_PASSWORD_WORK) throw new HttpError(503, PASSWORDS_BUSY, undefined, { "retry-after": "5" });
  passwordWork += 1;
  try {
    return await work();
  } finally {
    passwordWork -= 1;
  }
}

export const PASSWORD_MIN_LENGTH = 12;
export const PASSWORD_MAX_LENGTH = 256;

/**
 * `scrypt$<log2 N>$<r>$<p>$<salt>$<hash>` with base64url salt and hash. `logN` is for tests
 * that make hundreds of guesses: a hash carries its cost, and verification uses it.
 */
export async function hashPassword(password: string, logN = SCRYPT_LOG_N): Promise<string> {
  const salt = crypto.randomBytes(SALT_BYTES);
  const hash = await queueHash(() =>
    scrypt(password.normalize("NFC"), salt, KEY_BYTES, {
      N: 2 ** logN,
      r: SCRYPT_R,
      p: SCRYPT_P,
      maxmem: MAX_MEMORY,
    }),
  );
  return ["scrypt", logN, SCRYPT_R, SCRYPT_P, salt.toString("base64url"), hash.toString("base64url")].join("$");
}

/**
 * Whether a stored hash was made with the parameters of today (or stronger ones): if not,
 * a sign-in that has just checked the password hashes it again. Until then an old account's
 * sign-in is quicker than an unknown one's, which is what makes it worth doing at once.
 */
export function isCurrentHash(stored: string): boolean {
  const [kind, logN, r, p] = stored.split("$");
  return kind === "scrypt" && Number(logN) >= SCRYPT_LOG_N && Number(r) >= SCRYPT_R && Number(p) >= SCRYPT_P;
}

// Compared against when the account does not exist or has no password, so that the
// answer takes as long as for a real account and the timing does not tell them apart.
let dummyHash: Promise<string> | undefined;

/** Constant-time verification; a missing or malformed stored hash simply fails (after the same work). */
export async function verifyPassword(password: string, stored: string | null | undefined): Promise<boolean> {
  dummyHash ??= hashPassword(crypto.randomBytes(16).toString("hex"));
  const parts = (stored ?? "").split("$");
  const usable = parts.length === 6 && parts[0] === "scrypt";
  const [, logN, r, p, salt, hash] = usable ? parts : (await dummyHash).split("$");
  const expected = Buffer.from(hash!, "base64url");
  const options = (logN: number, p: number) => ({ N: 2 ** logN, r: Number(r), p, maxmem: MAX_MEMORY });
  const actual = await queueHash(async () => {
    const computed = await scrypt(
      password.normalize("NFC"),
      Buffer.from(salt!, "base64url"),
      expected.length,
      options(Number(logN), Number(p)),
    );
    // A hash of an earlier version (p = 1 where today's is 3) is quicker to check than the
    // dummy an unknown account is checked against: the rest of today's work is done too, so
    // that until its next sign-in the account cannot be told from an unknown one by time.
    if (usable && Number(logN) === SCRYPT_LOG_N && Number(r) === SCRYPT_R && Number(p) < SCRYPT_P) {
      await scrypt(password, crypto.randomBytes(SALT_BYTES), KEY_BYTES, options(SCRYPT_LOG_N, SCRYPT_P - Number(p)));
    }
    return computed;
  });
  // timingSafeEqual: === on the bytes would leak how much of the hash matched.
  return crypto.timingSafeEqual(actual, expected) && usable;
}
