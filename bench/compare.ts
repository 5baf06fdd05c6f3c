// `tsx bench/compare.ts <other checkout> [seconds] [rounds]`: the session read (and a PATCH)
// against this checkout's server and another's (say an export of the previous commit), in
// alternating rounds on the same core, printing each one's server CPU per request. On a
// machine shared with other work, only a comparison made in turns like this means much.
// COMPARE_WRITES=1, COMPARE_IMPORT=1, COMPARE_EXPORT=1 and COMPARE_LIST=1 add a PATCH, an
// import of 500 updates, an export and a list of 1,000 secrets.
import path from "node:path";
import Database from "better-sqlite3";
import { call, type LoadOptions, ROOT, request, runAlternating, type ServerProcess, signIn, startAppServer } from "./lib.ts";

const other = path.resolve(process.argv[2] ?? "");
const seconds = Number(process.argv[3]) || 8;
const rounds = Number(process.argv[4]) || 4;
const pin = process.env.COMPARE_PIN ? ["taskset", "-c", process.env.COMPARE_PIN] : [];

async function start(root: string): Promise<{ server: ServerProcess; scenarios: LoadOptions[] }> {
  const server = await startAppServer({
    pin,
    synchronous: process.env.COMPARE_SYNCHRONOUS ?? "full",
    dataDirPrefix: "bench-compare-",
    root,
  });
  const { cookie } = await signIn(server.url, "owner@bench.test");
  const post = (p: string, body: unknown) => call(server.url, cookie, "POST", p, body);
  const { project } = await post("/api/projects", { name: "bench", environments: ["production", "staging"] });
  const base = `/api/projects/${project.id}/environments/production/secrets`;
  const { secret } = await post(base, { key: "DATABASE_URL", value: "postgres://user:password@db.internal:5432/app" });
  const name = root === ROOT ? "this" : path.basename(root);
  let n = 0;
  const scenarios: LoadOptions[] = [
    {
      name: `${name}: read`,
      url: server.url,
      serverPid: server.pid,
      connections: 8,
      seconds,
      next: () => ({ method: "GET", path: `${base}/${secret.id}`, headers: { cookie } }),
    },
  ];
  if (process.env.COMPARE_WRITES) {
    scenarios.push({
      name: `${name}: patch`,
      url: server.url,
      serverPid: server.pid,
      connections: 8,
      seconds,
      next: () => ({
        method: "PATCH",
        path: `${base}/${secret.id}`,
        headers: { cookie, "content-type": "application/json" },
        body: JSON.stringify({ value: `v${n++}` }),
      }),
    });
  }
  // One pool per server: the import and the export scenarios share it.
  let pool: Promise<string[]> | undefined;
  const admins = () => (pool ??= adminPool(server, project.id));
  if (process.env.COMPARE_IMPORT) {
    // Import is limited to 10 a minute per user: a pool of admins added straight to the file.
    const keys = Array.from({ length: 500 }, (_, i) => `IMPORT_${i}`);
    await post(`/api/projects/${project.id}/environments/production/import`, {
      entries: keys.map((key) => ({ key, value: "initial", overwrite: false })),
    });
    const importers = await admins();
    let round = 0;
    scenarios.push({
      name: `${name}: import 500 updates`,
      url: server.url,
      serverPid: server.pid,
      connections: 2,
      seconds,
      next: () => {
        const r = round++;
        return {
          method: "POST",
          path: `/api/projects/${project.id}/environments/production/import`,
          headers: { cookie: importers[r % importers.length]!, "content-type": "application/json" },
          body: JSON.stringify({ entries: keys.map((key) => ({ key, value: `imported-${r}-${key}`, overwrite: true })) }),
        };
      },
    });
  }
  if (process.env.COMPARE_EXPORT || process.env.COMPARE_LIST) {
    // 1,000 secrets in staging, in two imports: one takes at most 500 entries.
    const keys = Array.from({ length: 1000 }, (_, i) => `EXPORT_${i}`);
    for (const half of [keys.slice(0, 500), keys.slice(500)]) {
      await post(`/api/projects/${project.id}/environments/staging/import`, {
        entries: half.map((key) => ({ key, value: `value-of-${key}-0123456789abcdef`, overwrite: false })),
      });
    }
  }
  if (process.env.COMPARE_LIST) {
    scenarios.push({
      name: `${name}: list 1,000`,
      url: server.url,
      serverPid: server.pid,
      connections: 8,
      seconds,
      next: () => ({ method: "GET", path: `/api/projects/${project.id}/environments/staging/secrets`, headers: { cookie } }),
    });
  }
  if (process.env.COMPARE_EXPORT) {
    // Export is limited to 30 a minute per user: the pool of admins again (60 of them, so 1,800 a minute).
    const exporters = await admins();
    let round = 0;
    scenarios.push({
      name: `${name}: export 1,000 as dotenv`,
      url: server.url,
      serverPid: server.pid,
      connections: 2,
      seconds,
      next: () => ({
        method: "GET",
        path: `/api/projects/${project.id}/environments/staging/export?format=dotenv`,
        headers: { cookie: exporters[round++ % exporters.length]! },
      }),
    });
  }
  return { server, scenarios };
}

/** Admins of the project, signed in, added straight to the file: a pool to spread per-user rate limits over. */
async function adminPool(server: ServerProcess, projectId: string): Promise<string[]> {
  const pool: string[] = [];
  const db = new Database(path.join(server.dataDir, "secrets.db"));
  const addMember = db.prepare("INSERT INTO memberships (project_id, user_id, role, created_at, updated_at) VALUES (?, ?, 'admin', ?, ?)");
  for (let i = 0; i < 60; i++) {
    const res = await request(server.url, {
      method: "POST",
      path: "/api/auth/dev/sign-in",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ email: `user${i}@bench.test` }),
    });
    const now = new Date().toISOString();
    addMember.run(projectId, (JSON.parse(res.body) as { user: { id: string } }).user.id, now, now);
    pool.push((res.headers["set-cookie"]?.[0] ?? "").split(";")[0]!);
  }
  db.close();
  return pool;
}

const a = await start(ROOT);
const b = await start(other);
try {
  const rows = await runAlternating([...a.scenarios, ...b.scenarios], rounds);
  for (const row of rows) {
    console.log(
      `${row.name.padEnd(30)} ${row.requestsPerSecond.toFixed(0).padStart(6)} req/s  p50 ${row.p50Ms.toFixed(2)} ms  ${row.serverCpuMicros.toFixed(0).padStart(5)} µs CPU/request  (${row.requests} requests, ${row.errors} errors)`,
    );
  }
} finally {
  await a.server.stop();
  await b.server.stop();
}
process.exit(0);
