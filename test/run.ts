// `npm test`'s test run: every test file on SQLite (the default store), then every file
// again on PostgreSQL but those that run once, in one throwaway cluster this run starts and
// removes (test/postgres.ts). One store only: `npm test -- --store=sqlite` or `--store=postgres`;
// some files only: `npm test -- test/secrets.test.ts` (both stores, but for RUN_ONCE's files)
// or with --store. Each pass writes its files' times, slowest first, to
// test-output/file-times-<store>.txt.
import { spawn } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { startSharedCluster, stopSharedCluster } from "./postgres.ts";

const ROOT = path.resolve(import.meta.dirname, "..");

/**
 * Files that run once (in the first pass), each for a reason: they test SQLite itself (its
 * files, its connection gate, the executable's embedded store), start and stop their own
 * PostgreSQL cluster (postgres-*), or test what no store is under (the CLI alone, the UI's
 * rendering, configuration, formats), or `npm start`, which is SQLite by definition.
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
  "cli-http.test.ts",
  "export-formats.test.ts",
  "json-body.test.ts",
  "npm-start.test.ts",
  "web-dotenv.test.ts",
  "web-audit-dates.test.ts",
  "screenshots.test.ts",
]);

/**
 * Files that take a minute or more (test-output/file-times-*.txt) start first, so that no
 * long file is left running alone on one core at the end of a pass: ui.test.ts, last in
 * name order, did that for 40 to 50 s.
 */
const LONGEST = ["ui.test.ts", "cli.test.ts", "cli-commands.test.ts", "several-processes.test.ts", "drills.test.ts"];

/** `files` with LONGEST first, the rest in name order. */
function longestFirst(files: string[]): string[] {
  const rank = (file: string) => (LONGEST.includes(file) ? LONGEST.indexOf(file) : LONGEST.length);
  return [...files].sort((a, b) => rank(a) - rank(b) || a.localeCompare(b));
}

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

function runFiles(files: string[], env: NodeJS.ProcessEnv): Promise<number> {
  if (files.length === 0) return Promise.resolve(0);
  fs.mkdirSync(path.join(ROOT, "test-output"), { recursive: true });
  return new Promise((resolve) => {
    const child = spawn(
      process.execPath,
      [
        "test/run-files.mjs",
        path.join("test-output", `file-times-${env.TEST_DATABASE}.txt`),
        ...longestFirst(files).map((f) => path.join("test", f)),
      ],
      { cwd: ROOT, env, stdio: "inherit" },
    );
    child.on("exit", (code, signal) => resolve(code ?? (signal ? 1 : 0)));
  });
}

let failed = false;
if (storeArg !== "postgres") {
  console.log(`\n# SQLite: ${chosen.length} test files\n`);
  failed ||= (await runFiles(chosen, { ...process.env, TEST_DATABASE: "sqlite" })) !== 0;
}
// A file that runs once runs in the SQLite pass even when named: on PostgreSQL it would test
// SQLite's files against a database that is not there.
const postgresFiles = chosen.filter((f) => !RUN_ONCE.has(f));
if (storeArg !== "sqlite" && postgresFiles.length === 0) {
  console.log("\n# PostgreSQL: no test files (the files named run in the SQLite pass only)\n");
} else if (storeArg !== "sqlite" && failed) {
  // What failed is to be mended first; the second pass would only take its time.
  console.log("\n# PostgreSQL: not run, the SQLite pass failed\n");
} else if (storeArg !== "sqlite") {
  console.log(`\n# PostgreSQL: ${postgresFiles.length} test files\n`);
  let cluster: string;
  try {
    cluster = await startSharedCluster();
  } catch (error) {
    console.error(`${(error as Error).message}\nTo run on SQLite only: npm test -- --store=sqlite.`);
    process.exit(1);
  }
  try {
    failed = (await runFiles(postgresFiles, { ...process.env, TEST_DATABASE: "postgres", TEST_PG_CLUSTER: cluster })) !== 0;
  } finally {
    stopSharedCluster(cluster);
  }
}
process.exit(failed ? 1 : 0);
