// Security review: the audit chain is keyed with a key derived from the
// master key, so someone who can write the database but has no master key cannot edit or
// remove events and rebuild a chain that `audit verify` accepts; and the chain stays
// verifiable across `rotate-key`, even once the old key is gone.
import assert from "node:assert/strict";
import crypto from "node:crypto";
import fs from "node:fs";
import { test } from "node:test";
import { makeTempDir, randomMasterKey, runMain, startServer, storeEnv, type TestServer } from "./helpers.ts";
import { auditRows, copyDatabase, keyVersionsInUse, removeAuditRow, rowCount, type StoredAuditRow, tamperAuditRow } from "./storage.ts";

/** An event's hashed content as the README publishes it, written out here as an attacker would. */
function chainContent(row: StoredAuditRow): string {
  return JSON.stringify([
    row.id,
    row.project_id,
    row.at,
    row.action,
    row.category,
    row.actor_user_id,
    row.target_type,
    row.target_id,
    row.metadata,
  ]);
}

/** The published formula of the chain without a key (README), as an attacker would compute it. */
function plainHash(prevHash: string, row: StoredAuditRow): string {
  return crypto.createHash("sha256").update(prevHash).update("\n").update(chainContent(row)).digest("hex");
}

/**
 * What a database writer without the master key can do: recompute every hash with plain
 * SHA-256 from `fromSeq` on, relinking each event to the one before it; optionally marking
 * the rebuilt events as written before the chain was keyed. `dataDir` holds the file.
 */
function rebuildWithoutKey(dataDir: string, fromSeq: number, options: { asHashOnly: boolean; throughSeq?: number }): void {
  let prev = "0".repeat(64);
  for (const row of auditRows(dataDir)) {
    if (row.seq >= fromSeq && row.seq <= (options.throughSeq ?? Infinity)) {
      const hash = plainHash(prev, row);
      tamperAuditRow(dataDir, row.seq, { prev_hash: prev, hash, mac_key_version: options.asHashOnly ? null : row.mac_key_version });
      prev = hash;
    } else {
      prev = row.hash;
    }
  }
}

/** A server with one project and `updates` more events; returns it stopped. */
async function serverWithEvents(t: Parameters<typeof startServer>[0], updates: number, env?: Record<string, string>): Promise<TestServer> {
  const server = await startServer(t, { env });
  const alice = await server.signIn("alice@example.test");
  const project = await alice.createProject({ name: "api", environments: ["development"] });
  for (let i = 0; i < updates; i++) {
    assert.equal((await alice.json("PATCH", `/api/projects/${project.id}`, { description: `v${i}` })).status, 200);
  }
  await server.stop();
  return server;
}

test("a database writer without the master key cannot edit or remove an event and rebuild the chain", async (t) => {
  const server = await serverWithEvents(t, 5);
  const dir = server.dataDir;
  const intact = await runMain(["audit", "verify"], server.env);
  assert.equal(intact.code, 0, intact.stderr);
  assert.match(intact.stdout, /^Audit log intact: 6 events verified\.\n/);
  const copies = Array.from({ length: 2 }, () => {
    const dir = makeTempDir();
    t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
    copyDatabase(server.dataDir, dir);
    return dir;
  });
  const third = auditRows(dir)[2]!;

  // Edit the third event's metadata, then recompute its hash and every later link.
  tamperAuditRow(dir, third.seq, { metadata: JSON.stringify({ descriptionChanged: false }) });
  rebuildWithoutKey(dir, third.seq, { asHashOnly: false });
  const edited = await runMain(["audit", "verify"], server.env);
  assert.equal(edited.code, 1, edited.stdout);
  assert.equal(edited.stdout, "");
  assert.match(
    edited.stderr,
    new RegExp(
      `^Audit log chain BROKEN at event #${third.seq} \\(id ${third.id}, at ${third.at}\\): its content does not match its hash: the event was edited\\.\n`,
    ),
  );
  assert.match(edited.stderr, /\n2 events before it verified\.\n$/);

  // Passing the rebuilt events off as written before the chain was keyed does not help:
  // hash-only events may only come before the keyed ones.
  rebuildWithoutKey(dir, third.seq, { asHashOnly: true });
  const downgraded = await runMain(["audit", "verify"], server.env);
  assert.equal(downgraded.code, 1, downgraded.stdout);
  assert.match(
    downgraded.stderr,
    new RegExp(
      `BROKEN at event #${third.seq} .*: it is checked by hash only but comes after keyed events: it was rewritten without the master key\\.`,
    ),
  );

  // Remove the third event and relink the rest.
  removeAuditRow(copies[0]!, third.seq);
  rebuildWithoutKey(copies[0]!, third.seq, { asHashOnly: false });
  const removed = await runMain(["audit", "verify"], storeEnv({ ...server.env, DATA_DIR: copies[0]! }));
  assert.equal(removed.code, 1, removed.stdout);
  assert.match(removed.stderr, new RegExp(`BROKEN at event #${third.seq + 1} .*: its content does not match its hash`));

  // The MAC key is not the master key itself: a chain rebuilt with HMAC under the master
  // key does not verify either.
  const masterKey = Buffer.from(server.env.MASTER_KEY!, "base64");
  const row = auditRows(copies[1]!, { seq: third.seq })[0]!;
  const withMasterKey = crypto.createHmac("sha256", masterKey).update(row.prev_hash).update("\n").update(chainContent(row)).digest("hex");
  assert.notEqual(withMasterKey, row.hash);
});

