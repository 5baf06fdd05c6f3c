// `tsx bench/profile.ts [seconds] [checkout]`: where the server's CPU goes on the
// session read (GET of one secret value), for the breakdown in the README's Performance
// section. PROFILE_TOKEN=1: the same read with a service token. PROFILE_SCENARIO=list or
// export: a list of 1,000 secrets, or their export as dotenv, instead. The server runs
// alone from source; `perf record` samples it on-CPU (kernel, SQLite, V8 and JavaScript
// frames, with --perf-basic-prof) while the clients call, and each sample is counted under
// the first category its stack names, innermost frame first.
// Needs perf and permission to attach to a process (root, or perf_event_paranoid <= 1).
import { spawn, spawnSync } from "node:child_process";
import path from "node:path";
import Database from "better-sqlite3";
import { call, makeTempDir, runLoad, signIn, startAppServer } from "./lib.ts";

const seconds = Number(process.argv[2]) || 6;
const root = path.resolve(process.argv[3] ?? path.join(import.meta.dirname, ".."));
const scenario = process.env.PROFILE_SCENARIO ?? "read";
if (!["read", "list", "export"].includes(scenario)) throw new Error(`PROFILE_SCENARIO: read, list or export, not ${scenario}`);
const perfData = process.env.PROFILE_KEEP ?? path.join(makeTempDir("bench-profile-"), "perf.data");
process.env.BENCH_NODE_ARGS = "--perf-basic-prof-only-functions";

const server = await startAppServer({ pin: [], synchronous: "full", dataDirPrefix: "bench-read-", root });
const { cookie } = await signIn(server.url, "owner@bench.test");
const post = (p: string, body: unknown) => call(server.url, cookie, "POST", p, body);
const { project } = await post("/api/projects", { name: "bench", environments: ["production"] });
const base = `/api/projects/${project.id}/environments/production`;
const { secret } = await post(`${base}/secrets`, {
  key: "DATABASE_URL",
  value: "postgres://user:password@db.internal:5432/app",
});
// PROFILE_TOKEN=1: the same read with a viewer service account's token, as a deploy job makes it.
let credentials: Record<string, string>[] = [{ cookie }];
if (process.env.PROFILE_TOKEN) {
  const { serviceAccount } = await post(`/api/projects/${project.id}/service-accounts`, {
    name: "profile",
    role: "viewer",
    environments: ["production"],
  });
  const { token } = await post(`/api/projects/${project.id}/service-accounts/${serviceAccount.id}/tokens`, { name: "profile" });
  credentials = [{ authorization: `Bearer ${token}` }];
}
let target = `${base}/secrets/${secret.id}`;
if (scenario !== "read") {
  // 1,000 secrets (999 beside the one above), as the bench lists and exports them.
  const keys = Array.from({ length: 999 }, (_, i) => `EXPORT_${i}`);
  for (const part of [keys.slice(0, 500), keys.slice(500)]) {
    await post(`${base}/import`, { entries: part.map((key) => ({ key, value: `value-of-${key}-0123456789abcdef`, overwrite: false })) });
  }
  target = scenario === "list" ? `${base}/secrets` : `${base}/export?format=dotenv`;
}
if (scenario === "export") {
  // Export is limited to 30 a minute per user: admins added straight to the file, in turns.
  const db = new Database(path.join(server.dataDir, "secrets.db"));
  const addMember = db.prepare("INSERT INTO memberships (project_id, user_id, role, created_at, updated_at) VALUES (?, ?, 'admin', ?, ?)");
  credentials = [];
  for (let i = 0; i < Math.ceil(((seconds + 2) * 400) / 30); i++) {
    const user = await signIn(server.url, `user${i}@bench.test`);
    const now = new Date().toISOString();
    addMember.run(project.id, user.userId, now, now);
    credentials.push({ cookie: user.cookie });
  }
  db.close();
}
let turn = 0;
const load = {
  name: scenario,
  url: server.url,
  serverPid: server.pid,
  connections: scenario === "read" ? 8 : 4,
  seconds,
  next: () => ({ method: "GET", path: target, headers: credentials[turn++ % credentials.length]! }),
};
// Warm: V8 has optimized the path before sampling starts.
await runLoad({ ...load, seconds: 2 });
const recorder = spawn("perf", ["record", "-F", "1999", "-g", "-o", perfData, "-p", String(server.pid), "--", "sleep", String(seconds)], {
  stdio: "ignore",
});
const row = await runLoad({ ...load, warmupSeconds: 0.01 });
await new Promise((resolve) => recorder.on("exit", resolve));
await server.stop();
console.log(
  `${row.requests} requests (${scenario}, ${row.errors} errors), ${row.requestsPerSecond.toFixed(0)} req/s, ${row.serverCpuMicros.toFixed(0)} µs of server CPU each (from /proc)`,
);

