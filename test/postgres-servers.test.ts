// The server on PostgreSQL, end to end, where the store itself is the subject: an outage
// under load answers 503 (never 500, never a hang) and the same server serves again once
// PostgreSQL is back; `copy-database` moves a SQLite DATA_DIR with every kind of record to
// PostgreSQL and the server then reads every value back from it. These run once, on their
// own throwaway cluster (they stop it), whatever store the rest of the run uses.
import assert from "node:assert/strict";
import crypto from "node:crypto";
import fs from "node:fs";
import { test } from "node:test";
import { type FakeVercel, startFakeVercel } from "./fake-vercel.ts";
import { makeTempDir, randomMasterKey, runMain, startServer } from "./helpers.ts";
import { queryPostgresSync } from "./pg-sync.ts";
import { createDatabase, startCluster, stopCluster, usePostgres } from "./postgres.ts";
import { addMember, createSecret } from "./secrets-helpers.ts";
import { auditRows, tamperAuditRow } from "./storage.ts";

usePostgres();

test("PostgreSQL stopped under load: requests answer 503 with Retry-After (never 500, never a hang); started again, the same server serves", {
  timeout: 90_000,
}, async (t) => {
  const server = await startServer(t, { env: { DATABASE_URL: await createDatabase() } });
  const alice = await server.signIn("alice@example.test");
  const project = await alice.createProject({ name: "api", environments: ["production"] });
  const base = `/api/projects/${project.id}/environments/production/secrets`;
  const secret = await createSecret(alice, project.id, "production", "API_KEY", "kept-through-the-outage");

  const load = async (until: () => boolean) => {
    const statuses: number[] = [];
    while (!until()) {
      const [read, write] = await Promise.all([
        alice.json("GET", `${base}/${secret.id}`),
        alice.json("POST", base, { key: `K_${crypto.randomBytes(4).toString("hex").toUpperCase()}`, value: "v" }),
      ]);
      for (const res of [read, write]) {
        statuses.push(res.status);
        if (res.status === 503) {
          assert.ok(Number(res.headers.get("retry-after")) > 0, "503 says when to retry");
          assert.match(res.body.error, /cannot reach its database/);
        }
      }
    }
    return statuses;
  };
  let outageDone = false;
  const during = load(() => outageDone);
  await stopCluster();
  try {
    // Requests made while it is down: each answers, 503.
    const down = await Promise.all([
      alice.json("GET", `${base}/${secret.id}`),
      alice.json("GET", "/api/projects"),
      alice.json("PATCH", `${base}/${secret.id}`, { value: "not-saved" }),
    ]);
    assert.deepEqual(
      down.map((r) => r.status),
      [503, 503, 503],
      JSON.stringify(down.map((r) => r.body)),
    );
    const health = await server.client().request("GET", "/healthz");
    assert.equal(health.status, 503);
  } finally {
    outageDone = true;
    await startCluster();
  }
  const statuses = await during;
  assert.ok(
    statuses.every((s) => s === 200 || s === 201 || s === 503),
    `only successes and 503s during the outage: ${[...new Set(statuses)].join(", ")}`,
  );
  // The load did overlap the outage: some of it was refused while the database was down.
  assert.ok(statuses.includes(503), `the load met the outage: ${[...new Set(statuses)].join(", ")}`);
  const back = await alice.json("GET", `${base}/${secret.id}`);
  assert.equal(back.status, 200, JSON.stringify(back.body));
  assert.equal(back.body.secret.value, "kept-through-the-outage", "the value written before the outage, not the refused PATCH");
  assert.equal((await server.client().request("GET", "/healthz")).status, 200);
  assert.ok(!server.logs.some((line) => /"statusCode":500/.test(line)), "no 500 was logged");
});

test("a start whose TLS does not fit the database stops with one line, not a stack", async () => {
  const result = await runMain(["migrate"], {
    DATABASE_URL: `${await createDatabase()}&sslmode=verify-full`,
    MASTER_KEY: randomMasterKey(),
    DATA_DIR: makeTempDir(),
  });
  assert.equal(result.code, 1, result.stderr);
  assert.equal(
    result.stderr,
    "secrets-server: configuration error: The database at DATABASE_URL does not offer TLS, which the sslmode in DATABASE_URL asks for: enable ssl on the database server, or (on a network you trust) remove sslmode.\n",
  );
});