test("audit verify says what it proved: keyed versions, hash-only events, the head hash", async (t) => {
  const server = await serverWithEvents(t, 2);
  const dir = server.dataDir;
  const events = auditRows(dir);
  assert.deepEqual(new Set(events.map((e) => e.mac_key_version)), new Set([1]));
  const head = events.at(-1)!.hash;
  const verified = await runMain(["audit", "verify"], server.env);
  assert.equal(verified.code, 0, verified.stderr);
  assert.equal(
    verified.stdout,
    "Audit log intact: 3 events verified.\n" +
      "3 events keyed with master key version 1 (HMAC-SHA256): nobody without the master key can edit, remove, insert or reorder them and rebuild the chain to match.\n" +
      `Head hash: ${head}\n` +
      "Record the head hash somewhere else to detect later removal of the newest events: a chain cut short still verifies.\n",
  );

  // Without the server's key, verify refuses to guess instead of calling every event edited.
  const wrongKey = await runMain(["audit", "verify"], { ...server.env, MASTER_KEY: randomMasterKey() });
  assert.equal(wrongKey.code, 1);
  assert.match(wrongKey.stderr, /configuration error: MASTER_KEY does not match the key version 1/);

  // What verify cannot tell from the database alone: a writer who rebuilds every event as
  // hash-only. Such events prove nothing, so verify does not pass them: exit 3, and what to do.
  rebuildWithoutKey(dir, 1, { asHashOnly: true });
  const rebuilt = await runMain(["audit", "verify"], server.env);
  assert.equal(rebuilt.code, 3, rebuilt.stderr);
  const lastHashOnly = auditRows(dir).at(-1)!.hash;
  assert.match(
    rebuilt.stdout,
    new RegExp(
      `\nNOT PROVEN: 3 events are checked by hash only \\(SHA-256\\), .*nothing in the database tells which\\. The last of them has hash ${lastHashOnly}\\. .*rotate-key --key-hash-only-audit-events.*otherwise treat the log as tampered with\\.\n$`,
    ),
  );
  assert.doesNotMatch(rebuilt.stdout, /keyed with master key/);
});

