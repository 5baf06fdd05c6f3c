// Shared by the drills: the real server as a process of its own (like bench/ and the unit
// start it), an HTTP client that sends exactly what it is given, sign-in and project
// helpers that use only the public API, a seeded PRNG, and process memory from /proc.
import { type ChildProcess, spawn } from "node:child_process";
import crypto from "node:crypto";
import fs from "node:fs";
import http from "node:http";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { sourceCommand, sourceCommandWithNodeArgs } from "../src/dev/source-command.ts";

export const ROOT = path.resolve(import.meta.dirname, "..");

/** What every drill exports; drills/index.ts lists them. */
export interface DrillOptions {
  /** The few-seconds version that `npm test` runs. */
  short: boolean;
  log: (line: string) => void;
  /** Where the server keeps its data: its SQLite file (by default), or a fresh PostgreSQL database. */
  database?: "sqlite" | "postgres";
}
export interface DrillResult {
  ok: boolean;
  /** One line of figures. */
  line: string;
  /** Set when the drill could not run here, with the reason. */
  skipped?: string;
}
export interface Drill {
  name: string;
  drill(options: DrillOptions): Promise<DrillResult>;
  /** Whether it means anything on PostgreSQL: the others drill SQLite's file, its WAL and its disk. */
  postgres?: boolean;
}

export function makeTempDir(prefix: string): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), prefix));
}

export function randomMasterKey(): string {
  return crypto.randomBytes(32).toString("base64");
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const address = srv.address();
      const port = typeof address === "object" && address ? address.port : 0;
      srv.close(() => resolve(port));
    });
  });
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** The environment of a drill's server: development mode, dev sign-in, limits out of the way. */
function serverEnv(dataDir: string, port: number, overrides: Record<string, string> = {}): Record<string, string> {
  return {
    PATH: process.env.PATH ?? "",
    HOME: process.env.HOME ?? "",
    NODE_ENV: "development",
    AUTH_PROVIDER: "dev",
    HOST: "127.0.0.1",
    PORT: String(port),
    APP_URL: `http://127.0.0.1:${port}`,
    DATA_DIR: dataDir,
    MASTER_KEY: randomMasterKey(),
    LOG_LEVEL: "warn",
    // The default limit would answer 429 instead of the endpoint after 600 requests a minute.
    // Endpoints with a limit of their own (import, export, CLI sign-in) keep it.
    RATE_LIMIT_PER_MINUTE: "1000000",
    // glibc's malloc settings when the drills run with them: MALLOC_ARENA_MAX as the systemd
    // unit sets it, or others to measure (MALLOC_TRIM_THRESHOLD_, ...).
    ...Object.fromEntries(Object.entries(process.env).filter((e): e is [string, string] => /^MALLOC_/.test(e[0]) && e[1] !== undefined)),
    ...overrides,
  };
}

export interface ServerProcess {
  url: string;
  origin: string;
  pid: number;
  dataDir: string;
  env: Record<string, string>;
  /** Log lines at level error or above (pino level >= 50), the last 200. */
  errorLines: string[];
  /** SIGTERM, then SIGKILL after `graceMs`; resolves when the process has exited. */
  stop(graceMs?: number): Promise<void>;
  /** SIGKILL at once; resolves when the process has exited. */
  kill(): Promise<void>;
  exited(): boolean;
}

export interface StartOptions {
  dataDir: string;
  /** Reuse a port (restarts); a free one otherwise. */
  port?: number;
  /** Extra or overriding environment variables (MASTER_KEY must be passed again on restarts). */
  env?: Record<string, string>;
  /** Node flags before the source command's own (for example --max-semi-space-size=…). */
  nodeArgs?: string[];
  /**
   * A built executable to run instead of the source (`npm run build`'s dist/secrets-server);
   * DRILL_EXECUTABLE sets it for every drill. Node flags then go in NODE_OPTIONS.
   */
  executable?: string;
}

let installed: string | undefined;

/**
 * The executable the drills run when DRILL_EXECUTABLE is set, else undefined (the source):
 * a copy of it in a temporary folder, made once, as `install -m 0755` puts it in place.
 * The copy is what an operator runs, and it matters to the memory figures: the file a
 * build has just written sits in the page cache in the large folios of that one big
 * write, and a page fault maps a whole folio, so a server started from dist/ has about
 * 16 MiB more of its executable resident (64–70 against 54 MiB after start and 20 requests,
 * the same after the page cache is dropped and the file read from disk again).
 */
