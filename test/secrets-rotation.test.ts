// Master key rotation across restarts: write under key 1, restart with key 2 current and
// key 1 previous, run `secrets-server rotate-key`, restart with key 2 only: every value and
// every version still reads. Interrupting the command and running it again is safe.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import crypto from "node:crypto";
import { type TestContext, test } from "node:test";
import { ENCRYPTED_COLUMNS } from "../src/core/encrypted-columns.ts";
import { readTransaction, writeTransaction } from "../src/core/store.ts";
import { createVault, DecryptError } from "../src/core/vault.ts";
import { sourceCommand } from "../src/dev/source-command.ts";
import { type FakeVercel, isEnvUpdate, startFakeVercel } from "./fake-vercel.ts";
import { type Client, ROOT, randomMasterKey, runMain, startServer } from "./helpers.ts";
import { createSecret, envPath, startTeam } from "./secrets-helpers.ts";
import { copyWrappedKey, keyVersionsInUse, rowCount, schemaColumns } from "./storage.ts";

/** Every value and every historical version of every secret of an environment. */
async function readEverything(client: Client, projectId: string, env: string): Promise<Record<string, string[]>> {
  const out: Record<string, string[]> = {};
  const { body } = await client.json("GET", `${envPath(projectId, env)}/secrets`);
  for (const secret of body.secrets) {
    const current = await client.json("GET", `${envPath(projectId, env)}/secrets/${secret.id}`);
    assert.equal(current.status, 200, JSON.stringify(current.body));
    const values = [current.body.secret.value as string];
    for (let n = secret.version; n >= 1; n--) {
      const old = await client.json("GET", `${envPath(projectId, env)}/secrets/${secret.id}/versions/${n}`);
      assert.equal(old.status, 200, JSON.stringify(old.body));
      values.push(old.body.version.value as string);
    }
    out[secret.key] = values;
  }
  return out;
}

/** The security overview's encrypted-record counts, summed over projects. */
async function encryptedRecords(client: Client, projectIds: string[]) {
  const sum = { total: 0, onCurrentKeyVersion: 0, other: 0 };
  for (const projectId of projectIds) {
    const res = await client.json("GET", `/api/projects/${projectId}/security`);
    assert.equal(res.status, 200, JSON.stringify(res.body));
    const records = res.body.encryption.records as typeof sum;
    for (const name of ["total", "onCurrentKeyVersion", "other"] as const) sum[name] += records[name];
  }
  return sum;
}

/**
 * Connects the project to the fake Vercel with a deploy hook: the token and the hook are the
 * two integration credentials, sealed like values. Returns both.
 */
async function connectVercel(owner: Client, projectId: string, fake: FakeVercel): Promise<{ token: string; hook: string }> {
  const token = `vcp_${crypto.randomBytes(18).toString("hex")}`;
  fake.addToken(token);
  fake.addProject("prj_web", "web");
  const hook = fake.addHook("prj_web");
  const base = `/api/projects/${projectId}/integrations/hosting`;
  const connected = await owner.json("POST", base, { token });
  assert.equal(connected.status, 201, JSON.stringify(connected.body));
  const linked = await owner.json("PUT", base, { hostProjectId: "prj_web", mappings: { development: "development" }, deployHookUrl: hook });
  assert.equal(linked.status, 200, JSON.stringify(linked.body));
  return { token, hook };
}

/** Both credentials open: a sync with a redeploy reaches the fake with the token and calls the hook. */
async function assertCredentialsOpen(owner: Client, projectId: string, fake: FakeVercel, token: string): Promise<void> {
  const hookCalls = fake.hookCalls.length;
  const requests = fake.requests.length;
  const synced = await owner.json("POST", `/api/projects/${projectId}/integrations/hosting/sync`, { redeploy: true });
  assert.equal(synced.status, 200, JSON.stringify(synced.body));
  assert.ok(
    fake.requests.slice(requests).some((request) => request.authorization === `Bearer ${token}`),
    "the sync reached Vercel with the saved token",
  );
  assert.equal(fake.hookCalls.length, hookCalls + 1, "the deploy hook was called");
}

