import crypto from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { printable } from "../core/text.ts";
import {
  type CredentialsFile,
  configDir,
  ensureFallbackKey,
  readCredentials,
  withCredentialsLock,
  writeCredentials,
} from "./credentials.ts";
import type { SecretPair } from "./dotenv.ts";
import { CliError, EXIT } from "./errors.ts";
import { writeFileAtomically } from "./files.ts";

// The last secrets fetched for one server, project and environment, kept for `--fallback`
// so deployments keep working while the server is down. AES-256-GCM under a random key
// kept in credentials.json (mode 0600); the AAD binds a copy to its server, project and
// environment, so a copy renamed to another's file name does not open.
//
// With a service token the key and the file name are derived from the token (HKDF-SHA256),
// and nothing else is written: only whoever holds the token can find or open its copy, and
// credentials.json, its lock and the index stay untouched (such copies have no logout).

export interface FallbackPlace {
  server: string;
  /** The project as the user named it (id or name), so a copy is found without the server. */
  project: string;
  environment: string;
  /** The service token the copy is keyed by; undefined for login's random key. */
  serviceToken?: string;
  /** The project's name when known (a link file's, the server's): messages name the project by it rather than by an id. */
  projectName?: string;
  /** The environment as the server resolved it, kept in the copy for messages. */
  resolvedEnvironment?: string;
}

interface FallbackContent {
  savedAt: string;
  /** Not in copies saved by earlier versions. */
  projectName?: string;
  /** The environment the server resolved (a service account's one, when none was named). */
  environment?: string;
  secrets: SecretPair[];
}

function aad(place: FallbackPlace): string {
  const kind = place.serviceToken ? "fallback v1 service token" : "fallback v1";
  return `secrets-server ${kind}\n${place.server}\n${place.project.toLowerCase()}\n${place.environment}`;
}

/** A high-entropy token needs no stretching; the salt separates these keys from any other use of it. */
function fromToken(token: string, purpose: string, length: number): Buffer {
  return Buffer.from(crypto.hkdfSync("sha256", token, "secrets-server fallback v1", purpose, length));
}

/** "api / production from https://…": a name, never an id, when one is known. */
export function describePlace(place: FallbackPlace, withServer = true): string {
  const what = `${place.projectName || place.project || "the service account's project"} / ${place.environment || "its environment"}`;
  return printable(withServer ? `${what} from ${place.server}` : what);
}

function fallbackDir(): string {
  return path.join(configDir(), "fallback");
}

function fallbackFile(place: FallbackPlace): string {
  const id = place.serviceToken
    ? fromToken(place.serviceToken, `file name\n${aad(place)}`, 16).toString("hex")
    : crypto.createHash("sha256").update(aad(place)).digest("hex").slice(0, 32);
  return path.join(fallbackDir(), `${id}.bin`);
}

/** Of a server: to remove them all on logout. The server URL is hashed into the name, so keep an index. */
function indexFile(): string {
  return path.join(fallbackDir(), "index.json");
}

function readIndex(): Record<string, string[]> {
  try {
    return JSON.parse(fs.readFileSync(indexFile(), "utf8")) as Record<string, string[]>;
  } catch {
    return {};
  }
}

function writeIndex(index: Record<string, string[]>): void {
  writeFileAtomically(indexFile(), JSON.stringify(index), 0o600);
}

export async function saveFallback(place: FallbackPlace, secrets: SecretPair[]): Promise<void> {
  const content: FallbackContent = {
    savedAt: new Date().toISOString(),
    projectName: place.projectName,
    environment: place.resolvedEnvironment,
    secrets,
  };
  const seal = (key: Buffer) => {
    const nonce = crypto.randomBytes(12);
    const cipher = crypto.createCipheriv("aes-256-gcm", key, nonce);
    cipher.setAAD(Buffer.from(aad(place), "utf8"));
    const body = Buffer.concat([cipher.update(JSON.stringify(content), "utf8"), cipher.final()]);
    writeFileAtomically(fallbackFile(place), Buffer.concat([nonce, body, cipher.getAuthTag()]), 0o600);
  };
  fs.mkdirSync(fallbackDir(), { recursive: true, mode: 0o700 });
  if (place.serviceToken) return seal(tokenKey(place.serviceToken));
  // Entered in the index and written under the same lock as logout's clearing: a logout in
  // between would otherwise clear the index first and leave this copy behind, readable again
  // after the next login (the key stays in the credentials file).
  await withCredentialsLock(async () => {
    // Logged out while the secrets were fetched: no copy outlives the sign-in it was made under.
    const data = readCredentials();
    if (!data.servers[place.server]) return;
    seal(personKey(place, data));
  });
}

