// The drills, in the order `npm run drills` runs them. test/drills.test.ts runs the same
// list with short: true.
import * as crash from "./crash.drill.ts";
import * as diskFull from "./disk-full.drill.ts";
import * as fuzz from "./fuzz.drill.ts";
import * as gracefulStop from "./graceful-stop.drill.ts";
import type { Drill } from "./lib.ts";
import * as soak from "./soak.drill.ts";

export const DRILLS: Drill[] = [
  { name: "fuzz", drill: fuzz.drill, postgres: true },
  { name: "crash", drill: crash.drill },
  { name: "disk-full", drill: diskFull.drill },
  { name: "graceful-stop", drill: gracefulStop.drill },
  { name: "soak", drill: soak.drill },
];
