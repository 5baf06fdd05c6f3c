// Memory back to the system when the server goes idle after a load.
//
// Under load V8 lets garbage pile up in the old space until its allocation limit, and
// after the load nothing allocates, so nothing collects it: in the soak drill the old
// space held 62 MiB of which 13 MiB were live, and RSS stayed at the end-of-load figure
// for most of the idle minute (V8's own memory reducer came, if at all, after about a
// minute). Once requests have stopped for `idleMs`, one full "last resort" collection
// (compacting, and giving V8's pooled pages back) runs, at most once per burst of
// requests and only when the process has grown since the previous one. Grown is measured
// on its resident memory, not on V8's heap size: V8's own collections during a load shrink
// the heap it reports while the pages they freed stay pooled and resident (a 2-minute soak
// ended with the heap under the threshold and RSS 80 MiB above its start, and this
// collection never ran).
//
// It needs V8's gc(). The executable turns on --expose-gc at its first idle collection and
// takes gc() from a new context (not in execArgv: a flag given at start changes V8's flag hash,
// and V8 then rejects the executable's code cache). From source (`npm start`, tests) it
// does nothing unless node runs with --expose-gc.
import v8 from "node:v8";
import vm from "node:vm";
import type { Logger } from "pino";
import { isSingleExecutable } from "./assets.ts";

type Gc = (options?: { type?: "major" | "minor"; execution?: "sync" | "async"; flavor?: "regular" | "last-resort" }) => void;

export interface IdleGcOptions {
  /** How long without requests counts as idle (10 s). */
  idleMs?: number;
  /** Collect only when the process's resident memory has grown by this much since the last collection (8 MiB). */
  minGrowthBytes?: number;
  /** For tests; defaults to V8's gc() (see above). */
  gc?: Gc;
  /** For tests; defaults to the process's RSS. */
  residentBytes?: () => number;
}

/** Whether gc() can be had: given to node (--expose-gc), or turned on in the executable. */
function gcAvailable(): boolean {
  return (globalThis as { gc?: Gc }).gc !== undefined || isSingleExecutable();
}

// Taken at the first collection, not at start: the new context costs about 1.3 MiB and a
// millisecond, which a server that never goes idle after a load need not pay.
function exposedGc(): Gc | undefined {
  const existing = (globalThis as { gc?: Gc }).gc;
  if (existing || !isSingleExecutable()) return existing;
  try {
    v8.setFlagsFromString("--expose-gc");
    return vm.runInNewContext("gc") as Gc;
  } catch {
    return undefined;
  }
}

export function createIdleGc(log: Pick<Logger, "debug">, options: IdleGcOptions = {}) {
  let gc = options.gc;
  const available = gc !== undefined || gcAvailable();
  const idleMs = options.idleMs ?? 10_000;
  const minGrowthBytes = options.minGrowthBytes ?? 8 * 1024 * 1024;
  const residentBytes = options.residentBytes ?? (() => process.memoryUsage.rss());
  let lastRequestMs = Date.now();
  let requestsSinceGc = 0;
  let residentAfterGc = residentBytes();
  let timer: NodeJS.Timeout | undefined;

  function collectIfIdle(now = Date.now()): boolean {
    if (!available || requestsSinceGc === 0 || now - lastRequestMs < idleMs) return false;
    requestsSinceGc = 0;
    const before = residentBytes();
    if (before - residentAfterGc < minGrowthBytes) {
      // RSS also falls without us (V8's memory reducer, pages given back late): grown is measured from the lowest seen.
      residentAfterGc = Math.min(residentAfterGc, before);
      return false;
    }
    gc ??= exposedGc();
    if (!gc) return false;
    const started = performance.now();
    gc({ type: "major", execution: "sync", flavor: "last-resort" });
    residentAfterGc = residentBytes();
    log.debug(
      {
        rssMiB: Math.round(before / 1048576),
        afterMiB: Math.round(residentAfterGc / 1048576),
        ms: Math.round(performance.now() - started),
      },
      "idle: collected",
    );
    return true;
  }

  return {
    available,
    collectIfIdle,
    /** For every request. */
    noteRequest(): void {
      lastRequestMs = Date.now();
      requestsSinceGc++;
    },
    start(): void {
      if (!available) return;
      timer = setInterval(() => collectIfIdle(), Math.max(1000, idleMs / 2));
      timer.unref();
    },
    stop(): void {
      clearInterval(timer);
    },
  };
}