/** Innermost match wins: a frame deep in the audit writer counts as audit, not as Fastify. */
const CATEGORIES: [string, RegExp][] = [
  [
    "fsync and WAL write (kernel, for the audit commit)",
    /fsync|ext4_sync|jbd2|blkdev_issue_flush|file_write_and_wait|walWriteToLog|walFrames|unixSync/,
  ],
  ["audit: hash chain (HMAC)", /eventHash|Hmac|hmac/i],
  ["audit: event id, metadata, JSON", /toContent|createEventIds|nextId|cleanValue/],
  ["audit: insert and its indexes", /append |appendAll|flushReads|audit\.writer/],
  ["rate limit", /rate-limit|rateLimit/],
  ["session lookup (cookie hash, SQL)", /resolveCookie|resolveBearer|browser-sessions\.repo|access-tokens\.repo|core\/auth\.ts|hashToken/],
  ["access checks", /core\/access\.ts|access\.repo/],
  ["export: ETag, dotenv text", /exportTag|formatDotenv|dotenv\.ts|exportFile/],
  // Before decrypt: listWithCiphertext would match its /Cipher/.
  ["secret lookup and lists (SQL)", /secrets\.repo|findOrFail/],
  ["decrypt (vault, AES-GCM)", /core\/vault\.ts|core\/crypto\.ts|Decipher|Cipher|EVP_|aes_gcm|gcm_/],
  ["security headers", /helmet|security-headers/],
  ["logging (pino, redaction)", /pino|redact|requestCompleted|OneLinePerRequest/],
  ["JSON response", /serializ|fast-json-stringify|JsonStringifier|JSON|json-body/],
  ["cookies", /@fastify\/cookie|cookie\/dist/],
  ["request hooks (stop, encoding, cache-control, idle timers)", /request-hooks|connections\.ts|idle-gc|core\/wal\.ts/],
  ["secret service (its read transaction)", /secrets\.service|readTransaction/],
  ["Fastify (routing, hooks, reply)", /fastify|find-my-way|avvio/],
  ["HTTP and sockets (Node, kernel)", /_http_|node:net|llhttp|http_parser|tcp_|inet_|sock_|LibuvStreamWrap|uv__|epoll|StreamBase/],
  ["garbage collection", /v8::internal::Heap|Scavenger|MarkCompact|GCTracer|ConcurrentMarking|Sweeper/],
];
const script = spawnSync("perf", ["script", "-i", perfData, "-F", "comm,tid,ip,sym"], { encoding: "utf8", maxBuffer: 1 << 30 });
const totals = new Map<string, number>();
let samples = 0;
for (const block of script.stdout.split("\n\n")) {
  const lines = block.split("\n").filter((line) => line.trim() !== "");
  if (lines.length === 0) continue;
  samples++;
  const frames = lines.slice(1).map((line) => line.trim().replace(/^[0-9a-f]+\s+/, ""));
  let category = "other (V8 runtime, libc, process)";
  for (const frame of frames) {
    const hit = CATEGORIES.find(([, re]) => re.test(frame));
    if (hit) {
      category = hit[0];
      break;
    }
  }
  totals.set(category, (totals.get(category) ?? 0) + 1);
}
const cpuPerRequest = row.serverCpuMicros;
console.log(`${samples} samples; share of the server's CPU and µs per request:`);
for (const [category, count] of [...totals].sort((a, b) => b[1] - a[1])) {
  const share = count / samples;
  console.log(`  ${category.padEnd(60)} ${(100 * share).toFixed(1).padStart(5)} %  ${(share * cpuPerRequest).toFixed(0).padStart(5)} µs`);
}
process.exit(0);
