// Soak: a few concurrent clients send a mixed load (read a value, list, update, create and
// delete, export as JSON and dotenv) to one real server for 2 minutes, then leave it idle
// for a minute. Every 10 s it prints the server's RSS and the p99 latency of that window;
// the final line has RSS at start, at the end of the load and a minute later. It fails on
// any unexpected status (a 5xx above all); memory figures are reported, not judged, because
// they depend on the machine.
import {
  addMember,
  type Caller,
  createProject,
  type DrillOptions,
  type DrillResult,
  formatBreakdown,
  makeTempDir,
  memoryBreakdown,
  percentile,
  removeDir,
  request,
  rssMiB,
  signIn,
  sleep,
  startServer,
} from "./lib.ts";

export interface SoakOptions {
  loadSeconds: number;
  /** Idle time after the load, with RSS sampled every 10 s. */
  idleSeconds: number;
  clients: number;
  /**
   * Requests a second over all clients, each client keeping its share of the pace (an open
   * loop while the server keeps up), so runs on a busy machine send the same load and their
   * memory figures compare. 0: each client sends its next request as soon as it has an answer.
   */
  requestsPerSecond: number;
  /** Flags for the server's node (memory experiments: --max-semi-space-size=…). */
  nodeArgs?: string[];
  /** Extra server environment (MALLOC_ARENA_MAX=…). */
  env?: Record<string, string>;
  sampleSeconds: number;
  log: (line: string) => void;
}

export interface SoakFigures {
  requests: number;
  errors: string[];
  rssStartMiB: number;
  rssPeakMiB: number;
  rssEndOfLoadMiB: number;
  rssAfterIdleMiB: number;
  p99Ms: number;
  p99FirstMs: number;
  p99LastMs: number;
  requestsPerSecond: number;
}

// Per user, below the limits of 30 exports and 10 imports a minute.
const EXPORTS_PER_USER_PER_MINUTE = 28;
const IMPORTS_PER_USER_PER_MINUTE = 9;

