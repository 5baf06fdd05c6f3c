import type { Logger } from "pino";
import { loggedMessage } from "../../core/error-text.ts";
import type { Lease } from "../../core/leases.ts";
import { type Store, writeTransaction } from "../../core/store.ts";
import { isStoppedForChange, type RunOutcome, type SyncFailureKind, type VercelExecutor } from "./vercel.executor.ts";
import { parseMappings } from "./vercel.plan.ts";
import type { IntegrationRow, VercelRepo } from "./vercel.repo.ts";

// Automatic syncs: a secret change counts in `pending` and, after a debounce, one run sends
// what changed. Several server processes may share the database, and every one of them
// counts changes, but only the holder of the "vercel-scheduler" lease runs automatic syncs:
// it learns of changes made through the others from `pending`, on its tick, and takes over
// the syncs of a process that stopped heartbeating. A run that failed because Vercel could
// not be reached is tried again later, at growing intervals, while changes are pending.

/** Failures that may pass by themselves: Vercel down or failing, or our database for a moment. */
const RETRIED: ReadonlySet<SyncFailureKind> = new Set(["unavailable", "unexpected"]);
/** Retries after one failed run: with the default first wait of a minute, about three hours in all. */
export const MAX_SYNC_RETRIES = 8;
const MAX_RETRY_DELAY_MS = 60 * 60 * 1000;

interface Deps {
  db: Store;
  repo: VercelRepo;
  log: Logger;
  executor: VercelExecutor;
  leader: Lease;
  debounceMs: number;
  /** The wait before the first retry of a failed run; it doubles with each failed retry. */
  retryMs: number;
}

