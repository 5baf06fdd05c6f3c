import type { Logger } from "pino";
import type { AuditWriter } from "../../audit/audit.writer.ts";
import type { Clock } from "../../core/clock.ts";
import { createLease, newOwnerId } from "../../core/leases.ts";
import type { Store } from "../../core/store.ts";
import type { Vault } from "../../core/vault.ts";
import type { VercelClient } from "./vercel.client.ts";
import { createVercelExecutor, type RunOptions, type RunOutcome, type SecretValues } from "./vercel.executor.ts";
import type { VercelRepo } from "./vercel.repo.ts";
import { createVercelScheduler } from "./vercel.scheduler.ts";

// Syncing to Vercel: vercel.plan.ts decides, vercel.executor.ts carries out one run under a
// lease, vercel.scheduler.ts runs the automatic ones. This wires the three for app.ts.

interface Deps {
  db: Store;
  repo: VercelRepo;
  vault: Vault;
  audit: AuditWriter;
  clock: Clock;
  client: VercelClient;
  secrets: SecretValues;
  log: Logger;
  debounceMs: number;
  /** The wait before retrying a run Vercel failed; doubles per failed retry. */
  retryMs: number;
  /** A sync or the scheduler whose process has not renewed its lease for this long is taken over. */
  leaseStaleMs: number;
}

export type VercelSync = ReturnType<typeof createVercelSync>;
/** The web UI reads a run's summary under this module's name. */
export type { SyncSummary } from "./vercel.executor.ts";

export function createVercelSync(deps: Deps) {
  const owner = newOwnerId();
  const executor = createVercelExecutor({ ...deps, owner, followUp: (projectId) => scheduler.schedule(projectId) });
  const leader = createLease(deps.db, deps.clock, { name: "vercel-scheduler", owner, staleMs: deps.leaseStaleMs });
  const scheduler = createVercelScheduler({
    db: deps.db,
    repo: deps.repo,
    log: deps.log,
    executor,
    leader,
    debounceMs: deps.debounceMs,
    retryMs: deps.retryMs,
  });
  return {
    /** A manual run; when Vercel failed it, the changes it leaves pending are retried later. */
    async run(projectId: string, options: RunOptions): Promise<RunOutcome> {
      const outcome = await scheduler.track(executor.run(projectId, options));
      scheduler.afterManualRun(projectId, outcome);
      return outcome;
    },
    schedule: scheduler.schedule,
    notifyChange: scheduler.notifyChange,
    cancel: scheduler.cancel,
    start: scheduler.start,
    stop: scheduler.stop,
  };
}
