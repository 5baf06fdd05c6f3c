// The short version of every drill (drills/index.ts): real server processes, a few seconds
// each. `npm run drills` runs the full ones.
import assert from "node:assert/strict";
import { test } from "node:test";
import { DRILLS } from "../drills/index.ts";
import { onPostgres, TEST_DATABASE } from "./helpers.ts";

for (const { name, drill, postgres } of DRILLS) {
  test(`drill: ${name} (short)`, { timeout: 180_000, skip: postgres ? false : onPostgres("the drill is of SQLite's file") }, async (t) => {
    const lines: string[] = [];
    const result = await drill({ short: true, database: TEST_DATABASE, log: (line) => lines.push(line) });
    if (result.skipped) {
      t.skip(result.skipped);
      return;
    }
    t.diagnostic(result.line);
    assert.ok(result.ok, `${result.line}\n${lines.join("\n")}`);
  });
}
