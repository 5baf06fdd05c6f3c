// Shared by the bench modules: servers in their own process pinned to one core, a
// closed-loop HTTP load generator pinned to another, and the server's CPU time per request.
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import crypto from "node:crypto";
import fs from "node:fs";
import http from "node:http";
import os from "node:os";
import path from "node:path";
import { freePort } from "../test/helpers.ts";

export const ROOT = path.resolve(import.meta.dirname, "..");

export interface BenchRow {
  name: string;
  requests: number;
  requestsPerSecond: number;
  p50Ms: number;
  p99Ms: number;
  /** Responses with an unexpected status. */
  errors: number;
  /** Server CPU time (user + system) per request, in microseconds. */
  serverCpuMicros: number;
  /** A measured figure that is not a load (a start time, an RSS): then only this counts. */
  figure?: number;
}

export interface BenchContext {
  seconds: number;
  cores: number;
  /** taskset prefix for servers (empty when pinning is not possible). */
  serverPin: string[];
  log(line: string): void;
}

export interface BenchModule {
  name: string;
  run(ctx: BenchContext): Promise<BenchRow[]>;
  /** Lines printed after the table (ratios, notes). */
  summary?(rows: BenchRow[]): string[];
}

export function hasTaskset(): boolean {
  return spawnSync("taskset", ["-V"]).status === 0;
}

/** Pins this process (all its threads) to `core`; the load generator runs here. */
export function pinSelf(core: number): boolean {
  return spawnSync("taskset", ["-a", "-cp", String(core), String(process.pid)], { stdio: "ignore" }).status === 0;
}

const CLOCK_TICKS_PER_SECOND = Number(spawnSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).stdout.trim()) || 100;

/** User + system CPU time of a process so far, in microseconds (from /proc). */
export function processCpuMicros(pid: number): number {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
  // Fields after the command name, which is in parentheses and may contain spaces.
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  const utime = Number(fields[11]);
  const stime = Number(fields[12]);
  return ((utime + stime) * 1_000_000) / CLOCK_TICKS_PER_SECOND;
}

export interface ServerProcess {
  url: string;
  pid: number;
  dataDir: string;
  stop(): Promise<void>;
}

