// Run before the server's modules load when they load from source (npm start, the tests and
// the servers they spawn), never in the executable, whose bundle holds drizzle already.
//
// drizzle-orm's package.json lists 447 export paths, and Node's ES module loader reads it
// again for each of the ~450 files it loads from the package: 1.0 s of CPU to import
// drizzle-orm/sqlite-core (0.14 s as CommonJS, which is the same code), 2.5 s for a
// `users list` from source (1.3 s with this hook). The hook runs in this thread (registerHooks):
// one that runs in the loader's worker pays a round trip for every require of the package.
//
// It also turns on Node's compile cache for every module loaded after it: the TypeScript
// stripped and the code V8 compiled are kept on disk between processes, which halves the
// start of a process from source (`version` 0.36 s to 0.18 s). The cache is under the
// repository's node_modules, not the shared temporary folder, where another local user
// could plant code for our processes to run. This file is JavaScript so that it is cached
// too: the first TypeScript file a process strips costs it 0.1 s to start the stripper.

import { enableCompileCache, registerHooks } from "node:module";
import path from "node:path";

enableCompileCache(path.resolve(import.meta.dirname, "../../node_modules/.cache/node-compile-cache"));

registerHooks({
  resolve(specifier, context, nextResolve) {
    if (specifier === "drizzle-orm" || specifier.startsWith("drizzle-orm/")) {
      return nextResolve(specifier, { ...context, conditions: ["node", "require", "default"] });
    }
    return nextResolve(specifier, context);
  },
});