function drillExecutable(): string | undefined {
  const file = process.env.DRILL_EXECUTABLE;
  if (!file) return undefined;
  if (!installed) {
    const dir = makeTempDir("drill-executable-");
    process.on("exit", () => removeDir(dir));
    const copy = path.join(dir, "secrets-server");
    fs.copyFileSync(path.resolve(file), copy);
    fs.chmodSync(copy, 0o755);
    installed = copy;
  }
  return installed;
}

// Servers still running when this process exits (a drill that threw) are killed with it.
const liveServers = new Set<ChildProcess>();
process.on("exit", () => {
  for (const child of liveServers) child.kill("SIGKILL");
});
// Node's default for these signals skips the exit handlers: a Ctrl-C left the servers
// running and the executable's 117 MB copy behind. Exiting runs them. A failed drill's data
// directory is kept on purpose, for a look.
for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"] as const) {
  process.once(signal, () => process.exit(128 + os.constants.signals[signal]));
}

/**
 * Starts the server, `secrets-server serve` from source (or the executable), and waits
 * until /healthz answers 200.
 */
export async function startServer(options: StartOptions): Promise<ServerProcess> {
  const port = options.port ?? (await freePort());
  const env = serverEnv(options.dataDir, port, options.env);
  const executable = options.executable ?? drillExecutable();
  if (executable && options.nodeArgs?.length) env.NODE_OPTIONS = options.nodeArgs.join(" ");
  const [file, args] = executable ? [executable, ["serve"]] : sourceCommandWithNodeArgs(options.nodeArgs ?? [], "serve");
  const child: ChildProcess = spawn(file, args, {
    cwd: ROOT,
    env,
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stderr = "";
  const errorLines: string[] = [];
  let pending = "";
  child.stdout!.on("data", (chunk: Buffer) => {
    pending += chunk.toString("utf8");
    const lines = pending.split("\n");
    pending = lines.pop() ?? "";
    for (const line of lines) {
      if (/"level":(5\d|60)/.test(line)) {
        errorLines.push(line);
        if (errorLines.length > 200) errorLines.shift();
      }
    }
  });
  child.stderr!.on("data", (chunk: Buffer) => {
    stderr = (stderr + chunk.toString("utf8")).slice(-4000);
  });
  liveServers.add(child);
  const exit = new Promise<void>((resolve) =>
    child.once("exit", () => {
      liveServers.delete(child);
      resolve();
    }),
  );
  const url = `http://127.0.0.1:${port}`;
  const started = Date.now();
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new Error(`the server exited at start (${child.exitCode ?? child.signalCode}): ${stderr.trim()}`);
    }
    try {
      const res = await request(url, { method: "GET", path: "/healthz" });
      if (res.status === 200) break;
    } catch {
      // not listening yet
    }
    if (Date.now() - started > 60_000) {
      child.kill("SIGKILL");
      throw new Error(`the server did not answer /healthz within 60 s: ${stderr.trim()}`);
    }
    await sleep(50);
  }
  const exited = () => child.exitCode !== null || child.signalCode !== null;
  return {
    url,
    origin: url,
    pid: child.pid!,
    dataDir: options.dataDir,
    env,
    errorLines,
    exited,
    async stop(graceMs = 10_000) {
      if (exited()) return;
      child.kill("SIGTERM");
      const timer = setTimeout(() => child.kill("SIGKILL"), graceMs);
      await exit;
      clearTimeout(timer);
    },
    async kill() {
      if (exited()) return;
      child.kill("SIGKILL");
      await exit;
    },
  };
}

/** Runs `secrets-server ...args` from source to its end (server commands such as `audit verify`). */
export function runCommand(
  args: string[],
  env: Record<string, string>,
  timeoutMs = 60_000,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(...sourceCommand(...args), {
      cwd: ROOT,
      env,
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => (stdout += d));
    child.stderr.on("data", (d) => (stderr += d));
    const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
    child.on("close", (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

export interface RequestSpec {
  method: string;
  /** Sent as is: not normalised or re-encoded. */
  path: string;
  headers?: Record<string, string | string[]>;
  body?: string | Buffer;
  timeoutMs?: number;
  /** Connections to use; a shared keep-alive pool unless told (a restarted server needs a new one). */
  agent?: http.Agent;
}

export interface HttpResponse {
  status: number;
  body: string;
  headers: http.IncomingHttpHeaders;
}

const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });

/** One HTTP request with node:http (fetch would normalise the path and refuse odd headers). */
export function request(url: string, spec: RequestSpec): Promise<HttpResponse> {
  return new Promise((resolve, reject) => {
    const target = new URL(url);
    const headers: Record<string, string | string[] | number> = { ...spec.headers };
    if (spec.body !== undefined && headers["content-length"] === undefined) headers["content-length"] = Buffer.byteLength(spec.body);
    const req = http.request(
      {
        hostname: target.hostname,
        port: target.port,
        path: spec.path,
        method: spec.method,
        headers,
        agent: spec.agent ?? agent,
        timeout: spec.timeoutMs ?? 30_000,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (chunk: Buffer) => chunks.push(chunk));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString("utf8"), headers: res.headers }));
        res.on("error", reject);
      },
    );
    req.on("timeout", () => req.destroy(new Error(`no answer within ${spec.timeoutMs ?? 30_000} ms`)));
    req.on("error", reject);
    req.end(spec.body);
  });
}

