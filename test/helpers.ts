// Test helpers: a real server (buildApp + listen on a free port) on a real SQLite file in
// a fresh temporary DATA_DIR, and HTTP clients that use only the public API.
import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import crypto from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { Writable } from "node:stream";
import type { TestContext } from "node:test";
import { type App, buildApp } from "../src/app.ts";
import { ManualClock } from "../src/core/clock.ts";
import { loadConfig } from "../src/core/config.ts";
import { DATABASE_FILE } from "../src/core/db.ts";
import { sourceCommand } from "../src/dev/source-command.ts";
import type { FakeVercel } from "./fake-vercel.ts";
import { createServerDatabase } from "./postgres.ts";
import { auditRows } from "./storage.ts";

export const ROOT = path.resolve(import.meta.dirname, "..");

/** Every log line any test server wrote, for scans that prove no secret was logged. */
export const allLogLines: string[] = [];

// Leak scan: every secret a test sends (request fields below) or receives (response
// fields below) is remembered per data folder, and when the test ends no audit event
// and no log line of that folder's servers may contain it. So every test file enforces
// "no value, token or key in audit metadata or logs". Strings under 6 characters are
// ignored; pick distinctive values in tests (a value like "secret" also occurs in
// ordinary log text).
const SENSITIVE_REQUEST_FIELDS = new Set(["value", "token", "refreshToken", "accessToken", "deviceCode", "password", "deployHookUrl"]);
// `token`: a service token, shown once by POST .../service-accounts/<id>/tokens.
const SENSITIVE_RESPONSE_FIELDS = new Set(["accessToken", "refreshToken", "deviceCode", "devAcceptUrl", "token"]);
const MIN_SENSITIVE_LENGTH = 6;

interface LeakWatch {
  /** Sensitive string to where the test used it. */
  sensitive: Map<string, string>;
  logs: string[];
}
const leakWatchesByDataDir = new Map<string, LeakWatch>();
const leakWatchesByUrl = new Map<string, LeakWatch>();

function leakWatchFor(dataDir: string): LeakWatch {
  let watch = leakWatchesByDataDir.get(dataDir);
  if (!watch) {
    watch = { sensitive: new Map(), logs: [] };
    leakWatchesByDataDir.set(dataDir, watch);
  }
  return watch;
}

function collectSensitive(watch: LeakWatch, input: unknown, fields: Set<string>, where: string): void {
  if (Array.isArray(input)) {
    for (const item of input) collectSensitive(watch, item, fields, where);
  } else if (input !== null && typeof input === "object") {
    for (const [name, value] of Object.entries(input)) {
      if (fields.has(name) && typeof value === "string") {
        // devAcceptUrl carries the invitation token in its fragment.
        const secret = name === "devAcceptUrl" ? value.slice(value.indexOf("#") + 1) : value;
        if (secret.length >= MIN_SENSITIVE_LENGTH && !value.endsWith("#")) watch.sensitive.set(secret, `${where} field "${name}"`);
      } else {
        collectSensitive(watch, value, fields, where);
      }
    }
  }
}

function parseJsonOrUndefined(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/** Fails when an audit event or a log line of this folder's servers contains a sensitive string. */
export function assertNoLeaks(dataDir: string): void {
  const watch = leakWatchesByDataDir.get(dataDir);
  if (!watch || watch.sensitive.size === 0) return;
  const found: string[] = [];
  const check = (text: string, place: string) => {
    for (const [secret, where] of watch.sensitive) {
      if (text.includes(secret)) found.push(`${where} (${JSON.stringify(secret.slice(0, 40))}) appears in ${place}`);
    }
  };
  // Every stored event, of every project, deleted ones too, and of none: the audit API shows one existing project's.
  if (databaseUrlOf.has(dataDir) || fs.existsSync(path.join(dataDir, DATABASE_FILE))) {
    for (const row of auditRows(dataDir))
      check(`${row.target_type}\n${row.target_id}\n${row.metadata}`, `audit event #${row.seq} (${row.action})`);
  }
  for (const line of watch.logs) check(line, `log line ${line.slice(0, 200)}`);
  if (found.length > 0) throw new Error(`secret material leaked:\n${found.slice(0, 10).join("\n")}`);
}

// A test file's folders go when its process ends: tests that made one for a command or a
// CLI home left hundreds behind per run on a developer's machine.
const tempDirs = new Set<string>();
process.on("exit", () => {
  for (const dir of tempDirs) fs.rmSync(dir, { recursive: true, force: true });
});

export function makeTempDir(prefix = "secrets-test-"): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  tempDirs.add(dir);
  return dir;
}

