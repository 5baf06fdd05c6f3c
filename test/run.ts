// `npm test`'s test run: every test file on SQLite (the default store) and, beside it, every
// one again on PostgreSQL (but those that run once), in one throwaway cluster this run starts
// and removes (test/postgres.ts). One store only: `npm test -- --store=sqlite` or `--store=postgres`;
// some files only: `npm test -- test/secrets.test.ts` (both stores) or with --store.
import { spawn } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { startSharedCluster, stopSharedCluster } from "./postgres.ts";

const ROOT = path.resolve(import.meta.dirname, "..");

/**
 * Files that run once (in the first pass), each for a reason: they test SQLite itself (its
 * files, its connection gate, the executable's embedded store), start and stop their own
 * PostgreSQL cluster (postgres-*), or test what no store is under (the CLI alone, the UI's
 * rendering, configuration, formats). The UI tests drive the same API the HTTP tests prove
 * on both stores.
 */
const RUN_ONCE = new Set([
  "config.test.ts",
  "executable.test.ts",
  "idle-gc.test.ts",
  "openapi.test.ts",
  "postgres-schema.test.ts",
  "postgres-store.test.ts",
  "postgres-servers.test.ts",
  "security-data-dir.test.ts",
  "transactions.test.ts",
  "vercel-plan.test.ts",
  "cli-run-env.test.ts",
  "export-formats.test.ts",
  "web-dotenv.test.ts",
  "screenshots.test.ts",
]);

const args = process.argv.slice(2);
const storeArg = args.find((a) => a.startsWith("--store="))?.slice("--store=".length) ?? "both";
if (!["sqlite", "postgres", "both"].includes(storeArg)) {
  console.error("--store must be sqlite, postgres or both.");
  process.exit(2);
}
const named = args.filter((a) => !a.startsWith("--"));
const all = fs
  .readdirSync(path.join(ROOT, "test"))
  .filter((f) => f.endsWith(".test.ts"))
  .sort();
const chosen = named.length > 0 ? named.map((f) => path.basename(f)) : all;

/**
 * One `node --test` run. Its report goes to the terminal as it comes, or, when `quiet`, is
 * kept and printed whole at the end, so that two runs side by side do not mix their lines.
 */
function runFiles(files: string[], env: NodeJS.ProcessEnv, quiet = false): Promise<{ code: number; report: string }> {
  if (files.length === 0) return Promise.resolve({ code: 0, report: "" });
  return new Promise((resolve) => {
    const child = spawn(
      process.execPath,
      ["--import", "tsx", "--test", "--test-concurrency=2", "--test-reporter=spec", ...files.map((f) => path.join("test", f))],
      { cwd: ROOT, env, stdio: quiet ? ["ignore", "pipe", "pipe"] : "inherit" },
    );
    let report = "";
    child.stdout?.on("data", (chunk: Buffer) => {
      report += chunk;
    });
    child.stderr?.on("data", (chunk: Buffer) => {
      report += chunk;
    });
    child.on("close", (code, signal) => resolve({ code: code ?? (signal ? 1 : 0), report }));
  });
}

/** The PostgreSQL pass: every chosen file but those that run once, in one throwaway cluster. */
async function postgresPass(quiet: boolean): Promise<{ code: number; report: string; files: number }> {
  const files = chosen.filter((f) => named.length > 0 || !RUN_ONCE.has(f));
  let cluster: string;
  try {
    cluster = await startSharedCluster();
  } catch (error) {
    return { code: 1, report: `${(error as Error).message}\nTo run on SQLite only: npm test -- --store=sqlite.\n`, files: files.length };
  }
  try {
    const result = await runFiles(files, { ...process.env, TEST_DATABASE: "postgres", TEST_PG_CLUSTER: cluster }, quiet);
    return { ...result, files: files.length };
  } finally {
    stopSharedCluster(cluster);
  }
}

/*
 * Both stores at once: much of a test's time is spent waiting (for processes to start, a
 * browser, a poll's deadline, PostgreSQL's round trips), so the two passes side by side take
 * little more than the longer one, which keeps CI within its time.
 */
let failed = false;
if (storeArg === "postgres") {
  const pass = await postgresPass(false);
  if (pass.report) console.error(pass.report);
  failed = pass.code !== 0;
} else {
  const both = storeArg === "both";
  const postgres = both ? postgresPass(true) : Promise.resolve(undefined);
  console.log(`\n# SQLite: ${chosen.length} test files${both ? " (PostgreSQL's pass runs beside it; its report follows)" : ""}\n`);
  failed = (await runFiles(chosen, { ...process.env, TEST_DATABASE: "sqlite" })).code !== 0;
  const pass = await postgres;
  if (pass) {
    console.log(`\n# PostgreSQL: ${pass.files} test files\n`);
    process.stdout.write(pass.report);
    failed ||= pass.code !== 0;
  }
}
process.exit(failed ? 1 : 0);
