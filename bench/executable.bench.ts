// The executable as an operator and a deploy job meet it: start to the first /healthz 200
// (on a fresh DATA_DIR and on an existing one), RSS once started and after 20 requests, and
// the CLI's `version` and `run -- true` against a local server. Real processes, the median
// of BENCH_RUNS (10) each. The executable is built into a temporary folder (as the
// executable test does) unless BENCH_EXECUTABLE names one already built.
import { spawn, spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { type BenchContext, type BenchModule, type BenchRow, freePort, makeTempDir, ROOT, randomKey, request } from "./lib.ts";

const RUNS = Number(process.env.BENCH_RUNS) || 10;

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? 0;
}

/** A row whose figure is a duration or a size rather than a load. */
function row(name: string, figure: number, samples: number): BenchRow {
  return { name, requests: samples, requestsPerSecond: 0, p50Ms: 0, p99Ms: 0, errors: 0, serverCpuMicros: 0, figure };
}

/**
 * The executable to time, installed as an operator installs it (`install -m 0755`, a copy):
 * run from the folder a build has just written it to, it would show about 16 MiB more RSS,
 * the large page-cache folios of that write (drillExecutable in drills/lib.ts).
 */
function build(ctx: BenchContext): string {
  let built = process.env.BENCH_EXECUTABLE ? path.resolve(process.env.BENCH_EXECUTABLE) : undefined;
  if (!built) {
    const out = makeTempDir("bench-build-");
    ctx.log("  building the executable (BENCH_EXECUTABLE=<file> uses one already built)");
    const result = spawnSync(process.execPath, [path.join(ROOT, "build.mjs"), "--out", out], { cwd: ROOT, encoding: "utf8" });
    if (result.status !== 0) throw new Error(`build failed:\n${result.stdout}${result.stderr}`);
    built = path.join(out, "secrets-server");
  }
  const installed = path.join(makeTempDir("bench-installed-"), "secrets-server");
  fs.copyFileSync(built, installed);
  fs.chmodSync(installed, 0o755);
  return installed;
}

/** Milliseconds from spawn to the end of a short command. */
function timeCommand(file: string, args: string[], env: NodeJS.ProcessEnv, pin: string[]): Promise<number> {
  return new Promise((resolve, reject) => {
    const command = [...pin, file, ...args];
    const started = performance.now();
    const child = spawn(command[0]!, command.slice(1), { env, stdio: ["ignore", "ignore", "pipe"] });
    let stderr = "";
    child.stderr.on("data", (d) => (stderr += d));
    child.on("error", reject);
    child.on("close", (code) => {
      if (code !== 0) reject(new Error(`${args.join(" ")} exited with ${code}: ${stderr}`));
      else resolve(performance.now() - started);
    });
  });
}

interface Started {
  url: string;
  pid: number;
  ms: number;
  stop(): Promise<void>;
}

/** Starts `serve` and polls /healthz every 2 ms: the figure is spawn to the first 200. */
async function startServer(executable: string, dataDir: string, masterKey: string, pin: string[]): Promise<Started> {
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const env = {
    PATH: process.env.PATH ?? "",
    NODE_ENV: "development",
    AUTH_PROVIDER: "dev",
    HOST: "127.0.0.1",
    PORT: String(port),
    APP_URL: url,
    DATA_DIR: dataDir,
    MASTER_KEY: masterKey,
    LOG_LEVEL: "warn",
    // As the systemd unit runs it (README, Memory).
    MALLOC_ARENA_MAX: "2",
  };
  const command = [...pin, executable, "serve"];
  const started = performance.now();
  const child = spawn(command[0]!, command.slice(1), { env, stdio: ["ignore", "ignore", "pipe"] });
  let stderr = "";
  child.stderr!.on("data", (d) => (stderr += d));
  for (;;) {
    if (child.exitCode !== null) throw new Error(`serve exited with ${child.exitCode}: ${stderr}`);
    try {
      const res = await fetch(`${url}/healthz`);
      if (res.status === 200) break;
    } catch {
      // not listening yet
    }
    if (performance.now() - started > 30_000) throw new Error(`serve did not answer within 30 s: ${stderr}`);
    await new Promise((resolve) => setTimeout(resolve, 2));
  }
  const ms = performance.now() - started;
  return {
    url,
    pid: child.pid!,
    ms,
    async stop() {
      if (child.exitCode !== null) return;
      const exited = new Promise((resolve) => child.once("exit", resolve));
      child.kill("SIGTERM");
      await exited;
    },
  };
}

/** VmRSS and RssAnon of a process, in MiB. */
function rss(pid: number): { total: number; anonymous: number } {
  const status = fs.readFileSync(`/proc/${pid}/status`, "utf8");
  const kib = (name: string) => Number(status.match(new RegExp(`^${name}:\\s+(\\d+) kB`, "m"))?.[1] ?? 0);
  return { total: kib("VmRSS") / 1024, anonymous: kib("RssAnon") / 1024 };
}

