// The pure half of a sync: what to do at Vercel for one environment → target mapping, given
// what Vercel holds, our secrets and the vars we created before. No I/O and no clock, so
// every rule reads as a table of cases (test/vercel-plan.test.ts); vercel.executor.ts
// reads what the plan needs and carries it out.

export type ConflictPolicy = "skip" | "overwrite";

export type KeyResultReason =
  | "exists" // a var we did not create holds the key and the policy is skip
  | "shared" // the existing var also covers other targets, which a sync never touches
  | "unreadable" // a sensitive or system var whose value Vercel never returns
  | "conflict" // Vercel answered ENV_CONFLICT
  | "rejected" // Vercel refused the var (reserved name, bad value)
  | "unanswered" // Vercel's answer to the create did not say what became of it: the next run finds out
  | "decrypt"; // the secrets of this environment could not be decrypted here

/** A var as Vercel listed it. */
export interface PlatformVar {
  id: string;
  key: string;
  type: string;
  target: string[];
  gitBranch?: string | null;
  /** Its plain value; undefined when Vercel never returns it (sensitive, system) or could not. */
  value?: string;
}

export interface Ours {
  target: string;
  /** The secrets of the environment mapped to `target`. */
  secrets: readonly { key: string; value: string }[];
  /** The vars this connection created for `target`: key → Vercel's id, or a claim (isClaim). */
  created: ReadonlyMap<string, string>;
  /**
   * Keys whose claim the var at Vercel provably fulfils: it holds the very value the
   * unanswered create sent (judged by the executor, see claimHolds there).
   */
  claimsHeld: ReadonlySet<string>;
}

/**
 * Recorded in place of an id for a var whose create got no answer (a 5xx, a timeout, which
 * are not repeated): Vercel may have written it. A claim is `unanswered:<key version>:<digest
 * of the value sent>`, so that the var can be recognised by the value it holds even after
 * the secret changed or was deleted; one recorded by an older version is "" (CREATE_UNANSWERED)
 * and is recognised by the secret's current value only. A var found under that key and
 * target alone, holding the claimed value, is then taken as ours; otherwise the claim is dropped.
 */
export const CREATE_UNANSWERED = "";
export const CLAIM_PREFIX = "unanswered:";

/** Whether a recorded id is a claim rather than Vercel's id of a var. */
export function isClaim(hostEnvId: string): boolean {
  return hostEnvId === CREATE_UNANSWERED || hostEnvId.startsWith(CLAIM_PREFIX);
}

/** The key version and digest a claim recorded, or undefined for an older claim without them. */
export function parseClaim(hostEnvId: string): { keyVersion: number; digest: string } | undefined {
  const match = /^unanswered:(\d+):([A-Za-z0-9_-]+)$/.exec(hostEnvId);
  return match ? { keyVersion: Number(match[1]), digest: match[2]! } : undefined;
}

export interface Policy {
  conflictPolicy: ConflictPolicy;
}

export type Operation =
  /** No var for the key and target: create one (one var per target). */
  | { op: "create"; key: string; value: string }
  /** Replace the value in place, keeping Vercel's id. */
  /** `encrypt`: the var was someone's `plain` one, readable by anyone on the Vercel project; our value must not be. */
  | { op: "update"; key: string; value: string; hostEnvId: string; encrypt?: true }
  /** A var we created whose secret is gone. */
  | { op: "delete"; key: string; hostEnvId: string }
  /** Drop our record of a var: gone at Vercel, or the key is now held by a var we did not create. */
  | { op: "forget"; key: string }
  /** Record as ours the var an unanswered create of ours made (see CREATE_UNANSWERED). */
  | { op: "adopt"; key: string; hostEnvId: string }
  | { op: "unchanged"; key: string }
  | { op: "skip"; key: string; reason: "exists" | "shared" | "unreadable" };

/**
 * The var that stands for each key in `target`: only vars without a git branch, and the
 * first one Vercel lists when several claim the key (one var per key and target).
 */
export function targetVars<T extends Omit<PlatformVar, "value">>(platformVars: readonly T[], target: string): Map<string, T> {
  const byKey = new Map<string, T>();
  for (const v of platformVars) {
    if (!v.gitBranch && Array.isArray(v.target) && v.target.includes(target) && !byKey.has(v.key)) byKey.set(v.key, v);
  }
  return byKey;
}

/** The value Vercel sent in the list, when it is the plain value (decrypted, or a plain var). */
export function listedValue(v: { value?: string; type: string; decrypted?: boolean }): string | undefined {
  return typeof v.value === "string" && (v.decrypted === true || v.type === "plain") ? v.value : undefined;
}

/** Whether a var's value can be asked for one by one: encrypted ones can, sensitive and system never. */
export function isReadableOnRequest(v: { type: string }): boolean {
  return v.type === "encrypted" || v.type === "secret";
}