test("events from before the chain was keyed hold but are not proven (exit 3); the keyed chain continues from them; rotate-key keys them only when told", async (t) => {
  const server = await serverWithEvents(t, 2);
  const dir = server.dataDir;
  // These three events as the previous version wrote them: plain SHA-256, no key version.
  rebuildWithoutKey(dir, 1, { asHashOnly: true });
  const restarted = await server.restart();
  t.after(() => restarted.stop());
  const alice = await restarted.signIn("alice@example.test");
  const projectId = auditRows(dir)[0]!.target_id;
  assert.equal((await alice.json("PATCH", `/api/projects/${projectId}`, { description: "keyed" })).status, 200);
  await restarted.stop();
  const mixed = auditRows(dir);
  assert.deepEqual(
    mixed.map((e) => e.mac_key_version),
    [null, null, null, 1],
  );
  assert.equal(mixed[3]!.prev_hash, mixed[2]!.hash);

  // The server says so at start, and verify holds the chain but does not call it proven.
  assert.ok(
    restarted.logs.some((line) => line.includes("The audit log starts with events chained by hash only")),
    "the start warns about hash-only events",
  );
  const verified = await runMain(["audit", "verify"], restarted.env);
  assert.equal(verified.code, 3, verified.stderr);
  assert.match(verified.stdout, /^Audit log intact: 4 events verified\.\n1 event keyed with master key version 1 \(HMAC-SHA256\)/);
  assert.match(
    verified.stdout,
    new RegExp(`\nNOT PROVEN: 3 events are checked by hash only .*The last of them has hash ${mixed[2]!.hash}\\.`),
  );

  // The keyed event seals the hash-only ones before it: editing one and rebuilding the
  // hash-only part breaks the link into the keyed event, which only the key could redo.
  const copy = makeTempDir();
  t.after(() => fs.rmSync(copy, { recursive: true, force: true }));
  copyDatabase(dir, copy);
  tamperAuditRow(copy, mixed[1]!.seq, { metadata: "{}" });
  rebuildWithoutKey(copy, mixed[1]!.seq, { asHashOnly: true, throughSeq: mixed[2]!.seq });
  const sealed = await runMain(["audit", "verify"], storeEnv({ ...restarted.env, DATA_DIR: copy }));
  assert.equal(sealed.code, 1, sealed.stdout);
  assert.match(sealed.stderr, new RegExp(`BROKEN at event #${mixed[3]!.seq} .*does not follow the event before it`));

  // rotate-key leaves them unless the operator vouches for them with the flag.
  const plain = await runMain(["rotate-key"], restarted.env);
  assert.equal(plain.code, 0, plain.stderr + plain.stdout);
  assert.match(
    plain.stdout,
    /\nAudit log: 0 of 4 events to re-key with version 1\. 3 events checked by hash only stay as they are: audit verify says how to key them\.\n/,
  );
  assert.deepEqual(
    auditRows(dir).map((e) => e.mac_key_version),
    [null, null, null, 1],
  );
  assert.equal((await runMain(["audit", "verify"], restarted.env)).code, 3);

  // With it, rotate-key on the same key version keys the older events too, after verifying them.
  const rotated = await runMain(["rotate-key", "--key-hash-only-audit-events"], restarted.env);
  assert.equal(rotated.code, 0, rotated.stderr + rotated.stdout);
  assert.match(rotated.stdout, /\nAudit log: 3 of 4 events to re-key with version 1\.\n/);
  assert.match(
    rotated.stdout,
    new RegExp(
      `\nAudit log verified; 4 events re-keyed with version 1 \\(3 of them were checked by hash only before\\)\\. The head hash was ${mixed[3]!.hash} and is now [0-9a-f]{64}: record the new one\\.\n`,
    ),
  );
  assert.deepEqual(
    auditRows(dir).map((e) => e.mac_key_version),
    [1, 1, 1, 1],
  );
  const after = await runMain(["audit", "verify"], restarted.env);
  assert.equal(after.code, 0, after.stderr);
  assert.match(after.stdout, /^Audit log intact: 4 events verified\.\n4 events keyed with master key version 1 /);
  assert.doesNotMatch(after.stdout, /hash only/);
});

