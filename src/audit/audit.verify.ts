import { loadConfig } from "../core/config.ts";
import { loadKeyring, type Keyring } from "../core/crypto.ts";
import { checkMasterKeys, openDatabase, writeTransaction, type Db } from "../core/db.ts";
import { createAuditRepo, type StoredEventRow } from "./audit.repo.ts";
import { eventHash, GENESIS_HASH, type StoredEventContent } from "./audit.writer.ts";

export interface ChainBreak {
  /** Events before the broken one that verified. */
  events: number;
  brokenAt: { seq: number; id: string; at: string };
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

/**
 * Checks events one by one in write order. Each event must name the previous event's hash,
 * and its own hash must match its content under its own key version: an edited row fails
 * the second test, a deleted or inserted row the first one at the next event. Keyed events
 * need the master key to be rebuilt; hash-only events (written before the chain was keyed)
 * are accepted only before the first keyed one, so nobody can turn a keyed event into a
 * hash-only one to rebuild it.
 */
function createChainWalker(keyring: Keyring) {
  let expectedPrev = GENESIS_HASH;
  let events = 0;
  let keyedEvents = 0;
  const keyVersions = new Set<number>();

  return {
    /** Why `row` breaks the chain, or undefined when it holds (and it becomes the head). */
    check(row: StoredEventRow): Omit<ChainBreak, "events" | "brokenAt"> | undefined {
      if (row.prev_hash !== expectedPrev) {
        return {
          reason:
            events === 0
              ? "the first event does not start the chain: earlier events were removed"
              : "it does not follow the event before it: an event was removed, inserted or reordered",
        };
      }
      const version = row.mac_key_version;
      if (version === null && keyedEvents > 0) {
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
      }
      expectedPrev = row.hash;
      events += 1;
      return undefined;
    },

    summary(): ChainSummary {
      return {
        events,
        headHash: expectedPrev,
        keyVersions: [...keyVersions].sort((a, b) => a - b),
        keyedEvents,
        hashOnlyEvents: events - keyedEvents,
      };
    },
  };
}

/**
 * Walks the whole log in write order (see createChainWalker). Removing the newest events
 * leaves a valid shorter chain; compare the printed head hash with one recorded elsewhere
 * to catch that.
 */
export function verifyAuditChain(db: Db, keyring: Keyring): ChainCheck {
  const walker = createChainWalker(keyring);
  for (const row of createAuditRepo(db).iterateChain()) {
    const problem = walker.check(row);
    if (problem) return { ok: false, events: walker.summary().events, brokenAt: { seq: row.seq, id: row.id, at: row.at }, ...problem };
  }
  return { ok: true, ...walker.summary() };
}

export interface RekeyCounts {
  /** Events whose link was rewritten under the current version. */
  rekeyed: number;
  /** Of those, the ones that were checked by hash only before. */
  wereHashOnly: number;
  previousHeadHash: string;
  headHash: string;
}

class ChainBroken extends Error {
  constructor(readonly detail: ChainBreak) {
    super(detail.reason);
  }
}

const REKEY_PAGE = 1000;

/**
 * rotate-key's part for the audit log: verifies every event under its own key version and
 * rewrites the chain from the first event not keyed with the current version to the head.
 * A new MAC changes that event's hash, so every later link changes too, and a chain half
 * rewritten would not verify: it is all one transaction (the server's writes wait for it).
 * The walk checks each event before rewriting it and a break rolls everything back, so a
 * tampered chain is never blessed with the new key.
 */
export function rekeyAuditChain(db: Db, keyring: Keyring): ({ ok: true } & RekeyCounts) | ({ ok: false } & ChainBreak) {
  const repo = createAuditRepo(db);
  const current = keyring.currentVersion;
  const macKey = keyring.auditMacKey(current);
  try {
    return writeTransaction(db, () => {
      const walker = createChainWalker(keyring);
      const counts: RekeyCounts = { rekeyed: 0, wereHashOnly: 0, previousHeadHash: GENESIS_HASH, headHash: GENESIS_HASH };
      let isRewriting = false;
      let afterSeq = 0;
      for (;;) {
        const rows = repo.chainPage(afterSeq, REKEY_PAGE);
        if (rows.length === 0) break;
        for (const row of rows) {
          const problem = walker.check(row);
          if (problem) {
            throw new ChainBroken({ events: walker.summary().events, brokenAt: { seq: row.seq, id: row.id, at: row.at }, ...problem });
          }
          isRewriting ||= row.mac_key_version !== current;
          if (isRewriting) {
            const hash = eventHash(counts.headHash, contentOf(row), macKey);
            repo.relink(row.seq, counts.headHash, hash, current);
            counts.headHash = hash;
            counts.rekeyed += 1;
            if (row.mac_key_version === null) counts.wereHashOnly += 1;
          } else {
            counts.headHash = row.hash;
          }
        }
        afterSeq = rows.at(-1)!.seq;
      }
      counts.previousHeadHash = walker.summary().headHash;
      return { ok: true as const, ...counts };
    });
  } catch (error) {
    if (error instanceof ChainBroken) return { ok: false, ...error.detail };
    throw error;
  }
}

/** "event" or "events". */
function events(count: number): string {
  return `${count} ${count === 1 ? "event" : "events"}`;
}

/** "version 2", "versions 1 and 2", "versions 1, 2 and 3". */
export function keyVersionList(versions: number[]): string {
  if (versions.length === 1) return `version ${versions[0]}`;
  return `versions ${versions.slice(0, -1).join(", ")} and ${versions.at(-1)}`;
}

/** Where a chain breaks, in one line for stderr. */
export function describeBreak(check: ChainBreak): string {
  const { seq, id, at } = check.brokenAt;
  return `event #${seq} (id ${id}, at ${at}): ${check.reason}`;
}

const USAGE = `Usage: secrets-server audit verify

Checks the audit log's chain in DATA_DIR and reports the first broken link. It needs the
server's MASTER_KEY (and MASTER_KEYS_PREVIOUS): keyed events are checked with keys derived
from them. Exit code 0 when the chain is intact, 1 when it is broken or cannot be checked.
`;

/** `secrets-server audit <subcommand>`. */
export async function auditCommand(args: string[]): Promise<number> {
  const [subcommand] = args;
  if (subcommand !== "verify") {
    process.stderr.write(subcommand === undefined || subcommand === "help" ? USAGE : `Unknown audit command "${subcommand}".\n\n${USAGE}`);
    return subcommand === "help" ? 0 : 2;
  }
  const config = loadConfig();
  const keyring = loadKeyring(config);
  const db = openDatabase(config);
  try {
    // A wrong key is a configuration error, not "every keyed event was edited".
    checkMasterKeys(db, keyring, new Date());
    const result = verifyAuditChain(db, keyring);
    if (result.ok) {
      const lines = [`Audit log intact: ${events(result.events)} verified.`];
      if (result.keyedEvents > 0) {
        lines.push(
          `${events(result.keyedEvents)} keyed with master key ${keyVersionList(result.keyVersions)} (HMAC-SHA256): ` +
            "nobody without the master key can edit, remove, insert or reorder them and rebuild the chain to match.",
        );
      }
      // The first keyed event's MAC covers the hash before it, so keyed events vouch for the
      // hash-only ones as they were when keying began; with none, nothing does.
      if (result.hashOnlyEvents > 0 && result.keyedEvents > 0) {
        lines.push(
          `${events(result.hashOnlyEvents)} from before the chain was keyed checked by hash only (SHA-256); ` +
            "the keyed events after them vouch for them as they were when keying began. Run rotate-key to key them too.",
        );
      } else if (result.hashOnlyEvents > 0) {
        lines.push(
          `${events(result.hashOnlyEvents)} checked by hash only (SHA-256) and none keyed: anyone who can write the database ` +
            "could have rewritten them all. This version keys every new event; run rotate-key to key these.",
        );
      }
      lines.push(
        `Head hash: ${result.headHash}`,
        "Record the head hash somewhere else to detect later removal of the newest events: a chain cut short still verifies.",
      );
      process.stdout.write(`${lines.join("\n")}\n`);
      return 0;
    }
    process.stderr.write(
      (result.missingKeyVersion === undefined ? "Audit log chain BROKEN at " : "Audit log cannot be verified at ") +
        `${describeBreak(result)}.\n${events(result.events)} before it verified.\n`,
    );
    return 1;
  } finally {
    db.$client.close();
  }
}
