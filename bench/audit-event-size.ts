// `tsx bench/audit-event-size.ts`: bytes on disk per audit event of a reveal, the table
// and all its indexes included, for the README's retention sizing. Writes 20,000
// `secret.revealed` events through the real writer into a temporary database.
import crypto from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { createAuditWriter } from "../src/audit/audit.writer.ts";
import { systemClock } from "../src/core/clock.ts";
import { loadKeyring } from "../src/core/crypto.ts";
import { openDatabase } from "../src/core/db.ts";
import { writeTransaction } from "../src/core/store.ts";

const EVENTS = 20_000;
const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "audit-size-"));
const config = { dataDir, sqliteSynchronous: "normal" as const };
const db = openDatabase(config);
const keyring = loadKeyring({ masterKey: crypto.randomBytes(32).toString("base64"), masterKeyVersion: 1, previousMasterKeys: "" } as never);
const writer = createAuditWriter(db, systemClock, keyring);
const sqlite = db.$client;

/** Bytes used by audit_events and its indexes (dbstat: pages in use, not free space). */
function auditBytes(): number {
  return sqlite
    .prepare(
      `SELECT sum(pgsize) FROM dbstat WHERE name = 'audit_events'
         OR name IN (SELECT name FROM sqlite_master WHERE tbl_name = 'audit_events' AND type = 'index')`,
    )
    .pluck()
    .get() as number;
}

const before = auditBytes();
const projectId = crypto.randomUUID();
const userIds = Array.from({ length: 20 }, () => crypto.randomUUID());
const secretIds = Array.from({ length: 200 }, () => crypto.randomUUID());
await writeTransaction(db, async () => {
  for (let i = 0; i < EVENTS; i++) {
    await writer.record({ userId: userIds[i % userIds.length]!, via: i % 2 ? "cli" : "browser" } as never, {
      projectId,
      action: "secret.revealed",
      targetType: "secret",
      targetId: secretIds[i % secretIds.length]!,
      metadata: { key: `DATABASE_URL_${i % 200}`, environment: "production", version: 3 },
    });
  }
});
const after = auditBytes();
const perEvent = (after - before) / EVENTS;
console.log(
  `${EVENTS} secret.revealed events: ${((after - before) / 1024 / 1024).toFixed(1)} MiB, ${perEvent.toFixed(0)} bytes per event (table and indexes)`,
);
console.log(
  `1,000 reveals a day: ${((perEvent * 1000 * 30) / 1024 / 1024).toFixed(1)} MiB per 30 days, ${((perEvent * 1000 * 365) / 1024 / 1024).toFixed(0)} MiB per year`,
);
sqlite.close();
fs.rmSync(dataDir, { recursive: true, force: true });
