import type { Logger } from "pino";
import type { AuditWriter } from "../../audit/audit.writer.ts";
import type { Caller } from "../../core/caller.ts";
import type { Clock } from "../../core/clock.ts";
import { writeTransaction, type Db } from "../../core/db.ts";
import { DecryptError, integrationAad, type Vault } from "../../core/vault.ts";
import { VercelError, type VercelClient, type VercelEnvVar } from "./vercel.client.ts";
import type { IntegrationRow, VercelRepo } from "./vercel.repo.ts";

// The sync engine and the automatic-sync scheduler. Shape of one run:
//   1. one short transaction takes the lock (sync_started_at) and records a running lastRun;
//   2. network calls, with no transaction open;
//   3. one short transaction writes the results, releases the lock and audits.

export type Trigger = "manual" | "automatic";

export type KeyResultReason =
  | "exists" // a var we did not create holds the key and the policy is skip
  | "shared" // the existing var also covers other targets, which a sync never touches
  | "unreadable" // a sensitive or system var whose value Vercel never returns
  | "conflict" // Vercel answered ENV_CONFLICT
  | "rejected" // Vercel refused the var (reserved name, bad value)
  | "decrypt"; // the secrets of this environment could not be decrypted here

export interface KeyResult {
  environment: string;
  target: string;
  /** "*" when a whole environment failed (reason decrypt). */
  key: string;
  result: "skipped" | "failed";
  reason: KeyResultReason;
}

export interface Deployment {
  at: string;
  trigger: Trigger;
  ok: boolean;
  jobId: string | null;
  state: string | null;
  error?: string;
}

export interface SyncSummary {
  status: "ok" | "partial" | "failed";
  trigger: Trigger;
  startedAt: string;
  finishedAt: string;
  created: number;
  updated: number;
  unchanged: number;
  skipped: number;
  deleted: number;
  failed: number;
  /** Every key that was skipped or failed, with the reason; at most MAX_RESULTS. */
  results: KeyResult[];
  /** The readable sentence of a failed run. */
  error?: string;
  /** Present when this run called the deploy hook. */
  deployment?: Deployment;
}

/** A run that has changed nothing yet: the counts a run adds to as it goes. */
function emptySummary(trigger: Trigger, startedAt: string): SyncSummary {
  return {
    status: "ok",
    trigger,
    startedAt,
    finishedAt: startedAt,
    created: 0,
    updated: 0,
    unchanged: 0,
    skipped: 0,
    deleted: 0,
    failed: 0,
    results: [],
  };
}

export type RunOutcome =
  | { kind: "done"; summary: SyncSummary }
  | { kind: "failed"; summary: SyncSummary; failure: Failure }
  | { kind: "busy" }
  | { kind: "not-linked" }
  | { kind: "attention" }
  | { kind: "paused" };

type Failure = "rejected" | "unavailable" | "project-gone" | "token-unreadable" | "unexpected";

export const SYNC_ERRORS: Record<Failure | "interrupted" | "hook-missing" | "hook-failed", string> = {
  rejected: "Vercel rejected the saved access token. Reconnect Vercel with a new token.",
  unavailable: "Vercel could not be reached or kept failing. Try the sync again in a few minutes.",
  "project-gone": "The linked Vercel project was not found. Link a Vercel project again.",
  "token-unreadable": "The saved Vercel token could not be decrypted. Reconnect Vercel.",
  unexpected: "The sync stopped on an unexpected error. Try again; if it keeps happening, check the server log.",
  interrupted: "The server stopped while a sync was running. Run the sync again.",
  "hook-missing": "Vercel did not find the deploy hook. Add a new deploy hook URL.",
  "hook-failed": "The deploy hook call failed. Try the redeploy again.",
};

const MAX_RESULTS = 200;
/** Far longer than a run can take: every call has a timeout and bounded retries. */
const STALE_LOCK_MS = 60 * 60 * 1000;
const CREATE_BATCH = 50;

/** The plain-data source of secret values: the secrets service's system read. */
export interface SecretValues {
  readAllValues(projectId: string, environment: string): { key: string; value: string }[];
}

interface Deps {
  db: Db;
  repo: VercelRepo;
  vault: Vault;
  audit: AuditWriter;
  clock: Clock;
  client: VercelClient;
  secrets: SecretValues;
  log: Logger;
  debounceMs: number;
}

export type VercelSync = ReturnType<typeof createVercelSync>;