test("every ciphertext column of the migrated database is in ENCRYPTED_COLUMNS, with its key version column", async (t) => {
  const server = await startServer(t);
  const columns = schemaColumns(server);
  // Ciphertext is stored as a blob (bytea on PostgreSQL), and its master key version beside it
  // (the audit chain's mac_key_version keys a MAC, not a ciphertext: audit events are counted apart).
  const blobs = columns.filter((c) => ["blob", "bytea"].includes(c.type.toLowerCase())).map((c) => `${c.table}.${c.name}`);
  const keyVersions = columns
    .filter((c) => /(^|_)key_version$/.test(c.name) && c.name !== "mac_key_version")
    .map((c) => `${c.table}.${c.name}`);
  assert.deepEqual(blobs.sort(), ENCRYPTED_COLUMNS.map((c) => `${c.table}.${c.ciphertext}`).sort());
  assert.deepEqual(keyVersions.sort(), ENCRYPTED_COLUMNS.map((c) => `${c.table}.${c.keyVersion}`).sort());
  for (const column of ENCRYPTED_COLUMNS) {
    const info = columns.find((c) => c.table === column.table && c.name === column.ciphertext);
    assert.equal(column.isNullable, info?.isNotNull === 0, `${column.table}.${column.ciphertext}`);
  }
});

