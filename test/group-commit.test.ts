// Group commit (src/core/group-commit.ts): at SQLITE_SYNCHRONOUS=full the server's commits
// reach the disk through an fdatasync of the WAL made off the event loop, shared by every
// write made while the previous one ran. The syncs here are the real ones; the test only
// holds each before it starts (buildApp's beforeWalSync), to see what waits for it.
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { type TestContext, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import Database from "better-sqlite3";
import { startGroupCommit } from "../src/core/group-commit.ts";
import { makeTempDir, onPostgres, startServer, waitFor } from "./helpers.ts";
import { createSecret, envPath } from "./secrets-helpers.ts";
import { committedVersion, SyncGate, settlesWithin } from "./sync-gate.ts";

const SQLITE_ONLY = { skip: onPostgres("group commit syncs SQLite's WAL; PostgreSQL flushes its own") };
const UNSYNCED =
  "The server's disk failed to confirm a write (I/O error): the last changes may not have been saved, and nothing more is saved, and no value shown, until the server restarts.";

const STALLED =
  "The server's disk has not confirmed a write for 2 seconds: saving and showing values wait for it. Try again in a few seconds.";

async function serverWithSecret(t: TestContext, gate: SyncGate, onWalSyncFailure?: () => void) {
  // Registered first so it runs first: a failed assertion must not leave the server's
  // close waiting for a held sync.
  t.after(() => gate.release());
  const server = await startServer(t, { beforeWalSync: gate.beforeSync, onWalSyncFailure });
  const owner = await server.signIn("owner@example.com");
  const project = await owner.createProject({ name: "group-commit", environments: ["production"] });
  const secret = await createSecret(owner, project.id, "production", "API_KEY", "first-value");
  return { server, owner, project, secret, secretPath: `${envPath(project.id, "production")}/secrets/${secret.id}` };
}

test(
  "a write and a reveal are answered only after a WAL sync that began after them; the server answers others meanwhile",
  SQLITE_ONLY,
  async (t) => {
    const gate = new SyncGate();
    const { server, owner, secret, secretPath } = await serverWithSecret(t, gate);
    assert.ok(gate.started > 0, "the secret's creation was synced through the gate");

    gate.hold();
    const patch = owner.json("PATCH", secretPath, { value: "second-value" });
    await gate.reached();
    assert.equal(await settlesWithin(patch, 300), false, "the PATCH was answered before its sync ended");
    // Committed, only not yet on disk: another connection already reads the new version.
    assert.equal(committedVersion(server, secret.id), 2);

    // A reveal's event must be on disk before the value is shown: it waits too.
    const reveal = owner.json("GET", secretPath);
    // The connection is not blocked by the sync: a request that writes nothing is answered.
    const me = await owner.json("GET", "/api/auth/me");
    assert.equal(me.status, 200);
    assert.equal(await settlesWithin(reveal, 200), false, "the value was shown before its audit event was synced");

    const startedBeforeRelease = gate.started;
    gate.release();
    const patched = await patch;
    assert.equal(patched.status, 200, JSON.stringify(patched.body));
    assert.equal(patched.body.secret.version, 2);
    const revealed = await reveal;
    assert.equal(revealed.status, 200);
    assert.equal(revealed.body.secret.value, "second-value");
    // The reveal's event was committed while the first sync was held: a second sync carried it.
    assert.ok(gate.started > startedBeforeRelease, "the reveal was answered without a sync of its own event");
  },
);

test("a reveal's event made while a sync runs is in the very next sync, not the one after", SQLITE_ONLY, async (t) => {
  const gate = new SyncGate();
  const { server, owner, project, secretPath } = await serverWithSecret(t, gate);
  const other = await createSecret(owner, project.id, "production", "OTHER_KEY", "other-value");
  gate.hold();
  const patch = owner.json("PATCH", secretPath, { value: "second-value" });
  await gate.reached();
  // The reveal's event waits for the held sync to end, and is committed just before the next
  // starts; a write committed meanwhile waits for that next sync too, and must not start it
  // before the event is in.
  const reveal = owner.json("GET", secretPath);
  const otherPatch = owner.json("PATCH", `${envPath(project.id, "production")}/secrets/${other.id}`, { value: "other-2" });
  await waitFor("the other PATCH to commit", async () => committedVersion(server, other.id) === 2);
  // The reveal, sent first, has queued its event long before (a few milliseconds of work).
  await sleep(200);
  gate.releaseHeld();
  assert.equal((await patch).status, 200);
  await gate.reached();
  assert.equal(await settlesWithin(reveal, 100), false, "the reveal was answered before its event's sync");
  // Only that sync goes on; a reveal whose event missed it would wait for the next, held one.
  gate.releaseHeld();
  assert.equal(await settlesWithin(reveal, 3000), true, "the reveal's event was left for a later sync");
  assert.equal((await reveal).body.secret.value, "second-value");
  assert.equal((await otherPatch).status, 200);
});

test("writes made while a sync runs share the next one", SQLITE_ONLY, async (t) => {
  const gate = new SyncGate();
  const { server, owner, project } = await serverWithSecret(t, gate);
  const secrets: { id: string }[] = [];
  for (let i = 0; i < 10; i++) secrets.push(await createSecret(owner, project.id, "production", `KEY_${i}`, `value-${i}`));

  gate.hold();
  const first = owner.json("PATCH", `${envPath(project.id, "production")}/secrets/${secrets[0]!.id}`, { value: "changed-0" });
  await gate.reached();
  const startedWhileHeld = gate.started;
  const others = secrets
    .slice(1)
    .map((secret, i) => owner.json("PATCH", `${envPath(project.id, "production")}/secrets/${secret.id}`, { value: `changed-${i + 1}` }));
  // Let the nine commit (each its own transaction) and queue behind the held sync.
  await waitFor("the nine PATCHes to commit", async () => secrets.slice(1).every((secret) => committedVersion(server, secret.id) === 2));
  for (const other of others) assert.equal(await settlesWithin(other, 30), false, "a PATCH was answered before any sync of it");
  assert.equal(gate.started, startedWhileHeld, "a sync started while another was under way");
  gate.release();
  const answers = await Promise.all([first, ...others]);
  for (const answer of answers) assert.equal(answer.status, 200, JSON.stringify(answer.body));
  // One sync for the nine (at FULL each would have made its own); a second only if the
  // rate-limit counters' save (every 5 s) happened to write in between.
  assert.ok(gate.started - startedWhileHeld >= 1 && gate.started - startedWhileHeld <= 2, `${gate.started - startedWhileHeld} syncs`);
});

test("a failed WAL sync stops the server; where it goes on (a test), nothing more is written or acknowledged", SQLITE_ONLY, async (t) => {
  const gate = new SyncGate();
  let stops = 0;
  const { server, owner, secret, secretPath } = await serverWithSecret(t, gate, () => {
    stops += 1;
  });

  gate.hold();
  const patch = owner.json("PATCH", secretPath, { value: "second-value" });
  await gate.reached();
  // A reveal whose event waits for the failing sync to end: refused, not left waiting.
  const revealDuring = owner.json("GET", secretPath);
  await sleep(100);
  gate.fail();
  const failed = await patch;
  assert.equal(await settlesWithin(revealDuring, 5000), true, "a reveal waiting on the failed sync was never answered");
  assert.equal((await revealDuring).status, 503);
  // A real server is gone by now (SIGKILL to itself) and this client sees its connection end.
  assert.equal(stops, 1);
  assert.ok(server.logs.some((line) => line.includes('"level":60') && line.includes("fsync of the database's WAL failed")));
  assert.equal(failed.status, 503);
  assert.equal(failed.body.error, UNSYNCED);
  assert.equal(committedVersion(server, secret.id), 2);
  // The kernel may have dropped the pages it could not write; a later sync that succeeds
  // proves nothing about them, so no later write is made, let alone acknowledged.
  const again = await owner.json("PATCH", secretPath, { value: "third-value" });
  assert.equal(again.status, 503);
  assert.equal(again.body.error, UNSYNCED);
  assert.equal(committedVersion(server, secret.id), 2);
  const reveal = await owner.json("GET", secretPath);
  assert.equal(reveal.status, 503);
  const health = await owner.json("GET", "/healthz");
  assert.equal(health.status, 503);
  assert.equal(health.body.reason, UNSYNCED);
  assert.equal(stops, 1);

  // After a restart SQLite recovers from what is on disk, and writes are acknowledged again.
  const restarted = await server.restart();
  t.after(() => restarted.stop());
  const client = await restarted.signIn("owner@example.com");
  const after = await client.json("PATCH", secretPath, { value: "fourth-value" });
  assert.equal(after.status, 200, JSON.stringify(after.body));
});

test(
  "/healthz says 503 when the disk has not finished a sync in 2 s, without a second probe, and 200 once it has",
  SQLITE_ONLY,
  async (t) => {
    const gate = new SyncGate();
    const { server, owner, secretPath } = await serverWithSecret(t, gate);
    assert.equal((await owner.json("GET", "/healthz")).status, 200);
    await sleep(1100); // past the probe's one-second cache

    gate.hold();
    const patch = owner.json("PATCH", secretPath, { value: "second-value" });
    await gate.reached();
    const asked = Date.now();
    const health = await owner.json("GET", "/healthz");
    const waited = Date.now() - asked;
    assert.equal(health.status, 503);
    assert.equal(health.body.reason, STALLED);
    assert.equal(health.body.error, STALLED);
    assert.ok(waited >= 1500 && waited < 4000, `answered after ${waited} ms`);
    assert.ok(server.logs.some((line) => line.includes('"storage":"stalled"')));
    // Asked again while the disk still holds the first probe: answered at once (a second
    // probe would wait for the disk too); one log line in all.
    await sleep(1100);
    const again = owner.json("GET", "/healthz");
    assert.equal(await settlesWithin(again, 500), true, "the second /healthz waited for the disk");
    assert.equal((await again).status, 503);
    assert.equal(server.logs.filter((line) => line.includes('"storage":"stalled"')).length, 1);
    // The writes were not given up on: they were only waiting.
    assert.equal(await settlesWithin(patch, 50), false);

    gate.release();
    assert.equal((await patch).status, 200);
    await waitFor("/healthz to answer 200 again", async () => (await owner.json("GET", "/healthz")).status === 200, 15_000);
  },
);

test("SQLITE_SYNCHRONOUS=normal syncs nothing itself", SQLITE_ONLY, async (t) => {
  const gate = new SyncGate();
  const server = await startServer(t, { env: { SQLITE_SYNCHRONOUS: "normal" }, beforeWalSync: gate.beforeSync });
  const owner = await server.signIn("owner@example.com");
  const project = await owner.createProject({ name: "normal", environments: ["production"] });
  const secret = await createSecret(owner, project.id, "production", "API_KEY", "value");
  assert.equal((await owner.json("GET", `${envPath(project.id, "production")}/secrets/${secret.id}`)).status, 200);
  assert.equal(gate.started, 0);
});

test(
  "another process's commit in the WAL: durableWithOthers syncs it, and a start syncs what a killed process left",
  SQLITE_ONLY,
  async (t) => {
    const file = path.join(makeTempDir(), "shared.db");
    const server = new Database(file);
    server.pragma("journal_mode = WAL");
    // A first read makes the WAL file, as the server's start does.
    server.prepare("SELECT count(*) FROM sqlite_master").get();
    // What the start syncs: the WAL as the previous process left it, before anything is served.
    const realSync = fs.fdatasyncSync;
    let syncedAtStart = 0;
    fs.fdatasyncSync = (fd) => {
      syncedAtStart += 1;
      realSync(fd);
    };
    let syncs = 0;
    let commits: ReturnType<typeof startGroupCommit>;
    try {
      commits = startGroupCommit(server, `${file}-wal`, { beforeSync: async () => void (syncs += 1) });
    } finally {
      fs.fdatasyncSync = realSync;
    }
    assert.equal(syncedAtStart, 1);
    const other = new Database(file);
    t.after(async () => {
      await commits.close();
      server.close();
      other.close();
    });
    server.prepare("CREATE TABLE t (x)").run();
    await commits.durable();
    assert.equal(syncs, 1);
    // Another server process on the same DATA_DIR commits; this one wrote nothing since its sync.
    other.prepare("INSERT INTO t VALUES (1)").run();
    await commits.durable();
    assert.equal(syncs, 1, "durable() covers this process's writes only");
    await commits.durableWithOthers();
    assert.equal(syncs, 2, "a sync that began after the other process's commit");
  },
);
