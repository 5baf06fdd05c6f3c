import type { Logger } from "pino";
import type { AuditWriter } from "../../audit/audit.writer.ts";
import type { Caller } from "../../core/caller.ts";
import type { Clock } from "../../core/clock.ts";
import { safeEqual } from "../../core/crypto.ts";
import { loggedMessage } from "../../core/error-text.ts";
import { type Store, writeTransaction } from "../../core/store.ts";
import { DecryptError, integrationAad, type Vault } from "../../core/vault.ts";
import { SHUTDOWN, type VercelClient, type VercelEnvVar, VercelError } from "./vercel.client.ts";
import {
  CLAIM_PREFIX,
  CREATE_UNANSWERED,
  createOutcome,
  isClaim,
  isReadableOnRequest,
  type KeyResultReason,
  listedValue,
  type PlatformVar,
  parseClaim,
  parseMappings,
  planSync,
  targetVars,
} from "./vercel.plan.ts";
import type { IntegrationRow, VercelRepo } from "./vercel.repo.ts";

// One sync run, carried out at Vercel. Shape of a run:
//   1. one short transaction takes the lease (sync_started_at, sync_owner) and records a
//      running lastRun; a timer renews the lease's heartbeat while the run lasts;
//   2. per mapping: list, read the values the plan needs, plan (vercel.plan.ts), carry it
//      out; network calls with no transaction open;
//   3. one short transaction writes the results, releases the lease and audits.

export type Trigger = "manual" | "automatic";

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

export type RunOptions = { trigger: Trigger; caller: Caller | null; redeploy: boolean };

export type RunOutcome =
  | { kind: "done"; summary: SyncSummary }
  | { kind: "failed"; summary: SyncSummary; failure: SyncFailureKind }
  | { kind: "busy" }
  | { kind: "not-linked" }
  | { kind: "attention" }
  | { kind: "paused" };

export type SyncFailureKind =
  | "rejected"
  | "refused"
  | "unavailable"
  | "project-gone"
  | "token-unreadable"
  | "unexpected"
  | "lease-lost"
  /** Paused while the run was under way (its connector lost the right): it stops before its next call. */
  | "paused"
  /** Linked to another Vercel project while the run was under way: it stops before it creates anything in the old one. */
  | "relinked"
  /** Reconnected with a new token while the run was under way: the old one is used for nothing more. */
  | "reconnected"
  /** The server began to close while the run was under way: its calls to Vercel were cut. */
  | "interrupted";

/** A run stopped because the connection changed under it: what is pending is for the connection as it is now. */
export function isStoppedForChange(failure: SyncFailureKind): boolean {
  return failure === "relinked" || failure === "reconnected";
}

export const SYNC_ERRORS: Record<Exclude<SyncFailureKind, "lease-lost"> | "hook-missing" | "hook-failed" | "stale-key", string> = {
  rejected: "Vercel rejected the saved access token. Reconnect Vercel with a new token.",
  unavailable: "Vercel could not be reached or kept failing. Try the sync again in a few minutes.",
  refused: "Vercel refused a request of the sync. Check the linked project at Vercel, then try the sync again.",
  "project-gone": "The linked Vercel project was not found. Link a Vercel project again.",
  "token-unreadable": "The saved Vercel token could not be decrypted. Reconnect Vercel.",
  unexpected: "The sync stopped on an unexpected error. Try again; if it keeps happening, check the server log.",
  paused:
    "Vercel syncing is paused: the person who connected it no longer manages this project's integrations. An admin or the owner must reconnect Vercel with their own access token.",
  interrupted: "The server stopped while a sync was running. Run the sync again.",
  relinked: "The Vercel link changed while the sync ran. The sync that follows sends the changes as the link is now.",
  reconnected: "Vercel was reconnected while the sync ran. The sync that follows uses the new token.",
  "hook-missing": "Vercel did not find the deploy hook. Add a new deploy hook URL.",
  "hook-failed": "The deploy hook call failed. Try the redeploy again.",
  "stale-key": "Not redeployed: a key failed to update or delete at Vercel, and its old value would be deployed. See the keys that failed.",
};

const MAX_RESULTS = 200;
/**
 * A lease with no owner was taken by a version before leases, which had no heartbeat:
 * it is stale only once older than any run could be (every call has a timeout and
 * bounded retries).
 */
const OWNERLESS_STALE_MS = 60 * 60 * 1000;
const CREATE_BATCH = 50;