test("rotation: key 1, then key 2 with key 1 previous, rotate-key, then key 2 alone; every value and version reads", async (t) => {
  const key1 = randomMasterKey();
  const key2 = randomMasterKey();
  const fake = await startFakeVercel();
  t.after(() => fake.stop());
  const team = await startTeam(t, { env: { MASTER_KEY: key1, VERCEL_API_URL: fake.url } });
  const { projectId, owner } = team;
  let server = team.server;
  const other = await owner.createProject({ name: "second", environments: ["production"] });
  for (const [project, env] of [
    [projectId, "development"],
    [projectId, "production"],
    [other.id, "production"],
  ] as const) {
    for (const key of ["DATABASE_URL", "API_TOKEN", "PEM"]) {
      const secret = await createSecret(owner, project, env, key, `${key}-${env}-value-1`);
      for (const n of [2, 3]) {
        const res = await owner.json("PATCH", `${envPath(project, env)}/secrets/${secret.id}`, { value: `${key}-${env}-value-${n}` });
        assert.equal(res.status, 200);
      }
    }
  }
  const { token } = await connectVercel(owner, projectId, fake);
  const before = {
    dev: await readEverything(owner, projectId, "development"),
    prod: await readEverything(owner, projectId, "production"),
    other: await readEverything(owner, other.id, "production"),
  };
  assert.deepEqual(before.dev.PEM, [
    "PEM-development-value-3",
    "PEM-development-value-3",
    "PEM-development-value-2",
    "PEM-development-value-1",
  ]);
  assert.deepEqual(keyVersionsInUse(server), { values: [1], projectKeys: [1], integrations: [1] });

  // Key 2 alone cannot start while records need key 1: the server says what is missing.
  await server.stop();
  await assert.rejects(
    server.restart({ MASTER_KEY: key2, MASTER_KEY_VERSION: "2" }),
    /encrypted with master key version 1, which is not configured/,
  );

  const rotatedEnv = { MASTER_KEY: key2, MASTER_KEY_VERSION: "2", MASTER_KEYS_PREVIOUS: `1:${key1}` };
  server = await server.restart(rotatedEnv);
  t.after(() => server.stop());
  let client = await server.signIn("olivia@example.test");
  assert.deepEqual(await readEverything(client, projectId, "development"), before.dev);
  // New writes use key 2 while the old records stay on key 1 until rotated.
  const fresh = await createSecret(client, projectId, "staging", "WRITTEN_ON_KEY_2", "written-on-key-2");
  assert.deepEqual(keyVersionsInUse(server), { values: [1, 2], projectKeys: [1, 2], integrations: [1] });
  assert.equal(rowCount(server, "secret_versions", { secret_id: fresh.id, key_version: 2 }), 1);

  // The security overview counts what rotate-key moves: 27 values, the token and the hook,
  // and the two projects' key-1 data keys (all from ENCRYPTED_COLUMNS).
  const overviewBefore = await encryptedRecords(client, [projectId, other.id]);
  assert.deepEqual(overviewBefore, { total: 33, onCurrentKeyVersion: 2, other: 31 });

  // rotate-key with the server running, in small batches, printing progress.
  const rotated = await runMain(["rotate-key", "--batch-size", "4"], server.env);
  assert.equal(rotated.code, 0, rotated.stderr + rotated.stdout);
  const lines = rotated.stdout.trim().split("\n");
  assert.equal(lines[0], "Master key version 2 is current. To re-encrypt: 27 secret values, 2 integration credentials.");
  assert.deepEqual(
    lines.filter((l) => l.startsWith("secret values:")),
    ["4", "8", "12", "16", "20", "24", "27"].map((n) => `secret values: ${n}/27`),
  );
  assert.ok(lines.includes("integration credentials: 1/2") && lines.includes("integration credentials: 2/2"), rotated.stdout);
  // Audit events are counted apart from encrypted records: the whole chain is re-keyed.
  assert.match(
    rotated.stdout,
    /\nAudit log: \d+ of (\d+) events to re-key with version 2\.\nAudit log verified; \1 events re-keyed with version 2\./,
  );
  const done =
    /Done: (\d+) records re-encrypted, (\d+) audit events re-keyed, (\d+) old project data keys removed\. 32 of 32 records and \2 of \2 audit events are on key version 2\./.exec(
      rotated.stdout,
    );
  assert.ok(done, rotated.stdout);
  const [reEncrypted, removedKeys] = [Number(done[1]), Number(done[3])];
  assert.deepEqual([reEncrypted, removedKeys], [29, 2]);
  assert.match(rotated.stdout, /Older keys are no longer needed: remove them from MASTER_KEYS_PREVIOUS/);
  assert.equal(rotated.stderr, "");
  // The three agree: what the overview called old is what rotate-key re-encrypted (29) or
  // removed (2), its "32 of 32" is the overview's total now, and the key check (below) then
  // accepts key 2 alone, as it refused it above while the overview counted old records.
  assert.equal(reEncrypted + removedKeys, overviewBefore.other);
  assert.deepEqual(await encryptedRecords(client, [projectId, other.id]), { total: 32, onCurrentKeyVersion: 32, other: 0 });
  for (const secret of [key1, key2, "value-1", token]) assert.ok(!rotated.stdout.includes(secret));
  assert.deepEqual(keyVersionsInUse(server), { values: [2], projectKeys: [2], integrations: [2] });
  // The running server still reads everything (its cached data keys are still right).
  assert.deepEqual(await readEverything(client, projectId, "production"), before.prod);

  // Running it again finds nothing to do.
  const again = await runMain(["rotate-key"], server.env);
  assert.equal(again.code, 0, again.stderr);
  assert.match(again.stdout, /To re-encrypt: 0 secret values, 0 integration credentials\./);

  // Key 2 alone: everything reads, history included.
  await server.stop();
  // With no older key configured there is nothing to tell the operator to remove.
  const alone = await runMain(["rotate-key"], {
    ...server.env,
    MASTER_KEY: key2,
    MASTER_KEY_VERSION: "2",
    MASTER_KEYS_PREVIOUS: undefined,
  });
  assert.equal(alone.code, 0, alone.stderr);
  assert.match(
    alone.stdout,
    /Done: 0 records re-encrypted, 0 audit events re-keyed, 0 old project data keys removed\. 32 of 32 records and (\d+) of \1 audit events are on key version 2\.\n$/,
  );
  // The audit chain, re-keyed with key 2, verifies without key 1.
  const verified = await runMain(["audit", "verify"], {
    ...server.env,
    MASTER_KEY: key2,
    MASTER_KEY_VERSION: "2",
    MASTER_KEYS_PREVIOUS: undefined,
  });
  assert.equal(verified.code, 0, verified.stderr);
  assert.match(verified.stdout, /^Audit log intact: (\d+) events verified\.\n\1 events keyed with master key version 2 /);
  server = await server.restart({ MASTER_KEY: key2, MASTER_KEY_VERSION: "2", MASTER_KEYS_PREVIOUS: undefined });
  client = await server.signIn("olivia@example.test");
  assert.deepEqual(await readEverything(client, projectId, "development"), before.dev);
  assert.deepEqual(await readEverything(client, projectId, "production"), before.prod);
  assert.deepEqual(await readEverything(client, other.id, "production"), before.other);
  assert.deepEqual((await readEverything(client, projectId, "staging")).WRITTEN_ON_KEY_2, ["written-on-key-2", "written-on-key-2"]);
  await assertCredentialsOpen(client, projectId, fake, token);
  const exported = await client.json("GET", `${envPath(projectId, "production")}/export`);
  assert.equal(exported.body.secrets.length, 3);
});