/** A caller: a browser session (cookie + Origin), a CLI or service token (Bearer), or nobody. */
export class Caller {
  readonly url: string;
  readonly origin: string;
  cookie?: string;
  bearer?: string;
  userId?: string;

  constructor(url: string, origin: string, cookie?: string, bearer?: string, userId?: string) {
    this.url = url;
    this.origin = origin;
    this.cookie = cookie;
    this.bearer = bearer;
    this.userId = userId;
  }

  /** Connections for this caller's requests (the shared pool when unset). */
  agent?: http.Agent;

  headers(method: string): Record<string, string> {
    const h: Record<string, string> = {};
    if (this.cookie) h.cookie = this.cookie;
    if (this.bearer) h.authorization = `Bearer ${this.bearer}`;
    if (method !== "GET" && method !== "HEAD") h.origin = this.origin;
    return h;
  }

  async call(method: string, urlPath: string, body?: unknown): Promise<{ status: number; body: any; text: string }> {
    const headers = this.headers(method);
    if (body !== undefined) headers["content-type"] = "application/json";
    const res = await request(this.url, {
      method,
      path: urlPath,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      agent: this.agent,
    });
    let parsed: unknown;
    try {
      parsed = res.body ? JSON.parse(res.body) : undefined;
    } catch {
      parsed = undefined;
    }
    return { status: res.status, body: parsed, text: res.body };
  }

  /** Like call, but throws unless the status is one of `expect`. */
  async ok(method: string, urlPath: string, body?: unknown, expect = [200, 201]): Promise<any> {
    const res = await this.call(method, urlPath, body);
    if (!expect.includes(res.status)) throw new Error(`${method} ${urlPath}: ${res.status} ${res.text.slice(0, 300)}`);
    return res.body;
  }
}

/** Signs in with the development provider. */
export async function signIn(server: { url: string; origin: string }, email: string): Promise<Caller> {
  const caller = new Caller(server.url, server.origin);
  const res = await request(server.url, {
    method: "POST",
    path: "/api/auth/dev/sign-in",
    headers: { "content-type": "application/json", origin: server.origin },
    body: JSON.stringify({ email }),
  });
  if (res.status !== 200) throw new Error(`sign-in failed: ${res.status} ${res.body.slice(0, 300)}`);
  const setCookie = res.headers["set-cookie"] ?? [];
  caller.cookie = setCookie.map((line) => line.split(";")[0]!).join("; ");
  caller.userId = (JSON.parse(res.body) as { user: { id: string } }).user.id;
  return caller;
}

export async function createProject(
  owner: Caller,
  name: string,
  environments = ["development", "staging", "production"],
): Promise<{ id: string; name: string }> {
  const { project } = await owner.ok("POST", "/api/projects", { name, environments });
  return project;
}

/** Invites `email` into the project and accepts as `invitee` (the development link carries the token). */
export async function addMember(
  owner: Caller,
  invitee: Caller,
  projectId: string,
  email: string,
  role: string,
  environments?: string[],
): Promise<void> {
  const { devAcceptUrl } = await owner.ok("POST", `/api/projects/${projectId}/invitations`, {
    email,
    role,
    ...(environments ? { environments } : {}),
  });
  const token = String(devAcceptUrl).slice(String(devAcceptUrl).indexOf("#") + 1);
  await invitee.ok("POST", "/api/invitations/accept", { token });
}