export async function runSoak(options: SoakOptions): Promise<SoakFigures> {
  const dataDir = makeTempDir("drill-soak-");
  const server = await startServer({ dataDir, nodeArgs: options.nodeArgs, env: options.env }).catch((error: unknown) => {
    removeDir(dataDir);
    throw error;
  });
  try {
    const owner = await signIn(server, "owner@soak.test");
    const project = await createProject(owner, "soak");
    const base = `/api/projects/${project.id}/environments/production`;
    // 800 secrets: exports and lists of a large environment, with room below the cap of
    // 1,000 per environment for the ones the clients create.
    for (let part = 0; part < 2; part++) {
      const entries = Array.from({ length: 400 }, (_, i) => ({
        key: `SOAK_${part * 400 + i}`,
        value: `value-${part * 400 + i}-${"v".repeat(60)}`,
        overwrite: false,
      }));
      await owner.ok("POST", `${base}/import`, { entries });
    }
    const { secrets } = await owner.ok("GET", `${base}/secrets`);
    const ids: string[] = secrets.map((s: { id: string }) => s.id);
    // Each client takes turns among a few users: export and import are limited per user
    // (30 and 10 a minute), and the load should reach those endpoints, not their limits.
    // A load shorter than the limits' minute needs one user per client.
    const usersPerClient = options.loadSeconds < 60 ? 1 : 8;
    const clients: Caller[][] = [];
    for (let i = 0; i < options.clients; i++) {
      const users: Caller[] = [];
      for (let j = 0; j < usersPerClient; j++) {
        const email = `client${i}-${j}@soak.test`;
        const user = await signIn(server, email);
        await addMember(owner, user, project.id, email, "admin");
        users.push(user);
      }
      clients.push(users);
    }

    const rssStartMiB = rssMiB(server.pid);
    let rssPeakMiB = rssStartMiB;
    const all: number[] = [];
    let window: number[] = [];
    const p99s: number[] = [];
    const errors: string[] = [];
    const started = performance.now();
    const deadline = started + options.loadSeconds * 1000;
    let running = true;

    const sampler = (async () => {
      let next = started + options.sampleSeconds * 1000;
      while (running) {
        await sleep(Math.max(0, Math.min(next, deadline) - performance.now()));
        const rss = rssMiB(server.pid);
        rssPeakMiB = Math.max(rssPeakMiB, rss);
        const sorted = window.sort((a, b) => a - b);
        window = [];
        if (sorted.length === 0 && performance.now() >= deadline) break;
        const p99 = percentile(sorted, 99);
        p99s.push(p99);
        const seconds = Math.round((performance.now() - started) / 1000);
        options.log(`  soak t=${seconds}s rss=${rss.toFixed(0)} MiB p99=${p99.toFixed(1)} ms requests=${sorted.length}`);
        if (next >= deadline) break;
        next += options.sampleSeconds * 1000;
      }
    })();

    await Promise.all(
      clients.map(async (users, worker) => {
        const exportTimes: number[] = [];
        const importTimes: number[] = [];
        let turns = 0;
        let created: string[] = [];
        let n = 0;
        const intervalMs = options.requestsPerSecond > 0 ? (1000 * options.clients) / options.requestsPerSecond : 0;
        // Clients start spread over one interval, not all at once.
        let due = started + (intervalMs * worker) / options.clients;
        while (performance.now() < deadline) {
          if (intervalMs > 0) {
            due += intervalMs;
            const wait = due - performance.now();
            if (wait > 0) await sleep(wait);
            if (performance.now() >= deadline) break;
          }
          n++;
          const roll = (n * 7919 + worker * 104729) % 100;
          let method = "GET";
          let path: string;
          let body: unknown;
          const expect = [200, 201];
          const id = ids[(n * 31 + worker * 17) % ids.length]!;
          const now = performance.now();
          while (exportTimes.length > 0 && now - exportTimes[0]! > 60_000) exportTimes.shift();
          while (importTimes.length > 0 && now - importTimes[0]! > 60_000) importTimes.shift();
          // Rate-limited endpoints go round the client's users, the others to its first.
          let client = users[0]!;
          if (roll < 15 && exportTimes.length < EXPORTS_PER_USER_PER_MINUTE * usersPerClient) {
            client = users[turns++ % users.length]!;
            exportTimes.push(now);
            path = roll < 8 ? `${base}/export` : `${base}/export?format=dotenv`;
          } else if (roll < 19 && importTimes.length < IMPORTS_PER_USER_PER_MINUTE * usersPerClient) {
            client = users[turns++ % users.length]!;
            importTimes.push(now);
            method = "POST";
            path = `${base}/import`;
            const from = (n * 53) % 700;
            body = {
              entries: Array.from({ length: 100 }, (_, i) => ({
                key: `SOAK_${from + i}`,
                value: `imported-${n}-${i}-${"i".repeat(40)}`,
                overwrite: true,
              })),
            };
          } else if (roll < 45) {
            path = `${base}/secrets/${id}`;
          } else if (roll < 60) {
            path = `${base}/secrets`;
          } else if (roll < 85) {
            method = "PATCH";
            path = `${base}/secrets/${id}`;
            body = { value: `updated-${worker}-${n}-${"u".repeat(n % 200)}` };
          } else if (created.length < 10) {
            method = "POST";
            path = `${base}/secrets`;
            body = { key: `TEMP_${worker}_${n}`, value: `temporary-${n}` };
          } else {
            method = "DELETE";
            path = `${base}/secrets/${created[0]}`;
            created = created.slice(1);
          }
          const t0 = performance.now();
          const headers = client.headers(method);
          if (body !== undefined) headers["content-type"] = "application/json";
          let status = 0;
          let text = "";
          try {
            const res = await request(server.url, { method, path, headers, body: body === undefined ? undefined : JSON.stringify(body) });
            status = res.status;
            text = res.body;
          } catch (error) {
            text = String(error);
          }
          const elapsed = performance.now() - t0;
          window.push(elapsed);
          all.push(elapsed);
          if (!expect.includes(status)) {
            errors.push(`${method} ${path.replace(project.id, ":projectId")} answered ${status}: ${text.slice(0, 160)}`);
          } else if (method === "POST" && path.endsWith("/secrets")) {
            created.push((JSON.parse(text) as { secret: { id: string } }).secret.id);
          }
        }
      }),
    );
    running = false;
    await sampler;
    const elapsedSeconds = (performance.now() - started) / 1000;
    const rssEndOfLoadMiB = rssMiB(server.pid);
    options.log(`  soak memory at the end of the load (MiB): ${formatBreakdown(memoryBreakdown(server.pid))}`);
    rssPeakMiB = Math.max(rssPeakMiB, rssEndOfLoadMiB);
    let rssAfterIdleMiB = rssEndOfLoadMiB;
    for (let waited = 0; waited < options.idleSeconds; waited += options.sampleSeconds) {
      await sleep(Math.min(options.sampleSeconds, options.idleSeconds - waited) * 1000);
      rssAfterIdleMiB = rssMiB(server.pid);
      options.log(`  soak idle +${Math.min(waited + options.sampleSeconds, options.idleSeconds)}s rss=${rssAfterIdleMiB.toFixed(0)} MiB`);
    }
    if (options.idleSeconds > 0) options.log(`  soak memory after the idle time (MiB): ${formatBreakdown(memoryBreakdown(server.pid))}`);
    all.sort((a, b) => a - b);
    if (server.errorLines.length > 0) errors.push(...server.errorLines.slice(0, 3).map((line) => `server logged: ${line.slice(0, 300)}`));
    return {
      requests: all.length,
      errors,
      rssStartMiB,
      rssPeakMiB,
      rssEndOfLoadMiB,
      rssAfterIdleMiB,
      p99Ms: percentile(all, 99),
      p99FirstMs: p99s[0] ?? 0,
      p99LastMs: p99s[p99s.length - 1] ?? 0,
      requestsPerSecond: all.length / elapsedSeconds,
    };
  } finally {
    await server.stop();
    removeDir(dataDir);
  }
}