/** What the server must store for a token: its SHA-256 in hex, computed here, not by the code under test. */
export function sha256Hex(text: string): string {
  return crypto.createHash("sha256").update(text).digest("hex");
}

export function randomMasterKey(): string {
  return crypto.randomBytes(32).toString("base64");
}

export interface ServerOptions {
  env?: Record<string, string | undefined>;
  /** Use `env` as the whole environment instead of overriding the test defaults (restarts). */
  exactEnv?: boolean;
  dataDir?: string;
  clock?: ManualClock;
  /** Runs before each group-commit sync of the WAL (buildApp's beforeWalSync). */
  beforeWalSync?: () => Promise<void>;
  /** Called instead of stopping the test process when a WAL sync fails (buildApp's onWalSyncFailure). */
  onWalSyncFailure?: () => void;
}

export interface TestServer {
  url: string;
  origin: string;
  dataDir: string;
  clock: ManualClock;
  app: App;
  env: Record<string, string>;
  /** Log lines of this server. */
  logs: string[];
  client(): Client;
  /** Signs in with the development provider and returns a client holding the session cookie. */
  signIn(email: string, name?: string): Promise<Client>;
  /** Stops the server, keeping its data folder. */
  stop(): Promise<void>;
  /** Starts a new server on the same data folder (and the same env unless overridden). */
  restart(env?: Record<string, string | undefined>): Promise<TestServer>;
}

/**
 * The store the test servers run on: SQLite in their data folder (the default), or, with
 * TEST_DATABASE=postgres, a fresh PostgreSQL database each (test/postgres.ts), which the
 * data folder's key file and caches still sit beside.
 */
export const TEST_DATABASE: "sqlite" | "postgres" = process.env.TEST_DATABASE === "postgres" ? "postgres" : "sqlite";

/** A test's skip option: the reason when the run is on PostgreSQL and the test is about SQLite itself, else false. */
export function onPostgres(reason: string): string | false {
  return TEST_DATABASE === "postgres" ? `SQLite-specific: ${reason}` : false;
}

/** The DATABASE_URL of each PostgreSQL test server's data folder, so a stopped server's folder still names its database. */
export const databaseUrlOf = new Map<string, string>();

/** A command's environment for the data folder `env.DATA_DIR` names: with its database's URL when it has one (PostgreSQL). */
export function storeEnv(env: Record<string, string | undefined>): Record<string, string | undefined> {
  const url = env.DATA_DIR === undefined ? undefined : databaseUrlOf.get(env.DATA_DIR);
  return url === undefined ? env : { ...env, DATABASE_URL: url };
}