/** A team's server restarted on a new master key (version 2): its project has no data key of version 2 yet. */
async function onKeyVersion2(t: TestContext) {
  const key1 = randomMasterKey();
  const team = await startTeam(t, { env: { MASTER_KEY: key1 } });
  const server = await team.server.restart({ MASTER_KEY: randomMasterKey(), MASTER_KEY_VERSION: "2", MASTER_KEYS_PREVIOUS: `1:${key1}` });
  t.after(() => server.stop());
  return { server, projectId: team.projectId };
}

test("rotate-key re-keys an audit log of more than one page (1,000 events) and it verifies with the new key alone", async (t) => {
  const key1 = randomMasterKey();
  const key2 = randomMasterKey();
  const team = await startTeam(t, { env: { MASTER_KEY: key1 } });
  const { projectId, owner } = team;
  const secret = await createSecret(owner, projectId, "production", "READ_OFTEN", "read-often-value");
  // Every read of a value is an event: some 1,150 of them, sent 50 at a time.
  for (let batch = 0; batch < 23; batch++) {
    const reads = await Promise.all(
      Array.from({ length: 50 }, () => owner.json("GET", `${envPath(projectId, "production")}/secrets/${secret.id}`)),
    );
    assert.deepEqual(new Set(reads.map((r) => r.status)), new Set([200]));
  }
  await team.server.stop();
  const rotated = await runMain(["rotate-key"], {
    ...team.server.env,
    MASTER_KEY: key2,
    MASTER_KEY_VERSION: "2",
    MASTER_KEYS_PREVIOUS: `1:${key1}`,
  });
  assert.equal(rotated.code, 0, rotated.stderr);
  const [, rekeyed] = rotated.stdout.match(/(\d+) audit events re-keyed/) ?? [];
  assert.ok(Number(rekeyed) > 1150, rotated.stdout);
  const verified = await runMain(["audit", "verify"], {
    ...team.server.env,
    MASTER_KEY: key2,
    MASTER_KEY_VERSION: "2",
    MASTER_KEYS_PREVIOUS: undefined,
  });
  assert.equal(verified.code, 0, verified.stdout + verified.stderr);
  assert.match(
    verified.stdout,
    new RegExp(`^Audit log intact: ${rekeyed} events verified\\.\\n${rekeyed} events keyed with master key version 2 `),
  );
});

