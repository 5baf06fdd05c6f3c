import { loadConfig } from "../core/config.ts";
import { openDatabase, type Db } from "../core/db.ts";
import { createAuditRepo } from "./audit.repo.ts";
import { eventHash, GENESIS_HASH } from "./audit.writer.ts";

export type ChainCheck =
  | { ok: true; events: number; headHash: string }
  | { ok: false; events: number; brokenAt: { seq: number; id: string; at: string }; reason: string };

/**
 * Walks the whole log in write order. Each event must name the previous event's hash, and
 * its own hash must match its content: an edited row fails the second test, a deleted or
 * inserted row the first one at the next event. (Removing the newest events leaves a valid
 * shorter chain; compare the printed head hash with one recorded elsewhere to catch that.)
 */
export function verifyAuditChain(db: Db): ChainCheck {
  let expectedPrev = GENESIS_HASH;
  let events = 0;
  for (const row of createAuditRepo(db).iterateChain()) {
    const position = { seq: row.seq, id: row.id, at: row.at };
    if (row.prev_hash !== expectedPrev) {
      return {
        ok: false,
        events,
        brokenAt: position,
        reason:
          events === 0
            ? "the first event does not start the chain: earlier events were removed"
            : "it does not follow the event before it: an event was removed, inserted or reordered",
      };
    }
    const hash = eventHash(row.prev_hash, {
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
    });
    if (hash !== row.hash) {
      return { ok: false, events, brokenAt: position, reason: "its content does not match its hash: the event was edited" };
    }
    expectedPrev = row.hash;
    events += 1;
  }
  return { ok: true, events, headHash: expectedPrev };
}

const USAGE = `Usage: secrets-server audit verify

Checks the audit log's hash chain in DATA_DIR and reports the first broken link.
Exit code 0 when the chain is intact, 1 when it is broken.
`;

/** `secrets-server audit <subcommand>`. */
export async function auditCommand(args: string[]): Promise<number> {
  const [subcommand] = args;
  if (subcommand !== "verify") {
    process.stderr.write(subcommand === undefined || subcommand === "help" ? USAGE : `Unknown audit command "${subcommand}".\n\n${USAGE}`);
    return subcommand === "help" ? 0 : 2;
  }
  const config = loadConfig();
  const db = openDatabase(config);
  try {
    const result = verifyAuditChain(db);
    if (result.ok) {
      process.stdout.write(
        `Audit log intact: ${result.events} ${result.events === 1 ? "event" : "events"} verified.\n` +
          `Head hash: ${result.headHash}\n` +
          "Record the head hash somewhere else to detect later removal of the newest events.\n",
      );
      return 0;
    }
    const { seq, id, at } = result.brokenAt;
    process.stderr.write(
      `Audit log chain BROKEN at event #${seq} (id ${id}, at ${at}): ${result.reason}.\n` +
        `${result.events} ${result.events === 1 ? "event" : "events"} before it verified.\n`,
    );
    return 1;
  } finally {
    db.$client.close();
  }
}