test("copy-database moves a SQLite DATA_DIR with every kind of record to PostgreSQL; the server serves it from there and the chain verifies", {
  timeout: 180_000,
}, async (t) => {
  const fake: FakeVercel = await startFakeVercel();
  t.after(() => fake.stop());
  const dataDir = makeTempDir();
  t.after(() => fs.rmSync(dataDir, { recursive: true, force: true }));
  const env = { MASTER_KEY: randomMasterKey(), VERCEL_API_URL: fake.url };
  // SQLite whatever store the run uses: this is the folder being moved.
  const sqlite = await startServer(t, { dataDir, env: { ...env, DATABASE_URL: undefined } });
  assert.equal(sqlite.env.DATABASE_URL, undefined);
  const owner = await sqlite.signIn("owner@example.test", "Owner");
  const member = await sqlite.signIn("member@example.test");
  const project = await owner.createProject({ name: "api", environments: ["development", "production"] });
  const values = new Map<string, string>();
  for (let i = 0; i < 12; i++) {
    const value = `value-${i}-${crypto.randomBytes(6).toString("hex")}`;
    const env = i % 2 === 0 ? "development" : "production";
    const created = await createSecret(owner, project.id, env, `KEY_${i}`, value);
    values.set(`${env}/${created.id}`, value);
  }
  // A second version of one secret, a member with a grant, an invitation, a service account
  // with a token, a CLI session, a Vercel connection, and audit events of all of them.
  const [first] = values.keys();
  const [firstEnv, firstId] = first!.split("/");
  const patched = await owner.json("PATCH", `/api/projects/${project.id}/environments/${firstEnv}/secrets/${firstId}`, {
    value: "second-version",
  });
  assert.equal(patched.status, 200);
  values.set(first!, "second-version");
  await addMember(owner, member, project.id, "member", ["development"]);
  const pending = await owner.json("POST", `/api/projects/${project.id}/invitations`, { email: "later@example.test", role: "viewer" });
  assert.equal(pending.status, 201);
  const account = await owner.json("POST", `/api/projects/${project.id}/service-accounts`, {
    name: "deployer",
    role: "member",
    environments: ["production"],
  });
  assert.equal(account.status, 201, JSON.stringify(account.body));
  const token = await owner.json("POST", `/api/projects/${project.id}/service-accounts/${account.body.serviceAccount.id}/tokens`, {
    name: "ci",
  });
  assert.equal(token.status, 201, JSON.stringify(token.body));
  const vercelToken = `vcp_${crypto.randomBytes(18).toString("hex")}`;
  fake.addToken(vercelToken);
  fake.addProject("prj_web", "web");
  const connected = await owner.json("POST", `/api/projects/${project.id}/integrations/hosting`, { token: vercelToken });
  assert.equal(connected.status, 201, JSON.stringify(connected.body));
  await sqlite.stop();

  const url = await createDatabase();
  const copied = await runMain(["copy-database", "--to", url], { DATA_DIR: dataDir, ...env }, { timeoutMs: 120_000 });
  assert.equal(copied.code, 0, copied.stderr + copied.stdout);
  assert.match(copied.stdout, /every table's row count matches and the audit chain verifies/);
  // A second copy into the same (now full) database is refused and changes nothing.
  const again = await runMain(["copy-database", "--to", url], { DATA_DIR: dataDir, ...env }, { timeoutMs: 120_000 });
  assert.equal(again.code, 1);
  assert.match(again.stderr, /is not empty/);

  const onPostgres = await startServer(t, { dataDir: makeTempDir(), env: { ...env, DATABASE_URL: url } });
  const ownerThere = await onPostgres.signIn("owner@example.test", "Owner");
  for (const [where, value] of values) {
    const [environment, id] = where.split("/");
    const read = await ownerThere.json("GET", `/api/projects/${project.id}/environments/${environment}/secrets/${id}`);
    assert.equal(read.status, 200, JSON.stringify(read.body));
    assert.equal(read.body.secret.value, value);
  }
  const members = await ownerThere.json("GET", `/api/projects/${project.id}/members`);
  assert.equal(members.status, 200);
  assert.deepEqual(members.body.members.map((m: { email: string }) => m.email).sort(), ["member@example.test", "owner@example.test"]);
  // The service token made on SQLite reads on PostgreSQL: its hash came along.
  const machine = await onPostgres
    .client()
    .request("GET", `/api/projects/${project.id}/environments/production/export?format=json`, undefined, {
      authorization: `Bearer ${token.body.token}`,
    });
  assert.equal(machine.status, 200);
  assert.equal(((await machine.json()) as { secrets: unknown[] }).secrets.length, 6);
  // New events continue the copied chain (the identity moved past the copied numbers).
  const created = await createSecret(ownerThere, project.id, "development", "AFTER_COPY", "written-on-postgres");
  assert.ok(created.id);
  const verified = await runMain(["audit", "verify"], onPostgres.env, { timeoutMs: 60_000 });
  assert.equal(verified.code, 0, verified.stderr + verified.stdout);
  // backup is SQLite's: on PostgreSQL it points to pg_dump, and writes nothing.
  const backupFile = `${makeTempDir()}/secrets.db`;
  const backup = await runMain(["backup", backupFile], onPostgres.env);
  assert.equal(backup.code, 1);
  assert.match(backup.stderr, /^secrets-server: configuration error: DATABASE_URL is set: back up PostgreSQL with pg_dump /);
  assert.equal(fs.existsSync(backupFile), false);
});

test("copy-database refuses a DATA_DIR whose audit chain does not verify before it copies anything", { timeout: 120_000 }, async (t) => {
  const dataDir = makeTempDir();
  t.after(() => fs.rmSync(dataDir, { recursive: true, force: true }));
  const env = { MASTER_KEY: randomMasterKey() };
  const sqlite = await startServer(t, { dataDir, env: { ...env, DATABASE_URL: undefined } });
  const owner = await sqlite.signIn("owner@example.test");
  await owner.createProject({ name: "api", environments: ["development"] });
  await sqlite.stop();
  const [first] = auditRows(dataDir);
  tamperAuditRow(dataDir, first!.seq, { target_id: "someone-else" });

  const url = await createDatabase();
  const refused = await runMain(["copy-database", "--to", url], { DATA_DIR: dataDir, ...env }, { timeoutMs: 120_000 });
  assert.equal(refused.code, 1, refused.stderr + refused.stdout);
  assert.equal(
    refused.stderr,
    `The audit chain does not verify in DATA_DIR (event #${first!.seq}); run "secrets-server audit verify" and find out what happened to the log. Nothing was copied.\n`,
  );
  // The target was left empty: once the log is whole again, a copy into it goes through.
  tamperAuditRow(dataDir, first!.seq, { target_id: first!.target_id });
  const copied = await runMain(["copy-database", "--to", url], { DATA_DIR: dataDir, ...env }, { timeoutMs: 120_000 });
  assert.equal(copied.code, 0, copied.stderr + copied.stdout);
});

test("copy-database refuses a target that holds rows before it migrates it: a live database of an older version is left as it was", {
  timeout: 120_000,
}, async (t) => {
  const dataDir = makeTempDir();
  t.after(() => fs.rmSync(dataDir, { recursive: true, force: true }));
  const env = { MASTER_KEY: randomMasterKey() };
  const migrated = await runMain(["migrate"], { DATA_DIR: dataDir, ...env });
  assert.equal(migrated.code, 0, migrated.stderr);

  const url = await createDatabase();
  const live = await startServer(t, { dataDir: makeTempDir(), env: { ...env, DATABASE_URL: url } });
  await live.signIn("owner@example.test");
  await live.stop();
  // As a server of the version before the newest migration left it.
  const newest = "SELECT max(created_at) FROM drizzle.__drizzle_migrations";
  queryPostgresSync(url, `DELETE FROM drizzle.__drizzle_migrations WHERE created_at = (${newest})`);
  const applied = () =>
    queryPostgresSync(url, "SELECT count(*)::int AS n, max(created_at)::text AS newest FROM drizzle.__drizzle_migrations").rows[0];
  const before = applied();

  const refused = await runMain(["copy-database", "--to", url], { DATA_DIR: dataDir, ...env }, { timeoutMs: 120_000 });
  assert.equal(refused.code, 1, refused.stderr + refused.stdout);
  assert.match(
    refused.stderr,
    /^secrets-server: configuration error: The database at --to is not empty \(\w+ has rows\): copy into a new, empty database\.\n$/,
  );
  assert.deepEqual(applied(), before, "no migration was applied to the target");
});