test("a project data key created in a transaction that rolls back is not kept in memory", async (t) => {
  const { server, projectId } = await onKeyVersion2(t);
  const { db, keyring } = server.app;
  assert.equal(rowCount(server, "project_keys", { project_id: projectId, key_version: 2 }), 0);

  // The first value under key version 2 creates the project's data key, then the write fails.
  const vault = createVault(db, keyring);
  await assert.rejects(
    writeTransaction(db, async () => {
      await vault.seal(projectId, "test|first", "first-value");
      throw new Error("the write failed after sealing");
    }),
    /the write failed after sealing/,
  );
  assert.equal(rowCount(server, "project_keys", { project_id: projectId, key_version: 2 }), 0);

  // The next value must be sealed with a data key that is stored, or no restart could open it.
  const sealed = await writeTransaction(db, () => vault.seal(projectId, "test|second", "second-value"));
  assert.equal(sealed.keyVersion, 2);
  assert.equal(rowCount(server, "project_keys", { project_id: projectId, key_version: 2 }), 1);
  assert.equal(await createVault(db, keyring).open(projectId, "test|second", sealed), "second-value");
});

test("a data key read again by the transaction that created it is forgotten too when that transaction rolls back", async (t) => {
  const { server, projectId } = await onKeyVersion2(t);
  const { db, keyring } = server.app;
  const vault = createVault(db, keyring);
  await assert.rejects(
    writeTransaction(db, async () => {
      await vault.seal(projectId, "test|first", "first-value");
      // A rollback meanwhile (here a nested one; on PostgreSQL a failed read running beside
      // the write does the same): the cache forgets the new key, and the writer reads its
      // own uncommitted row again.
      await assert.rejects(
        readTransaction(db, () => {
          throw new Error("a read that fails");
        }),
        /a read that fails/,
      );
      await vault.seal(projectId, "test|again", "again-value");
      throw new Error("the write failed after sealing");
    }),
    /the write failed after sealing/,
  );
  assert.equal(rowCount(server, "project_keys", { project_id: projectId, key_version: 2 }), 0);
  const sealed = await writeTransaction(db, () => vault.seal(projectId, "test|second", "second-value"));
  assert.equal(rowCount(server, "project_keys", { project_id: projectId, key_version: 2 }), 1);
  assert.equal(await createVault(db, keyring).open(projectId, "test|second", sealed), "second-value");
});

test("a deleted project's data key, read while or after it is forgotten, is not put back in memory", async (t) => {
  const { server, projectId, owner } = await startTeam(t);
  const other = await owner.createProject({ name: "other", environments: ["production"] });
  const { db, keyring } = server.app;
  const sealed = await writeTransaction(db, () => createVault(db, keyring).seal(projectId, "test|forget", "forget-value"));
  const vault = createVault(db, keyring);
  // The deletion's forget() lands while the key is read (on PostgreSQL a round trip): the
  // read that was under way still answers...
  const opening = vault.open(projectId, "test|forget", sealed);
  vault.forget(projectId);
  assert.equal(await opening, "forget-value");
  // ...and so does one that reads it afterwards, from a snapshot older than the deletion
  // (PostgreSQL's REPEATABLE READ; here the row is simply still there)...
  assert.equal(await vault.open(projectId, "test|forget", sealed), "forget-value");
  // ...but neither kept the key: the next open reads the stored key again, which no longer opens.
  copyWrappedKey(server, other.id, projectId);
  await assert.rejects(vault.open(projectId, "test|forget", sealed), DecryptError);
});