test("rotation: events under key 1, rotate to key 2 with the server running, drop key 1: audit verify still passes", async (t) => {
  const key1 = randomMasterKey();
  const key2 = randomMasterKey();
  const first = await serverWithEvents(t, 3, { MASTER_KEY: key1 });
  const dir = first.dataDir;
  const rotatedEnv = { MASTER_KEY: key2, MASTER_KEY_VERSION: "2", MASTER_KEYS_PREVIOUS: `1:${key1}` };
  let server = await first.restart(rotatedEnv);
  t.after(() => server.stop());
  let alice = await server.signIn("alice@example.test");
  const projectId = auditRows(dir)[0]!.target_id;
  assert.equal((await alice.json("PATCH", `/api/projects/${projectId}`, { description: "under key 2" })).status, 200);
  assert.deepEqual(
    auditRows(dir).map((e) => e.mac_key_version),
    [1, 1, 1, 1, 2],
  );
  const mixed = await runMain(["audit", "verify"], server.env);
  assert.equal(mixed.code, 0, mixed.stderr);
  assert.match(mixed.stdout, /\n5 events keyed with master key versions 1 and 2 \(HMAC-SHA256\)/);

  const rotated = await runMain(["rotate-key"], server.env);
  assert.equal(rotated.code, 0, rotated.stderr + rotated.stdout);
  assert.match(rotated.stdout, /\nAudit log: 4 of 5 events to re-key with version 2\.\n/);
  assert.match(
    rotated.stdout,
    /\nAudit log verified; 5 events re-keyed with version 2\. The head hash was [0-9a-f]{64} and is now [0-9a-f]{64}: record the new one\.\n/,
  );
  assert.match(
    rotated.stdout,
    /\nDone: 0 records re-encrypted, 5 audit events re-keyed, 1 old project data key removed\. 1 of 1 record and 5 of 5 audit events are on key version 2\.\n/,
  );
  assert.match(rotated.stdout, /Older keys are no longer needed: remove them from MASTER_KEYS_PREVIOUS/);
  // The running server chains its next event onto the re-keyed head.
  assert.equal((await alice.json("PATCH", `/api/projects/${projectId}`, { description: "after rotation" })).status, 200);
  assert.deepEqual(
    auditRows(dir).map((e) => e.mac_key_version),
    [2, 2, 2, 2, 2, 2],
  );

  // Key 2 alone.
  server = await server.restart({ MASTER_KEY: key2, MASTER_KEY_VERSION: "2", MASTER_KEYS_PREVIOUS: undefined });
  alice = await server.signIn("alice@example.test");
  assert.equal((await alice.json("PATCH", `/api/projects/${projectId}`, { description: "key 2 alone" })).status, 200);
  const alone = await runMain(["audit", "verify"], server.env);
  assert.equal(alone.code, 0, alone.stderr);
  assert.match(alone.stdout, /^Audit log intact: 7 events verified\.\n7 events keyed with master key version 2 \(HMAC-SHA256\)/);
  assert.equal(alone.stdout.match(/Head hash: ([0-9a-f]{64})/)![1], auditRows(dir).at(-1)!.hash);
});

test("rotate-key refuses to re-key a tampered audit chain and changes nothing", async (t) => {
  const key1 = randomMasterKey();
  const server = await startServer(t, { env: { MASTER_KEY: key1 } });
  const alice = await server.signIn("alice@example.test");
  const project = await alice.createProject({ name: "api", environments: ["development"] });
  const base = `/api/projects/${project.id}/environments/development/secrets`;
  assert.equal((await alice.json("POST", base, { key: "API_KEY", value: "tamper-test-value" })).status, 201);
  assert.equal((await alice.json("PATCH", `/api/projects/${project.id}`, { description: "one" })).status, 200);
  await server.stop();
  const dir = server.dataDir;
  const second = auditRows(dir)[1]!;
  tamperAuditRow(dir, second.seq, { actor_user_id: null });
  const eventsBefore = auditRows(dir);
  const snapshot = () => ({ keyVersions: keyVersionsInUse(dir), projectKeys: rowCount(dir, "project_keys") });
  const recordsBefore = snapshot();

  const env = { ...server.env, MASTER_KEY: randomMasterKey(), MASTER_KEY_VERSION: "2", MASTER_KEYS_PREVIOUS: `1:${key1}` };
  const rotated = await runMain(["rotate-key"], env);
  assert.equal(rotated.code, 1, rotated.stdout);
  assert.match(rotated.stdout, /\nAudit log: 3 of 3 events to re-key with version 2\.\n$/);
  assert.equal(
    rotated.stderr,
    `The audit log does not verify at event #${second.seq} (id ${second.id}, at ${second.at}): its content does not match its hash: the event was edited.\n` +
      'rotate-key re-keys the audit log only after verifying it, so it stopped and changed nothing. Run "secrets-server audit verify", find out what happened to the log, and keep every older key in MASTER_KEYS_PREVIOUS meanwhile.\n',
  );
  assert.deepEqual(auditRows(dir), eventsBefore);
  // Only the new key's verifier was recorded; no value moved to key 2 and no data key was added.
  assert.deepEqual(snapshot(), recordsBefore);
  const verified = await runMain(["audit", "verify"], env);
  assert.equal(verified.code, 1);
  assert.match(verified.stderr, new RegExp(`BROKEN at event #${second.seq} `));
});