/** Starts a server; it is stopped and its folder removed when the test ends. */
export async function startServer(t: TestContext | undefined, options: ServerOptions = {}): Promise<TestServer> {
  const dataDir = options.dataDir ?? makeTempDir();
  const env: Record<string, string> = options.exactEnv
    ? {}
    : {
        NODE_ENV: "development",
        HOST: "127.0.0.1",
        PORT: "0",
        DATA_DIR: dataDir,
        MASTER_KEY: randomMasterKey(),
        LOG_LEVEL: "info",
        RATE_LIMIT_PER_MINUTE: "100000",
      };
  for (const [k, v] of Object.entries(options.env ?? {})) {
    if (v === undefined) delete env[k];
    else env[k] = v;
  }
  // A test that unsets MASTER_KEY tests the development key file in DATA_DIR, which
  // PostgreSQL does not allow: that server stays on SQLite.
  if (TEST_DATABASE === "postgres" && !options.exactEnv && !("DATABASE_URL" in (options.env ?? {})) && env.MASTER_KEY) {
    env.DATABASE_URL = databaseUrlOf.get(dataDir) ?? (await createServerDatabase());
  }
  if (env.DATABASE_URL) databaseUrlOf.set(dataDir, env.DATABASE_URL);
  const clock = options.clock ?? new ManualClock();
  const logs: string[] = [];
  const watch = leakWatchFor(dataDir);
  const logStream = new Writable({
    write(chunk, _enc, done) {
      for (const line of String(chunk).split("\n")) {
        if (line) {
          logs.push(line);
          allLogLines.push(line);
          watch.logs.push(line);
        }
      }
      done();
    },
  });

  // PORT=0: the OS picks the port at listen, and an APP_URL on port 0 follows it, so
  // servers start side by side without racing for a free port.
  if (!options.env?.APP_URL && !options.exactEnv) env.APP_URL = `http://127.0.0.1:${env.PORT}`;
  // A test that holds the WAL syncs must hold its own writes' syncs: the server's own
  // writes every few seconds (the rate-limit counts' save, the sync scheduler's lease)
  // would now and then be the held one, and a test letting one sync go at a time would hang.
  const holdsSyncs = options.beforeWalSync !== undefined;
  if (holdsSyncs && !("SYNC_LEASE_SECONDS" in (options.env ?? {}))) env.SYNC_LEASE_SECONDS = "600";
  const config = loadConfig(env);
  const app = await buildApp(config, {
    clock,
    logStream,
    beforeWalSync: options.beforeWalSync,
    rateLimitSaveEveryMs: holdsSyncs ? 3_600_000 : undefined,
    // Never the real stop, which would end the test run: the test's own assertions fail instead.
    onWalSyncFailure: options.onWalSyncFailure ?? (() => console.error(`a WAL sync failed in the test server of ${dataDir}`)),
  });
  await app.app.listen({ host: "127.0.0.1", port: config.port });
  await app.announce();
  const url = `http://127.0.0.1:${config.port}`;
  // A restart comes back on the same port and URL, so the clients a test holds keep working.
  env.PORT = String(config.port);
  if (config.appUrlFollowsPort) env.APP_URL = config.appUrl;
  leakWatchesByUrl.set(url, watch);

  let stopped = false;
  const server: TestServer = {
    url,
    origin: new URL(config.appUrl).origin,
    dataDir,
    clock,
    app,
    env,
    logs,
    client: () => new Client(url, config.appUrl),
    async signIn(email, name) {
      const client = new Client(url, config.appUrl);
      const res = await client.post("/api/auth/dev/sign-in", { email, ...(name ? { name } : {}) });
      if (res.status !== 200) throw new Error(`sign-in failed: ${res.status} ${await res.text()}`);
      client.user = ((await res.json()) as { user: SignedInUser }).user;
      return client;
    },
    async stop() {
      if (stopped) return;
      stopped = true;
      await app.close();
    },
    async restart(overrides) {
      await server.stop();
      const nextEnv: Record<string, string | undefined> = { ...env, ...overrides };
      return startServer(undefined, { env: nextEnv, exactEnv: true, dataDir, clock });
    },
  };
  t?.after(async () => {
    await server.stop();
    try {
      assertNoLeaks(dataDir);
    } finally {
      if (!options.dataDir) fs.rmSync(dataDir, { recursive: true, force: true });
    }
  });
  return server;
}

/**
 * Waits until the server has answered a request (its one log line per request), polling its
 * log with a deadline: the sign that a client's request of its own, a CLI's poll say, was
 * made and answered.
 */