export async function drill(options: DrillOptions): Promise<DrillResult> {
  const loadSeconds = options.short ? 5 : Number(process.env.SOAK_SECONDS) || 120;
  const idleSeconds = options.short ? 0 : 60;
  const clients = 4;
  const requestsPerSecond = Number(process.env.SOAK_RATE) || 60;
  const f = await runSoak({
    loadSeconds,
    idleSeconds,
    clients,
    requestsPerSecond,
    sampleSeconds: options.short ? 2.5 : 10,
    log: options.log,
  });
  for (const error of f.errors.slice(0, 5)) options.log(`  soak: ${error}`);
  const mib = (n: number) => `${n.toFixed(0)} MiB`;
  const line =
    `soak: ${loadSeconds} s, ${clients} clients at ${requestsPerSecond}/s, ${f.requests} requests (${f.requestsPerSecond.toFixed(0)}/s), ${f.errors.length} errors; ` +
    `RSS ${mib(f.rssStartMiB)} at start, peak ${mib(f.rssPeakMiB)}, ${mib(f.rssEndOfLoadMiB)} at the end of the load` +
    (idleSeconds > 0 ? `, ${mib(f.rssAfterIdleMiB)} ${idleSeconds} s later` : "") +
    `; p99 ${f.p99Ms.toFixed(1)} ms (first window ${f.p99FirstMs.toFixed(1)} ms, last ${f.p99LastMs.toFixed(1)} ms)`;
  return { ok: f.errors.length === 0, line };
}
