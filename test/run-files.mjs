// One pass of `npm test`: test/run.ts spawns it with the pass's environment and the files in
// the order to start them. It calls node:test's run() rather than `node --test`, which sorts
// the files it is given by name: run() starts them in the order given, longest first. The
// spec reporter prints the tests; each file's summed test time, slowest first, goes to the
// file named first on the command line, since the spec reporter names tests, not files.
import fs from "node:fs";
import { run } from "node:test";
import { spec } from "node:test/reporters";

const [timesFile, ...files] = process.argv.slice(2);
const stream = run({
  files,
  concurrency: 2,
  // What the test files themselves run under: tsx, and drizzle-orm resolved as CommonJS.
  execArgv: ["--import", "tsx", "--import", "./src/dev/from-source.mjs"],
});

const times = new Map();
let failed = false;
function count(data) {
  if (data.nesting !== 0 || !data.file) return;
  const file = times.get(data.file) ?? { ms: 0, tests: 0 };
  file.ms += data.details.duration_ms;
  file.tests += 1;
  times.set(data.file, file);
}
stream.on("test:pass", count);
stream.on("test:fail", (data) => {
  if (!data.todo) failed = true;
  count(data);
});
// A file that fails outside any test (it does not load, or exits early) is reported here.
stream.on("test:summary", (data) => {
  if (!data.success) failed = true;
});
stream.once("end", () => {
  const lines = [...times].sort((a, b) => b[1].ms - a[1].ms);
  fs.writeFileSync(
    timesFile,
    lines
      .map(([name, t]) => `${(t.ms / 1000).toFixed(1).padStart(7)} s ${String(t.tests).padStart(4)} tests  ${name.split("/").pop()}\n`)
      .join(""),
  );
  process.exitCode = failed ? 1 : 0;
});
stream.compose(spec).pipe(process.stdout);
