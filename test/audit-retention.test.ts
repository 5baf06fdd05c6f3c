// AUDIT_RETENTION_DAYS: old events are pruned in batches, and `audit verify` still proves
// the rest from a checkpoint signed under the audit key (README, "Audit log").
import assert from "node:assert/strict";
import { test } from "node:test";
import { createAuditWriter } from "../src/audit/audit.writer.ts";
import { writeTransaction } from "../src/core/store.ts";
import { type Client, randomMasterKey, runMain, startServer, type TestServer } from "./helpers.ts";
import {
  auditCheckpoint,
  auditRows,
  removeAuditCheckpoint,
  removeAuditRow,
  storedRows,
  tamperAuditCheckpoint,
  tamperAuditRow,
} from "./storage.ts";

const DAY_MS = 24 * 60 * 60 * 1000;

function chain(server: TestServer) {
  return auditRows(server.dataDir);
}

/** Tampers with the stopped server's file, runs audit verify, then undoes the change. */
async function verifyWith(server: TestServer, tamper: () => void, undo: () => void) {
  tamper();
  const result = await runMain(["audit", "verify"], server.env);
  undo();
  return result;
}

/** Moves the clock on; the session would have expired meanwhile, so a new one is returned. */
async function later(server: TestServer, days: number): Promise<Client> {
  server.clock.advance(days * DAY_MS);
  return server.signIn("alice@example.test");
}

async function revealOne(client: Client, projectId: string, key: string): Promise<void> {
  const base = `/api/projects/${projectId}/environments/development/secrets`;
  const created = await client.json("POST", base, { key, value: `value-of-${key.toLowerCase()}` });
  assert.equal(created.status, 201, JSON.stringify(created.body));
  assert.equal((await client.json("GET", `${base}/${created.body.secret.id}`)).status, 200);
}

test("events older than AUDIT_RETENTION_DAYS are pruned; audit verify proves the rest from the signed checkpoint", async (t) => {
  const server = await startServer(t, { env: { AUDIT_RETENTION_DAYS: "30" } });
  let alice = await server.signIn("alice@example.test");
  const project = await alice.createProject({ name: "api", environments: ["development"] });
  for (const key of ["OLD_A", "OLD_B", "OLD_C"]) await revealOne(alice, project.id, key);
  const old = chain(server);
  assert.equal(old.length, 7);

  // Nothing is old enough yet.
  assert.deepEqual(await server.app.maintenance.pruneAuditLog(), { pruned: 0 });
  alice = await later(server, 31);
  await revealOne(alice, project.id, "NEW_A");
  assert.deepEqual(await server.app.maintenance.pruneAuditLog(), { pruned: 7 });

  const kept = chain(server);
  assert.deepEqual(
    kept.map((e) => e.seq),
    [8, 9],
  );
  const saved = auditCheckpoint(server.dataDir)!;
  assert.equal(saved.seq, 7);
  assert.equal(saved.hash, old.at(-1)!.hash);
  assert.equal(saved.at, old.at(-1)!.at);
  assert.equal(saved.pruned_events, 7);
  assert.equal(kept[0]!.prev_hash, saved.hash);

  // The audit list still works and shows what is left.
  const page = await alice.json("GET", `/api/projects/${project.id}/audit`);
  assert.equal(page.status, 200);
  assert.deepEqual(
    page.body.events.map((e: { action: string }) => e.action),
    ["secret.revealed", "secret.created"],
  );
  assert.equal(page.body.nextCursor, null);

  const verified = await runMain(["audit", "verify"], server.env);
  assert.equal(verified.code, 0, verified.stderr);
  assert.match(
    verified.stdout,
    new RegExp(
      `^Audit log intact: 2 events verified\\.\\nEvents before ${saved.pruned_before.replace(/\./g, "\\.")} were pruned under retention ` +
        `\\(AUDIT_RETENTION_DAYS; 7 events in all\\)\\. The chain continues from a checkpoint signed with master key version 1: ` +
        `the last pruned event, #7 at ${saved.at.replace(/\./g, "\\.")}, hash ${saved.hash}\\.\\n`,
    ),
  );

  // Everything pruned: the next event chains onto the checkpoint, and the chain still verifies.
  alice = await later(server, 31);
  assert.deepEqual(await server.app.maintenance.pruneAuditLog(), { pruned: 2 });
  assert.equal(chain(server).length, 0);
  const pruned = auditCheckpoint(server.dataDir)!;
  assert.equal(pruned.pruned_events, 9);
  await revealOne(alice, project.id, "NEWER");
  assert.equal(chain(server)[0]!.prev_hash, pruned.hash);
  const again = await runMain(["audit", "verify"], server.env);
  assert.equal(again.code, 0, again.stderr);
  assert.match(again.stdout, /^Audit log intact: 2 events verified\.\nEvents before .* \(AUDIT_RETENTION_DAYS; 9 events in all\)/);
});