export const EXECUTABLE_NAMES = {
  startFresh: "executable: start to first /healthz 200, fresh DATA_DIR (ms)",
  startExisting: "executable: start to first /healthz 200, existing DATA_DIR (ms)",
  rss: "executable: RSS after start and 20 requests (MiB)",
  rssAnonymous: "executable: anonymous RSS after start and 20 requests (MiB)",
  version: "CLI: secrets-server version (ms)",
  run: "CLI: secrets-server run -- true, local server (ms)",
} as const;

export const executableBench: BenchModule = {
  name: "executable",

  async run(ctx: BenchContext): Promise<BenchRow[]> {
    const executable = build(ctx);
    const masterKey = randomKey();
    const rows: BenchRow[] = [];

    ctx.log(`  start on a fresh DATA_DIR, ${RUNS} times`);
    const fresh: number[] = [];
    for (let i = 0; i < RUNS; i++) {
      const server = await startServer(executable, makeTempDir("bench-exe-fresh-"), masterKey, ctx.serverPin);
      fresh.push(server.ms);
      await server.stop();
    }
    rows.push(row(EXECUTABLE_NAMES.startFresh, median(fresh), RUNS));

    const dataDir = makeTempDir("bench-exe-");
    await (await startServer(executable, dataDir, masterKey, ctx.serverPin)).stop();
    ctx.log(`  start on an existing DATA_DIR, ${RUNS} times`);
    const existing: number[] = [];
    for (let i = 0; i < RUNS; i++) {
      const server = await startServer(executable, dataDir, masterKey, ctx.serverPin);
      existing.push(server.ms);
      await server.stop();
    }
    rows.push(row(EXECUTABLE_NAMES.startExisting, median(existing), RUNS));

    ctx.log("  RSS after 20 requests; the CLI against the same server");
    const server = await startServer(executable, dataDir, masterKey, ctx.serverPin);
    try {
      const json = { "content-type": "application/json" };
      const signIn = await request(server.url, {
        method: "POST",
        path: "/api/auth/dev/sign-in",
        headers: json,
        body: JSON.stringify({ email: "owner@bench.test" }),
      });
      const cookie = (signIn.headers["set-cookie"]?.[0] ?? "").split(";")[0]!;
      const call = async (method: string, p: string, body?: unknown) =>
        JSON.parse(
          (
            await request(server.url, {
              method,
              path: p,
              headers: { cookie, ...json },
              body: body === undefined ? undefined : JSON.stringify(body),
            })
          ).body,
        );
      const { project } = await call("POST", "/api/projects", { name: "bench", environments: ["production"] });
      const base = `/api/projects/${project.id}/environments/production`;
      const { secret } = await call("POST", `${base}/secrets`, { key: "DATABASE_URL", value: "postgres://db.internal/app" });
      for (let i = 0; i < 6; i++) await call("GET", `${base}/secrets/${secret.id}`);
      for (let i = 0; i < 6; i++) await call("GET", `${base}/secrets`);
      for (let i = 0; i < 4; i++) await request(server.url, { method: "GET", path: `${base}/export?format=dotenv`, headers: { cookie } });
      const { serviceAccount } = await call("POST", `/api/projects/${project.id}/service-accounts`, {
        name: "bench",
        role: "viewer",
        environments: ["production"],
      });
      const { token } = await call("POST", `/api/projects/${project.id}/service-accounts/${serviceAccount.id}/tokens`, { name: "bench" });
      // 20 requests in all, then a moment for the last responses' buffers to be let go.
      await new Promise((resolve) => setTimeout(resolve, 500));
      const memory = rss(server.pid);
      rows.push(row(EXECUTABLE_NAMES.rss, memory.total, 1), row(EXECUTABLE_NAMES.rssAnonymous, memory.anonymous, 1));

      const home = makeTempDir("bench-cli-home-");
      const cliEnv = { PATH: process.env.PATH ?? "", HOME: home, XDG_CONFIG_HOME: home };
      const versions: number[] = [];
      for (let i = 0; i < RUNS; i++) versions.push(await timeCommand(executable, ["version"], cliEnv, []));
      rows.push(row(EXECUTABLE_NAMES.version, median(versions), RUNS));
      const runs: number[] = [];
      const runEnv = { ...cliEnv, SECRETS_SERVER_URL: server.url, SECRETS_SERVER_TOKEN: token };
      for (let i = 0; i < RUNS; i++) runs.push(await timeCommand(executable, ["run", "--silent", "--", "true"], runEnv, []));
      rows.push(row(EXECUTABLE_NAMES.run, median(runs), RUNS));
    } finally {
      await server.stop();
      // The installed copy (117 MB) at once; the build's folder goes when the bench ends.
      fs.rmSync(path.dirname(executable), { recursive: true, force: true });
    }
    return rows;
  },
};