test("a server still on the old key while rotate-key runs with the new one: what it writes afterwards stays readable", async (t) => {
  const key1 = randomMasterKey();
  const key2 = randomMasterKey();
  const team = await startTeam(t, { env: { MASTER_KEY: key1 } });
  const { projectId, owner, server } = team;
  // The server holds the project's version-1 data key in memory from here on.
  await createSecret(owner, projectId, "production", "BEFORE", "before-value");
  const rotatedEnv = { MASTER_KEY: key2, MASTER_KEY_VERSION: "2", MASTER_KEYS_PREVIOUS: `1:${key1}` };
  // The operator runs rotate-key with the new key but has not restarted the server yet.
  const rotated = await runMain(["rotate-key"], { ...server.env, ...rotatedEnv });
  assert.equal(rotated.code, 0, rotated.stderr + rotated.stdout);
  assert.deepEqual(keyVersionsInUse(server).projectKeys, [2], "no record needed the version-1 data key");

  // Still on key 1, the server seals with the key it holds, and stores that key again.
  const after = await createSecret(owner, projectId, "production", "AFTER", "after-value");
  assert.deepEqual(keyVersionsInUse(server), { values: [1, 2], projectKeys: [1, 2], integrations: [] });
  await server.stop();
  const restarted = await server.restart(rotatedEnv);
  t.after(() => restarted.stop());
  const client = await restarted.signIn("olivia@example.test");
  const read = await client.json("GET", `${envPath(projectId, "production")}/secrets/${after.id}`);
  assert.equal(read.status, 200, JSON.stringify(read.body));
  assert.equal(read.body.secret.value, "after-value");
  // rotate-key run again moves it, and then key 2 alone is enough.
  const again = await runMain(["rotate-key"], restarted.env);
  assert.equal(again.code, 0, again.stderr + again.stdout);
  assert.deepEqual(keyVersionsInUse(restarted).projectKeys, [2]);
});

test("rotate-key refuses a wrong previous key and changes nothing", async (t) => {
  const key1 = randomMasterKey();
  const { server, projectId, owner } = await startTeam(t, { env: { MASTER_KEY: key1 } });
  await createSecret(owner, projectId, "development", "SOMETHING", "something-value-1");
  await server.stop();
  const result = await runMain(["rotate-key"], {
    ...server.env,
    MASTER_KEY: randomMasterKey(),
    MASTER_KEY_VERSION: "2",
    MASTER_KEYS_PREVIOUS: `1:${randomMasterKey()}`,
  });
  assert.equal(result.code, 1);
  assert.match(
    result.stderr,
    /configuration error: MASTER_KEYS_PREVIOUS \(version 1\) does not match the key version 1 this database was encrypted with/,
  );
  const bad = await runMain(["rotate-key", "--batch-size", "0"], server.env);
  assert.equal(bad.code, 2);
  assert.match(bad.stderr, /Usage: secrets-server rotate-key \[--batch-size N\]/);
});

