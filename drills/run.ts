// `npm run drills [-- --short] [-- <name>...]`: runs the drills of drills/index.ts against
// real server processes, prints each one's progress and its line of figures, and exits 1
// when any drill fails. DRILL_SEED repeats a seeded run; DRILL_EXECUTABLE runs a built
// executable instead of the source; DRILL_DATABASE=postgres runs the drills that mean
// anything there (the fuzz) on a PostgreSQL database of a cluster started for the run.
import os from "node:os";
import { DRILLS } from "./index.ts";

async function main(): Promise<number> {
  const args = process.argv.slice(2);
  const short = args.includes("--short");
  const names = args.filter((a) => !a.startsWith("-"));
  const unknown = names.filter((n) => !DRILLS.some((d) => d.name === n));
  if (unknown.length > 0) {
    console.error(`No drill named ${unknown.join(", ")}. Known: ${DRILLS.map((d) => d.name).join(", ")}.`);
    return 2;
  }
  const database = process.env.DRILL_DATABASE === "postgres" ? "postgres" : "sqlite";
  const selected = (names.length === 0 ? DRILLS : DRILLS.filter((d) => names.includes(d.name))).filter(
    (d) => database === "sqlite" || d.postgres,
  );
  if (selected.length === 0) {
    console.error(
      `No drill of ${names.join(", ")} runs on PostgreSQL. Those that do: ${DRILLS.filter((d) => d.postgres)
        .map((d) => d.name)
        .join(", ")}.`,
    );
    return 2;
  }
  console.log(
    `Drills${short ? " (short)" : ""}: ${selected.map((d) => d.name).join(", ")}. ` +
      `${os.availableParallelism()} cores (${os.cpus()[0]?.model ?? "unknown CPU"}), Node ${process.version}, ` +
      `server: ${process.env.DRILL_EXECUTABLE ? "the executable" : "the source"}, on ${database === "postgres" ? "PostgreSQL" : "SQLite"}.`,
  );
  const lines: string[] = [];
  let failed = 0;
  for (const { name, drill } of selected) {
    console.log(`\n${name}:`);
    let line: string;
    try {
      const result = await drill({ short, database, log: (text) => console.log(text) });
      if (result.skipped) line = `SKIPPED ${name}: ${result.skipped}`;
      else {
        line = `${result.ok ? "ok  " : "FAIL"} ${result.line}`;
        if (!result.ok) failed++;
      }
    } catch (error) {
      failed++;
      line = `FAIL ${name}: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`;
    }
    console.log(line);
    lines.push(line);
  }
  console.log(`\n${lines.join("\n")}`);
  return failed > 0 ? 1 : 0;
}

const code = await main();
// A PostgreSQL cluster started for the run stops with the process (test/postgres.ts).
process.exit(code);