test("pruning over several batches (100 events per transaction) leaves one chain that verifies", async (t) => {
  const server = await startServer(t, { env: { AUDIT_RETENTION_DAYS: "1" } });
  let alice = await server.signIn("alice@example.test");
  const project = await alice.createProject({ name: "api", environments: ["development"] });
  const base = `/api/projects/${project.id}/environments/development/secrets`;
  const created = await alice.json("POST", base, { key: "READ_OFTEN", value: "value-read-often" });
  await Promise.all(
    Array.from({ length: 248 }, async () => assert.equal((await alice.json("GET", `${base}/${created.body.secret.id}`)).status, 200)),
  );
  const old = chain(server);
  assert.equal(old.length, 250);
  alice = await later(server, 2);
  await revealOne(alice, project.id, "KEPT");
  assert.deepEqual(await server.app.maintenance.pruneAuditLog(), { pruned: 250 });
  assert.equal(auditCheckpoint(server.dataDir)!.hash, old.at(-1)!.hash);
  assert.deepEqual(
    chain(server).map((e) => e.seq),
    [251, 252],
  );
  assert.ok(server.logs.some((line) => line.includes('"pruned":250') && line.includes("audit events pruned under AUDIT_RETENTION_DAYS")));
  const verified = await runMain(["audit", "verify"], server.env);
  assert.equal(verified.code, 0, verified.stderr);
  assert.match(verified.stdout, /\(AUDIT_RETENTION_DAYS; 250 events in all\)/);
});

