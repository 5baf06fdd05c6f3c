// The drills, in the order `npm run drills` runs them. test/drills.test.ts runs the same
// list with short: true. INTEGRATOR: add disk-full and graceful-stop here once their files
// (drills/disk-full.drill.ts, drills/graceful-stop.drill.ts) are in the tree, e.g.
//   import * as diskFull from "./disk-full.drill.ts";
//   { name: "disk-full", drill: diskFull.drill },
import * as crash from "./crash.drill.ts";
import * as fuzz from "./fuzz.drill.ts";
import type { Drill } from "./lib.ts";
import * as soak from "./soak.drill.ts";

export const DRILLS: Drill[] = [
  { name: "fuzz", drill: fuzz.drill },
  { name: "crash", drill: crash.drill },
  { name: "soak", drill: soak.drill },
];
