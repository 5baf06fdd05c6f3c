import crypto from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { configDir, ensureFallbackKey, readCredentials, withCredentialsLock, writeCredentials } from "./credentials.ts";
import { writeFileAtomically } from "./files.ts";
import { CliError, EXIT } from "./errors.ts";
import type { SecretPair } from "./dotenv.ts";

// The last secrets fetched for one server, project and environment, kept for `--fallback`
// so deployments keep working while the server is down. AES-256-GCM under a random key
// kept in credentials.json (mode 0600); the AAD binds a copy to its server, project and
// environment, so a copy renamed to another's file name does not open.

export interface FallbackPlace {
  server: string;
  /** The project as the user named it (id or name), so a copy is found without the server. */
  project: string;
  environment: string;
}

interface FallbackContent {
  savedAt: string;
  secrets: SecretPair[];
}

function aad(place: FallbackPlace): string {
  return `secrets-server fallback v1\n${place.server}\n${place.project.toLowerCase()}\n${place.environment}`;
}

export function fallbackDir(): string {
  return path.join(configDir(), "fallback");
}

function fallbackFile(place: FallbackPlace): string {
  const id = crypto.createHash("sha256").update(aad(place)).digest("hex").slice(0, 32);
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
  const key = await withCredentialsLock(async () => {
    const data = readCredentials();
    const { key, created } = ensureFallbackKey(data);
    if (created) writeCredentials(data);
    const index = readIndex();
    const file = path.basename(fallbackFile(place));
    index[place.server] = [...new Set([...(index[place.server] ?? []), file])];
    fs.mkdirSync(fallbackDir(), { recursive: true, mode: 0o700 });
    writeIndex(index);
    return key;
  });
  const content: FallbackContent = { savedAt: new Date().toISOString(), secrets };
  const nonce = crypto.randomBytes(12);
  const cipher = crypto.createCipheriv("aes-256-gcm", key, nonce);
  cipher.setAAD(Buffer.from(aad(place), "utf8"));
  const body = Buffer.concat([cipher.update(JSON.stringify(content), "utf8"), cipher.final()]);
  const sealed = Buffer.concat([nonce, body, cipher.getAuthTag()]);
  const file = fallbackFile(place);
  writeFileAtomically(file, sealed, 0o600);
}

/** The saved copy, or a CliError saying why there is none to use. */
export function loadFallback(place: FallbackPlace, maxAgeMs: number | undefined): { secrets: SecretPair[]; ageMs: number } {
  const file = fallbackFile(place);
  const keyText = readCredentials().fallbackKey;
  if (!fs.existsSync(file) || !keyText) {
    throw new CliError(`No fallback copy of ${place.project} / ${place.environment} from ${place.server} exists yet.`, EXIT.unreachable);
  }
  let content: FallbackContent;
  try {
    const sealed = fs.readFileSync(file);
    const decipher = crypto.createDecipheriv("aes-256-gcm", Buffer.from(keyText, "base64"), sealed.subarray(0, 12));
    decipher.setAAD(Buffer.from(aad(place), "utf8"));
    decipher.setAuthTag(sealed.subarray(sealed.length - 16));
    const plain = Buffer.concat([decipher.update(sealed.subarray(12, sealed.length - 16)), decipher.final()]);
    content = JSON.parse(plain.toString("utf8")) as FallbackContent;
  } catch {
    throw new CliError(`The fallback copy in ${file} cannot be opened (damaged, or the key in credentials.json changed).`, EXIT.unreachable);
  }
  const ageMs = Math.max(0, Date.now() - Date.parse(content.savedAt));
  if (maxAgeMs !== undefined && ageMs > maxAgeMs) {
    throw new CliError(
      `The fallback copy is ${formatAge(ageMs)} old, older than --fallback-max-age ${formatAge(maxAgeMs)}; not using it.`,
      EXIT.unreachable,
    );
  }
  return { secrets: content.secrets, ageMs };
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