/** The operations of one target, in the order they are carried out: in place first, then creates, then deletes. */
export function planSync(platformVars: readonly PlatformVar[], ours: Ours, policy: Policy): Operation[] {
  const byKey = targetVars(platformVars, ours.target);
  const inPlace: Operation[] = [];
  const creates: Operation[] = [];
  for (const { key, value } of ours.secrets) {
    const existing = byKey.get(key);
    let createdId = ours.created.get(key);
    if (!existing) {
      creates.push({ op: "create", key, value });
      continue;
    }
    if (createdId !== undefined && isClaim(createdId)) {
      if (ours.claimsHeld.has(key) && existing.target.length === 1) {
        // Ours: it follows the secret from here, like any var we created.
        inPlace.push({ op: "adopt", key, hostEnvId: existing.id });
        createdId = existing.id;
      } else {
        // Not provably the var our create made: anyone else's, as before the claim.
        inPlace.push({ op: "forget", key });
        createdId = undefined;
      }
    }
    const isOurs = createdId === existing.id;
    if (existing.value !== undefined && existing.value === value) {
      inPlace.push({ op: "unchanged", key });
      // Our record points at a var that no longer holds the key: someone else's does now.
      if (createdId !== undefined && !isOurs) inPlace.push({ op: "forget", key });
      continue;
    }
    if (existing.target.length > 1) {
      inPlace.push({ op: "skip", key, reason: "shared" });
      continue;
    }
    // Our own vars always follow the secret; the policy decides about anyone else's.
    if (!isOurs && policy.conflictPolicy !== "overwrite") {
      inPlace.push({ op: "skip", key, reason: "exists" });
      continue;
    }
    if (existing.type === "system") {
      inPlace.push({ op: "skip", key, reason: "unreadable" });
      continue;
    }
    inPlace.push({ op: "update", key, value, hostEnvId: existing.id, ...(existing.type === "plain" ? { encrypt: true as const } : {}) });
  }

  // Vars we created whose secret is gone: removed (never anyone else's). One that someone
  // has since given other targets or another name serves them now: only forgotten.
  const current = new Set(ours.secrets.map((s) => s.key));
  const atVercel = new Map(platformVars.map((v) => [v.id, v]));
  const removals: Operation[] = [];
  for (const [key, hostEnvId] of ours.created) {
    if (current.has(key)) continue;
    if (isClaim(hostEnvId)) {
      // The secret went before the claim was settled: the var goes too if it is provably the one our create made.
      const claimed = byKey.get(key);
      const isOurs = claimed !== undefined && ours.claimsHeld.has(key) && claimed.target.length === 1;
      removals.push(isOurs ? { op: "delete", key, hostEnvId: claimed.id } : { op: "forget", key });
      continue;
    }
    const v = atVercel.get(hostEnvId);
    const isStillOnlyOurs = v !== undefined && v.key === key && v.target.length === 1 && v.target[0] === ours.target;
    removals.push(isStillOnlyOurs ? { op: "delete", key, hostEnvId } : { op: "forget", key });
  }
  return [...inPlace, ...creates, ...removals];
}

export interface CreateOutcome {
  created: { key: string; hostEnvId: string }[];
  refused: { key: string; result: "skipped" | "failed"; reason: "conflict" | "rejected" }[];
  /**
   * Keys the answer neither lists as created (with an id) nor names as refused: a 2xx whose
   * body was cut or unreadable. Vercel may have written them, so their claims stay, as for a
   * create that got no answer at all.
   */
  unanswered: string[];
}

/**
 * What a batch create did, key by key. Vercel may write part of a batch; every key sent is
 * created, refused or unanswered exactly once, even when a failure entry names no key or a key twice.
 * A key the answer names nowhere is unanswered, unless the answer was a 400 (`nothingWritten`).
 */
export function createOutcome(
  sentKeys: readonly string[],
  result: {
    created: readonly ({ id?: unknown; key?: unknown } | null | undefined)[];
    failed: readonly { key?: string; code?: string }[];
    nothingWritten?: boolean;
  },
): CreateOutcome {
  const outcome: CreateOutcome = { created: [], refused: [], unanswered: [] };
  const createdKeys = new Set<string>();
  for (const created of result.created) {
    if (typeof created?.id !== "string" || typeof created.key !== "string") continue;
    createdKeys.add(created.key);
    outcome.created.push({ key: created.key, hostEnvId: created.id });
  }
  const refusedKeys = new Set<string>();
  for (const failed of result.failed) {
    if (!failed.key || createdKeys.has(failed.key) || refusedKeys.has(failed.key)) continue;
    refusedKeys.add(failed.key);
    const conflict = failed.code === "ENV_CONFLICT" || failed.code === "ENV_ALREADY_EXISTS";
    outcome.refused.push(
      conflict ? { key: failed.key, result: "skipped", reason: "conflict" } : { key: failed.key, result: "failed", reason: "rejected" },
    );
  }
  for (const key of sentKeys) {
    if (createdKeys.has(key) || refusedKeys.has(key)) continue;
    // A 400 wrote nothing: a key its failures do not name was refused all the same.
    if (result.nothingWritten) outcome.refused.push({ key, result: "failed", reason: "rejected" });
    else outcome.unanswered.push(key);
  }
  return outcome;
}

/** The stored environment → target mappings; anything unreadable counts as none. */
export function parseMappings(row: { mappings: string }): Record<string, string> {
  try {
    const value = JSON.parse(row.mappings) as unknown;
    return value && typeof value === "object" && !Array.isArray(value) ? (value as Record<string, string>) : {};
  } catch {
    return {};
  }
}