/** A CLI access token for `user` through the device flow (see cli-auth.routes.ts). */
export async function cliToken(user: Caller): Promise<{ accessToken: string; refreshToken: string }> {
  const nobody = new Caller(user.url, user.origin);
  const device = await nobody.ok("POST", "/api/cli/auth/device", { deviceName: "drill" });
  await user.ok("POST", "/api/cli/auth/approve", { userCode: device.userCode });
  const token = await nobody.ok("POST", "/api/cli/auth/token", { deviceCode: device.deviceCode });
  return { accessToken: token.accessToken, refreshToken: token.refreshToken };
}

/** A seeded PRNG (sfc32 over a 128-bit state from the seed), so a failing run can be repeated. */
export class Random {
  private a: number;
  private b: number;
  private c: number;
  private d: number;

  readonly seed: number;

  constructor(seed: number) {
    this.seed = seed;
    const h = crypto.createHash("sha256").update(String(seed)).digest();
    this.a = h.readUInt32LE(0);
    this.b = h.readUInt32LE(4);
    this.c = h.readUInt32LE(8);
    this.d = h.readUInt32LE(12);
  }

  /** A float in [0, 1). */
  next(): number {
    this.a >>>= 0;
    this.b >>>= 0;
    this.c >>>= 0;
    this.d >>>= 0;
    const t = (((this.a + this.b) | 0) + this.d) | 0;
    this.d = (this.d + 1) | 0;
    this.a = this.b ^ (this.b >>> 9);
    this.b = (this.c + (this.c << 3)) | 0;
    this.c = (this.c << 21) | (this.c >>> 11);
    this.c = (this.c + t) | 0;
    return (t >>> 0) / 4294967296;
  }

  int(below: number): number {
    return Math.floor(this.next() * below);
  }

  between(min: number, max: number): number {
    return min + this.next() * (max - min);
  }

  chance(p: number): boolean {
    return this.next() < p;
  }

  pick<T>(items: readonly T[]): T {
    return items[this.int(items.length)]!;
  }

  hex(bytes: number): string {
    let out = "";
    for (let i = 0; i < bytes; i++) out += this.int(256).toString(16).padStart(2, "0");
    return out;
  }
}

/** The seed of a run: DRILL_SEED when set (to repeat a failure), else a fresh one that is printed. */
export function drillSeed(): number {
  const fromEnv = Number(process.env.DRILL_SEED);
  return Number.isInteger(fromEnv) && fromEnv > 0 ? fromEnv : crypto.randomInt(1, 2 ** 31);
}

/** Resident memory of a process in MiB (VmRSS), or NaN once it has gone. */
export function rssMiB(pid: number): number {
  try {
    const status = fs.readFileSync(`/proc/${pid}/status`, "utf8");
    const kib = Number(/VmRSS:\s+(\d+) kB/.exec(status)?.[1]);
    return kib / 1024;
  } catch {
    return Number.NaN;
  }
}

export function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

export function removeDir(dir: string): void {
  fs.rmSync(dir, { recursive: true, force: true });
}

/**
 * Where a process's resident memory is, from /proc/<pid>/smaps, in MiB: the executable's
 * own pages (shared with the page cache), glibc's malloc arenas (anonymous mappings aligned
 * to 64 MiB, the arena size), the main malloc heap ([heap]), other anonymous memory (V8's
 * heap among it) and other files.
 */
export function memoryBreakdown(pid: number): Record<string, number> {
  const out: Record<string, number> = { executable: 0, arenas: 0, heap: 0, anonymous: 0, files: 0 };
  let smaps: string;
  try {
    smaps = fs.readFileSync(`/proc/${pid}/smaps`, "utf8");
  } catch {
    return out;
  }
  let exe = "";
  try {
    exe = fs.readlinkSync(`/proc/${pid}/exe`);
  } catch {
    // gone
  }
  let kind = "anonymous";
  for (const line of smaps.split("\n")) {
    const header = /^([0-9a-f]+)-([0-9a-f]+) \S+ \S+ \S+ \d+\s*(.*)$/.exec(line);
    if (header) {
      const start = BigInt(`0x${header[1]}`);
      const name = header[3]!.trim();
      if (name === exe) kind = "executable";
      else if (name === "[heap]") kind = "heap";
      else if (name.startsWith("/")) kind = "files";
      else if (name === "" && start % (64n << 20n) === 0n) kind = "arenas";
      else kind = "anonymous";
      continue;
    }
    const rss = /^Rss:\s+(\d+) kB/.exec(line);
    if (rss) out[kind]! += Number(rss[1]) / 1024;
  }
  return out;
}

export function formatBreakdown(parts: Record<string, number>): string {
  return Object.entries(parts)
    .map(([name, mib]) => `${name} ${mib.toFixed(0)}`)
    .join(", ");
}