export function parseMappings(row: Pick<IntegrationRow, "mappings">): Record<string, string> {
  try {
    const value = JSON.parse(row.mappings) as unknown;
    return value && typeof value === "object" && !Array.isArray(value) ? (value as Record<string, string>) : {};
  } catch {
    return {};
  }
}

export function openToken(vault: Vault, row: IntegrationRow): string {
  return vault.open(row.projectId, integrationAad(row.projectId, "token"), {
    ciphertext: row.tokenCiphertext,
    keyVersion: row.tokenKeyVersion,
  });
}

export function createVercelSync({ db, repo, vault, audit, clock, client, secrets, log, debounceMs }: Deps) {
  const timers = new Map<string, NodeJS.Timeout>();
  const inFlight = new Set<Promise<unknown>>();
  /** Projects whose run this process is executing. */
  const running = new Set<string>();
  let stopped = false;

  function track<T>(promise: Promise<T>): Promise<T> {
    inFlight.add(promise);
    void promise.finally(() => inFlight.delete(promise)).catch(() => undefined);
    return promise;
  }

  /** Schedules an automatic run after the debounce delay; a newer change restarts the wait. */
  function schedule(projectId: string): void {
    if (stopped) return;
    clearTimeout(timers.get(projectId));
    const timer = setTimeout(() => {
      timers.delete(projectId);
      void track(run(projectId, { trigger: "automatic", caller: null, redeploy: false })).catch((error: unknown) => {
        log.error({ projectId, error: error instanceof Error ? error.message : "unknown" }, "automatic Vercel sync failed");
      });
    }, debounceMs);
    timer.unref();
    timers.set(projectId, timer);
  }

  async function run(projectId: string, options: { trigger: Trigger; caller: Caller | null; redeploy: boolean }): Promise<RunOutcome> {
    const { trigger } = options;
    const startedAt = clock.now().toISOString();
    const start = writeTransaction(db, () => {
      const row = repo.find(projectId);
      if (!row || !row.hostProjectId) return { kind: "not-linked" as const };
      if (row.status === "attention") return { kind: "attention" as const };
      // Checked here, in the transaction that takes the lock, so no trigger (a debounced
      // change, a follow-up run, recovery at start) can sync with a paused connection's token.
      if (row.pausedAt !== null) return { kind: "paused" as const };
      // A lock this process does not hold and that is older than any run could be was left
      // by a run whose last write failed: take it over rather than answer 409 forever.
      const staleBefore = running.has(projectId) ? undefined : new Date(Date.parse(startedAt) - STALE_LOCK_MS).toISOString();
      if (!repo.tryLock(projectId, startedAt, JSON.stringify({ status: "running", trigger, startedAt }), staleBefore)) {
        return { kind: "busy" as const };
      }
      return { kind: "locked" as const, row };
    });
    if (start.kind !== "locked") return start;
    const row = start.row;
    running.add(projectId);
    try {
      return await runLocked(row, startedAt, options);
    } finally {
      running.delete(projectId);
    }
  }

  async function runLocked(
    row: IntegrationRow,
    startedAt: string,
    options: { trigger: Trigger; caller: Caller | null; redeploy: boolean },
  ): Promise<RunOutcome> {
    const { trigger, caller } = options;
    const projectId = row.projectId;

    const summary = emptySummary(trigger, startedAt);
    const varChanges: { op: "save" | "delete"; target: string; key: string; hostEnvId?: string }[] = [];
    let failure: Failure | undefined;
    try {
      await syncAll(row, summary, varChanges);
    } catch (error) {
      failure = failureOf(error);
      if (failure === "unexpected") {
        log.error({ projectId, error: error instanceof Error ? error.message : "unknown" }, "Vercel sync failed unexpectedly");
      }
    }

    summary.finishedAt = clock.now().toISOString();
    if (failure) {
      summary.status = "failed";
      summary.error = SYNC_ERRORS[failure];
    } else if (summary.failed > 0) {
      summary.status = "partial";
    }
    if (summary.results.length > MAX_RESULTS) summary.results = summary.results.slice(0, MAX_RESULTS);

    function recordRun(): void {
      if (failure) {
        audit.record(caller, {
          projectId,
          action: "integration.sync_failed",
          targetType: "integration",
          targetId: projectId,
          metadata: { trigger, error: summary.error },
        });
        return;
      }
      audit.record(caller, {
        projectId,
        action: "integration.synced",
        targetType: "integration",
        targetId: projectId,
        metadata: {
          trigger,
          created: summary.created,
          updated: summary.updated,
          unchanged: summary.unchanged,
          skipped: summary.skipped,
          deleted: summary.deleted,
          failed: summary.failed,
        },
      });
    }

    const finish = writeTransaction(db, () => {
      // What reached Vercel is audited even when the connection is gone by now.
      recordRun();
      const current = repo.find(projectId);
      // Disconnected (or disconnected and reconnected) during the run: nothing else to record.
      if (!current || current.syncStartedAt !== startedAt || current.createdAt !== row.createdAt) return { remaining: 0, recorded: false };
      // A token rejected by Vercel means attention only while it is still the saved one:
      // a reconnect during the run has replaced it with a token this run never used.
      const tokenRejected = (failure === "rejected" || failure === "token-unreadable") && current.tokenCiphertext.equals(row.tokenCiphertext);
      const nowIso = summary.finishedAt;
      for (const change of varChanges) {
        if (change.op === "save") {
          repo.saveVar({ projectId, target: change.target, key: change.key, hostEnvId: change.hostEnvId!, createdAt: nowIso });
        } else {
          repo.deleteVar(projectId, change.target, change.key);
        }
      }
      // A failed run leaves `pending` as it was: those changes still have to reach Vercel.
      const consumed = failure ? 0 : row.pending;
      repo.finishRun(projectId, consumed, {
        status: tokenRejected ? "attention" : current.status,
        lastSyncAt: summary.finishedAt,
        lastSyncStatus: summary.status,
        lastError: summary.error ?? null,
        lastRun: JSON.stringify(summary),
        updatedAt: nowIso,
      });
      return { remaining: Math.max(current.pending - consumed, 0), recorded: true };
    });

    if (failure) return { kind: "failed", summary, failure };
    if (!finish.recorded) return { kind: "done", summary };

    // Changes that landed during this run: a follow-up run picks them up, and redeploys.
    const followUp = finish.remaining > 0;
    if (followUp) schedule(projectId);
    const wantsRedeploy = trigger === "manual" ? options.redeploy : row.autoRedeploy && !followUp;
    if (wantsRedeploy && summary.status === "ok" && row.hookCiphertext && row.hookKeyVersion !== null) {
      summary.deployment = await redeploy(row, trigger, caller, summary);
    }
    return { kind: "done", summary };
  }

  async function syncAll(
    row: IntegrationRow,
    summary: SyncSummary,
    varChanges: { op: "save" | "delete"; target: string; key: string; hostEnvId?: string }[],
  ): Promise<void> {
    const projectId = row.projectId;
    let token: string;
    try {
      token = openToken(vault, row);
    } catch (error) {
      if (error instanceof DecryptError) throw new SyncFailure("token-unreadable");
      throw error;
    }
    const hostProjectId = row.hostProjectId!;
    const teamId = row.teamId;
    let hostVars: VercelEnvVar[];
    try {
      hostVars = await client.listEnvVars(token, teamId, hostProjectId);
    } catch (error) {
      if (error instanceof VercelError && error.failure === "not_found") throw new SyncFailure("project-gone");
      throw error;
    }
    const ours = new Map(repo.listVars(projectId).map((v) => [`${v.target}\n${v.key}`, v.hostEnvId]));
    const hostIds = new Set(hostVars.map((v) => v.id));

    const note = (environment: string, target: string, key: string, result: KeyResult["result"], reason: KeyResultReason) => {
      summary[result] += 1;
      summary.results.push({ environment, target, key, result, reason });
    };

    for (const [environment, target] of Object.entries(parseMappings(row))) {
      let values: { key: string; value: string }[];
      try {
        values = secrets.readAllValues(projectId, environment);
      } catch (error) {
        if (!(error instanceof DecryptError)) throw error;
        note(environment, target, "*", "failed", "decrypt");
        continue;
      }
      // Only this target's vars without a git branch: one var per key and target.
      const byKey = new Map<string, VercelEnvVar>();
      for (const v of hostVars) {
        if (!v.gitBranch && Array.isArray(v.target) && v.target.includes(target) && !byKey.has(v.key)) byKey.set(v.key, v);
      }
      const toCreate: { key: string; value: string }[] = [];
      for (const { key, value } of values) {
        const existing = byKey.get(key);
        const ourId = ours.get(`${target}\n${key}`);
        if (!existing) {
          toCreate.push({ key, value });
          continue;
        }
        const isOurs = ourId === existing.id;
        const current = await readableValue(token, teamId, hostProjectId, existing);
        if (current !== undefined && current === value) {
          summary.unchanged += 1;
          if (ourId !== undefined && !isOurs) varChanges.push({ op: "delete", target, key });
          continue;
        }
        if (existing.target.length > 1) {
          note(environment, target, key, "skipped", "shared");
          continue;
        }
        // Our own vars always follow the secret; the policy decides about anyone else's.
        if (!isOurs && row.conflictPolicy !== "overwrite") {
          note(environment, target, key, "skipped", "exists");
          continue;
        }
        if (existing.type === "system") {
          note(environment, target, key, "skipped", "unreadable");
          continue;
        }
        try {
          await client.updateEnvValue(token, teamId, hostProjectId, existing.id, value);
          summary.updated += 1;
        } catch (error) {
          // Removed at Vercel since the list was read, or refused: this key only.
          if (!(error instanceof VercelError) || (error.failure !== "invalid" && error.failure !== "not_found")) throw error;
          note(environment, target, key, "failed", error.code === "ENV_CONFLICT" ? "conflict" : "rejected");
        }
      }

      for (let i = 0; i < toCreate.length; i += CREATE_BATCH) {
        const batch = toCreate.slice(i, i + CREATE_BATCH);
        const result = await client.createEnvVars(
          token,
          teamId,
          hostProjectId,
          batch.map(({ key, value }) => ({ key, value, type: "encrypted" as const, target: [target] })),
        );
        const createdKeys = new Set<string>();
        for (const created of result.created) {
          if (typeof created?.id !== "string" || typeof created.key !== "string") continue;
          createdKeys.add(created.key);
          summary.created += 1;
          varChanges.push({ op: "save", target, key: created.key, hostEnvId: created.id });
        }
        const failedKeys = new Set<string>();
        for (const failed of result.failed) {
          if (!failed.key || createdKeys.has(failed.key) || failedKeys.has(failed.key)) continue;
          failedKeys.add(failed.key);
          if (failed.code === "ENV_CONFLICT" || failed.code === "ENV_ALREADY_EXISTS") {
            note(environment, target, failed.key, "skipped", "conflict");
          } else {
            note(environment, target, failed.key, "failed", "rejected");
          }
        }
        // A failure entry Vercel did not name a key for still counts once per missing key.
        for (const { key } of batch) {
          if (!createdKeys.has(key) && !failedKeys.has(key)) note(environment, target, key, "failed", "rejected");
        }
      }

      // Vars we created whose secret is gone: remove them (never anyone else's).
      const current = new Set(values.map((v) => v.key));
      for (const [id, hostEnvId] of ours) {
        const [varTarget, key] = id.split("\n") as [string, string];
        if (varTarget !== target || current.has(key)) continue;
        if (hostIds.has(hostEnvId)) {
          try {
            await client.deleteEnvVar(token, teamId, hostProjectId, hostEnvId);
            summary.deleted += 1;
          } catch (error) {
            if (!(error instanceof VercelError) || error.failure !== "invalid") throw error;
            note(environment, target, key, "failed", "rejected");
            continue;
          }
        }
        varChanges.push({ op: "delete", target, key });
      }
    }
  }

  /** The var's plain value, or undefined when Vercel never returns it. */
  async function readableValue(token: string, teamId: string | null, hostProjectId: string, v: VercelEnvVar): Promise<string | undefined> {
    if (typeof v.value === "string" && (v.decrypted === true || v.type === "plain")) return v.value;
    if (v.type !== "encrypted" && v.type !== "secret") return undefined;
    try {
      return await client.readEnvValue(token, teamId, hostProjectId, v.id);
    } catch (error) {
      if (error instanceof VercelError && (error.failure === "not_found" || error.failure === "invalid")) return undefined;
      throw error;
    }
  }

  async function redeploy(row: IntegrationRow, trigger: Trigger, caller: Caller | null, summary: SyncSummary): Promise<Deployment> {
    const projectId = row.projectId;
    let deployment: Deployment;
    try {
      const hookUrl = vault.open(projectId, integrationAad(projectId, "deploy-hook"), {
        ciphertext: row.hookCiphertext!,
        keyVersion: row.hookKeyVersion!,
      });
      const job = await client.triggerDeployHook(hookUrl);
      deployment = { at: clock.now().toISOString(), trigger, ok: true, jobId: job.jobId, state: job.state };
    } catch (error) {
      const missing = error instanceof VercelError && error.failure === "not_found";
      if (!(error instanceof VercelError) && !(error instanceof DecryptError)) {
        log.error({ projectId, error: error instanceof Error ? error.message : "unknown" }, "deploy hook call failed");
      }
      deployment = {
        at: clock.now().toISOString(),
        trigger,
        ok: false,
        jobId: null,
        state: null,
        error: SYNC_ERRORS[missing ? "hook-missing" : "hook-failed"],
      };
    }
    writeTransaction(db, () => {
      // Disconnected (and perhaps connected anew) while the hook was called: this run's
      // deployment belongs to a connection that no longer exists.
      // A deployment that started is audited all the same.
      if (deployment.ok) {
        audit.record(caller, {
          projectId,
          action: "integration.redeployed",
          targetType: "integration",
          targetId: projectId,
          metadata: { trigger, jobId: deployment.jobId, state: deployment.state },
        });
      }
      const current = repo.find(projectId);
      if (!current || current.createdAt !== row.createdAt) return;
      summary.deployment = deployment;
      repo.update(projectId, {
        lastDeployment: JSON.stringify(deployment),
        // A follow-up run that has started since keeps its own lastRun ("running").
        ...(current.syncStartedAt === null ? { lastRun: JSON.stringify(summary) } : {}),
        ...(deployment.ok ? {} : { lastError: deployment.error }),
      });
    });
    return deployment;
  }

  return {
    run(projectId: string, options: { trigger: Trigger; caller: Caller | null; redeploy: boolean }): Promise<RunOutcome> {
      return track(run(projectId, options));
    },

    schedule,

    /** A secret changed (after its commit): count it and schedule an automatic run. */
    notifyChange(projectId: string, environment: string): void {
      if (stopped) return;
      try {
        // Most projects have no connection: a plain read, no write lock, for those.
        const linked = repo.find(projectId);
        if (!linked?.hostProjectId || !Object.hasOwn(parseMappings(linked), environment)) return;
        const shouldRun = writeTransaction(db, () => {
          const row = repo.find(projectId);
          if (!row?.hostProjectId || !Object.hasOwn(parseMappings(row), environment)) return false;
          // Counted while paused too: the reconnect that ends the pause sends them.
          repo.incrementPending(projectId);
          return row.status === "active" && row.pausedAt === null;
        });
        if (shouldRun) schedule(projectId);
      } catch (error) {
        // A listener must never fail the secret change that already committed.
        log.error({ projectId, error: error instanceof Error ? error.message : "unknown" }, "could not schedule a Vercel sync");
      }
    },

    /** Forgets a scheduled run (the connection is gone). */
    cancel(projectId: string): void {
      clearTimeout(timers.get(projectId));
      timers.delete(projectId);
    },

    /**
     * At start-up: a sync that was running when the process died is marked failed (its lock
     * released), and connections with pending changes get their automatic run.
     */
    recover(): void {
      const nowIso = clock.now().toISOString();
      writeTransaction(db, () => {
        for (const row of repo.listLocked()) {
          let trigger: Trigger = "automatic";
          try {
            const previous = JSON.parse(row.lastRun ?? "{}") as { trigger?: unknown };
            if (previous.trigger === "manual") trigger = "manual";
          } catch {
            // Keep the default.
          }
          const summary: SyncSummary = {
            ...emptySummary(trigger, row.syncStartedAt!),
            status: "failed",
            finishedAt: nowIso,
            error: SYNC_ERRORS.interrupted,
          };
          repo.finishRun(row.projectId, 0, {
            lastSyncAt: nowIso,
            lastSyncStatus: "failed",
            lastError: SYNC_ERRORS.interrupted,
            lastRun: JSON.stringify(summary),
            updatedAt: nowIso,
          });
          audit.record(null, {
            projectId: row.projectId,
            action: "integration.sync_failed",
            targetType: "integration",
            targetId: row.projectId,
            metadata: { trigger, error: SYNC_ERRORS.interrupted },
          });
        }
      });
      for (const row of repo.listWithPending()) {
        if (row.status === "active" && row.hostProjectId && row.pausedAt === null) schedule(row.projectId);
      }
    },

    /** Stops scheduling and waits for runs under way (bounded by the client's retries). */
    async stop(): Promise<void> {
      stopped = true;
      for (const timer of timers.values()) clearTimeout(timer);
      timers.clear();
      await Promise.allSettled([...inFlight]);
    },
  };
}

class SyncFailure extends Error {
  constructor(readonly failure: Failure) {
    super(failure);
  }
}

function failureOf(error: unknown): Failure {
  if (error instanceof SyncFailure) return error.failure;
  if (error instanceof VercelError) {
    if (error.failure === "rejected") return "rejected";
    if (error.failure === "scope" || error.failure === "not_found") return "project-gone";
    if (error.failure === "unavailable") return "unavailable";
  }
  return "unexpected";
}