function tokenKey(token: string): Buffer {
  return fromToken(token, "key", 32);
}

/** login's random key, created on first use, and the copy entered in the index for logout (under the credentials lock). */
function personKey(place: FallbackPlace, data: CredentialsFile): Buffer {
  const { key, created } = ensureFallbackKey(data);
  if (created) writeCredentials(data);
  const index = readIndex();
  const file = path.basename(fallbackFile(place));
  index[place.server] = [...new Set([...(index[place.server] ?? []), file])];
  writeIndex(index);
  return key;
}

/** The saved copy, or a CliError saying why there is none to use. */
export function loadFallback(
  place: FallbackPlace,
  maxAgeMs: number | undefined,
): { secrets: SecretPair[]; ageMs: number; projectName?: string; environment?: string } {
  const file = fallbackFile(place);
  const key = place.serviceToken ? tokenKey(place.serviceToken) : readCredentials().fallbackKey;
  if (!fs.existsSync(file) || !key) {
    throw new CliError(`No fallback copy of ${describePlace(place)} exists yet.`, EXIT.unreachable);
  }
  let content: FallbackContent;
  try {
    const sealed = fs.readFileSync(file);
    const decipher = crypto.createDecipheriv(
      "aes-256-gcm",
      typeof key === "string" ? Buffer.from(key, "base64") : key,
      sealed.subarray(0, 12),
    );
    decipher.setAAD(Buffer.from(aad(place), "utf8"));
    decipher.setAuthTag(sealed.subarray(sealed.length - 16));
    const plain = Buffer.concat([decipher.update(sealed.subarray(12, sealed.length - 16)), decipher.final()]);
    content = JSON.parse(plain.toString("utf8")) as FallbackContent;
  } catch {
    throw new CliError(
      `The fallback copy in ${file} cannot be opened (damaged, or ${place.serviceToken ? "not saved with this token" : "the key in credentials.json changed"}).`,
      EXIT.unreachable,
    );
  }
  const ageMs = Math.max(0, Date.now() - Date.parse(content.savedAt));
  if (maxAgeMs !== undefined && ageMs > maxAgeMs) {
    throw new CliError(
      `The fallback copy is ${formatAge(ageMs)} old, older than --fallback-max-age ${formatAge(maxAgeMs)}; not using it.`,
      EXIT.unreachable,
    );
  }
  const text = (value: unknown) => (typeof value === "string" ? value : undefined);
  return { secrets: content.secrets, ageMs, projectName: text(content.projectName), environment: text(content.environment) };
}

/** Whether this machine keeps copies of the server (read only: nothing is created). */
export function hasFallbacks(server: string): boolean {
  return (readIndex()[server]?.length ?? 0) > 0;
}

/** Removes the copies of one server (logout). */
export function removeFallbacks(server: string): void {
  const index = readIndex();
  for (const file of index[server] ?? []) fs.rmSync(path.join(fallbackDir(), path.basename(file)), { force: true });
  if (index[server]) {
    delete index[server];
    writeIndex(index);
  }
}

/** `90`, `90s`, `15m`, `12h`, `7d`. */
export function parseDuration(text: string): number {
  const match = text.trim().match(/^(\d+)(s|m|h|d)?$/);
  if (!match) throw new CliError(`--fallback-max-age takes a duration such as 90s, 15m, 12h or 7d (got "${text}").`, EXIT.usage);
  const unit = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 }[(match[2] ?? "s") as "s" | "m" | "h" | "d"];
  return Number(match[1]) * unit;
}

export function formatAge(ms: number): string {
  const seconds = Math.round(ms / 1000);
  if (seconds < 120) return `${seconds}s`;
  if (seconds < 7200) return `${Math.round(seconds / 60)}m`;
  if (seconds < 172_800) return `${Math.round(seconds / 3600)}h`;
  return `${Math.round(seconds / 86_400)}d`;
}