test("rotate-key interrupted with Ctrl-C stops between batches; running it again finishes the job", async (t) => {
  const key1 = randomMasterKey();
  const key2 = randomMasterKey();
  const team = await startTeam(t, { env: { MASTER_KEY: key1 } });
  const entries = Array.from({ length: 300 }, (_, i) => ({ key: `BULK_${i}`, value: `bulk-value-${i}-on-key-1`, overwrite: false }));
  assert.equal((await team.owner.json("POST", `${envPath(team.projectId, "development")}/import`, { entries })).status, 200);
  await team.server.stop();
  const env = { ...team.server.env, MASTER_KEY: key2, MASTER_KEY_VERSION: "2", MASTER_KEYS_PREVIOUS: `1:${key1}` };

  // Ctrl-C as soon as the first batch is reported.
  const child = spawn(...sourceCommand("rotate-key", "--batch-size", "1"), {
    cwd: ROOT,
    env: { PATH: process.env.PATH, HOME: process.env.HOME, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let signalled = false;
  child.stdout.on("data", (chunk) => {
    stdout += chunk;
    if (!signalled && stdout.includes("secret values: ")) {
      signalled = true;
      child.kill("SIGINT");
    }
  });
  const code = await new Promise<number | null>((resolve) => child.on("close", resolve));
  const server = await team.server.restart({ MASTER_KEY: key2, MASTER_KEY_VERSION: "2", MASTER_KEYS_PREVIOUS: `1:${key1}` });
  t.after(() => server.stop());
  const moved = rowCount(server, "secret_versions", { key_version: 2 });
  t.diagnostic(`rotate-key exited with ${code} after moving ${moved} of 300 values`);
  if (code === 130) {
    assert.match(
      stdout,
      /Interrupted after \d+ records? re-encrypted and \d+ audit events? re-keyed\. Nothing is half done: run rotate-key again to continue\./,
    );
    assert.ok(moved >= 1 && moved < 300, `moved ${moved}`);
    // Each batch is whole: the count printed last is exactly what was moved.
    const last = stdout
      .trim()
      .split("\n")
      .filter((l) => l.startsWith("secret values:"))
      .at(-1)!;
    assert.equal(last, `secret values: ${moved}/300`);
  } else {
    // The machine was fast enough to finish first; the rerun below must still be a no-op.
    assert.equal(code, 0, stdout);
  }
  // Mixed key versions read fine in the meantime.
  const client = await server.signIn("olivia@example.test");
  const exported = await client.json("GET", `${envPath(team.projectId, "development")}/export`);
  assert.equal(exported.body.secrets.length, 300);

  const rerun = await runMain(["rotate-key", "--batch-size", "50"], server.env);
  assert.equal(rerun.code, 0, rerun.stderr + rerun.stdout);
  assert.match(rerun.stdout, new RegExp(`To re-encrypt: ${300 - moved} secret values`));
  assert.deepEqual(keyVersionsInUse(server), { values: [2], projectKeys: [2], integrations: [] });
  const after = await client.json("GET", `${envPath(team.projectId, "development")}/export`);
  assert.deepEqual(after.body, exported.body);
  assert.equal(after.body.secrets.find((s: any) => s.key === "BULK_7").value, "bulk-value-7-on-key-1");
});

test("rotate-key under a running Vercel sync: the token encrypted again is the same token, and the sync goes on", async (t) => {
  const key1 = randomMasterKey();
  const key2 = randomMasterKey();
  const fake = await startFakeVercel();
  t.after(() => fake.stop());
  const team = await startTeam(t, { env: { MASTER_KEY: key1, VERCEL_API_URL: fake.url, SYNC_DEBOUNCE_MS: "600000" } });
  const ids: string[] = [];
  for (const key of ["FIRST_KEY", "SECOND_KEY"]) ids.push((await createSecret(team.owner, team.projectId, "development", key, "one")).id);
  await connectVercel(team.owner, team.projectId, fake);
  const rotatedEnv = { MASTER_KEY: key2, MASTER_KEY_VERSION: "2", MASTER_KEYS_PREVIOUS: `1:${key1}` };
  await team.server.stop();
  const server = await team.server.restart(rotatedEnv);
  t.after(() => server.stop());
  const owner = await server.signIn("olivia@example.test");
  const sync = `/api/projects/${team.projectId}/integrations/hosting/sync`;
  assert.equal((await owner.json("POST", sync)).status, 200);
  for (const id of ids) {
    assert.equal((await owner.json("PATCH", `${envPath(team.projectId, "development")}/secrets/${id}`, { value: "two" })).status, 200);
  }

  const held = fake.hold(isEnvUpdate);
  const running = owner.json("POST", sync);
  await held.reached;
  const rotated = await runMain(["rotate-key"], server.env);
  assert.equal(rotated.code, 0, rotated.stderr + rotated.stdout);
  assert.deepEqual(keyVersionsInUse(server).integrations, [2], "the token was encrypted again");
  held.release();
  const answer = await running;
  assert.equal(answer.status, 200, JSON.stringify(answer.body));
  assert.equal(answer.body.summary.updated, 2);
  assert.equal(fake.envFor("prj_web", "SECOND_KEY", "development")!.value, "two");
});