export async function waitForAnswer(
  server: TestServer,
  request: { method: string; url: string; status: number },
  from = 0,
  timeoutMs = 30_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  const answered = (line: string) => {
    const entry = parseJsonOrUndefined(line) as { msg?: string; req?: { method?: string; url?: string }; res?: { statusCode?: number } };
    return (
      entry?.msg === "request completed" &&
      entry.req?.method === request.method &&
      entry.req?.url === request.url &&
      entry.res?.statusCode === request.status
    );
  };
  while (!server.logs.slice(from).some(answered)) {
    if (Date.now() > deadline) throw new Error(`no ${request.method} ${request.url} answered ${request.status} within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/**
 * Another project of `owner`'s, connected to the fake Vercel with a token of its own, gets a
 * change, and its automatic sync reaches the fake. The sign that an automatic run of a
 * project changed before it (every run waits the same debounce, SYNC_DEBOUNCE_MS) has had its
 * moment: tests proving that nothing reached Vercel wait for this instead of a fixed time.
 * Returns the other connection's token, to tell its requests from the rest.
 */
export async function automaticRunElsewhere(owner: Client, fake: FakeVercel): Promise<{ token: string }> {
  const token = `vcp_${crypto.randomBytes(18).toString("hex")}`;
  fake.addToken(token);
  fake.addProject("prj_marker", "marker");
  const other = await owner.createProject({ name: `marker-${crypto.randomUUID()}`, environments: ["development"] });
  const base = `/api/projects/${other.id}/integrations/hosting`;
  const connected = await owner.json("POST", base, { token });
  assert.equal(connected.status, 201, JSON.stringify(connected.body));
  const linked = await owner.json("PUT", base, { hostProjectId: "prj_marker", mappings: { development: "development" } });
  assert.equal(linked.status, 200, JSON.stringify(linked.body));
  const created = await owner.json("POST", `/api/projects/${other.id}/environments/development/secrets`, {
    key: "MARKER_KEY",
    value: "marker-value",
  });
  assert.equal(created.status, 201, JSON.stringify(created.body));
  const deadline = Date.now() + 20_000;
  while (fake.envFor("prj_marker", "MARKER_KEY", "development") === undefined) {
    if (Date.now() > deadline) throw new Error("the other project's automatic sync did not reach Vercel within 20 s");
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  return { token };
}

export interface CliTokens {
  accessToken: string;
  refreshToken: string;
  expiresIn: number;
}

/**
 * A real CLI login through the device flow: start, approve from `approver`'s browser
 * session, poll once. The tokens answer is checked never to be cached (RFC 6749 5.1).
 */
export async function cliLogin(server: TestServer, approver: Client, deviceName = "test laptop"): Promise<CliTokens> {
  const device = await server.client().json("POST", "/api/cli/auth/device", { deviceName });
  assert.equal(device.status, 200, JSON.stringify(device.body));
  const approved = await approver.json("POST", "/api/cli/auth/approve", { userCode: device.body.userCode });
  assert.equal(approved.status, 200, JSON.stringify(approved.body));
  const tokens = await server.client().json("POST", "/api/cli/auth/token", { deviceCode: device.body.deviceCode });
  assert.equal(tokens.status, 200, JSON.stringify(tokens.body));
  assert.equal(tokens.headers.get("cache-control"), "no-store");
  return tokens.body as CliTokens;
}

/** A client holding a CLI access token of `approver`'s user. */
export async function cliClient(server: TestServer, approver: Client, deviceName?: string): Promise<Client> {
  return server.client().withBearer((await cliLogin(server, approver, deviceName)).accessToken);
}

export interface AuditRow {
  id: string;
  at: string;
  action: string;
  category: string;
  /** The actor's user id; null for the system and for a service account. */
  actor: string | null;
  serviceAccount: { id: string; name: string } | null;
  targetType: string;
  targetId: string;
  metadata: Record<string, unknown>;
}

const AUDIT_CATEGORIES = ["secrets", "access", "project", "integrations"] as const;

/**
 * The project's audit events as the API shows them to an owner or admin (`reader`), oldest
 * first, those whose action starts with `prefix`. Read through GET /audit like a person
 * would; each event's category is learnt from the API's category filter (events carry none).
 */
export async function auditEvents(reader: Client, projectId: string, prefix = ""): Promise<AuditRow[]> {
  const page = async (query: string) => {
    const events: {
      id: string;
      at: string;
      action: string;
      targetType: string;
      targetId: string;
      metadata: Record<string, unknown>;
      actor: { userId: string | null } | null;
      serviceAccount: { id: string; name: string } | null;
    }[] = [];
    let cursor: string | null = null;
    do {
      const res: { status: number; body: any } = await reader.json(
        "GET",
        `/api/projects/${projectId}/audit?limit=100${query}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`,
      );
      assert.equal(res.status, 200, JSON.stringify(res.body));
      events.push(...res.body.events);
      cursor = res.body.nextCursor;
    } while (cursor);
    return events;
  };
  const categoryOf = new Map<string, string>();
  for (const category of AUDIT_CATEGORIES) for (const event of await page(`&category=${category}`)) categoryOf.set(event.id, category);
  return (await page(""))
    .reverse()
    .filter((event) => event.action.startsWith(prefix))
    .map((event) => ({
      id: event.id,
      at: event.at,
      action: event.action,
      category: categoryOf.get(event.id) ?? "",
      actor: event.actor?.userId ?? null,
      serviceAccount: event.serviceAccount ?? null,
      targetType: event.targetType,
      targetId: event.targetId,
      metadata: event.metadata,
    }));
}

export interface ServerProcess {
  url: string;
  dataDir: string;
  child: ChildProcess;
  output(): string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null; atMs: number }>;
}

/**
 * The server as its own process (`serve` from source), on PORT=0: ready, and its URL known,
 * when it logs "secrets-server is ready" with the port the OS gave it. Killed and its data
 * folder removed after the test unless the caller passes its own `dataDir`.
 */
export async function startServerProcess(
  t: TestContext,
  env: Record<string, string> = {},
  options: { dataDir?: string; timeoutMs?: number } = {},
): Promise<ServerProcess> {
  const dataDir = options.dataDir ?? makeTempDir();
  if (TEST_DATABASE === "postgres" && !("DATABASE_URL" in env)) {
    // Several processes on one folder share its database, as they share its SQLite file.
    const url = databaseUrlOf.get(dataDir) ?? (await createServerDatabase());
    databaseUrlOf.set(dataDir, url);
    env = { ...env, DATABASE_URL: url };
  }
  const child = spawn(...sourceCommand("serve"), {
    cwd: ROOT,
    env: {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      DATA_DIR: dataDir,
      PORT: "0",
      MASTER_KEY: randomMasterKey(),
      RATE_LIMIT_PER_MINUTE: "1000000",
      ...env,
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null; atMs: number }>((resolve) =>
    child.on("close", (code, signal) => resolve({ code, signal, atMs: Date.now() })),
  );
  // The leak scan covers this server as it covers those in the test's process: its whole
  // output once it has gone, before its folder does.
  const watch = leakWatchFor(dataDir);
  t.after(async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
    await exited;
    watch.logs.push(...output.split("\n").filter(Boolean));
    try {
      // A folder removed by an earlier `after` hook would skip the audit log without a word.
      if (!databaseUrlOf.has(dataDir) && !fs.existsSync(dataDir)) {
        throw new Error(`${dataDir} was removed before the leak scan of its server: leave it to makeTempDir`);
      }
      assertNoLeaks(dataDir);
    } finally {
      if (!options.dataDir) fs.rmSync(dataDir, { recursive: true, force: true });
    }
  });
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`the server did not start within ${options.timeoutMs ?? 30_000} ms:\n${output}`)),
      options.timeoutMs ?? 30_000,
    );
    const take = (chunk: Buffer) => {
      output += chunk;
      const ready = output.split("\n").find((line) => line.includes("secrets-server is ready"));
      if (!ready) return;
      clearTimeout(timer);
      // JSON when the output is a pipe; the URL's port is the one the OS picked.
      const port = new URL((JSON.parse(ready) as { url: string }).url).port;
      resolve(`http://127.0.0.1:${port}`);
    };
    child.stdout!.on("data", take);
    child.stderr!.on("data", (chunk: Buffer) => (output += chunk));
    child.once("exit", () => {
      clearTimeout(timer);
      reject(new Error(`the server exited before it was ready:\n${output}`));
    });
  });
  leakWatchesByUrl.set(url, watch);
  return { url, dataDir, child, output: () => output, exited };
}

