// `npm run bench [-- <module>...]`: runs the bench modules below against real servers on
// temporary databases and prints one table. Not a test: nothing here fails the build.
// BENCH_SECONDS sets the measured time of each scenario (default 8, after 1 s of warm-up).
import os from "node:os";
import { auditBench } from "./audit.bench.ts";
import { executableBench } from "./executable.bench.ts";
import { formatGoals, goals } from "./goals.ts";
import { type BenchContext, type BenchModule, type BenchRow, formatTable, hasTaskset, pinSelf } from "./lib.ts";
import { postgresBench } from "./postgres.bench.ts";
import { secretsBench } from "./secrets.bench.ts";

/** Every bench module, in the order they run. Add new ones here. */
const BENCHES: BenchModule[] = [secretsBench, postgresBench, executableBench, auditBench];

async function main(): Promise<void> {
  const wanted = process.argv.slice(2);
  const selected = wanted.length === 0 ? BENCHES : BENCHES.filter((b) => wanted.includes(b.name));
  if (selected.length === 0) {
    console.error(`No bench named ${wanted.join(", ")}. Known: ${BENCHES.map((b) => b.name).join(", ")}.`);
    process.exit(2);
  }
  const cores = os.availableParallelism();
  // Servers on core 0, this process (the load generator) on core 1, so they never share one.
  const canPin = cores >= 2 && hasTaskset() && pinSelf(1);
  const ctx: BenchContext = {
    seconds: Number(process.env.BENCH_SECONDS) || 8,
    cores,
    serverPin: canPin ? ["taskset", "-c", "0"] : [],
    log: (line) => console.log(line),
  };
  console.log(
    `Machine: ${cores} cores (${os.cpus()[0]?.model ?? "unknown CPU"}), Node ${process.version}, ${os.platform()} ${os.release()}`,
  );
  console.log(
    canPin
      ? "Pinning: servers on core 0, load generator on core 1 (taskset)."
      : "Pinning: not possible here (needs taskset and 2 cores); server and load generator share the CPUs.",
  );
  console.log(`Each scenario: 1 s warm-up, then ${ctx.seconds} s measured; closed loop, one request per connection at a time.\n`);

  const all: { module: BenchModule; rows: BenchRow[] }[] = [];
  for (const bench of selected) {
    console.log(`${bench.name}:`);
    all.push({ module: bench, rows: await bench.run(ctx) });
  }
  const rows = all.flatMap((r) => r.rows);
  if (rows.some((r) => r.figure === undefined)) {
    console.log("");
    console.log(formatTable(rows));
  }
  console.log("");
  for (const { module, rows } of all) for (const line of module.summary?.(rows) ?? []) console.log(line);
  const reached = goals(rows);
  if (reached.length > 0) {
    console.log("");
    console.log(formatGoals(reached));
  }
  process.exit(0);
}

await main();