test("a full downgrade is not laundered: the log rewritten as hash-only and keyed events written on top does not verify as proven", async (t) => {
  // The review's attack: delete a reveal, rewrite every event as hash-only with plain
  // SHA-256 (no key needed), and let the server chain its keyed events onto the forgery.
  const server = await serverWithEvents(t, 3);
  const dir = server.dataDir;
  const before = auditRows(dir);
  removeAuditRow(dir, before[1]!.seq);
  rebuildWithoutKey(dir, 1, { asHashOnly: true });
  const restarted = await server.restart();
  t.after(() => restarted.stop());
  const alice = await restarted.signIn("alice@example.test");
  assert.equal((await alice.json("PATCH", `/api/projects/${before[0]!.target_id}`, { description: "on top" })).status, 200);
  await restarted.stop();
  assert.deepEqual(
    auditRows(dir).map((e) => e.mac_key_version),
    [null, null, null, 1],
  );

  const verified = await runMain(["audit", "verify"], restarted.env);
  assert.notEqual(verified.code, 0, "a forged hash-only prefix must not verify as proven");
  assert.equal(verified.code, 3);
  assert.match(verified.stdout, /NOT PROVEN: 3 events are checked by hash only/);
  // And rotate-key without the operator's word does not bless it.
  assert.equal((await runMain(["rotate-key"], restarted.env)).code, 0);
  assert.deepEqual(
    auditRows(dir).map((e) => e.mac_key_version),
    [null, null, null, 1],
  );
});

test("retention never prunes events checked by hash only: a forged, backdated prefix stays NOT PROVEN until the operator vouches for it", async (t) => {
  // The downgrade above, with the forged events dated long ago: pruning them would sign a
  // checkpoint over them, and `audit verify` would no longer say that nothing proves them.
  const server = await serverWithEvents(t, 2, { AUDIT_RETENTION_DAYS: "1" });
  const dir = server.dataDir;
  for (const row of auditRows(dir)) tamperAuditRow(dir, row.seq, { at: `2020-01-0${row.seq}T00:00:00.000Z` });
  rebuildWithoutKey(dir, 1, { asHashOnly: true });
  const restarted = await server.restart();
  t.after(() => restarted.stop());
  const alice = await restarted.signIn("alice@example.test");
  assert.equal((await alice.json("PATCH", `/api/projects/${auditRows(dir)[0]!.target_id}`, { description: "on top" })).status, 200);

  // At start, and on every later run: nothing pruned, said once.
  assert.deepEqual(await restarted.app.maintenance.pruneAuditLog(), { pruned: 0, heldHashOnly: true });
  assert.deepEqual(
    auditRows(dir).map((e) => e.mac_key_version),
    [null, null, null, 1],
  );
  assert.equal(rowCount(restarted, "audit_checkpoint"), 0, "no checkpoint signed over them");
  assert.equal(
    restarted.logs.filter((line) => line.includes("Audit retention keeps the events written before the audit chain was keyed")).length,
    1,
  );
  const verified = await runMain(["audit", "verify"], restarted.env);
  assert.equal(verified.code, 3, verified.stdout + verified.stderr);
  assert.match(verified.stdout, /NOT PROVEN: 3 events are checked by hash only/);

  // A hash-only event that does not even hold is the error it always was, not "held".
  const first = auditRows(dir)[0]!;
  tamperAuditRow(dir, first.seq, { metadata: "{}" });
  const broken = await restarted.app.maintenance.pruneAuditLog();
  assert.equal(broken.heldHashOnly, undefined);
  assert.match(broken.problem ?? "", /its content does not match its hash/);
  tamperAuditRow(dir, first.seq, { metadata: first.metadata });

  // Vouched for (keyed as they are), they are old events like any other and go.
  const vouched = await runMain(["rotate-key", "--key-hash-only-audit-events"], restarted.env);
  assert.equal(vouched.code, 0, vouched.stderr + vouched.stdout);
  assert.deepEqual(await restarted.app.maintenance.pruneAuditLog(), { pruned: 3 });
  assert.deepEqual(
    auditRows(dir).map((e) => e.mac_key_version),
    [1],
  );
  const after = await runMain(["audit", "verify"], restarted.env);
  assert.equal(after.code, 0, after.stdout + after.stderr);
});