export async function freePort(): Promise<number> {
  const net = await import("node:net");
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

export interface SignedInUser {
  id: string;
  email: string;
  name: string | null;
}

/** An HTTP client with a cookie jar (browser) or a Bearer token (CLI). */
export class Client {
  cookies = new Map<string, string>();
  bearer?: string;
  user?: SignedInUser;
  /** Sent as Origin on every request unless a test overrides it per request. */
  origin: string;

  readonly baseUrl: string;

  constructor(baseUrl: string, appUrl: string) {
    this.baseUrl = baseUrl;
    this.origin = new URL(appUrl).origin;
  }

  /** A client that sends only a Bearer token (a CLI). */
  withBearer(token: string): Client {
    const client = new Client(this.baseUrl, this.origin);
    client.bearer = token;
    return client;
  }

  /** The Cookie header this client sends: for requests a test writes by hand. */
  cookieHeader(): string {
    return [...this.cookies].map(([k, v]) => `${k}=${v}`).join("; ");
  }

  async request(method: string, urlPath: string, body?: unknown, headers: Record<string, string> = {}): Promise<Response> {
    const h: Record<string, string> = { ...headers };
    if (body !== undefined && typeof body !== "string") h["content-type"] ??= "application/json";
    if (this.bearer) h.authorization ??= `Bearer ${this.bearer}`;
    else if (method !== "GET" && method !== "HEAD" && !("origin" in h)) h.origin = this.origin;
    if (this.cookies.size > 0 && !("cookie" in h)) h.cookie = this.cookieHeader();
    const watch = leakWatchesByUrl.get(this.baseUrl);
    if (watch && body !== undefined) {
      collectSensitive(
        watch,
        typeof body === "string" ? parseJsonOrUndefined(body) : body,
        SENSITIVE_REQUEST_FIELDS,
        `${method} ${urlPath} request`,
      );
    }
    const send = () =>
      fetch(this.baseUrl + urlPath, {
        method,
        headers: h,
        body: body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body),
        redirect: "manual",
      });
    let res: Response;
    try {
      res = await send();
    } catch (error) {
      // After server.restart() on the same port, fetch's pool may still hold a kept-alive
      // socket to the stopped server; it fails before any byte reaches the new one.
      if (!isStaleSocket(error)) throw error;
      res = await send();
    }
    if (watch && res.headers.get("content-type")?.includes("application/json")) {
      collectSensitive(watch, parseJsonOrUndefined(await res.clone().text()), SENSITIVE_RESPONSE_FIELDS, `${method} ${urlPath} response`);
    }
    storeCookies(this.cookies, res);
    return res;
  }

  get(p: string, headers?: Record<string, string>) {
    return this.request("GET", p, undefined, headers);
  }
  post(p: string, body?: unknown, headers?: Record<string, string>) {
    return this.request("POST", p, body, headers);
  }
  put(p: string, body?: unknown, headers?: Record<string, string>) {
    return this.request("PUT", p, body, headers);
  }
  patch(p: string, body?: unknown, headers?: Record<string, string>) {
    return this.request("PATCH", p, body, headers);
  }
  delete(p: string, headers?: Record<string, string>) {
    return this.request("DELETE", p, undefined, headers);
  }

  /** Requests and parses JSON, returning status and body together. */
  async json<T = any>(method: string, p: string, body?: unknown): Promise<{ status: number; body: T; headers: Headers }> {
    const res = await this.request(method, p, body);
    const text = await res.text();
    return { status: res.status, body: (text ? JSON.parse(text) : undefined) as T, headers: res.headers };
  }

  async createProject(input: { name: string; description?: string; environments: string[] }): Promise<any> {
    const { status, body } = await this.json("POST", "/api/projects", input);
    if (status !== 201) throw new Error(`createProject failed: ${status} ${JSON.stringify(body)}`);
    return body.project;
  }
}

