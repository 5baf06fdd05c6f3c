import crypto from "node:crypto";
import { loadConfig } from "../core/config.ts";
import { type Keyring, loadKeyring, safeEqual } from "../core/crypto.ts";
import {
  checkMasterKeys,
  closeStore,
  openStore,
  readTransaction,
  requireDatabaseFile,
  type Store,
  writeTransaction,
} from "../core/store.ts";
import { plural } from "../core/text.ts";
import { type AuditRepo, type ChainLink, type CheckpointRow, createAuditRepo, type StoredEventRow } from "./audit.repo.ts";
import { eventHash, GENESIS_HASH, type StoredEventContent } from "./audit.writer.ts";

export interface ChainBreak {
  /** Events before the broken one that verified. */
  events: number;
  /** The event that breaks the chain; for a bad checkpoint, the pruned event it names. */
  brokenAt: { seq: number; id: string; at: string };
  /** Set when the retention checkpoint itself does not verify. */
  isCheckpoint?: boolean;
  reason: string;
  /** Set when the event names a master key version that is not configured. */
  missingKeyVersion?: number;
}

export interface ChainSummary {
  events: number;
  headHash: string;
  /** Master key versions the keyed events were chained with, in ascending order. */
  keyVersions: number[];
  keyedEvents: number;
  /** Events written before the chain was keyed, checked by plain SHA-256 only. */
  hashOnlyEvents: number;
  /** The hash of the last hash-only event, when there are any. */
  hashOnlyHeadHash?: string;
  /** Set when retention pruned the oldest events: the verified chain starts here. */
  checkpoint?: { seq: number; at: string; hash: string; prunedBefore: string; prunedEvents: number; macKeyVersion: number };
}

export type ChainCheck = ({ ok: true } & ChainSummary) | ({ ok: false } & ChainBreak);

function contentOf(row: StoredEventRow): StoredEventContent {
  return {
    id: row.id,
    projectId: row.project_id,
    at: row.at,
    action: row.action,
    category: row.category,
    actorUserId: row.actor_user_id,
    targetType: row.target_type,
    targetId: row.target_id,
    metadata: row.metadata,
    serviceAccountId: row.service_account_id,
    serviceAccountName: row.service_account_name,
  };
}

/** What the checkpoint's MAC covers: every field but the key version, which picks the key. */
type CheckpointContent = Omit<CheckpointRow, "mac" | "mac_key_version">;

function checkpointMac(content: CheckpointContent, macKey: crypto.KeyObject): string {
  const fields = [content.seq, content.hash, content.at, content.is_keyed, content.pruned_before, content.pruned_events];
  // A label of its own, so a checkpoint's MAC can never pass for an event's link or back.
  return crypto.createHmac("sha256", macKey).update("audit-checkpoint\n").update(JSON.stringify(fields)).digest("hex");
}

/** A checkpoint signed with the current master key version's audit key. */
export function signCheckpoint(content: CheckpointContent, keyring: Keyring): CheckpointRow {
  const version = keyring.currentVersion;
  return { ...content, mac_key_version: version, mac: checkpointMac(content, keyring.auditMacKey(version)) };
}

/** Why the checkpoint cannot be trusted, or undefined when its MAC holds. */
function checkpointProblem(checkpoint: CheckpointRow, keyring: Keyring): Omit<ChainBreak, "events" | "brokenAt"> | undefined {
  const version = checkpoint.mac_key_version;
  if (!keyring.has(version)) {
    return {
      isCheckpoint: true,
      reason: `it is signed with master key version ${version}, which is not configured. Add that key to MASTER_KEYS_PREVIOUS as ${version}:<base64>; if there never was a version ${version}, the checkpoint was edited`,
      missingKeyVersion: version,
    };
  }
  if (!safeEqual(checkpointMac(checkpoint, keyring.auditMacKey(version)), checkpoint.mac)) {
    return { isCheckpoint: true, reason: "its signature does not match its content: the checkpoint was edited" };
  }
  return undefined;
}

function checkpointBreak(checkpoint: CheckpointRow, problem: Omit<ChainBreak, "events" | "brokenAt">): ChainBreak {
  return { events: 0, brokenAt: { seq: checkpoint.seq, id: "checkpoint", at: checkpoint.at }, ...problem };
}

/**
 * Checks events one by one in write order. Each event must name the previous event's hash,
 * and its own hash must match its content under its own key version: an edited row fails
 * the second test, a deleted or inserted row the first one at the next event. Keyed events
 * need the master key to be rebuilt; hash-only events (written before the chain was keyed)
 * are accepted only before the first keyed one, so nobody can turn a keyed event into a
 * hash-only one to rebuild it.
 */