export function createVercelScheduler({ db, repo, log, executor, leader, debounceMs, retryMs }: Deps) {
  /** Each project's scheduled run, and when it fires (Date.now() clock). */
  const timers = new Map<string, { timer: NodeJS.Timeout; at: number }>();
  const inFlight = new Set<Promise<unknown>>();
  /** Projects whose automatic run this process is executing, and those that changed meanwhile. */
  const runningAutomatic = new Set<string>();
  const runAgain = new Set<string>();
  /**
   * What each project's row looked like when its run was scheduled or ended (see seen()). A
   * different one on a tick is a change made elsewhere: a secret changed, or the connection
   * reconnected, relinked or resumed through another process, after which what is pending
   * goes out.
   */
  const seenPending = new Map<string, string>();
  /** Failed runs in a row per project, for the back-off; forgotten after a run that did not fail that way. */
  const failuresInARow = new Map<string, number>();
  /** Projects disconnected while this process's automatic run of them was under way. */
  const cancelledDuringRun = new Set<string>();
  let isLeader = false;
  let stopped = false;
  let ticker: NodeJS.Timeout | undefined;
  /** The tick under way: one at a time, and stop() waits for it before handing leadership on. */
  let ticking: Promise<void> | undefined;

  function track<T>(promise: Promise<T>): Promise<T> {
    inFlight.add(promise);
    void promise.finally(() => inFlight.delete(promise)).catch(() => undefined);
    return promise;
  }

  function logFailure(projectId: string, error: unknown, message: string): void {
    log.error({ projectId, error: loggedMessage(error) }, message);
  }

  /** An automatic run after the debounce delay; a newer change restarts the wait. Only the leader runs them. */
  function schedule(projectId: string): void {
    if (stopped || !isLeader) return;
    // A change (or the run's own follow-up) while this process's automatic run of the project
    // is under way: one more run once it ends. A timer set now could fire between that run's
    // commit and its follow-up, and the follow-up would then run a third time for nothing.
    if (runningAutomatic.has(projectId)) {
      runAgain.add(projectId);
      return;
    }
    startTimer(projectId, debounceMs, false);
  }

  /** One timer per project: a change's debounce replaces a retry's longer wait. */
  function startTimer(projectId: string, delayMs: number, isRetry: boolean): void {
    clearTimeout(timers.get(projectId)?.timer);
    const timer = setTimeout(() => {
      timers.delete(projectId);
      void track(runAutomatic(projectId, isRetry));
    }, delayMs);
    timer.unref();
    timers.set(projectId, { timer, at: Date.now() + delayMs });
  }

  async function runAutomatic(projectId: string, isRetry: boolean): Promise<void> {
    runningAutomatic.add(projectId);
    let retryInMs: number | undefined;
    try {
      if (isRetry) {
        // Sent meanwhile (a manual sync), or the connection changed: nothing to try again.
        const row = await repo.find(projectId);
        if (!row || row.pending === 0 || !isRunnable(row)) {
          failuresInARow.delete(projectId);
          return;
        }
      }
      const outcome = await executor.run(projectId, { trigger: "automatic", caller: null, redeploy: false });
      // Busy: another process's run holds the lease; what it leaves in pending is scheduled
      // again on a tick. Otherwise what is left waits for a new change or a retry.
      if (outcome.kind === "busy") seenPending.delete(projectId);
      else {
        const after = await repo.find(projectId);
        if (after) seenPending.set(projectId, seen(after));
        else seenPending.delete(projectId);
        retryInMs = afterRun(projectId, isRetried(outcome));
        // A change another process counted after the run's last commit: no follow-up was
        // asked for it, and the ticks will not see it as new, since it is what is seen now.
        // Likewise a run stopped by a new link or token saved through another process: what
        // it left in pending is for the connection as it is now.
        const stoppedForChange = outcome.kind === "failed" && isStoppedForChange(outcome.failure);
        if ((outcome.kind === "done" || stoppedForChange) && after && after.pending > 0 && isRunnable(after)) runAgain.add(projectId);
      }
    } catch (error) {
      // The database failing around the run (busy past its timeout, say) passes like Vercel's outages.
      logFailure(projectId, error, "automatic Vercel sync failed");
      retryInMs = afterRun(projectId, true);
    } finally {
      runningAutomatic.delete(projectId);
      // Disconnected during the run: no retry or back-off of the old connection carries over
      // (a change since, to a new connection, still gets its run).
      const cancelled = cancelledDuringRun.delete(projectId);
      if (cancelled) failuresInARow.delete(projectId);
      if (runAgain.delete(projectId)) schedule(projectId);
      else if (retryInMs !== undefined && !cancelled) retryLater(projectId, retryInMs);
    }
  }

  function isRetried(outcome: RunOutcome): boolean {
    return outcome.kind === "failed" && RETRIED.has(outcome.failure);
  }

  /** The wait before the nth retry in a row: doubling, capped, with jitter so that the projects of one outage do not all come back at once. */
  function waitBefore(retry: number): number {
    return Math.round(Math.min(retryMs * 2 ** (retry - 1), MAX_RETRY_DELAY_MS) * (0.9 + Math.random() * 0.2));
  }

  /**
   * Counts a run's failure on the leader (the only process that retries), or ends the
   * back-off after any other outcome; returns the wait before the retry, if there is one.
   */
  function afterRun(projectId: string, failed: boolean): number | undefined {
    if (!failed) {
      failuresInARow.delete(projectId);
      return undefined;
    }
    if (stopped || !isLeader) return undefined;
    const failures = (failuresInARow.get(projectId) ?? 0) + 1;
    if (failures > MAX_SYNC_RETRIES) {
      failuresInARow.delete(projectId);
      log.warn(
        { projectId, retries: MAX_SYNC_RETRIES },
        "Vercel sync still failing: no more automatic retries until the next change or a manual sync",
      );
      return undefined;
    }
    failuresInARow.set(projectId, failures);
    return waitBefore(failures);
  }

  function retryLater(projectId: string, delayMs: number): void {
    if (stopped || !isLeader) return;
    log.warn(
      { projectId, retryInSeconds: Math.round(delayMs / 1000) },
      "Vercel sync failed; it runs again later if changes are still pending",
    );
    startTimer(projectId, delayMs, true);
  }

  /**
   * The pending count and what a person changes about the connection: its token (a new
   * nonce with every save), status, link and pause. Not the row's update time, which every
   * run writes: a manual run elsewhere would look like a change and start an automatic one.
   */
  function seen(row: IntegrationRow): string {
    const tokenNonce = row.tokenCiphertext.subarray(0, 12).toString("hex");
    return JSON.stringify([row.pending, tokenNonce, row.status, row.pausedAt, row.hostProjectId, row.mappings]);
  }

  function isRunnable(row: { status: string; hostProjectId: string | null; pausedAt: string | null }): boolean {
    return row.status === "active" && row.hostProjectId !== null && row.pausedAt === null;
  }

  /** Leadership renewed or taken; the leader takes over dead processes' syncs and picks up changes made elsewhere. */
  async function tick(): Promise<void> {
    const wasLeader = isLeader;
    isLeader = await leader.renew();
    if (!isLeader) {
      if (wasLeader) {
        // Another process took over (this one hung past the lease): its timers run from now.
        for (const { timer } of timers.values()) clearTimeout(timer);
        timers.clear();
        failuresInARow.clear();
        // What it saw as leader says nothing of what happened since: a later leadership starts afresh.
        seenPending.clear();
        log.warn("another server process now runs the automatic Vercel syncs");
      }
      return;
    }
    for (const projectId of await executor.recoverStale()) schedule(projectId);
    const withPending = await repo.listWithPending();
    const present = new Set(withPending.map((row) => row.projectId));
    for (const projectId of seenPending.keys()) if (!present.has(projectId)) seenPending.delete(projectId);
    // Nothing pending any more (sent by another process, say): a later failure starts a new back-off.
    for (const projectId of failuresInARow.keys()) if (!present.has(projectId)) failuresInARow.delete(projectId);
    for (const row of withPending) {
      if (!isRunnable(row) || seenPending.get(row.projectId) === seen(row)) continue;
      seenPending.set(row.projectId, seen(row));
      schedule(row.projectId);
    }
  }

  return {
    schedule,

    /** A secret changed (after its commit): count it and schedule an automatic run. */
    async notifyChange(projectId: string, environment: string): Promise<void> {
      if (stopped) return;
      try {
        // Most projects have no connection: a plain read, no write lock, for those.
        const linked = await repo.find(projectId);
        if (!linked?.hostProjectId || !Object.hasOwn(parseMappings(linked), environment)) return;
        const pending = await writeTransaction(db, async () => {
          const row = await repo.find(projectId);
          if (!row?.hostProjectId || !Object.hasOwn(parseMappings(row), environment)) return undefined;
          // Counted while paused too: the reconnect that ends the pause sends them.
          await repo.incrementPending(projectId);
          return isRunnable(row) ? seen({ ...row, pending: row.pending + 1 }) : undefined;
        });
        if (pending === undefined || !isLeader) return;
        seenPending.set(projectId, pending);
        schedule(projectId);
      } catch (error) {
        // A listener must never fail the secret change that already committed.
        logFailure(projectId, error, "could not schedule a Vercel sync");
      }
    },

    /** Forgets a scheduled run and the back-off (the connection is gone). */
    cancel(projectId: string): void {
      clearTimeout(timers.get(projectId)?.timer);
      timers.delete(projectId);
      seenPending.delete(projectId);
      failuresInARow.delete(projectId);
      if (runningAutomatic.has(projectId)) cancelledDuringRun.add(projectId);
    },

    /**
     * After a manual run on the leader: one that failed as an automatic run would be retried
     * leaves its pending changes to a retry, unless an automatic run is under way or comes
     * sooner (then the back-off stays as it is: a person pressing sync during an outage does
     * not use the retries up).
     */
    afterManualRun(projectId: string, outcome: RunOutcome): void {
      if (outcome.kind === "busy" || stopped || !isLeader || runningAutomatic.has(projectId)) return;
      const failed = isRetried(outcome);
      const due = timers.get(projectId)?.at;
      if (failed && due !== undefined && due <= Date.now() + waitBefore((failuresInARow.get(projectId) ?? 0) + 1)) return;
      const delayMs = afterRun(projectId, failed);
      if (delayMs !== undefined) retryLater(projectId, delayMs);
    },

    /**
     * At start-up: syncs left by a process that is gone are marked failed (their lease
     * released), and, on the leader, connections with pending changes get their run. A
     * sync another live process runs is left alone: its heartbeat is fresh.
     */
    async start(onError: (error: unknown) => void): Promise<void> {
      await tick();
      if (!isLeader) await executor.recoverStale();
      // Stopped while the first tick waited: no timer is left running behind stop().
      if (stopped) return;
      ticker = setInterval(() => {
        // A tick still waiting for the database is not overlapped by the next one.
        if (ticking !== undefined) return;
        ticking = tick()
          .catch(onError)
          .finally(() => {
            ticking = undefined;
          });
      }, executor.heartbeatMs);
      ticker.unref();
    },

    /** Stops scheduling, waits for runs under way (bounded by the client's retries), hands leadership on. */
    async stop(): Promise<void> {
      stopped = true;
      clearInterval(ticker);
      for (const { timer } of timers.values()) clearTimeout(timer);
      timers.clear();
      await ticking;
      await Promise.allSettled([...inFlight]);
      if (isLeader) await leader.release();
    },

    track,
  };
}