/** Runs the server's entry point as a process (for start-up failures and CLI commands). */
export function runMain(
  args: string[],
  env: Record<string, string | undefined>,
  options: { timeoutMs?: number; cwd?: string; input?: string | Buffer; stdoutReadAfterMs?: number; uid?: number } = {},
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(...sourceCommand(...args), {
      cwd: options.cwd ?? ROOT,
      env: { PATH: process.env.PATH, HOME: process.env.HOME, ...env } as NodeJS.ProcessEnv,
      stdio: ["pipe", "pipe", "pipe"],
      // Another user (the tests run as root to do so).
      ...(options.uid !== undefined ? { uid: options.uid, gid: options.uid } : {}),
    });
    let stdout = "";
    let stderr = "";
    // A slow reader: the pipe fills up and the command's writes wait in its own memory.
    if (options.stdoutReadAfterMs !== undefined) {
      child.stdout.pause();
      setTimeout(() => child.stdout.resume(), options.stdoutReadAfterMs);
    }
    child.stdout.on("data", (d) => (stdout += d));
    child.stderr.on("data", (d) => (stderr += d));
    if (options.input !== undefined) child.stdin.end(options.input);
    else child.stdin.end();
    const timer = setTimeout(() => child.kill("SIGKILL"), options.timeoutMs ?? 20_000);
    child.on("close", (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

export interface ListedUser {
  email: string;
  name: string;
  provider: string;
  status: string;
  verified: boolean;
}

/** Every user, as the operator's `users list` prints them (a server command on the same data folder). */
export async function listUsers(server: TestServer): Promise<ListedUser[]> {
  const listed = await runMain(["users", "list"], server.env);
  assert.equal(listed.code, 0, listed.stderr);
  if (listed.stdout === "No users yet.\n") return [];
  const [header, ...lines] = listed.stdout.trimEnd().split("\n");
  assert.equal(header, "EMAIL\tNAME\tPROVIDER\tSTATUS\tVERIFIED\tCREATED");
  return lines.map((line) => {
    const [email, name, provider, status, verified] = line.split("\t") as [string, string, string, string, string];
    return { email, name, provider, status, verified: verified === "yes" };
  });
}

function isStaleSocket(error: unknown): boolean {
  const cause = (error as { cause?: { code?: string; message?: string } }).cause;
  return (
    error instanceof TypeError &&
    (cause?.code === "UND_ERR_SOCKET" || cause?.code === "ECONNRESET" || /other side closed/.test(cause?.message ?? ""))
  );
}

/** Keeps a response's Set-Cookie headers in a cookie jar, dropping cleared cookies. */
export function storeCookies(jar: Map<string, string>, res: Response): void {
  for (const line of res.headers.getSetCookie()) {
    const [pair, ...attributes] = line.split(";");
    const eq = pair!.indexOf("=");
    const name = pair!.slice(0, eq).trim();
    const value = pair!.slice(eq + 1).trim();
    const expired = attributes.some((a) => /max-age=0|expires=thu, 01 jan 1970/i.test(a.trim()));
    if (!value || expired) jar.delete(name);
    else jar.set(name, value);
  }
}

/**
 * Polls `probe` until it gives a value (not undefined, not false) and returns it; fails naming
 * `what` after `timeoutMs`. The one way tests wait for something that happens on its own.
 */
export async function waitFor<T>(what: string, probe: () => Promise<T | undefined | false>, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}
