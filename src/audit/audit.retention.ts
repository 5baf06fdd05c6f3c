// AUDIT_RETENTION_DAYS: the oldest events are pruned, a hundred per transaction, at
// start and every hour. The chain stays provable: before a batch is deleted its events are
// checked link by link from the current checkpoint, and the checkpoint then moves to the
// last deleted event (its seq, hash and time), signed under the audit key, so `audit
// verify` starts from it and a database writer without the master key cannot move it.
import type { Logger } from "pino";
import type { Clock } from "../core/clock.ts";
import type { Keyring } from "../core/crypto.ts";
import { type Store, writeTransaction } from "../core/store.ts";
import { createAuditRepo } from "./audit.repo.ts";
import { type ChainBreak, describeBreak, signCheckpoint, startChain } from "./audit.verify.ts";

const DAY_MS = 24 * 60 * 60 * 1000;
/**
 * Events per transaction. Deleting an event costs about 0.2 ms of CPU (nine b-trees), and a
 * batch holds the event loop: 500 held it about 90 ms, 100 about 15 ms for the same total.
 */
const PRUNE_BATCH = 100;
const PRUNE_EVERY_MS = 60 * 60 * 1000;

export interface PruneResult {
  pruned: number;
  /** Set when an event to prune (or the checkpoint) did not verify: pruning stopped there. */
  problem?: string;
  /** Set when pruning stopped at an event checked by hash only, which nobody has vouched for yet. */
  heldHashOnly?: true;
}

const HELD_HASH_ONLY =
  'Audit retention keeps the events written before the audit chain was keyed (checked by hash only): pruning them would sign over events nothing proves. Compare "secrets-server audit verify" with the hash you recorded, then key them with "secrets-server rotate-key --key-hash-only-audit-events"; retention goes on from there.';

interface Deps {
  db: Store;
  keyring: Keyring;
  clock: Clock;
  log: Pick<Logger, "info" | "warn" | "error">;
  retentionDays: number;
  /** Called after a run that removed events, to give the WAL's space back. */
  afterPrune?: () => void;
}

export function createAuditRetention({ db, keyring, clock, log, retentionDays, afterPrune }: Deps) {
  const repo = createAuditRepo(db);
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<PruneResult> | undefined;
  let isStopping = false;
  // Said once a process: it stays so until the operator acts, and the start warns as well.
  let hasToldHashOnly = false;

  /** One batch in one transaction: the oldest events before `cutoff`, checked, then deleted. */
  function pruneBatch(cutoff: string): Promise<{ pruned: number; isDone: boolean; problem?: ChainBreak; heldHashOnly?: true }> {
    return writeTransaction(db, async () => {
      // An edited checkpoint stops pruning like an edited event: pruning on would re-sign it.
      const chain = await startChain(repo, keyring);
      if ("broken" in chain) return { pruned: 0, isDone: true, problem: chain.broken };
      const { checkpoint, walker } = chain;
      // One more than a batch: the event after it says whether the batch reaches the cutoff.
      const rows = await repo.chainPage(0, PRUNE_BATCH + 1);
      let last: (typeof rows)[number] | undefined;
      let count = 0;
      let problem: ChainBreak | undefined;
      let heldHashOnly: true | undefined;
      for (const row of rows.slice(0, PRUNE_BATCH)) {
        // Oldest first by seq: the first event inside the retention period ends the prefix.
        if (row.at >= cutoff) break;
        // Deleting an event that does not verify would destroy the evidence and sign over
        // it: the verified events before it go, it and everything after stay.
        const reason = walker.check(row);
        if (reason) {
          problem = { events: count, brokenAt: { seq: row.seq, id: row.id, at: row.at }, ...reason };
          break;
        }
        // A hash-only event holds whenever its hashes line up, which anyone who can write the
        // database can make so (and its `at` too): `audit verify` calls them NOT PROVEN until
        // the operator vouches for them. Pruning one would sign a checkpoint over it and end
        // that warning.
        if (row.mac_key_version === null) {
          heldHashOnly = true;
          break;
        }
        last = row;
        count += 1;
      }
      // Whether every event before the cutoff is gone once this batch is (the first one kept
      // is inside the retention period, or there is none): only then may the checkpoint say
      // so, as audit verify prints "Events before <pruned_before> were pruned".
      const firstKept = rows[count];
      const reachedCutoff = problem === undefined && !heldHashOnly && (firstKept === undefined || firstKept.at >= cutoff);
      if (!last) return { pruned: 0, isDone: true, problem, heldHashOnly };
      await repo.deleteThrough(last.seq);
      await repo.saveCheckpoint(
        signCheckpoint(
          {
            seq: last.seq,
            hash: last.hash,
            at: last.at,
            is_keyed: walker.isKeyed() ? 1 : 0,
            // Short of the cutoff (stopped at an event that does not verify, or more batches to
            // go), what an earlier run reached, else up to the last event pruned.
            pruned_before: reachedCutoff ? cutoff : (checkpoint?.pruned_before ?? last.at),
            pruned_events: (checkpoint?.pruned_events ?? 0) + count,
          },
          keyring,
        ),
      );
      return { pruned: count, isDone: problem !== undefined || reachedCutoff, problem, heldHashOnly };
    });
  }

  async function pruneAll(): Promise<PruneResult> {
    const cutoff = new Date(clock.now().getTime() - retentionDays * DAY_MS).toISOString();
    let pruned = 0;
    try {
      while (!isStopping) {
        const batch = await pruneBatch(cutoff);
        pruned += batch.pruned;
        if (batch.problem) {
          const problem = describeBreak(batch.problem);
          log.error(
            `Audit retention stopped: the audit log does not verify at ${problem}. Nothing there was pruned; run "secrets-server audit verify".`,
          );
          return { pruned, problem };
        }
        if (batch.heldHashOnly) {
          if (!hasToldHashOnly) log.warn(HELD_HASH_ONLY);
          hasToldHashOnly = true;
          return { pruned, heldHashOnly: true };
        }
        if (batch.isDone) break;
        // Between batches the server's requests run; a batch itself takes milliseconds.
        await new Promise((resolve) => setImmediate(resolve));
      }
    } finally {
      if (pruned > 0) {
        log.info({ pruned, before: cutoff }, "audit events pruned under AUDIT_RETENTION_DAYS");
        afterPrune?.();
      }
    }
    return { pruned };
  }

  /** A run, or the one already under way. */
  function run(): Promise<PruneResult> {
    running ??= pruneAll().finally(() => {
      running = undefined;
    });
    return running;
  }

  function runLogged(): void {
    run().catch((error: unknown) => log.error({ err: error }, "audit retention failed; it will try again in an hour"));
  }

  return {
    run,
    /** At start (after the current turn, so the server starts listening first) and hourly. */
    start(): void {
      setImmediate(runLogged);
      timer = setInterval(runLogged, PRUNE_EVERY_MS);
      timer.unref();
    },
    /** Stops the timer and waits for a run under way to finish its batch. */
    async stop(): Promise<void> {
      isStopping = true;
      clearInterval(timer);
      await running?.catch(() => undefined);
    },
  };
}