function createChainWalker(keyring: Keyring, checkpoint?: CheckpointRow) {
  // After retention the chain starts at the checkpoint (its MAC checked by the caller):
  // the first kept event must name the last pruned one's hash.
  let expectedPrev = checkpoint?.hash ?? GENESIS_HASH;
  let events = 0;
  let keyedEvents = 0;
  let isKeyed = checkpoint?.is_keyed === 1;
  let hashOnlyHeadHash: string | undefined;
  const keyVersions = new Set<number>();

  return {
    /** Why `row` breaks the chain, or undefined when it holds (and it becomes the head). */
    check(row: StoredEventRow): Omit<ChainBreak, "events" | "brokenAt"> | undefined {
      if (row.prev_hash !== expectedPrev) {
        return {
          reason:
            events > 0
              ? "it does not follow the event before it: an event was removed, inserted or reordered"
              : checkpoint
                ? "it does not follow the retention checkpoint: events after the checkpoint were removed, or the event was edited"
                : "the first event does not start the chain: earlier events were removed",
        };
      }
      const version = row.mac_key_version;
      if (version === null && isKeyed) {
        return { reason: "it is checked by hash only but comes after keyed events: it was rewritten without the master key" };
      }
      if (version !== null && !keyring.has(version)) {
        return {
          reason: `it is keyed with master key version ${version}, which is not configured. Add that key to MASTER_KEYS_PREVIOUS as ${version}:<base64>; if there never was a version ${version}, the event was edited`,
          missingKeyVersion: version,
        };
      }
      const hash = eventHash(row.prev_hash, contentOf(row), version === null ? null : keyring.auditMacKey(version));
      if (hash !== row.hash) return { reason: "its content does not match its hash: the event was edited" };
      if (version !== null) {
        keyedEvents += 1;
        keyVersions.add(version);
        isKeyed = true;
      } else {
        hashOnlyHeadHash = row.hash;
      }
      expectedPrev = row.hash;
      events += 1;
      return undefined;
    },

    /** Whether the chain is keyed at the head: no hash-only event may follow. */
    isKeyed(): boolean {
      return isKeyed;
    },

    summary(): ChainSummary {
      return {
        events,
        headHash: expectedPrev,
        keyVersions: [...keyVersions].sort((a, b) => a - b),
        keyedEvents,
        hashOnlyEvents: events - keyedEvents,
        ...(hashOnlyHeadHash !== undefined && { hashOnlyHeadHash }),
      };
    },
  };
}

/**
 * Where the chain starts: after the retention checkpoint (whose MAC must hold) or at the
 * beginning. Every walk of the chain starts here: verify, rotate-key's re-keying, and
 * retention, which must not prune on from (and re-sign) a checkpoint someone edited.
 */
export async function startChain(
  repo: Pick<AuditRepo, "findCheckpoint">,
  keyring: Keyring,
): Promise<{ checkpoint: CheckpointRow | undefined; walker: ReturnType<typeof createChainWalker> } | { broken: ChainBreak }> {
  const checkpoint = await repo.findCheckpoint();
  if (checkpoint) {
    const problem = checkpointProblem(checkpoint, keyring);
    if (problem) return { broken: checkpointBreak(checkpoint, problem) };
  }
  return { checkpoint, walker: createChainWalker(keyring, checkpoint) };
}

/**
 * Walks the whole log in write order (see createChainWalker). Removing the newest events
 * leaves a valid shorter chain; compare the printed head hash with one recorded elsewhere
 * to catch that.
 */
export async function verifyAuditChain(db: Store, keyring: Keyring): Promise<ChainCheck> {
  const repo = createAuditRepo(db);
  // One snapshot: the server may prune (moving the checkpoint) while this runs.
  return readTransaction(db, async (): Promise<ChainCheck> => {
    const start = await startChain(repo, keyring);
    if ("broken" in start) return { ok: false, ...start.broken };
    const { checkpoint, walker } = start;
    const breakAt = (row: StoredEventRow): ChainCheck | undefined => {
      const problem = walker.check(row);
      return problem && { ok: false, events: walker.summary().events, brokenAt: { seq: row.seq, id: row.id, at: row.at }, ...problem };
    };
    const rows = await repo.iterateChain();
    // SQLite's rows come synchronously: no await per event of a long log.
    if (Symbol.asyncIterator in rows) {
      for await (const row of rows) {
        const broken = breakAt(row);
        if (broken) return broken;
      }
    } else {
      for (const row of rows) {
        const broken = breakAt(row);
        if (broken) return broken;
      }
    }
    return {
      ok: true,
      ...walker.summary(),
      ...(checkpoint && {
        checkpoint: {
          seq: checkpoint.seq,
          at: checkpoint.at,
          hash: checkpoint.hash,
          prunedBefore: checkpoint.pruned_before,
          prunedEvents: checkpoint.pruned_events,
          macKeyVersion: checkpoint.mac_key_version,
        },
      }),
    };
  });
}

