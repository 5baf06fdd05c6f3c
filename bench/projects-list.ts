// `tsx bench/projects-list.ts`: latency of GET /api/projects for a user in 200 projects
// (3 environments and 3 secrets each), one caller and then 8 at once. Not part of
// `npm run bench`: a quick before/after measure for the projects list's queries.
import fs from "node:fs";
import os from "node:os";
import { startServer } from "../test/helpers.ts";

const PROJECTS = 200;
const ROUNDS = 200;

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
}

const server = await startServer(undefined, { env: { LOG_LEVEL: "warn" } });
const owner = await server.signIn("bench@example.test");
for (let i = 0; i < PROJECTS; i++) {
  const project = await owner.createProject({ name: `project-${i}`, environments: ["development", "staging", "production"] });
  for (const env of ["development", "staging", "production"]) {
    await owner.post(`/api/projects/${project.id}/environments/${env}/secrets`, { key: `KEY_${i}`, value: "bench-value" });
  }
}

async function timed(): Promise<number> {
  const started = performance.now();
  const res = await owner.get("/api/projects");
  const body = (await res.json()) as { projects: unknown[] };
  if (body.projects.length !== PROJECTS) throw new Error("wrong list");
  return performance.now() - started;
}

for (let i = 0; i < 20; i++) await timed();
const alone: number[] = [];
for (let i = 0; i < ROUNDS; i++) alone.push(await timed());
const together: number[] = [];
await Promise.all(
  Array.from({ length: 8 }, async () => {
    for (let i = 0; i < ROUNDS / 8; i++) together.push(await timed());
  }),
);
console.log(`${os.cpus()[0]?.model ?? "unknown CPU"}, ${os.availableParallelism()} cores, Node ${process.version}`);
console.log(
  `GET /api/projects, ${PROJECTS} projects: median ${median(alone).toFixed(1)} ms alone, ${median(together).toFixed(1)} ms with 8 callers`,
);
await server.stop();
fs.rmSync(server.dataDir, { recursive: true, force: true });
process.exit(0);