test("a moved, edited or missing checkpoint, or an edited, relinked or removed first kept event, fails audit verify", async (t) => {
  const server = await startServer(t, { env: { AUDIT_RETENTION_DAYS: "7" } });
  let alice = await server.signIn("alice@example.test");
  const project = await alice.createProject({ name: "api", environments: ["development"] });
  await revealOne(alice, project.id, "OLD_ONE");
  alice = await later(server, 8);
  for (const key of ["KEPT_A", "KEPT_B"]) await revealOne(alice, project.id, key);
  assert.deepEqual(await server.app.maintenance.pruneAuditLog(), { pruned: 3 });
  await server.stop();
  const saved = auditCheckpoint(server.dataDir)!;
  const [first, second] = chain(server);

  const edited = await verifyWith(
    server,
    () => tamperAuditCheckpoint(server.dataDir, { pruned_before: "2000-01-01T00:00:00.000Z" }),
    () => tamperAuditCheckpoint(server.dataDir, { pruned_before: saved.pruned_before }),
  );
  assert.equal(edited.code, 1);
  assert.equal(
    edited.stderr,
    `Audit log chain BROKEN at the retention checkpoint (after pruned event #3, at ${saved.at}): its signature does not match its content: the checkpoint was edited.\n0 events before it verified.\n`,
  );

  const firstEdited = await verifyWith(
    server,
    () => tamperAuditRow(server.dataDir, first!.seq, { target_id: "someone-else" }),
    () => tamperAuditRow(server.dataDir, first!.seq, { target_id: first!.target_id }),
  );
  assert.equal(firstEdited.code, 1);
  assert.match(
    firstEdited.stderr,
    new RegExp(`^Audit log chain BROKEN at event #${first!.seq} .*: its content does not match its hash: the event was edited\\.\\n`),
  );
  const relinked = await verifyWith(
    server,
    () => tamperAuditRow(server.dataDir, first!.seq, { prev_hash: "0".repeat(64) }),
    () => tamperAuditRow(server.dataDir, first!.seq, { prev_hash: saved.hash }),
  );
  assert.equal(relinked.code, 1);
  assert.match(relinked.stderr, /it does not follow the retention checkpoint/);

  // Hiding the first kept event: moving the checkpoint onto it needs the audit key.
  const moved = await verifyWith(
    server,
    () => {
      removeAuditRow(server.dataDir, first!.seq);
      tamperAuditCheckpoint(server.dataDir, { seq: first!.seq, hash: first!.hash, at: first!.at });
    },
    () => {},
  );
  assert.equal(moved.code, 1);
  assert.match(
    moved.stderr,
    /^Audit log chain BROKEN at the retention checkpoint \(after pruned event #4, .*: its signature does not match its content/,
  );
  const removed = await verifyWith(
    server,
    () => tamperAuditCheckpoint(server.dataDir, { seq: saved.seq, hash: saved.hash, at: saved.at }),
    () => {},
  );
  assert.equal(removed.code, 1);
  assert.match(
    removed.stderr,
    new RegExp(
      `^Audit log chain BROKEN at event #${second!.seq} .*: it does not follow the retention checkpoint: events after the checkpoint were removed`,
    ),
  );

  // Without the checkpoint the remaining chain does not start at the beginning.
  removeAuditCheckpoint(server.dataDir);
  const missing = await runMain(["audit", "verify"], server.env);
  assert.equal(missing.code, 1);
  assert.match(missing.stderr, /the first event does not start the chain: earlier events were removed/);
});

test("an event that does not verify is never pruned: retention stops there and keeps the evidence", async (t) => {
  const server = await startServer(t, { env: { AUDIT_RETENTION_DAYS: "7" } });
  const alice = await server.signIn("alice@example.test");
  const project = await alice.createProject({ name: "api", environments: ["development"] });
  await revealOne(alice, project.id, "OLD_ONE");
  tamperAuditRow(server.dataDir, 2, { metadata: JSON.stringify({ key: "OTHER", environment: "development" }) });
  const firstAt = auditRows(server.dataDir)[0]!.at;
  server.clock.advance(8 * DAY_MS);
  const result = await server.app.maintenance.pruneAuditLog();
  assert.equal(result.pruned, 1);
  // Event #2 stays, though older than the cutoff: the checkpoint says only what went.
  assert.equal(auditCheckpoint(server.dataDir)!.pruned_before, firstAt);
  assert.match(result.problem!, /^event #2 .*: its content does not match its hash: the event was edited$/);
  assert.deepEqual(
    chain(server).map((e) => e.seq),
    [2, 3],
  );
  assert.ok(server.logs.some((line) => line.includes("Audit retention stopped: the audit log does not verify at event #2")));
});

test("rotate-key re-signs the checkpoint: with the old key gone, audit verify still passes", async (t) => {
  const key1 = randomMasterKey();
  const key2 = randomMasterKey();
  const server = await startServer(t, { env: { MASTER_KEY: key1, AUDIT_RETENTION_DAYS: "7" } });
  let alice = await server.signIn("alice@example.test");
  const project = await alice.createProject({ name: "api", environments: ["development"] });
  await revealOne(alice, project.id, "OLD_ONE");
  alice = await later(server, 8);
  await revealOne(alice, project.id, "KEPT_A");
  assert.equal((await server.app.maintenance.pruneAuditLog()).pruned, 3);
  await server.stop();

  const rotatedEnv = { ...server.env, MASTER_KEY: key2, MASTER_KEY_VERSION: "2", MASTER_KEYS_PREVIOUS: `1:${key1}` };
  const rotated = await runMain(["rotate-key"], rotatedEnv);
  assert.equal(rotated.code, 0, rotated.stderr + rotated.stdout);
  assert.match(rotated.stdout, /\nAudit log: 2 of 2 events to re-key with version 2, and its retention checkpoint to re-sign\.\n/);
  assert.equal(auditCheckpoint(server.dataDir)!.mac_key_version, 2);

  const alone = await runMain(["audit", "verify"], { ...rotatedEnv, MASTER_KEYS_PREVIOUS: undefined });
  assert.equal(alone.code, 0, alone.stderr);
  assert.match(alone.stdout, /checkpoint signed with master key version 2/);
});

test("an edited checkpoint stops retention too: nothing is pruned and the checkpoint is not signed anew", async (t) => {
  const server = await startServer(t, { env: { AUDIT_RETENTION_DAYS: "7" } });
  let alice = await server.signIn("alice@example.test");
  const project = await alice.createProject({ name: "api", environments: ["development"] });
  await revealOne(alice, project.id, "OLD_ONE");
  alice = await later(server, 8);
  await revealOne(alice, project.id, "SECOND_ONE");
  assert.deepEqual(await server.app.maintenance.pruneAuditLog(), { pruned: 3 });
  // A database writer moves the checkpoint's date; more events age past the period meanwhile.
  tamperAuditCheckpoint(server.dataDir, { pruned_before: "2000-01-01T00:00:00.000Z" });
  const edited = auditCheckpoint(server.dataDir)!;
  const before = chain(server).map((e) => e.seq);
  await later(server, 8);

  const result = await server.app.maintenance.pruneAuditLog();
  assert.equal(result.pruned, 0);
  assert.match(
    result.problem!,
    /^the retention checkpoint \(after pruned event #3, .*\): its signature does not match its content: the checkpoint was edited$/,
  );
  assert.deepEqual(
    chain(server).map((e) => e.seq),
    before,
    "nothing was pruned",
  );
  assert.deepEqual(auditCheckpoint(server.dataDir), edited, "the edited checkpoint was not signed over");
  await server.stop();
  assert.equal((await runMain(["audit", "verify"], server.env)).code, 1);
});

test("audit verify records no key: a key version tried with it stays free for the key the servers will have", async (t) => {
  const key1 = randomMasterKey();
  const server = await startServer(t, { env: { MASTER_KEY: key1 } });
  const alice = await server.signIn("alice@example.test");
  const project = await alice.createProject({ name: "api", environments: ["development"] });
  await revealOne(alice, project.id, "ONE");
  await server.stop();

  const tried = { ...server.env, MASTER_KEY: randomMasterKey(), MASTER_KEY_VERSION: "2", MASTER_KEYS_PREVIOUS: `1:${key1}` };
  const verified = await runMain(["audit", "verify"], tried);
  assert.equal(verified.code, 0, verified.stderr);
  assert.match(verified.stdout, /^Audit log intact: \d+ events verified\./);
  // A wrong key for a version already recorded is still refused, and named.
  const wrong = await runMain(["audit", "verify"], { ...server.env, MASTER_KEY: randomMasterKey() });
  assert.equal(wrong.code, 1);
  assert.match(wrong.stderr, /MASTER_KEY does not match the key version 1 this database was encrypted with/);
  // Servers then given another version 2 start: verify bound no key to it.
  const restarted = await server.restart({ ...tried, MASTER_KEY: randomMasterKey() });
  assert.deepEqual(
    storedRows(restarted, "key_checks")
      .map((row) => Number(row.version))
      .sort(),
    [1, 2],
  );
  await restarted.stop();
});

test("a prune whose old events fill its batches exactly still ends with a checkpoint that names the cutoff", async (t) => {
  const server = await startServer(t, { env: { AUDIT_RETENTION_DAYS: "7" } });
  const alice = await server.signIn("alice@example.test");
  const project = await alice.createProject({ name: "api", environments: ["development"] });
  // 200 old events in all: two whole batches of 100, and nothing old left for a third.
  const writer = createAuditWriter(server.app.db, server.clock, server.app.keyring);
  const entry = { projectId: project.id, action: "secret.created", targetType: "secret", targetId: "s1" } as const;
  await writeTransaction(server.app.db, async () => {
    for (let i = chain(server).length; i < 200; i++)
      await writer.record(null, { ...entry, metadata: { key: `K${i}`, environment: "development", version: 1 } });
  });
  assert.equal(chain(server).length, 200);
  const fresh = await later(server, 8);
  await revealOne(fresh, project.id, "KEPT");
  // The clock goes on with real time: the prune's cutoff is 7 days before a moment within its call.
  const earliest = new Date(server.clock.now().getTime() - 7 * DAY_MS).toISOString();
  assert.equal((await server.app.maintenance.pruneAuditLog()).pruned, 200);
  const latest = new Date(server.clock.now().getTime() - 7 * DAY_MS).toISOString();
  const prunedBefore = auditCheckpoint(server.dataDir)!.pruned_before;
  assert.ok(earliest <= prunedBefore && prunedBefore <= latest, `${prunedBefore} is not between ${earliest} and ${latest}`);
});