export interface RekeyCounts {
  /** Events whose link was rewritten under the current version. */
  rekeyed: number;
  /** Of those, the ones that were checked by hash only before. */
  wereHashOnly: number;
  /** Hash-only events left as they were (keying them needs the operator's word). */
  leftHashOnly: number;
  previousHeadHash: string;
  headHash: string;
}

class ChainBroken extends Error {
  readonly detail: ChainBreak;

  constructor(detail: ChainBreak) {
    super(detail.reason);
    this.detail = detail;
  }
}

const REKEY_PAGE = 1000;

/**
 * rotate-key's part for the audit log: verifies every event under its own key version and
 * rewrites the chain from the first event not keyed with the current version to the head.
 * A new MAC changes that event's hash, so every later link changes too, and a chain half
 * rewritten would not verify: it is all one transaction (the server's writes wait for it).
 * The walk checks each event before rewriting it and a break rolls everything back, so a
 * tampered chain is never blessed with the new key. Hash-only events are keyed only when
 * the operator says so (`keyHashOnly`): nothing in the database tells events an older
 * version wrote from ones a database writer rewrote without the key, and keying them
 * vouches for them as they are.
 */
export async function rekeyAuditChain(
  db: Store,
  keyring: Keyring,
  options: { keyHashOnly: boolean } = { keyHashOnly: false },
): Promise<({ ok: true } & RekeyCounts) | ({ ok: false } & ChainBreak)> {
  const repo = createAuditRepo(db);
  const current = keyring.currentVersion;
  const macKey = keyring.auditMacKey(current);
  try {
    return await writeTransaction(db, async () => {
      const chain = await startChain(repo, keyring);
      if ("broken" in chain) throw new ChainBroken(chain.broken);
      const { checkpoint, walker } = chain;
      const start = checkpoint?.hash ?? GENESIS_HASH;
      const counts: RekeyCounts = { rekeyed: 0, wereHashOnly: 0, leftHashOnly: 0, previousHeadHash: start, headHash: start };
      let isRewriting = false;
      let afterSeq = 0;
      for (;;) {
        const rows = await repo.chainPage(afterSeq, REKEY_PAGE);
        if (rows.length === 0) break;
        const links: ChainLink[] = [];
        for (const row of rows) {
          const problem = walker.check(row);
          if (problem) {
            throw new ChainBroken({ events: walker.summary().events, brokenAt: { seq: row.seq, id: row.id, at: row.at }, ...problem });
          }
          // Hash-only events stand only before the keyed ones (the walker checked), so
          // leaving them keeps the chain whole: the first keyed event still names their head.
          if (row.mac_key_version === null && !options.keyHashOnly) {
            counts.headHash = row.hash;
            counts.leftHashOnly += 1;
            continue;
          }
          isRewriting ||= row.mac_key_version !== current;
          if (isRewriting) {
            const hash = eventHash(counts.headHash, contentOf(row), macKey);
            links.push({ seq: row.seq, prevHash: counts.headHash, hash });
            counts.headHash = hash;
            counts.rekeyed += 1;
            if (row.mac_key_version === null) counts.wereHashOnly += 1;
          } else {
            counts.headHash = row.hash;
          }
        }
        // Written after the page was checked: the next page is read by seq, not by link.
        await repo.relink(links, current);
        afterSeq = rows.at(-1)!.seq;
      }
      counts.previousHeadHash = walker.summary().headHash;
      // The checkpoint's hash stays (the event it names is gone and cannot be re-hashed): the
      // first kept event's new MAC covers it. Its signature moves to the current version, so
      // the older key is not needed for it either.
      if (checkpoint && checkpoint.mac_key_version !== current) await repo.saveCheckpoint(signCheckpoint(checkpoint, keyring));
      return { ok: true as const, ...counts };
    });
  } catch (error) {
    if (error instanceof ChainBroken) return { ok: false, ...error.detail };
    throw error;
  }
}

const events = (count: number) => plural(count, "event");

/** "version 2", "versions 1 and 2", "versions 1, 2 and 3". */
export function keyVersionList(versions: number[]): string {
  if (versions.length === 1) return `version ${versions[0]}`;
  return `versions ${versions.slice(0, -1).join(", ")} and ${versions.at(-1)}`;
}