/** Starts `node --import tsx <script> ...args` pinned with `pin`, and waits for `readyPath` to answer. */
export async function startProcess(
  pin: string[],
  script: string,
  args: string[],
  env: Record<string, string>,
  port: number,
  readyPath: string,
  dataDir: string,
  /** The checkout to run `script` from (this one unless told: bench/compare.ts runs two). */
  root = ROOT,
): Promise<ServerProcess> {
  // BENCH_NODE_ARGS adds flags to the servers' node (`--cpu-prof --cpu-prof-dir=...` for a profile).
  const nodeArgs = (process.env.BENCH_NODE_ARGS ?? "").split(" ").filter(Boolean);
  const command = [...pin, process.execPath, ...nodeArgs, "--import", "tsx", path.join(root, script), ...args];
  const child: ChildProcess = spawn(command[0]!, command.slice(1), {
    cwd: root,
    // The request path as the executable runs it: drizzle's ES modules (see src/main.ts).
    env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "", DRIZZLE_AS_BUNDLED: "1", ...env },
    stdio: ["ignore", "ignore", "pipe"],
  });
  let stderr = "";
  child.stderr!.on("data", (chunk) => (stderr += chunk));
  const url = `http://127.0.0.1:${port}`;
  for (let i = 0; ; i++) {
    if (child.exitCode !== null) throw new Error(`${script} exited with ${child.exitCode}: ${stderr}`);
    try {
      const res = await fetch(url + readyPath);
      if (res.ok) break;
    } catch {
      // not listening yet
    }
    if (i > 300) throw new Error(`${script} did not start: ${stderr}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return {
    url,
    pid: child.pid!,
    dataDir,
    async stop() {
      if (child.exitCode !== null) return;
      const exited = new Promise((resolve) => child.once("exit", resolve));
      child.kill("SIGTERM");
      await exited;
    },
  };
}

// Every folder makeTempDir made (data directories, a built executable of 117 MB) goes when
// the bench ends, a Ctrl-C included: runs used to leave them behind in the temporary folder.
const tempDirs = new Set<string>();
function removeTempDirs(): void {
  for (const dir of tempDirs) fs.rmSync(dir, { recursive: true, force: true });
  tempDirs.clear();
}
process.on("exit", removeTempDirs);
// Node's default for these signals skips the exit handlers: clean up, then die of the signal
// as before (after any other handler of it, such as postgres.bench.ts stopping its cluster).
for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"] as const) {
  process.once(signal, () => {
    removeTempDirs();
    process.kill(process.pid, signal);
  });
}

export function makeTempDir(prefix: string): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  tempDirs.add(dir);
  return dir;
}

export function randomKey(): string {
  return crypto.randomBytes(32).toString("base64");
}

export interface RequestSpec {
  method: string;
  path: string;
  headers?: Record<string, string>;
  body?: string;
  /** The statuses that count as success (200 unless told). */
  expect?: number[];
  /** The server to send it to, when the load spreads over several (the load's url unless told). */
  url?: string;
}

export interface Response {
  status: number;
  body: string;
  headers: http.IncomingHttpHeaders;
}

const agent = new http.Agent({ keepAlive: true, maxSockets: 256 });

export function request(url: string, spec: RequestSpec): Promise<Response> {
  return new Promise((resolve, reject) => {
    const target = new URL(spec.path, url);
    const headers: Record<string, string | number> = { ...spec.headers };
    if (spec.body !== undefined) headers["content-length"] = Buffer.byteLength(spec.body);
    const req = http.request(
      { hostname: target.hostname, port: target.port, path: target.pathname + target.search, method: spec.method, headers, agent },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (chunk: Buffer) => chunks.push(chunk));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString("utf8"), headers: res.headers }));
        res.on("error", reject);
      },
    );
    req.on("error", reject);
    req.end(spec.body);
  });
}

export interface LoadOptions {
  name: string;
  url: string;
  serverPid: number;
  /** More servers taking part in the load: their CPU counts with serverPid's. */
  otherServerPids?: number[];
  connections: number;
  seconds: number;
  /** Builds the next request of worker `worker` (each worker sends one at a time). */
  next(worker: number): RequestSpec;
  /** Sees each response of a worker (to track versions, for example). */
  onResponse?(worker: number, response: Response): void;
  warmupSeconds?: number;
}

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

interface Measured {
  latencies: number[];
  errors: number;
  elapsedSeconds: number;
  cpuMicros: number;
}

/** `connections` workers, each sending its next request when the last one answered, for `seconds`. */
async function closedLoop(options: LoadOptions, seconds: number): Promise<Measured> {
  const latencies: number[] = [];
  let errors = 0;
  const pids = [options.serverPid, ...(options.otherServerPids ?? [])];
  const cpuNow = () => pids.reduce((sum, pid) => sum + processCpuMicros(pid), 0);
  const cpuBefore = cpuNow();
  const started = performance.now();
  const deadline = started + seconds * 1000;
  await Promise.all(
    Array.from({ length: options.connections }, async (_, worker) => {
      while (performance.now() < deadline) {
        const spec = options.next(worker);
        const sent = performance.now();
        const response = await request(spec.url ?? options.url, spec);
        const elapsed = performance.now() - sent;
        if (!(spec.expect ?? [200]).includes(response.status)) {
          errors++;
          if (errors === 1) console.error(`  ${options.name}: unexpected ${response.status} ${response.body.slice(0, 200)}`);
        }
        options.onResponse?.(worker, response);
        latencies.push(elapsed);
      }
    }),
  );
  return {
    latencies,
    errors,
    elapsedSeconds: (performance.now() - started) / 1000,
    cpuMicros: cpuNow() - cpuBefore,
  };
}

function toRow(name: string, parts: Measured[]): BenchRow {
  const latencies = parts.flatMap((p) => p.latencies).sort((a, b) => a - b);
  const elapsedSeconds = parts.reduce((sum, p) => sum + p.elapsedSeconds, 0);
  const cpu = parts.reduce((sum, p) => sum + p.cpuMicros, 0);
  return {
    name,
    requests: latencies.length,
    requestsPerSecond: latencies.length / elapsedSeconds,
    p50Ms: percentile(latencies, 50),
    p99Ms: percentile(latencies, 99),
    errors: parts.reduce((sum, p) => sum + p.errors, 0),
    serverCpuMicros: latencies.length > 0 ? cpu / latencies.length : 0,
  };
}

/** A closed loop: `connections` workers, each sending its next request when the last one answered. */
export async function runLoad(options: LoadOptions): Promise<BenchRow> {
  await closedLoop(options, options.warmupSeconds ?? 1);
  return toRow(options.name, [await closedLoop(options, options.seconds)]);
}

/**
 * Scenarios to compare with each other, against the same server: each is warmed up, then
 * they take turns in `rounds` rounds of `seconds / rounds` each, so that whatever else the
 * machine does at the time (other processes, a checkpoint of the WAL) falls on all of them
 * alike instead of on whichever ran at that moment. One row per scenario, over its rounds.
 */
export async function runAlternating(scenarios: LoadOptions[], rounds: number): Promise<BenchRow[]> {
  for (const options of scenarios) await closedLoop(options, options.warmupSeconds ?? 1);
  const parts: Measured[][] = scenarios.map(() => []);
  for (let round = 0; round < rounds; round++) {
    // Alternate the order too, so neither always runs right after the other.
    const order = scenarios.map((_, i) => i);
    if (round % 2 === 1) order.reverse();
    for (const i of order) parts[i]!.push(await closedLoop(scenarios[i]!, scenarios[i]!.seconds / rounds));
  }
  return scenarios.map((options, i) => toRow(options.name, parts[i]!));
}

/** The load scenarios as one table (rows with a `figure` are the goals table's: bench/goals.ts). */
export function formatTable(rows: BenchRow[]): string {
  const header = ["scenario", "req/s", "p50 ms", "p99 ms", "server CPU µs/req", "requests", "errors"];
  const body = rows
    .filter((r) => r.figure === undefined)
    .map((r) => [
      r.name,
      r.requestsPerSecond.toFixed(0),
      r.p50Ms.toFixed(2),
      r.p99Ms.toFixed(2),
      r.serverCpuMicros.toFixed(0),
      String(r.requests),
      String(r.errors),
    ]);
  const widths = header.map((h, i) => Math.max(h.length, ...body.map((row) => row[i]!.length)));
  const line = (cells: string[]) => `| ${cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join(" | ")} |`;
  return [
    line(header),
    `|${widths.map((w, i) => (i === 0 ? "-".repeat(w + 2) : `${"-".repeat(w + 1)}:`)).join("|")}|`,
    ...body.map(line),
  ].join("\n");
}

export { freePort };

/** Signs `email` in through the development sign-in; the session cookie and the user id. */
export async function signIn(url: string, email: string): Promise<{ cookie: string; userId: string }> {
  const res = await request(url, {
    method: "POST",
    path: "/api/auth/dev/sign-in",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ email }),
  });
  if (res.status !== 200) throw new Error(`sign-in failed: ${res.status} ${res.body}`);
  const setCookie = res.headers["set-cookie"]?.[0] ?? "";
  return { cookie: setCookie.split(";")[0]!, userId: (JSON.parse(res.body) as { user: { id: string } }).user.id };
}

/** One API call as the session `cookie`; any status outside `expect` throws. */
export async function call(url: string, cookie: string, method: string, path: string, body?: unknown, expect = [200, 201]): Promise<any> {
  const res = await request(url, {
    method,
    path,
    headers: { cookie, ...(body === undefined ? {} : { "content-type": "application/json" }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (!expect.includes(res.status)) throw new Error(`${method} ${path}: ${res.status} ${res.body.slice(0, 300)}`);
  return JSON.parse(res.body);
}

/** The server (`serve` from `root`) in development mode on a fresh data folder, rate limits out of the way. */
export async function startAppServer(options: {
  pin: string[];
  synchronous: string;
  dataDirPrefix: string;
  root?: string;
  /** A postgres:// URL: the server keeps everything there instead of SQLite in its data folder. */
  databaseUrl?: string;
  /** Servers that share a database must share the key too (a fresh one unless told). */
  masterKey?: string;
}): Promise<ServerProcess> {
  const dataDir = makeTempDir(options.dataDirPrefix);
  const port = await freePort();
  return startProcess(
    options.pin,
    "src/main.ts",
    ["serve"],
    {
      NODE_ENV: "development",
      AUTH_PROVIDER: "dev",
      HOST: "127.0.0.1",
      PORT: String(port),
      APP_URL: `http://127.0.0.1:${port}`,
      DATA_DIR: dataDir,
      MASTER_KEY: options.masterKey ?? randomKey(),
      LOG_LEVEL: "info",
      SQLITE_SYNCHRONOUS: options.synchronous,
      RATE_LIMIT_PER_MINUTE: "1000000",
      ...(options.databaseUrl ? { DATABASE_URL: options.databaseUrl } : {}),
    },
    port,
    "/healthz",
    dataDir,
    options.root,
  );
}