/** The plain-data source of secret values: the secrets service's system read. */
export interface SecretValues {
  readAllValues(projectId: string, environment: string): Promise<{ key: string; value: string }[]>;
}

export interface ExecutorDeps {
  db: Store;
  repo: VercelRepo;
  vault: Vault;
  audit: AuditWriter;
  clock: Clock;
  client: VercelClient;
  secrets: SecretValues;
  log: Logger;
  /** This process in sync leases. */
  owner: string;
  /** A lease whose heartbeat is older than this belongs to a process that is gone. */
  leaseStaleMs: number;
  /** Changes landed during a run: the scheduler runs again for them. */
  followUp: (projectId: string) => void;
}

export type VercelExecutor = ReturnType<typeof createVercelExecutor>;

export function openToken(vault: Vault, row: IntegrationRow): Promise<string> {
  return vault.open(row.projectId, integrationAad(row.projectId, "token"), {
    ciphertext: row.tokenCiphertext,
    keyVersion: row.tokenKeyVersion,
  });
}

type RunLease = { startedAt: string; renew(): Promise<void>; holds(): Promise<boolean> };

/** A var's place among the recorded ones: one per target and key. */
function varSlot(v: { target: string; key: string }): string {
  return `${v.target}\n${v.key}`;
}

/**
 * What the run's last commit records of the vars at Vercel. `claim`: the claim this run
 * wrote before the create (see claimCreates), which the change replaces, or removes.
 */
type VarChange =
  | { op: "save"; target: string; key: string; hostEnvId: string; claim?: string }
  | { op: "delete"; target: string; key: string; claim?: string };