/** Where a chain breaks, in one line for stderr. */
export function describeBreak(check: ChainBreak): string {
  const { seq, id, at } = check.brokenAt;
  if (check.isCheckpoint) return `the retention checkpoint (after pruned event #${seq}, at ${at}): ${check.reason}`;
  return `event #${seq} (id ${id}, at ${at}): ${check.reason}`;
}

const USAGE = `Usage: secrets-server audit verify

Checks the audit log's chain in DATA_DIR and reports the first broken link. It needs the
server's MASTER_KEY (and MASTER_KEYS_PREVIOUS): keyed events are checked with keys derived
from them. With AUDIT_RETENTION_DAYS the oldest events are pruned and the chain starts at
a checkpoint signed under the same keys; the output says up to when events were pruned.
Exit code 0 when the chain is intact and every event is keyed, 1 when it is broken or
cannot be checked, 3 when it holds but events checked by hash only remain: events an
older version wrote before the chain was keyed, or events someone without the master key
rewrote, which nothing in the database can tell apart. See the output for what to do.
`;

/** `secrets-server audit <subcommand>`. */
export async function auditCommand(args: string[]): Promise<number> {
  const [subcommand] = args;
  if (subcommand === "help") {
    process.stdout.write(USAGE);
    return 0;
  }
  if (subcommand !== "verify") {
    process.stderr.write(subcommand === undefined ? USAGE : `Unknown audit command "${subcommand}".\n\n${USAGE}`);
    return 2;
  }
  // An argument verify does not take is most likely a mistyped option: say so rather than verify
  // as if it were not there (main.ts turns --help into "help").
  if (args.length > 1) {
    process.stderr.write(USAGE);
    return 2;
  }
  const config = loadConfig();
  // Before the keyring: in development it would write a new key file into the wrong folder.
  requireDatabaseFile(config);
  const keyring = loadKeyring(config);
  const db = await openStore(config);
  try {
    // A wrong key is a configuration error, not "every keyed event was edited".
    await checkMasterKeys(db, keyring, new Date(), { recordNew: false });
    const result = await verifyAuditChain(db, keyring);
    if (result.ok) {
      const lines = [`Audit log intact: ${events(result.events)} verified.`];
      if (result.checkpoint) {
        const cp = result.checkpoint;
        lines.push(
          `Events before ${cp.prunedBefore} were pruned under retention (AUDIT_RETENTION_DAYS; ${events(cp.prunedEvents)} in all). ` +
            `The chain continues from a checkpoint signed with master key ${keyVersionList([cp.macKeyVersion])}: ` +
            `the last pruned event, #${cp.seq} at ${cp.at}, hash ${cp.hash}.`,
        );
      }
      if (result.keyedEvents > 0) {
        lines.push(
          `${events(result.keyedEvents)} keyed with master key ${keyVersionList(result.keyVersions)} (HMAC-SHA256): ` +
            "nobody without the master key can edit, remove, insert or reorder them and rebuild the chain to match.",
        );
      }
      if (result.events === 0 && !result.checkpoint) {
        lines.push(
          "The log holds no events at all. A server that has been used has some (every sign-in is one): if this one has, its whole log was removed.",
        );
      }
      lines.push(
        `Head hash: ${result.headHash}`,
        "Record the head hash somewhere else to detect later removal of the newest events: a chain cut short still verifies.",
      );
      process.stdout.write(`${lines.join("\n")}\n`);
      // Hash-only events prove nothing: a database writer can rewrite the whole log as
      // hash-only, and the server then chains its keyed events onto the forgery. Only the
      // operator can tell them from the events an older version wrote, by a hash kept elsewhere.
      if (result.hashOnlyEvents > 0) {
        process.stdout.write(
          `NOT PROVEN: ${events(result.hashOnlyEvents)} ${result.hashOnlyEvents === 1 ? "is" : "are"} checked by hash only (SHA-256), ` +
            "as a version before the chain was keyed wrote them, or as anyone who can write the database can rewrite them: " +
            "nothing in the database tells which. " +
            `The last of them has hash ${result.hashOnlyHeadHash}. If that (or the head hash) matches one you recorded before upgrading, ` +
            'run "secrets-server rotate-key --key-hash-only-audit-events" to key them as they are; otherwise treat the log as tampered with.\n',
        );
        return 3;
      }
      return 0;
    }
    process.stderr.write(
      (result.missingKeyVersion === undefined ? "Audit log chain BROKEN at " : "Audit log cannot be verified at ") +
        `${describeBreak(result)}.\n${events(result.events)} before it verified.\n`,
    );
    return 1;
  } finally {
    await closeStore(db);
  }
}
