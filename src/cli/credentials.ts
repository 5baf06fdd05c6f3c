import crypto from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { CliError } from "./errors.ts";
import { writeFileAtomically } from "./files.ts";

/** What the CLI keeps per server URL. The tokens never leave this file except as a Bearer header. */
export interface ServerCredentials {
  email: string;
  accessToken: string;
  refreshToken: string;
  accessExpiresAt: string;
  refreshExpiresAt: string;
}

export interface CredentialsFile {
  version: 1;
  /** The server of the last login; used when no --server, link file or SECRETS_SERVER_URL names one. */
  defaultServer?: string;
  /** Base64 AES-256 key of the encrypted fallback copies (run/export --fallback). */
  fallbackKey?: string;
  servers: Record<string, ServerCredentials>;
  /**
   * Servers this machine has signed in to and since signed out of: a link file may still pick
   * them (the trust rule of resolveServer is about servers never chosen here).
   */
  knownServers?: string[];
}

const LOCK_STALE_MS = 60_000;
/** Past the staleness of a lock whose holder cannot be asked: such a lock is broken, not waited out. */
const LOCK_WAIT_MS = LOCK_STALE_MS + 5_000;
/** A breaker's own lock older than this was left by a process that died while breaking. */
const BREAK_STALE_MS = 10_000;

/**
 * This process's PID namespace. A pid in a lock means something only in the namespace that
 * wrote it: containers sharing a credentials volume each have their own pid 1, and a
 * restarted container has a new namespace where the old pid may be alive again.
 */
function pidNamespace(): string {
  // Read once, when a lock is first taken: a process's namespace never changes, and a waiter
  // looks at the lock every few dozen milliseconds.
  if (ownPidNamespace === undefined) {
    try {
      ownPidNamespace = fs.readlinkSync("/proc/self/ns/pid").replace(/\s/g, "");
    } catch {
      ownPidNamespace = "unknown";
    }
  }
  return ownPidNamespace;
}
let ownPidNamespace: string | undefined;

export function configDir(env: NodeJS.ProcessEnv = process.env): string {
  const base = env.XDG_CONFIG_HOME && path.isAbsolute(env.XDG_CONFIG_HOME) ? env.XDG_CONFIG_HOME : path.join(os.homedir(), ".config");
  return path.join(base, "secrets-server");
}

function credentialsPath(env: NodeJS.ProcessEnv = process.env): string {
  return path.join(configDir(env), "credentials.json");
}

function ensureDir(dir: string): void {
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
}

export function readCredentials(env: NodeJS.ProcessEnv = process.env): CredentialsFile {
  const file = credentialsPath(env);
  let text: string;
  try {
    text = fs.readFileSync(file, "utf8");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return { version: 1, servers: {} };
    throw new CliError(`Cannot read ${file}: ${(error as Error).message}`);
  }
  try {
    const parsed = JSON.parse(text) as CredentialsFile;
    if (parsed?.version !== 1 || typeof parsed.servers !== "object" || parsed.servers === null) throw new Error("unknown format");
    return parsed;
  } catch {
    throw new CliError(`${file} is damaged. Delete it and run "secrets-server login" again.`);
  }
}

/** Written to a temporary file with mode 0600 and renamed, so a reader never sees half a file. */
export function writeCredentials(data: CredentialsFile, env: NodeJS.ProcessEnv = process.env): void {
  const file = credentialsPath(env);
  ensureDir(path.dirname(file));
  writeFileAtomically(file, `${JSON.stringify(data, null, 2)}\n`, 0o600);
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

/**
 * Runs fn holding credentials.json.lock, so two CLI processes sharing the file never both
 * refresh with the same refresh token (the second would revoke the session) and never
 * overwrite each other's changes. Read the file again inside fn.
 */
export async function withCredentialsLock<T>(fn: () => Promise<T>, env: NodeJS.ProcessEnv = process.env): Promise<T> {
  const lock = `${credentialsPath(env)}.lock`;
  ensureDir(path.dirname(lock));
  // Our pid and its namespace (for the staleness check) and a random part: released, the
  // lock is removed only while it still holds this, never when another process has taken it
  // over as stale.
  const owner = `${process.pid} ${crypto.randomBytes(8).toString("hex")} ${pidNamespace()}\n`;
  const deadline = Date.now() + LOCK_WAIT_MS;
  for (;;) {
    try {
      fs.writeFileSync(lock, owner, { mode: 0o600, flag: "wx" });
      break;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
    }
    const stale = staleLock(lock);
    if (stale !== undefined && breakStaleLock(lock, stale, owner)) continue;
    if (Date.now() > deadline) {
      throw new CliError(`Another secrets-server process holds ${lock}. If none is running, delete that file.`);
    }
    await new Promise((resolve) => setTimeout(resolve, 25 + Math.random() * 50));
  }
  try {
    return await fn();
  } finally {
    removeLockHolding(lock, owner);
  }
}

/**
 * Removes a stale lock that still holds `stale`, under `<lock>.break`: of two processes that
 * found the same stale lock, the second would otherwise read it, then remove the lock the
 * first had just taken in its place, and both would refresh with the same token. False when
 * another process is breaking it.
 */
function breakStaleLock(lock: string, stale: string, owner: string): boolean {
  const breaker = `${lock}.break`;
  try {
    fs.writeFileSync(breaker, owner, { mode: 0o600, flag: "wx" });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
    // Another process is breaking it now: wait our turn. One that died doing so leaves its
    // file, cleared once it is older than any break takes. Read before its age is looked
    // at: a breaker that replaced it meanwhile keeps its own.
    try {
      const content = fs.readFileSync(breaker, "utf8");
      if (Date.now() - fs.statSync(breaker).mtimeMs > BREAK_STALE_MS) removeLockHolding(breaker, content);
    } catch {
      // Gone meanwhile.
    }
    return false;
  }
  try {
    removeLockHolding(lock, stale);
  } finally {
    removeLockHolding(breaker, owner);
  }
  return true;
}

/** The content of a lock left behind by a process that died, or held far longer than any refresh takes. */
function staleLock(lock: string): string | undefined {
  try {
    const content = fs.readFileSync(lock, "utf8");
    const [pidText, , namespace] = content.trim().split(/\s+/);
    const pid = Number(pidText);
    // A lock of older versions names no namespace: its pid is taken to be of this one.
    const isOurNamespace = namespace === undefined || namespace === pidNamespace();
    if (isOurNamespace && Number.isInteger(pid) && pid > 0 && !isAlive(pid)) return content;
    return Date.now() - fs.statSync(lock).mtimeMs > LOCK_STALE_MS ? content : undefined;
  } catch {
    return undefined;
  }
}

/** Removes the lock if it still holds `content`: a lock another process took meanwhile stays. */
function removeLockHolding(lock: string, content: string): void {
  try {
    if (fs.readFileSync(lock, "utf8") === content) fs.rmSync(lock, { force: true });
  } catch {
    // Already gone.
  }
}

/** Drops a server's tokens (logout, an ended session) and remembers that this machine chose it once. */
export function forgetServer(data: CredentialsFile, server: string): void {
  delete data.servers[server];
  data.knownServers = [...new Set([...(data.knownServers ?? []), server])];
}

/** The fallback key, created on first use (call inside the lock). */
export function ensureFallbackKey(data: CredentialsFile): { key: Buffer; created: boolean } {
  if (data.fallbackKey) {
    const key = Buffer.from(data.fallbackKey, "base64");
    if (key.length === 32) return { key, created: false };
  }
  const key = crypto.randomBytes(32);
  data.fallbackKey = key.toString("base64");
  return { key, created: true };
}