export function createVercelExecutor({ db, repo, vault, audit, clock, client, secrets, log, owner, leaseStaleMs, followUp }: ExecutorDeps) {
  /** Projects whose run this process is executing. */
  const running = new Set<string>();
  const heartbeatMs = Math.max(100, Math.floor(leaseStaleMs / 6));

  function staleBounds(nowMs: number): { staleBefore: string; ownerlessStaleBefore: string } {
    return {
      staleBefore: new Date(nowMs - leaseStaleMs).toISOString(),
      ownerlessStaleBefore: new Date(nowMs - OWNERLESS_STALE_MS).toISOString(),
    };
  }

  /** The rule of repo.tryLock and repo.listStale, for a row already read; a run of this process is never stale. */
  function isStale(row: IntegrationRow, bounds: { staleBefore: string; ownerlessStaleBefore: string }): boolean {
    if (row.syncStartedAt === null) return false;
    if (row.syncOwner === null) return row.syncStartedAt < bounds.ownerlessStaleBefore;
    if (row.syncOwner === owner && running.has(row.projectId)) return false;
    return (row.syncHeartbeatAt ?? row.syncStartedAt) < bounds.staleBefore;
  }

  /** Inside a write transaction: the stale run is failed (interrupted) and its lease released. */
  async function markInterrupted(row: IntegrationRow, nowIso: string): Promise<void> {
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
    await repo.finishRun(row.projectId, 0, {
      // What it did at Vercel before it stopped is unknown: the next redeploy is not for nothing.
      deployDue: true,
      lastSyncAt: nowIso,
      lastSyncStatus: "failed",
      lastError: SYNC_ERRORS.interrupted,
      lastRun: JSON.stringify(summary),
      updatedAt: nowIso,
    });
    await audit.record(null, {
      projectId: row.projectId,
      action: "integration.sync_failed",
      targetType: "integration",
      targetId: row.projectId,
      metadata: { trigger, error: SYNC_ERRORS.interrupted },
    });
  }

  /**
   * The lease of one run. A renewal that finds the row no longer this run's means another
   * process took it over. Before each call the lease is renewed at once when the timer is
   * late (the process was stalled: the timer and the answer it waited for may wake it in
   * either order), so a stalled process finds out before it writes at Vercel again.
   */
  function runLease(projectId: string, startedAt: string): RunLease {
    let lost = false;
    let renewedAtMs = performance.now();
    /** Never rejects: a failure is logged. */
    async function renew(): Promise<void> {
      try {
        if (!(await writeTransaction(db, () => repo.heartbeat(projectId, owner, startedAt, clock.now().toISOString())))) lost = true;
        renewedAtMs = performance.now();
      } catch (error) {
        // Busy or failing storage: the next beat tries again; the lease lasts several beats.
        log.warn({ projectId, error: loggedMessage(error) }, "could not renew a Vercel sync lease");
      }
    }
    return {
      startedAt,
      renew,
      async holds(): Promise<boolean> {
        if (!lost && performance.now() - renewedAtMs > heartbeatMs * 2) await renew();
        // Renewals that keep failing (busy or unreachable storage) do not keep the lease: past
        // half its stale time without one, another process may soon take it over, so this
        // run stops before it writes at Vercel again (6 beats make the stale time).
        if (!lost && performance.now() - renewedAtMs > heartbeatMs * 3) lost = true;
        return !lost;
      },
    };
  }

  /**
   * The claim recorded before a create: the value it sends, as a digest (see CREATE_UNANSWERED).
   * Inside a write transaction, where a missing data key is made.
   */
  async function claimFor(projectId: string, value: string): Promise<string> {
    try {
      const keyVersion = vault.currentKeyVersion;
      return `${CLAIM_PREFIX}${keyVersion}:${await vault.digest(projectId, keyVersion, value)}`;
    } catch (error) {
      // A data key that does not open: the claim without a digest, recognised by the secret's value.
      if (error instanceof DecryptError) return CREATE_UNANSWERED;
      throw error;
    }
  }

  /** The vars recorded now, by varSlot: read only where a change must not replace a newer record. */
  async function recordedVars(projectId: string): Promise<Map<string, string>> {
    return new Map((await repo.listVars(projectId)).map((v) => [varSlot(v), v.hostEnvId]));
  }

  /**
   * Whether `value` is the one a claim recorded: true or false, or undefined when the claim's
   * key version no longer opens (rotated away), which the caller then judges as an older
   * claim, by the secret's current value.
   */
  async function claimHolds(projectId: string, claim: { keyVersion: number; digest: string }, value: string): Promise<boolean | undefined> {
    try {
      return safeEqual(await vault.digest(projectId, claim.keyVersion, value), claim.digest);
    } catch (error) {
      if (error instanceof DecryptError) return undefined;
      throw error;
    }
  }

  async function run(projectId: string, options: RunOptions): Promise<RunOutcome> {
    const { trigger } = options;
    const startedAt = clock.now().toISOString();
    const start = await writeTransaction(db, async () => {
      const row = await repo.find(projectId);
      if (!row?.hostProjectId) return { kind: "not-linked" as const };
      if (row.status === "attention") return { kind: "attention" as const };
      // Checked here, in the transaction that takes the lease, so no trigger (a debounced
      // change, a follow-up run, recovery) can sync with a paused connection's token.
      if (row.pausedAt !== null) return { kind: "paused" as const };
      const bounds = staleBounds(Date.parse(startedAt));
      // A run whose process is gone is recorded as interrupted before this one takes its place.
      if (isStale(row, bounds)) await markInterrupted(row, startedAt);
      const lastRun = JSON.stringify({ status: "running", trigger, startedAt });
      if (!(await repo.tryLock({ projectId, startedAt, owner, lastRun, ...bounds }))) return { kind: "busy" as const };
      return { kind: "locked" as const, row };
    });
    if (start.kind !== "locked") return start;
    running.add(projectId);
    const lease = runLease(projectId, startedAt);
    // Renewed on a timer, not only between calls: one Vercel call may take longer than the
    // lease (timeouts and retries), and the lease must outlive it.
    // renew() never rejects (it logs what failed), so the beat's promise is left to itself.
    const heartbeat = setInterval(() => void lease.renew(), heartbeatMs);
    heartbeat.unref();
    try {
      return await runLocked(start.row, startedAt, options, lease);
    } finally {
      clearInterval(heartbeat);
      running.delete(projectId);
    }
  }

  async function runLocked(row: IntegrationRow, startedAt: string, options: RunOptions, lease: RunLease): Promise<RunOutcome> {
    const { trigger, caller } = options;
    const projectId = row.projectId;

    const summary = emptySummary(trigger, startedAt);
    const varChanges: VarChange[] = [];
    /** A key failed in a way that leaves a stale value at Vercel (or was never read). */
    let leftStale = false;
    let failure: SyncFailureKind | undefined;
    try {
      leftStale = await syncAll(row, summary, varChanges, lease);
    } catch (error) {
      failure = failureOf(error);
      if (failure === "lease-lost") {
        log.warn(
          { projectId },
          "stopped a Vercel sync: another server process took it over, as this one had not renewed its lease in time",
        );
      }
      if (failure === "unexpected") {
        log.error({ projectId, error: loggedMessage(error) }, "Vercel sync failed unexpectedly");
      }
      if (failure === "refused" && error instanceof VercelError) {
        // Status and Vercel's error code only: its text may repeat what was sent.
        log.warn({ projectId, status: error.status, code: error.code }, "Vercel refused a request of the sync");
      }
    }

    summary.finishedAt = clock.now().toISOString();
    if (failure) {
      summary.status = "failed";
      summary.error = failure === "lease-lost" ? SYNC_ERRORS.interrupted : SYNC_ERRORS[failure];
    } else if (summary.failed > 0) {
      summary.status = "partial";
    }
    if (summary.results.length > MAX_RESULTS) summary.results = summary.results.slice(0, MAX_RESULTS);

    async function recordRun(): Promise<void> {
      if (failure) {
        await audit.record(caller, {
          projectId,
          action: "integration.sync_failed",
          targetType: "integration",
          targetId: projectId,
          metadata: { trigger, error: summary.error },
        });
        return;
      }
      await audit.record(caller, {
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

    const finish = await writeTransaction(db, async () => {
      const current = await repo.find(projectId);
      const isStillOurs =
        current !== undefined && current.syncStartedAt === startedAt && current.syncOwner === owner && current.createdAt === row.createdAt;
      // Taken over by another process, which has recorded this run as interrupted: what
      // reached Vercel is audited only when something did.
      if (failure !== "lease-lost" || summary.created + summary.updated + summary.deleted > 0) await recordRun();
      // Taken over while this run was stalled: the vars it created at Vercel are ours all the
      // same, and are recorded unless the run that took over has recorded those keys since
      // (its view is the newer): where the record is still this run's claim, or none. Nothing
      // else: the rest is that run's to record.
      if (current && !isStillOurs && current.createdAt === row.createdAt && current.hostProjectId === row.hostProjectId) {
        const ours = varChanges.filter((change) => change.op === "save" || change.claim !== undefined);
        const recorded = ours.length > 0 ? await recordedVars(projectId) : new Map<string, string>();
        for (const change of ours) {
          const now = recorded.get(varSlot(change));
          if (now !== undefined && now !== change.claim) continue;
          if (change.op === "save") {
            await repo.saveVar({
              projectId,
              target: change.target,
              key: change.key,
              hostEnvId: change.hostEnvId,
              createdAt: summary.finishedAt,
            });
          } else if (now !== undefined) {
            await repo.deleteVar(projectId, change.target, change.key);
          }
        }
      }
      // Disconnected (or disconnected and reconnected, or taken over) during the run: nothing else to record.
      if (!current || !isStillOurs) return { remaining: 0, recorded: false, paused: false };
      // A token rejected by Vercel means attention only while it is still the saved one:
      // a reconnect during the run has replaced it with a token this run never used.
      const tokenRejected =
        (failure === "rejected" || failure === "token-unreadable") && current.tokenCiphertext.equals(row.tokenCiphertext);
      const nowIso = summary.finishedAt;
      // Linked to another Vercel project during the run: what this run did is the old one's.
      const changes = current.hostProjectId === row.hostProjectId ? varChanges : [];
      // A claim names its value, not its run: one that is no longer the record (a stalled
      // run that was taken over has since saved the var it made) is not this run's to drop.
      const recorded = changes.some((change) => change.op === "delete" && change.claim !== undefined)
        ? await recordedVars(projectId)
        : undefined;
      for (const change of changes) {
        if (change.op === "save") {
          await repo.saveVar({ projectId, target: change.target, key: change.key, hostEnvId: change.hostEnvId, createdAt: nowIso });
        } else if (change.claim === undefined || recorded?.get(varSlot(change)) === change.claim) {
          await repo.deleteVar(projectId, change.target, change.key);
        }
      }
      // A failed run leaves `pending` as it was: those changes still have to reach Vercel.
      const consumed = failure ? 0 : row.pending;
      // What this run changed at Vercel (a failed or partial run too) waits for a deployment.
      // A create that got no answer may have written its vars too.
      const deployDue =
        current.deployDue ||
        summary.created + summary.updated + summary.deleted > 0 ||
        varChanges.some((change) => change.op === "save" && isClaim(change.hostEnvId));
      await repo.finishRun(projectId, consumed, {
        deployDue,
        status: tokenRejected ? "attention" : current.status,
        lastSyncAt: summary.finishedAt,
        lastSyncStatus: summary.status,
        lastError: summary.error ?? null,
        lastRun: JSON.stringify(summary),
        updatedAt: nowIso,
      });
      return { remaining: Math.max(current.pending - consumed, 0), recorded: true, deployDue, paused: current.pausedAt !== null };
    });

    if (failure) return { kind: "failed", summary, failure };
    if (!finish.recorded) return { kind: "done", summary };

    // Changes that landed during this run: a follow-up run picks them up, and redeploys.
    const hasFollowUp = finish.remaining > 0;
    if (hasFollowUp) followUp(projectId);
    // An automatic redeploy only when some change at Vercel is not deployed yet: a run that
    // found everything as it was (a change back, a key skipped) would rebuild for nothing.
    const wantsRedeploy = trigger === "manual" ? options.redeploy : row.autoRedeploy && !hasFollowUp && finish.deployDue === true;
    // Not after a key that failed to update or delete: its old value would be deployed beside
    // the new ones. A key Vercel refused to create (a reserved name) leaves nothing behind and,
    // failing on every run, would otherwise stop every redeploy.
    const deployable = summary.status === "ok" || (summary.status === "partial" && !leftStale);
    if (wantsRedeploy && deployable && !finish.paused && row.hookCiphertext && row.hookKeyVersion !== null) {
      summary.deployment = await redeploy(row, trigger, caller, summary);
    } else if (wantsRedeploy && !deployable && trigger === "manual") {
      // Asked for by a person: the answer says why no deployment started.
      summary.deployment = { at: clock.now().toISOString(), trigger, ok: false, jobId: null, state: null, error: SYNC_ERRORS["stale-key"] };
    }
    return { kind: "done", summary };
  }

  /** One run's calls to Vercel; true when a key failed in a way that leaves a stale value there (or was never read). */
  async function syncAll(row: IntegrationRow, summary: SyncSummary, varChanges: VarChange[], lease: RunLease): Promise<boolean> {
    let token: string;
    try {
      token = await openToken(vault, row);
    } catch (error) {
      if (error instanceof DecryptError) throw new SyncFailure("token-unreadable");
      throw error;
    }
    try {
      return await syncAllWith(token, row, summary, varChanges, lease);
    } catch (error) {
      // Vercel refusing the old token or project after a reconnect or a new link: the
      // change is what stopped the run, not the refusal (the new token may be fine).
      if (error instanceof VercelError || (error instanceof SyncFailure && error.failure === "project-gone")) {
        const stop = await stopReason(await repo.find(row.projectId), row, lease, token);
        if (stop) throw new SyncFailure(stop);
      }
      throw error;
    }
  }

  async function syncAllWith(
    token: string,
    row: IntegrationRow,
    summary: SyncSummary,
    varChanges: VarChange[],
    lease: RunLease,
  ): Promise<boolean> {
    const projectId = row.projectId;
    let leftStale = false;
    const hostProjectId = row.hostProjectId!;
    const teamId = row.teamId;
    /**
     * Before every call: a process whose lease was taken over stops talking to Vercel, and so
     * does a run whose connection was disconnected, reconnected, relinked or paused meanwhile:
     * a token its owner replaced or removed (perhaps because it leaked) is used for nothing more.
     */
    const holdsLease = async () => {
      if (!(await lease.holds())) throw new SyncFailure("lease-lost");
      const stop = await stopReason(await repo.find(projectId), row, lease, token);
      if (stop) throw new SyncFailure(stop);
    };
    await holdsLease();
    let listed: VercelEnvVar[];
    try {
      listed = await client.listEnvVars(token, teamId, hostProjectId);
    } catch (error) {
      if (error instanceof VercelError && error.failure === "not_found") throw new SyncFailure("project-gone");
      throw error;
    }
    const createdByTarget = new Map<string, Map<string, string>>();
    for (const v of await repo.listVars(projectId)) {
      const created = createdByTarget.get(v.target) ?? new Map<string, string>();
      created.set(v.key, v.hostEnvId);
      createdByTarget.set(v.target, created);
    }

    const note = (environment: string, target: string, key: string, result: KeyResult["result"], reason: KeyResultReason) => {
      summary[result] += 1;
      summary.results.push({ environment, target, key, result, reason });
    };

    for (const [environment, target] of Object.entries(parseMappings(row))) {
      let values: { key: string; value: string }[];
      try {
        values = await secrets.readAllValues(projectId, environment);
      } catch (error) {
        if (!(error instanceof DecryptError)) throw error;
        note(environment, target, "*", "failed", "decrypt");
        leftStale = true;
        continue;
      }
      const created = createdByTarget.get(target) ?? new Map<string, string>();
      const claims = [...created].filter(([, hostEnvId]) => isClaim(hostEnvId));
      // The plan compares values: read the ones the list did not carry, for the vars it will
      // look at (a claimed key's too, whose secret may be gone).
      const wanted = new Set([...values.map((v) => v.key), ...claims.map(([key]) => key)]);
      const readValues = new Map<string, string | undefined>();
      for (const [key, v] of targetVars(listed, target)) {
        if (!wanted.has(key) || listedValue(v) !== undefined || !isReadableOnRequest(v)) continue;
        await holdsLease();
        readValues.set(v.id, await readValue(token, teamId, hostProjectId, v.id));
      }
      const platformVars: PlatformVar[] = listed.map((v) => ({
        ...v,
        value: readValues.has(v.id) ? readValues.get(v.id) : listedValue(v),
      }));
      // Which claims the var at Vercel fulfils, decided here alone: by the claim's digest, or,
      // for a claim without one (an older version's, or its key version rotated away), by
      // the secret's current value.
      const claimsHeld = new Set<string>();
      const secretValues = new Map(values.map((v) => [v.key, v.value]));
      const platformByKey = targetVars(platformVars, target);
      for (const [key, hostEnvId] of claims) {
        const value = platformByKey.get(key)?.value;
        if (value === undefined) continue;
        const claim = parseClaim(hostEnvId);
        const byDigest = claim && (await claimHolds(projectId, claim, value));
        if (byDigest ?? value === secretValues.get(key)) claimsHeld.add(key);
      }
      const plan = planSync(platformVars, { target, secrets: values, created, claimsHeld }, { conflictPolicy: row.conflictPolicy });

      const creates: { key: string; value: string }[] = [];
      for (const step of plan) {
        switch (step.op) {
          case "unchanged":
            summary.unchanged += 1;
            break;
          case "skip":
            note(environment, target, step.key, "skipped", step.reason);
            break;
          case "forget":
            varChanges.push({ op: "delete", target, key: step.key });
            break;
          case "adopt":
            varChanges.push({ op: "save", target, key: step.key, hostEnvId: step.hostEnvId });
            break;
          case "create":
            creates.push({ key: step.key, value: step.value });
            break;
          case "update":
            // Creates wait for their batch; updates and deletes go one by one, in plan order.
            await flushCreates();
            await holdsLease();
            try {
              await client.updateEnvValue(token, teamId, hostProjectId, step.hostEnvId, step.value, step.encrypt === true);
              summary.updated += 1;
            } catch (error) {
              // Removed at Vercel since the list was read: made anew, as any key without a
              // var is, rather than left out until some other change runs a sync again.
              if (error instanceof VercelError && error.failure === "not_found") {
                creates.push({ key: step.key, value: step.value });
                break;
              }
              // Refused: this key only.
              if (!(error instanceof VercelError) || error.failure !== "invalid") throw error;
              note(environment, target, step.key, "failed", error.code === "ENV_CONFLICT" ? "conflict" : "rejected");
              leftStale = true;
            }
            break;
          case "delete":
            await flushCreates();
            await holdsLease();
            try {
              await client.deleteEnvVar(token, teamId, hostProjectId, step.hostEnvId);
              summary.deleted += 1;
            } catch (error) {
              if (!(error instanceof VercelError) || error.failure !== "invalid") throw error;
              note(environment, target, step.key, "failed", "rejected");
              leftStale = true;
              break;
            }
            varChanges.push({ op: "delete", target, key: step.key });
            break;
        }
      }
      await flushCreates();

      async function flushCreates(): Promise<void> {
        while (creates.length > 0) {
          const batch = creates.splice(0, CREATE_BATCH);
          // claimCreates reads the connection's row in its transaction, paused or not: only the lease here.
          if (!(await lease.holds())) throw new SyncFailure("lease-lost");
          const claims = await claimCreates(row, lease, token, target, batch);
          let result: Awaited<ReturnType<typeof client.createEnvVars>>;
          try {
            result = await client.createEnvVars(
              token,
              teamId,
              hostProjectId,
              batch.map(({ key, value }) => ({ key, value, type: "encrypted" as const, target: [target] })),
            );
          } catch (error) {
            // No answer (or a 5xx): Vercel may have written them. The claims stay, so that the
            // next run takes a var it finds holding our value as ours instead of as someone
            // else's. A refusal, or rate limiting (429), wrote nothing: the claims go.
            const unanswered = error instanceof VercelError && error.failure === "unavailable" && error.status !== 429;
            for (const [key, claim] of claims) {
              varChanges.push(unanswered ? { op: "save", target, key, hostEnvId: claim, claim } : { op: "delete", target, key, claim });
            }
            throw error;
          }
          const outcome = createOutcome(
            batch.map((b) => b.key),
            result,
          );
          for (const { key, hostEnvId } of outcome.created) {
            summary.created += 1;
            varChanges.push({ op: "save", target, key, hostEnvId, claim: claims.get(key) });
          }
          for (const refused of outcome.refused) {
            note(environment, target, refused.key, refused.result, refused.reason);
            varChanges.push({ op: "delete", target, key: refused.key, claim: claims.get(refused.key) });
          }
          for (const key of outcome.unanswered) {
            note(environment, target, key, "failed", "unanswered");
            const claim = claims.get(key)!;
            varChanges.push({ op: "save", target, key, hostEnvId: claim, claim });
          }
        }
      }
    }
    return leftStale;
  }

  /**
   * Claims the keys of a batch before Vercel is asked to create them, in a commit of their
   * own: a process that dies between Vercel's answer and the run's last commit leaves claims,
   * which the next run settles (the vars holding our values are ours), instead of vars it
   * would take for someone else's and then skip under the default policy.
   */
  async function claimCreates(
    row: IntegrationRow,
    lease: RunLease,
    token: string,
    target: string,
    batch: readonly { key: string; value: string }[],
  ): Promise<Map<string, string>> {
    const projectId = row.projectId;
    return writeTransaction(db, async () => {
      const stop = await stopReason(await repo.find(projectId), row, lease, token);
      if (stop) throw new SyncFailure(stop);
      const claims = new Map<string, string>();
      const createdAt = clock.now().toISOString();
      for (const { key, value } of batch) {
        const claim = await claimFor(projectId, value);
        claims.set(key, claim);
        await repo.saveVar({ projectId, target, key, hostEnvId: claim, createdAt });
      }
      return claims;
    });
  }

  /**
   * Why a run must stop, judged from the connection as stored now (`current`) against the row
   * it started from and the token it uses: its lease taken over or the connection gone
   * (lease-lost), the link changed (another project or team, other mappings or conflict
   * policy: the run would write what nobody asks for any more), syncing paused, or another
   * token saved. A token only encrypted again (rotate-key does that under running servers)
   * is the same token.
   */
  async function stopReason(
    current: IntegrationRow | undefined,
    row: IntegrationRow,
    lease: RunLease,
    token: string,
  ): Promise<SyncFailureKind | undefined> {
    const isStillOurs =
      current !== undefined &&
      current.syncStartedAt === lease.startedAt &&
      current.syncOwner === owner &&
      current.createdAt === row.createdAt;
    if (!isStillOurs) return "lease-lost";
    const isSameLink =
      current.hostProjectId === row.hostProjectId &&
      current.teamId === row.teamId &&
      sameMappings(parseMappings(current), parseMappings(row)) &&
      current.conflictPolicy === row.conflictPolicy;
    if (!isSameLink) return "relinked";
    if (current.pausedAt != null) return "paused";
    if (!current.tokenCiphertext.equals(row.tokenCiphertext) && !(await holdsToken(current, token))) return "reconnected";
    return undefined;
  }

  async function holdsToken(current: IntegrationRow, token: string): Promise<boolean> {
    try {
      return safeEqual(await openToken(vault, current), token);
    } catch (error) {
      if (error instanceof DecryptError) return false;
      throw error;
    }
  }

  /** An encrypted var's plain value, or undefined when Vercel no longer has or returns it. */
  async function readValue(token: string, teamId: string | null, hostProjectId: string, envId: string): Promise<string | undefined> {
    try {
      return await client.readEnvValue(token, teamId, hostProjectId, envId);
    } catch (error) {
      if (error instanceof VercelError && (error.failure === "not_found" || error.failure === "invalid")) return undefined;
      throw error;
    }
  }

  async function redeploy(row: IntegrationRow, trigger: Trigger, caller: Caller | null, summary: SyncSummary): Promise<Deployment> {
    const projectId = row.projectId;
    let deployment: Deployment;
    try {
      const hookUrl = await vault.open(projectId, integrationAad(projectId, "deploy-hook"), {
        ciphertext: row.hookCiphertext!,
        keyVersion: row.hookKeyVersion!,
      });
      const job = await client.triggerDeployHook(hookUrl);
      deployment = { at: clock.now().toISOString(), trigger, ok: true, jobId: job.jobId, state: job.state };
    } catch (error) {
      const missing = error instanceof VercelError && error.failure === "not_found";
      const cut = error instanceof VercelError && error.code === SHUTDOWN;
      if (!(error instanceof VercelError) && !(error instanceof DecryptError)) {
        log.error({ projectId, error: loggedMessage(error) }, "deploy hook call failed");
      }
      deployment = {
        at: clock.now().toISOString(),
        trigger,
        ok: false,
        jobId: null,
        state: null,
        error: SYNC_ERRORS[missing ? "hook-missing" : cut ? "interrupted" : "hook-failed"],
      };
    }
    await writeTransaction(db, async () => {
      // Disconnected (and perhaps connected anew) while the hook was called: this run's
      // deployment belongs to a connection that no longer exists.
      // A deployment that started is audited all the same.
      if (deployment.ok) {
        await audit.record(caller, {
          projectId,
          action: "integration.redeployed",
          targetType: "integration",
          targetId: projectId,
          metadata: { trigger, jobId: deployment.jobId, state: deployment.state },
        });
      }
      const current = await repo.find(projectId);
      if (!current || current.createdAt !== row.createdAt) return;
      summary.deployment = deployment;
      await repo.update(projectId, {
        // Vercel builds from the vars as they are now: every change made so far is in it.
        ...(deployment.ok ? { deployDue: false } : {}),
        lastDeployment: JSON.stringify(deployment),
        // A follow-up run that has started since keeps its own lastRun ("running").
        ...(current.syncStartedAt === null ? { lastRun: JSON.stringify(summary) } : {}),
        ...(deployment.ok ? {} : { lastError: deployment.error }),
      });
    });
    return deployment;
  }

  return {
    run,

    /**
     * Syncs whose process is gone (its lease went stale) are marked failed and their lease
     * released; a run of this process is never one of them, even when the clock jumped.
     * Returns the connections that still have changes to send.
     */
    async recoverStale(): Promise<string[]> {
      const now = clock.now();
      const nowIso = now.toISOString();
      const { staleBefore, ownerlessStaleBefore } = staleBounds(now.getTime());
      return writeTransaction(db, async () => {
        const recovered: string[] = [];
        for (const row of await repo.listStale(staleBefore, ownerlessStaleBefore)) {
          if (!isStale(row, { staleBefore, ownerlessStaleBefore })) continue;
          await markInterrupted(row, nowIso);
          if (row.pending > 0) recovered.push(row.projectId);
        }
        return recovered;
      });
    },

    /** How often a lease is renewed: the scheduler's tick too. */
    heartbeatMs,
  };
}

/** The same environment → target pairs, whatever order the JSON stored them in. */
function sameMappings(a: Record<string, string>, b: Record<string, string>): boolean {
  const keys = Object.keys(a);
  return keys.length === Object.keys(b).length && keys.every((key) => Object.hasOwn(b, key) && a[key] === b[key]);
}

class SyncFailure extends Error {
  readonly failure: SyncFailureKind;

  constructor(failure: SyncFailureKind) {
    super(failure);
    this.failure = failure;
  }
}

function failureOf(error: unknown): SyncFailureKind {
  if (error instanceof SyncFailure) return error.failure;
  if (error instanceof VercelError) {
    if (error.failure === "rejected") return "rejected";
    if (error.failure === "scope" || error.failure === "not_found") return "project-gone";
    if (error.failure === "unavailable") return error.code === SHUTDOWN ? "interrupted" : "unavailable";
    // Another 4xx (400, 402, 409, 413, 422) for the run itself, not for one key: Vercel's
    // answer, not a fault of this server.
    if (error.failure === "invalid") return "refused";
  }
  return "unexpected";
}
