// The secrets endpoints over HTTP against a real server: every rule, status and message.
import assert from "node:assert/strict";
import { test } from "node:test";
import { auditEvents, runMain } from "./helpers.ts";
import { cliFor, createSecret, envPath, ISO_MS, secretCounts, startTeam, UUID, versionCount } from "./secrets-helpers.ts";
import { copyWrappedKey, failWritesTo, markBaseline, rowCount, setStoredCiphertext, storedCiphertext, storedRows } from "./storage.ts";

const NOT_FOUND = { error: "Project not found." };
const FORBIDDEN = { error: "You do not have permission to do this in this project." };
const SECRET_NOT_FOUND = { error: "Secret not found." };
const VERSION_NOT_FOUND = { error: "Version not found." };
const ENV_NOT_FOUND = { error: "Environment not found." };
const INVALID = { error: "invalid key or value" };
const KEY_TAKEN = { error: "A secret with this key already exists in this environment." };
const STALE = { error: "This secret was changed by someone else. Reload and try again." };
const NOTHING = { error: "Nothing to update." };
const BAD_EXPECTED = { error: "expectedVersion must be a positive integer." };
const ALREADY_CURRENT = { error: "This version is already the current value." };
const NOT_DECRYPTED_ONE = { error: "This secret could not be decrypted. Nothing partial is returned." };
const NOT_DECRYPTED_SOME = { error: "Some secrets could not be decrypted." };
const BROWSER_ONLY = { error: "This action needs a browser session; CLI tokens cannot be used here." };

test("create answers 201 with version 1, stores the value only encrypted, and is audited", async (t) => {
  const { server, projectId, owner } = await startTeam(t);
  const res = await owner.json("POST", `${envPath(projectId, "production")}/secrets`, {
    key: "DATABASE_URL",
    value: "postgres://db.internal/app-4417",
  });
  assert.equal(res.status, 201);
  const secret = res.body.secret;
  assert.deepEqual(Object.keys(res.body), ["secret"]);
  assert.deepEqual(Object.keys(secret).sort(), ["createdAt", "id", "key", "updatedAt", "version"]);
  assert.match(secret.id, UUID);
  assert.equal(secret.key, "DATABASE_URL");
  assert.equal(secret.version, 1);
  assert.match(secret.createdAt, ISO_MS);
  assert.equal(secret.updatedAt, secret.createdAt);

  const rows = storedRows(server, "secret_versions");
  assert.equal(rows.length, 1);
  assert.equal(rows[0]!.change_type, "CREATED");
  assert.equal(rows[0]!.version_number, 1);
  assert.equal(rows[0]!.changed_by, owner.user!.id);
  assert.equal(rows[0]!.key_version, 1);
  assert.ok(!Buffer.from(rows[0]!.ciphertext).includes("db.internal"), "the value is not stored in clear");
  // 12-byte nonce, ciphertext, 16-byte tag.
  assert.equal(rows[0]!.ciphertext.length, 12 + "postgres://db.internal/app-4417".length + 16);

  assert.deepEqual(
    (await auditEvents(owner, projectId, "secret")).map((e) => [e.action, e.actor, e.targetType, e.targetId, e.metadata]),
    [["secret.created", owner.user!.id, "secret", secret.id, { key: "DATABASE_URL", environment: "production", version: 1 }]],
  );
});

test("two encryptions of the same value differ: a fresh nonce every time", async (t) => {
  const { server, projectId, owner } = await startTeam(t);
  await createSecret(owner, projectId, "production", "A", "same-value-123");
  await createSecret(owner, projectId, "production", "B", "same-value-123");
  const [a, b] = storedRows(server, "secret_versions").map((row) => row.ciphertext as Buffer);
  assert.notDeepEqual(a!.subarray(0, 12), b!.subarray(0, 12));
  assert.notDeepEqual(a, b);
});

test("the value limit counts UTF-16 code units: 5,000 emoji fit, one more character does not, on create, PATCH and import", async (t) => {
  const { projectId, owner } = await startTeam(t);
  const base = envPath(projectId, "development");
  // Astral characters: two UTF-16 units, one code point, four UTF-8 bytes each.
  const atLimit = "🔑".repeat(5_000);
  const overLimit = `${atLimit}x`;
  assert.equal(atLimit.length, 10_000);
  assert.equal([...overLimit].length, 5_001);

  const over = await owner.json("POST", `${base}/secrets`, { key: "EMOJI", value: overLimit });
  assert.deepEqual([over.status, over.body], [400, INVALID]);
  assert.equal((await secretCounts(owner, projectId)).secrets, 0);
  const created = await createSecret(owner, projectId, "development", "EMOJI", atLimit);
  assert.equal((await owner.json("GET", `${base}/secrets/${created.id}`)).body.secret.value, atLimit);

  const patched = await owner.json("PATCH", `${base}/secrets/${created.id}`, { value: `${overLimit}y` });
  assert.deepEqual([patched.status, patched.body], [400, INVALID]);
  const stillOne = await owner.json("PATCH", `${base}/secrets/${created.id}`, { value: `x${"🔑".repeat(4_999)}x` });
  assert.equal(stillOne.status, 200);
  assert.equal(stillOne.body.secret.version, 2);

  const imported = await owner.json("POST", `${base}/import`, { entries: [{ key: "OTHER", value: overLimit, overwrite: false }] });
  assert.deepEqual([imported.status, imported.body], [400, { error: "invalid request" }]);
  const fits = await owner.json("POST", `${base}/import`, { entries: [{ key: "OTHER", value: atLimit, overwrite: false }] });
  assert.deepEqual(fits.body.summary, { created: 1, updated: 0, unchanged: 0, skipped: 0, failed: 0 });
  assert.equal((await secretCounts(owner, projectId)).versions, 3);
});

test("create validates key and value: 400 invalid key or value, and nothing is written", async (t) => {
  const { projectId, owner } = await startTeam(t);
  const url = `${envPath(projectId, "development")}/secrets`;
  const bad: unknown[] = [
    { key: "1ABC", value: "v" },
    { key: "A-B", value: "v" },
    { key: "A B", value: "v" },
    { key: "ÄPFEL", value: "v" },
    { key: "", value: "v" },
    { key: "A".repeat(129), value: "v" },
    { key: "A", value: "" },
    { key: "A", value: "x".repeat(10_001) },
    { key: "A", value: "lone \ud800 surrogate" },
    { key: "A" },
    { value: "v" },
    { key: "A", value: 5 },
    { key: 5, value: "v" },
    { key: "A", value: "v", extra: true },
    // A key shaped like one of our tokens is refused up front (audit metadata would hide it).
    { key: `svc_at_${"A".repeat(24)}`, value: "v" },
    { key: `MY_svc_rt_${"B".repeat(30)}`, value: "v" },
    [],
    "text",
    null,
  ];
  for (const body of bad) {
    const res = await owner.json("POST", url, body);
    assert.equal(res.status, 400, JSON.stringify(body));
    assert.deepEqual(res.body, INVALID, JSON.stringify(body));
  }
  assert.equal((await secretCounts(owner, projectId)).secrets, 0);

  // The limits themselves are fine.
  await createSecret(owner, projectId, "development", `_${"a".repeat(127)}`, "x".repeat(10_000));
  await createSecret(owner, projectId, "development", "_x9", "v");
  const plain = await createSecret(owner, projectId, "development", "lower_case", "emoji 🔑 and ünïcödé");

  // A rename is held to the same key rules.
  const rename = await owner.json("PATCH", `${url}/${plain.id}`, { key: `svc_at_${"R".repeat(24)}` });
  assert.deepEqual([rename.status, rename.body], [400, INVALID]);
});

test("a key is unique within its environment: 409 on create; the same key elsewhere is fine", async (t) => {
  const { projectId, owner } = await startTeam(t);
  await createSecret(owner, projectId, "development", "API_KEY", "first-value-1");
  const res = await owner.json("POST", `${envPath(projectId, "development")}/secrets`, { key: "API_KEY", value: "second-value-2" });
  assert.equal(res.status, 409);
  assert.deepEqual(res.body, KEY_TAKEN);
  assert.equal((await secretCounts(owner, projectId)).secrets, 1);
  // Keys are case-sensitive, and environments are separate.
  await createSecret(owner, projectId, "development", "api_key", "third-value-3");
  await createSecret(owner, projectId, "staging", "API_KEY", "fourth-value-4");
});

test("list: metadata only, most recently updated first", async (t) => {
  const { server, projectId, owner } = await startTeam(t);
  const a = await createSecret(owner, projectId, "staging", "ALPHA", "alpha-value-1");
  server.clock.advance(1000);
  const b = await createSecret(owner, projectId, "staging", "BRAVO", "bravo-value-1");
  server.clock.advance(1000);
  const c = await createSecret(owner, projectId, "staging", "CHARLIE", "charlie-value-1");
  await createSecret(owner, projectId, "production", "OTHER_ENV", "other-value-1");
  server.clock.advance(1000);
  const patched = await owner.json("PATCH", `${envPath(projectId, "staging")}/secrets/${a.id}`, { value: "alpha-value-2" });
  assert.equal(patched.status, 200);

  const res = await owner.json("GET", `${envPath(projectId, "staging")}/secrets`);
  assert.equal(res.status, 200);
  assert.deepEqual(res.body, { secrets: [patched.body.secret, c, b] });
  assert.ok(!JSON.stringify(res.body).includes("value"));
  // Listing is not a reveal.
  assert.equal((await auditEvents(owner, projectId, "secret.revealed")).length, 0);

  const empty = await owner.json("GET", `${envPath(projectId, "development")}/secrets`);
  assert.deepEqual(empty.body, { secrets: [] });
});

test("read returns the value, is audited as secret.revealed, and is not cached", async (t) => {
  const { projectId, owner } = await startTeam(t);
  const created = await createSecret(owner, projectId, "production", "STRIPE_KEY", "sk_live_abcdef123");
  const res = await owner.json("GET", `${envPath(projectId, "production")}/secrets/${created.id}`);
  assert.equal(res.status, 200);
  assert.deepEqual(res.body, {
    secret: { id: created.id, key: "STRIPE_KEY", value: "sk_live_abcdef123", version: 1, updatedAt: created.updatedAt },
  });
  assert.equal(res.headers.get("cache-control"), "no-store");
  const revealed = await auditEvents(owner, projectId, "secret.revealed");
  assert.deepEqual(
    revealed.map((e) => [e.actor, e.targetId, e.metadata]),
    [[owner.user!.id, created.id, { key: "STRIPE_KEY", environment: "production", version: 1 }]],
  );

  // Not found: unknown id, or the id of a secret in another environment of the project.
  for (const path of [`${envPath(projectId, "production")}/secrets/nope`, `${envPath(projectId, "staging")}/secrets/${created.id}`]) {
    const missing = await owner.json("GET", path);
    assert.equal(missing.status, 404);
    assert.deepEqual(missing.body, SECRET_NOT_FOUND);
  }
  assert.equal((await auditEvents(owner, projectId, "secret.revealed")).length, 1);
});

test("concurrent reads share a commit, yet each answers only with its event on disk; no event, no value", async (t) => {
  const { server, projectId, owner } = await startTeam(t);
  const created = await createSecret(owner, projectId, "production", "SHARED_KEY", "shared-commit-value");
  const path = `${envPath(projectId, "production")}/secrets/${created.id}`;
  const answers = await Promise.all(Array.from({ length: 40 }, () => owner.json("GET", path)));
  assert.deepEqual(new Set(answers.map((a) => a.status)), new Set([200]));
  assert.equal((await auditEvents(owner, projectId, "secret.revealed")).length, 40);
  const history = await owner.json("GET", `${path}/versions/1`);
  assert.equal(history.status, 200);
  assert.equal((await auditEvents(owner, projectId, "secret.version_revealed")).length, 1);

  // When the event cannot be written, the value is not given out.
  const undo = failWritesTo(server, "audit_events");
  const refused = await Promise.all([owner.json("GET", path), owner.json("GET", path), owner.json("GET", `${path}/versions/1`)]);
  for (const res of refused) {
    assert.equal(res.status, 500);
    assert.ok(!JSON.stringify(res.body).includes("shared-commit-value"), JSON.stringify(res.body));
  }
  undo();
  assert.equal((await auditEvents(owner, projectId, "secret.revealed")).length, 40);
  assert.equal((await owner.json("GET", path)).body.secret.value, "shared-commit-value");
  // Events written together still chain one after another.
  // The server's own environment: on the PostgreSQL pass its DATABASE_URL too (with the
  // data folder alone, verify used to check a new, empty SQLite file and pass vacuously).
  const verified = await runMain(["audit", "verify"], server.env);
  assert.equal(verified.code, 0, verified.stdout + verified.stderr);
  const [, count] = verified.stdout.match(/^Audit log intact: (\d+) events verified\./) ?? [];
  assert.ok(Number(count) >= 42, verified.stdout);
});

test("checks run in order before anything is read: membership 404, permission 403, environment 404/403", async (t) => {
  const { projectId, owner, member, viewer, outsider } = await startTeam(t, { environments: ["development", "staging"] });
  const dev = await createSecret(owner, projectId, "development", "DEV_ONLY", "dev-value-778");
  const stg = await createSecret(owner, projectId, "staging", "STG_ONLY", "stg-value-778");
  const auditBefore = (await auditEvents(owner, projectId)).length;

  const endpoints = (env: string, id: string) =>
    [
      ["GET", `${envPath(projectId, env)}/secrets`, undefined, "secrets:read"],
      ["POST", `${envPath(projectId, env)}/secrets`, { key: "NEW_KEY", value: "v" }, "secrets:create"],
      ["GET", `${envPath(projectId, env)}/secrets/${id}`, undefined, "secrets:read"],
      ["PATCH", `${envPath(projectId, env)}/secrets/${id}`, { value: "changed-value" }, "secrets:update"],
      ["DELETE", `${envPath(projectId, env)}/secrets/${id}`, undefined, "secrets:delete"],
      ["GET", `${envPath(projectId, env)}/secrets/${id}/versions`, undefined, "secrets:read"],
      ["GET", `${envPath(projectId, env)}/secrets/${id}/versions/1`, undefined, "secrets:read"],
      ["POST", `${envPath(projectId, env)}/secrets/${id}/versions/1/restore`, {}, "secrets:update"],
      ["GET", `${envPath(projectId, env)}/export`, undefined, "secrets:read"],
      ["POST", `${envPath(projectId, env)}/import`, { entries: [] }, "secrets:create"],
    ] as const;

  // A non-member gets 404 for everything, whatever the environment, even an invalid one.
  for (const env of ["development", "production", "bogus"]) {
    for (const [method, path, body] of endpoints(env, dev.id)) {
      const res = await outsider.json(method, path, body);
      assert.equal(res.status, 404, `${method} ${path}`);
      assert.deepEqual(res.body, NOT_FOUND, `${method} ${path}`);
    }
  }
  // A project id that does not exist looks the same.
  const ghost = await owner.json("GET", `${envPath("00000000-0000-0000-0000-000000000000", "development")}/secrets`);
  assert.deepEqual([ghost.status, ghost.body], [404, NOT_FOUND]);

  // The viewer: permission before environment, so writes are 403 even in an unknown environment.
  for (const env of ["development", "production", "bogus"]) {
    for (const [method, path, body, permission] of endpoints(env, dev.id)) {
      if (permission === "secrets:read") continue;
      const res = await viewer.json(method, path, body);
      assert.equal(res.status, 403, `${method} ${path}`);
      assert.deepEqual(res.body, FORBIDDEN);
    }
  }
  // Environment the project does not have, or no such slug: 404, for members and owners alike.
  for (const client of [owner, member, viewer]) {
    for (const env of ["production", "bogus", "DEVELOPMENT"]) {
      for (const [method, path, body, permission] of endpoints(env, dev.id)) {
        if (client === viewer && permission !== "secrets:read") continue;
        const res = await client.json(method, path, body);
        assert.equal(res.status, 404, `${method} ${path}`);
        assert.deepEqual(res.body, ENV_NOT_FOUND);
      }
    }
  }
  // An environment of the project that the member or viewer was not granted: 403.
  for (const client of [member, viewer]) {
    for (const [method, path, body, permission] of endpoints("staging", stg.id)) {
      if (client === viewer && permission !== "secrets:read") continue;
      const res = await client.json(method, path, body);
      assert.equal(res.status, 403, `${method} ${path}`);
      assert.deepEqual(res.body, { error: "You do not have access to the staging environment of this project." });
    }
  }
  // Nothing was read, revealed, exported or written along the way.
  assert.equal((await auditEvents(owner, projectId)).length, auditBefore);
  assert.equal((await secretCounts(owner, projectId)).secrets, 2);
  assert.equal((await secretCounts(owner, projectId)).versions, 2);

  // Granted environments work for each role according to its permissions.
  const viewerRead = await viewer.json("GET", `${envPath(projectId, "development")}/secrets/${dev.id}`);
  assert.equal(viewerRead.body.secret.value, "dev-value-778");
  const memberPatch = await member.json("PATCH", `${envPath(projectId, "development")}/secrets/${dev.id}`, { value: "dev-value-779" });
  assert.equal(memberPatch.status, 200);
});

test("signed out: 401; a bad CLI token: 401; a CLI token on a browser-only endpoint: 403", async (t) => {
  const { server, projectId, owner } = await startTeam(t);
  const secret = await createSecret(owner, projectId, "development", "TOKEN_TEST", "token-test-value");
  const base = envPath(projectId, "development");
  const anonymous = server.client();
  const res = await anonymous.json("GET", `${base}/secrets`);
  assert.deepEqual([res.status, res.body], [401, { error: "not signed in" }]);
  const bad = owner.withBearer(`svc_at_${"x".repeat(40)}`);
  const badRes = await bad.json("GET", `${base}/secrets`);
  assert.deepEqual(
    [badRes.status, badRes.body],
    [401, { error: "Your CLI session has expired or was revoked. Run the CLI login command." }],
  );

  const cli = await cliFor(server, owner);
  const browserOnly = [
    ["DELETE", `${base}/secrets/${secret.id}`, undefined],
    ["GET", `${base}/secrets/${secret.id}/versions`, undefined],
    ["GET", `${base}/secrets/${secret.id}/versions/1`, undefined],
    ["POST", `${base}/secrets/${secret.id}/versions/1/restore`, {}],
    ["POST", `${base}/import`, { entries: [] }],
  ] as const;
  for (const [method, path, body] of browserOnly) {
    const r = await cli.json(method, path, body);
    assert.equal(r.status, 403, `${method} ${path}`);
    assert.deepEqual(r.body, BROWSER_ONLY);
  }
  assert.equal((await secretCounts(owner, projectId)).secrets, 1);
});

test("the CLI can list, create, read, patch and export, and its events say via cli", async (t) => {
  const { server, projectId, owner } = await startTeam(t);
  const cli = await cliFor(server, owner);
  const base = envPath(projectId, "staging");
  const created = await cli.json("POST", `${base}/secrets`, { key: "FROM_CLI", value: "cli-value-0001" });
  assert.equal(created.status, 201);
  const id = created.body.secret.id;
  assert.equal((await cli.json("GET", `${base}/secrets`)).body.secrets.length, 1);
  assert.equal((await cli.json("GET", `${base}/secrets/${id}`)).body.secret.value, "cli-value-0001");
  const patched = await cli.json("PATCH", `${base}/secrets/${id}`, { value: "cli-value-0002", expectedVersion: 1 });
  assert.equal(patched.body.secret.version, 2);
  const exported = await cli.json("GET", `${base}/export`);
  assert.deepEqual(exported.body, { secrets: [{ key: "FROM_CLI", value: "cli-value-0002" }] });

  assert.deepEqual(
    (await auditEvents(owner, projectId, "secret")).map((e) => [e.action, e.metadata.via]),
    [
      ["secret.created", "cli"],
      ["secret.revealed", "cli"],
      ["secret.updated", "cli"],
      ["secrets.exported", "cli"],
    ],
  );
  // A browser read carries no via.
  await owner.json("GET", `${base}/secrets/${id}`);
  assert.equal((await auditEvents(owner, projectId, "secret.revealed")).at(-1)!.metadata.via, undefined);
});

test("PATCH rule 1: at least one of key and value, otherwise 400 Nothing to update.", async (t) => {
  const { projectId, owner } = await startTeam(t);
  const secret = await createSecret(owner, projectId, "development", "KEEP", "keep-value-01");
  const url = `${envPath(projectId, "development")}/secrets/${secret.id}`;
  for (const body of [{}, { expectedVersion: 1 }, { expectedVersion: 0 }, undefined]) {
    const res = await owner.json("PATCH", url, body);
    assert.deepEqual([res.status, res.body], [400, NOTHING], JSON.stringify(body));
  }
  // Invalid key or value, unknown fields, non-objects.
  for (const body of [
    { key: "1BAD" },
    { value: "" },
    { value: "x".repeat(10_001) },
    { key: "OK", extra: 1 },
    { value: null },
    [],
    "text",
  ]) {
    const res = await owner.json("PATCH", url, body);
    assert.deepEqual([res.status, res.body], [400, INVALID], JSON.stringify(body));
  }
  assert.equal((await secretCounts(owner, projectId)).versions, 1);
  assert.equal((await auditEvents(owner, projectId, "secret.updated")).length, 0);
});

test("PATCH rule 2: expectedVersion is a positive integer (400), and a stale one is a 409", async (t) => {
  const { projectId, owner } = await startTeam(t);
  const secret = await createSecret(owner, projectId, "development", "OPTIMISTIC", "optimistic-value-1");
  const url = `${envPath(projectId, "development")}/secrets/${secret.id}`;
  for (const expectedVersion of [0, -1, 1.5, "1", null, true, [1], 2 ** 60]) {
    const res = await owner.json("PATCH", url, { value: "optimistic-value-2", expectedVersion });
    assert.deepEqual([res.status, res.body], [400, BAD_EXPECTED], JSON.stringify(expectedVersion));
  }
  const ok = await owner.json("PATCH", url, { value: "optimistic-value-2", expectedVersion: 1 });
  assert.equal(ok.status, 200);
  assert.equal(ok.body.secret.version, 2);
  const stale = await owner.json("PATCH", url, { value: "optimistic-value-3", expectedVersion: 1 });
  assert.deepEqual([stale.status, stale.body], [409, STALE]);
  const staleRename = await owner.json("PATCH", url, { key: "RENAMED", expectedVersion: 3 });
  assert.deepEqual([staleRename.status, staleRename.body], [409, STALE]);
  const current = await owner.json("GET", url);
  assert.deepEqual(
    [current.body.secret.key, current.body.secret.value, current.body.secret.version],
    ["OPTIMISTIC", "optimistic-value-2", 2],
  );
  // Rule 3: without expectedVersion the write applies to the latest version.
  const latest = await owner.json("PATCH", url, { value: "optimistic-value-3" });
  assert.equal(latest.body.secret.version, 3);
  assert.equal((await secretCounts(owner, projectId)).versions, 3);
});

test("PATCH: a new value makes a new version; a rename does not; nothing changing returns the current metadata", async (t) => {
  const { server, projectId, owner } = await startTeam(t);
  const secret = await createSecret(owner, projectId, "production", "OLD_NAME", "value-version-1");
  const url = (id = secret.id) => `${envPath(projectId, "production")}/secrets/${id}`;

  server.clock.advance(1000);
  const renamed = await owner.json("PATCH", url(), { key: "NEW_NAME" });
  assert.equal(renamed.status, 200);
  assert.deepEqual(Object.keys(renamed.body.secret).sort(), ["createdAt", "id", "key", "updatedAt", "version"]);
  assert.equal(renamed.body.secret.key, "NEW_NAME");
  assert.equal(renamed.body.secret.version, 1);
  assert.ok(renamed.body.secret.updatedAt > secret.updatedAt);
  assert.equal((await secretCounts(owner, projectId)).versions, 1);
  assert.equal((await owner.json("GET", url())).body.secret.value, "value-version-1");

  // Same key and same value: nothing changes, no version, no event.
  server.clock.advance(1000);
  const same = await owner.json("PATCH", url(), { key: "NEW_NAME", value: "value-version-1", expectedVersion: 1 });
  assert.equal(same.status, 200);
  assert.deepEqual(same.body.secret, renamed.body.secret);

  server.clock.advance(1000);
  const both = await owner.json("PATCH", url(), { key: "NEWER_NAME", value: "value-version-2" });
  assert.equal(both.body.secret.version, 2);
  assert.equal(both.body.secret.key, "NEWER_NAME");
  const valueOnly = await owner.json("PATCH", url(), { value: "value-version-3" });
  assert.equal(valueOnly.body.secret.version, 3);
  assert.equal(valueOnly.body.secret.createdAt, secret.createdAt);

  const versions = (await owner.json("GET", `${url()}/versions`)).body;
  assert.deepEqual(
    versions.versions.map((v: any) => [v.versionNumber, v.changeType, v.key]),
    [
      [3, "UPDATED", "NEWER_NAME"],
      [2, "UPDATED", "NEWER_NAME"],
      [1, "CREATED", "OLD_NAME"],
    ],
  );

  assert.deepEqual(
    (await auditEvents(owner, projectId, "secret.updated")).map((e) => e.metadata),
    [
      { key: "NEW_NAME", environment: "production", previousKey: "OLD_NAME", keyChanged: true, valueChanged: false, version: 1 },
      { key: "NEWER_NAME", environment: "production", previousKey: "NEW_NAME", keyChanged: true, valueChanged: true, version: 2 },
      { key: "NEWER_NAME", environment: "production", keyChanged: false, valueChanged: true, version: 3 },
    ],
  );

  // Rule 4: a rename onto another key of the environment is a 409; another environment's key is fine.
  const other = await createSecret(owner, projectId, "production", "TAKEN", "taken-value-1");
  await createSecret(owner, projectId, "staging", "FREE_ELSEWHERE", "free-value-1");
  const clash = await owner.json("PATCH", url(), { key: "TAKEN" });
  assert.deepEqual([clash.status, clash.body], [409, KEY_TAKEN]);
  const clashWithValue = await owner.json("PATCH", url(), { key: "TAKEN", value: "value-version-4" });
  assert.deepEqual([clashWithValue.status, clashWithValue.body], [409, KEY_TAKEN]);
  assert.equal((await owner.json("PATCH", url(), { key: "FREE_ELSEWHERE" })).status, 200);
  assert.equal((await owner.json("GET", url(other.id))).body.secret.key, "TAKEN");
  assert.equal(await versionCount(owner, projectId, "production", secret.id), 3);

  const missing = await owner.json("PATCH", url("nope"), { value: "x1234567" });
  assert.deepEqual([missing.status, missing.body], [404, SECRET_NOT_FOUND]);
});

test("20 parallel PATCHes with the same expectedVersion: exactly one winner, 19 conflicts, no lost update", async (t) => {
  const { projectId, owner } = await startTeam(t);
  const secret = await createSecret(owner, projectId, "production", "RACE", "race-start-0");
  const url = `${envPath(projectId, "production")}/secrets/${secret.id}`;
  const values = Array.from({ length: 20 }, (_, i) => `race-value-${String(i).padStart(2, "0")}`);
  const results = await Promise.all(values.map((value) => owner.json("PATCH", url, { value, expectedVersion: 1 })));
  const winners = results.filter((r) => r.status === 200);
  assert.equal(winners.length, 1);
  assert.equal(winners[0]!.body.secret.version, 2);
  for (const loser of results.filter((r) => r.status !== 200)) assert.deepEqual([loser.status, loser.body], [409, STALE]);
  const winningValue = values[results.indexOf(winners[0]!)];
  assert.equal((await owner.json("GET", url)).body.secret.value, winningValue);
  assert.equal(await versionCount(owner, projectId, "production", secret.id), 2);

  // Without expectedVersion every write lands, each on its own contiguous version.
  const unguarded = await Promise.all(values.map((value) => owner.json("PATCH", url, { value: `${value}-b` })));
  assert.ok(unguarded.every((r) => r.status === 200));
  const versionsSeen = unguarded.map((r) => r.body.secret.version).sort((a: number, b: number) => a - b);
  assert.deepEqual(
    versionsSeen,
    Array.from({ length: 20 }, (_, i) => i + 3),
  );
  const history = (await owner.json("GET", `${url}/versions`)).body;
  assert.equal(history.currentVersion, 22);
  assert.deepEqual(
    history.versions.map((v: any) => v.versionNumber),
    Array.from({ length: 22 }, (_, i) => 22 - i),
  );
  // Every value written is in the history: none was lost.
  const historical = await Promise.all(
    history.versions.map((v: any) => owner.json("GET", `${url}/versions/${v.versionNumber}`).then((r) => r.body.version.value)),
  );
  assert.deepEqual(new Set(historical.slice(0, 20)), new Set(values.map((v) => `${v}-b`)));
  const last = unguarded.find((r) => r.body.secret.version === 22)!;
  assert.equal((await owner.json("GET", url)).body.secret.value, `${values[unguarded.indexOf(last)]}-b`);
});

test("delete removes the secret and all its versions, browser only, audited", async (t) => {
  const { server, projectId, owner, member } = await startTeam(t);
  const secret = await createSecret(owner, projectId, "development", "DOOMED", "doomed-value-1");
  await owner.json("PATCH", `${envPath(projectId, "development")}/secrets/${secret.id}`, { value: "doomed-value-2" });
  const keep = await createSecret(owner, projectId, "development", "KEEPER", "keeper-value-1");
  const url = `${envPath(projectId, "development")}/secrets/${secret.id}`;
  const res = await member.json("DELETE", url);
  assert.deepEqual([res.status, res.body], [200, { ok: true }]);
  // The API answers 404 for a deleted secret: only the storage shows its history went too.
  assert.equal(rowCount(server, "secret_versions", { secret_id: secret.id }), 0);
  assert.equal(rowCount(server, "secrets", { id: secret.id }), 0);
  assert.equal(await versionCount(owner, projectId, "development", keep.id), 1);
  const again = await member.json("DELETE", url);
  assert.deepEqual([again.status, again.body], [404, SECRET_NOT_FOUND]);
  assert.deepEqual([(await owner.json("GET", url)).status, (await owner.json("GET", `${url}/versions`)).status], [404, 404]);
  assert.deepEqual(
    (await auditEvents(owner, projectId, "secret.deleted")).map((e) => [e.actor, e.targetId, e.metadata]),
    [[member.user!.id, secret.id, { key: "DOOMED", environment: "development", version: 2 }]],
  );
  // The key is free again.
  await createSecret(owner, projectId, "development", "DOOMED", "reborn-value-1");
});

test("version history: newest first, who changed it (isYou, isMember), restoredFromVersion only on rollbacks", async (t) => {
  const { server, projectId, owner, member } = await startTeam(t);
  const secret = await createSecret(owner, projectId, "development", "HISTORY", "history-value-1");
  const url = `${envPath(projectId, "development")}/secrets/${secret.id}`;
  server.clock.advance(1000);
  await member.json("PATCH", url, { value: "history-value-2" });
  server.clock.advance(1000);
  const restored = await owner.json("POST", `${url}/versions/1/restore`, {});
  assert.equal(restored.status, 200);

  const res = await owner.json("GET", `${url}/versions`);
  assert.equal(res.status, 200);
  assert.equal(res.body.currentVersion, 3);
  const [v3, v2, v1] = res.body.versions;
  assert.deepEqual(Object.keys(v3).sort(), [
    "changeType",
    "changedBy",
    "createdAt",
    "isCurrent",
    "key",
    "restoredFromVersion",
    "versionNumber",
  ]);
  assert.deepEqual(Object.keys(v2).sort(), ["changeType", "changedBy", "createdAt", "isCurrent", "key", "versionNumber"]);
  assert.deepEqual(
    { ...v3, createdAt: undefined },
    {
      versionNumber: 3,
      changeType: "ROLLED_BACK",
      key: "HISTORY",
      isCurrent: true,
      restoredFromVersion: 1,
      createdAt: undefined,
      changedBy: { userId: owner.user!.id, email: "olivia@example.test", isYou: true, isMember: true },
    },
  );
  assert.equal(v2.changeType, "UPDATED");
  assert.equal(v2.isCurrent, false);
  assert.deepEqual(v2.changedBy, { userId: member.user!.id, email: "mia@example.test", isYou: false, isMember: true });
  assert.equal(v1.changeType, "CREATED");
  assert.match(v1.createdAt, ISO_MS);
  assert.ok(v3.createdAt > v2.createdAt && v2.createdAt > v1.createdAt);
  assert.ok(!JSON.stringify(res.body).includes("history-value"), "metadata only");

  // Seen by the member: isYou flips. After the member is removed, isMember is false.
  const asMember = await member.json("GET", `${url}/versions`);
  assert.equal(asMember.body.versions[1].changedBy.isYou, true);
  const removed = await owner.json("DELETE", `/api/projects/${projectId}/members/${member.user!.id}`);
  assert.equal(removed.status, 200);
  const after = await owner.json("GET", `${url}/versions`);
  assert.deepEqual(after.body.versions[1].changedBy, { userId: member.user!.id, email: "mia@example.test", isYou: false, isMember: false });

  // A BASELINE record (written by an import from elsewhere) has changedBy null.
  markBaseline(server, secret.id, 1);
  const baseline = await owner.json("GET", `${url}/versions`);
  assert.deepEqual([baseline.body.versions[2].changeType, baseline.body.versions[2].changedBy], ["BASELINE", null]);
});

test("a NUL anywhere in the address is a 400 before anything is read, on either store", async (t) => {
  const { projectId, owner } = await startTeam(t);
  const secret = await createSecret(owner, projectId, "staging", "PLAIN", "plain-value");
  for (const address of [
    "/api/projects/%00",
    `/api/projects/${projectId}%00/environments/staging/secrets`,
    `${envPath(projectId, "staging")}/secrets/${secret.id}%00`,
    `/api/projects/${projectId}/audit?actor=%00`,
  ]) {
    const res = await owner.json("GET", address);
    assert.deepEqual([res.status, res.body], [400, { error: "The address could not be understood." }], address);
  }
  assert.equal((await auditEvents(owner, projectId, "secret.revealed")).length, 0);
});

test("one historical value: audited as secret.version_revealed; unknown versions are 404", async (t) => {
  const { projectId, owner } = await startTeam(t);
  const secret = await createSecret(owner, projectId, "staging", "OLD_VALUES", "old-values-1");
  const url = `${envPath(projectId, "staging")}/secrets/${secret.id}`;
  await owner.json("PATCH", url, { value: "old-values-2" });
  const res = await owner.json("GET", `${url}/versions/1`);
  assert.equal(res.status, 200);
  assert.deepEqual(res.body, { version: { versionNumber: 1, value: "old-values-1" } });
  assert.equal(res.headers.get("cache-control"), "no-store");
  assert.deepEqual((await owner.json("GET", `${url}/versions/2`)).body, { version: { versionNumber: 2, value: "old-values-2" } });
  assert.deepEqual(
    (await auditEvents(owner, projectId, "secret.version_revealed")).map((e) => [e.targetId, e.metadata]),
    [
      [secret.id, { key: "OLD_VALUES", environment: "staging", versionNumber: 1 }],
      [secret.id, { key: "OLD_VALUES", environment: "staging", versionNumber: 2 }],
    ],
  );
  for (const n of ["3", "0", "-1", "1.5", "abc", "01", "99999999999999999999", "3000000000", "999999999999999"]) {
    const missing = await owner.json("GET", `${url}/versions/${n}`);
    assert.deepEqual([missing.status, missing.body], [404, VERSION_NOT_FOUND], n);
  }
  const otherSecret = await owner.json("GET", `${envPath(projectId, "staging")}/secrets/nope/versions/1`);
  assert.deepEqual([otherSecret.status, otherSecret.body], [404, SECRET_NOT_FOUND]);
  assert.equal((await auditEvents(owner, projectId, "secret.version_revealed")).length, 2);
});

test("restore writes the old value as a new ROLLED_BACK version, with the spec's 400, 404 and 409", async (t) => {
  const { server, projectId, owner } = await startTeam(t);
  const secret = await createSecret(owner, projectId, "production", "ROLLBACK", "rollback-a");
  const url = `${envPath(projectId, "production")}/secrets/${secret.id}`;
  await owner.json("PATCH", url, { value: "rollback-b" });
  await owner.json("PATCH", url, { value: "rollback-c" });

  // The current version, or any version with the current value: 400.
  const current = await owner.json("POST", `${url}/versions/3/restore`, {});
  assert.deepEqual([current.status, current.body], [400, ALREADY_CURRENT]);
  await owner.json("PATCH", url, { value: "rollback-a" }); // v4 has v1's value
  const sameValue = await owner.json("POST", `${url}/versions/1/restore`, {});
  assert.deepEqual([sameValue.status, sameValue.body], [400, ALREADY_CURRENT]);

  for (const body of [{ expectedVersion: 0 }, { expectedVersion: "4" }, { expectedVersion: 1.5 }]) {
    const res = await owner.json("POST", `${url}/versions/2/restore`, body);
    assert.deepEqual([res.status, res.body], [400, BAD_EXPECTED], JSON.stringify(body));
  }
  for (const body of [{ other: 1 }, [], "text"]) {
    const res = await owner.json("POST", `${url}/versions/2/restore`, body);
    assert.deepEqual([res.status, res.body], [400, { error: "invalid request" }], JSON.stringify(body));
  }
  const stale = await owner.json("POST", `${url}/versions/2/restore`, { expectedVersion: 3 });
  assert.deepEqual([stale.status, stale.body], [409, STALE]);
  const unknown = await owner.json("POST", `${url}/versions/9/restore`, {});
  assert.deepEqual([unknown.status, unknown.body], [404, VERSION_NOT_FOUND]);
  assert.equal((await secretCounts(owner, projectId)).versions, 4);

  server.clock.advance(1000);
  const restored = await owner.json("POST", `${url}/versions/2/restore`, { expectedVersion: 4 });
  assert.equal(restored.status, 200);
  assert.deepEqual(Object.keys(restored.body.secret).sort(), ["createdAt", "id", "key", "updatedAt", "version"]);
  assert.equal(restored.body.secret.version, 5);
  assert.equal((await owner.json("GET", url)).body.secret.value, "rollback-b");
  // A body is optional.
  const noBody = await owner.request("POST", `${url}/versions/3/restore`);
  assert.equal(noBody.status, 200);
  assert.equal(((await noBody.json()) as any).secret.version, 6);
  const history = (await owner.json("GET", `${url}/versions`)).body.versions;
  assert.deepEqual(
    history.slice(0, 2).map((v: any) => [v.versionNumber, v.changeType, v.restoredFromVersion]),
    [
      [6, "ROLLED_BACK", 3],
      [5, "ROLLED_BACK", 2],
    ],
  );
  assert.deepEqual(
    (await auditEvents(owner, projectId, "secret.rolled_back")).map((e) => e.metadata),
    [
      { key: "ROLLBACK", environment: "production", restoredFromVersion: 2, version: 5 },
      { key: "ROLLBACK", environment: "production", restoredFromVersion: 3, version: 6 },
    ],
  );
});

test("export: JSON sorted by key, or a .env attachment; audited with the key count", async (t) => {
  const { projectId, owner } = await startTeam(t);
  const base = envPath(projectId, "staging");
  await createSecret(owner, projectId, "staging", "ZULU_KEY", "zulu-value-1");
  await createSecret(owner, projectId, "staging", "ALPHA_NOTE", 'it\'s a "quoted" value');
  await createSecret(owner, projectId, "staging", "MIKE_LINES", "line one\nline two");
  await createSecret(owner, projectId, "staging", "B_LOWER", "b-lower-value");
  await createSecret(owner, projectId, "production", "ELSE_WHERE", "elsewhere-value");

  const json = await owner.json("GET", `${base}/export`);
  assert.equal(json.status, 200);
  assert.deepEqual(json.body, {
    secrets: [
      { key: "ALPHA_NOTE", value: 'it\'s a "quoted" value' },
      { key: "B_LOWER", value: "b-lower-value" },
      { key: "MIKE_LINES", value: "line one\nline two" },
      { key: "ZULU_KEY", value: "zulu-value-1" },
    ],
  });
  assert.equal(json.headers.get("cache-control"), "no-store");
  assert.deepEqual((await owner.json("GET", `${base}/export?format=json`)).body, json.body);

  const res = await owner.get(`${base}/export?format=dotenv`);
  assert.equal(res.status, 200);
  assert.equal(res.headers.get("content-type"), "text/plain; charset=utf-8");
  assert.equal(res.headers.get("content-disposition"), 'attachment; filename=".env.staging"');
  assert.equal(
    await res.text(),
    [
      ": <<'END_OF_DOTENV_ONLY_LINES'",
      'ALPHA_NOTE=`it\'s a "quoted" value`',
      "END_OF_DOTENV_ONLY_LINES",
      "B_LOWER='b-lower-value'",
      "MIKE_LINES='line one",
      "line two'",
      "ZULU_KEY='zulu-value-1'",
      "",
    ].join("\n"),
  );

  assert.equal(res.headers.get("x-secrets-left-out"), "0");

  const shell = await owner.get(`${base}/export?format=shell`);
  assert.equal(shell.headers.get("content-disposition"), 'attachment; filename="staging.sh"');
  assert.equal(
    await shell.text(),
    [
      "export ALPHA_NOTE='it'\\''s a \"quoted\" value'",
      "export B_LOWER='b-lower-value'",
      "export MIKE_LINES='line one",
      "line two'",
      "export ZULU_KEY='zulu-value-1'",
      "",
    ].join("\n"),
  );
  const yaml = await owner.get(`${base}/export?format=yaml`);
  assert.equal(
    await yaml.text(),
    [
      '"ALPHA_NOTE": "it\'s a \\"quoted\\" value"',
      '"B_LOWER": "b-lower-value"',
      '"MIKE_LINES": "line one\\nline two"',
      '"ZULU_KEY": "zulu-value-1"',
      "",
    ].join("\n"),
  );
  const docker = await owner.json("GET", `${base}/export?format=docker`);
  assert.deepEqual(
    [docker.status, docker.body],
    [400, { error: "These secrets cannot be written in Docker's env-file format: MIKE_LINES. Use format=json or format=shell." }],
  );

  const bad = await owner.json("GET", `${base}/export?format=xml`);
  assert.deepEqual(
    [bad.status, bad.body],
    [400, { error: "Unknown export format: use format=dotenv, shell, docker or yaml, or leave it out for JSON." }],
  );

  assert.deepEqual(
    (await auditEvents(owner, projectId, "secrets.exported")).map((e) => [e.actor, e.targetType, e.metadata]),
    [
      [owner.user!.id, "environment", { environment: "staging", count: 4, format: "json" }],
      [owner.user!.id, "environment", { environment: "staging", count: 4, format: "json" }],
      [owner.user!.id, "environment", { environment: "staging", count: 4, format: "dotenv" }],
      [owner.user!.id, "environment", { environment: "staging", count: 4, format: "shell" }],
      [owner.user!.id, "environment", { environment: "staging", count: 4, format: "yaml" }],
      // Refused after the values were read: still an export, audited.
      [owner.user!.id, "environment", { environment: "staging", count: 4, format: "docker" }],
    ],
  );
  const empty = await owner.json("GET", `${envPath(projectId, "development")}/export`);
  assert.deepEqual(empty.body, { secrets: [] });
});

test("export is limited to 30 a minute per user (429)", async (t) => {
  const { projectId, owner, admin } = await startTeam(t);
  const url = `${envPath(projectId, "development")}/export`;
  for (let i = 0; i < 30; i++) assert.equal((await owner.json("GET", url)).status, 200, `request ${i + 1}`);
  const limited = await owner.json("GET", url);
  assert.equal(limited.status, 429);
  assert.match(limited.body.error, /^Too many requests\./);
  // Per user: someone else is not affected.
  assert.equal((await admin.json("GET", url)).status, 200);
});

test("a ciphertext copied into another row does not open: 500 for that read and for export, nothing partial", async (t) => {
  const { server, projectId, owner } = await startTeam(t);
  const base = envPath(projectId, "production");
  const victim = await createSecret(owner, projectId, "production", "VICTIM", "victim-value-0001");
  const attacker = await createSecret(owner, projectId, "production", "ATTACKER", "attacker-value-0001");
  const staging = await createSecret(owner, projectId, "staging", "STAGING_SAFE", "staging-value-0001");
  await owner.json("PATCH", `${base}/secrets/${victim.id}`, { value: "victim-value-0002" });

  // Someone with write access to the database file copies the victim's sealed value into the attacker's row.
  setStoredCiphertext(server, attacker.id, 1, storedCiphertext(server, victim.id, 2));
  const auditBefore = (await auditEvents(owner, projectId)).length;

  const read = await owner.json("GET", `${base}/secrets/${attacker.id}`);
  assert.deepEqual([read.status, read.body], [500, NOT_DECRYPTED_ONE]);
  const version = await owner.json("GET", `${base}/secrets/${attacker.id}/versions/1`);
  assert.deepEqual([version.status, version.body], [500, NOT_DECRYPTED_ONE]);
  const exported = await owner.json("GET", `${base}/export`);
  assert.deepEqual([exported.status, exported.body], [500, NOT_DECRYPTED_SOME]);
  const dotenv = await owner.json("GET", `${base}/export?format=dotenv`);
  assert.deepEqual([dotenv.status, dotenv.body], [500, NOT_DECRYPTED_SOME]);
  // Nothing was revealed, so nothing was audited as revealed or exported.
  assert.equal((await auditEvents(owner, projectId)).length, auditBefore);

  // The rest still reads; the broken secret can be repaired by writing a new value.
  assert.equal((await owner.json("GET", `${base}/secrets/${victim.id}`)).body.secret.value, "victim-value-0002");
  assert.equal((await owner.json("GET", `${envPath(projectId, "staging")}/secrets/${staging.id}`)).body.secret.value, "staging-value-0001");
  const repaired = await owner.json("PATCH", `${base}/secrets/${attacker.id}`, { value: "attacker-value-0002" });
  assert.equal(repaired.body.secret.version, 2);
  assert.equal((await owner.json("GET", `${base}/export`)).status, 200);

  // A single flipped byte, or a row moved to another version number, fails the same way.
  const sealed = storedCiphertext(server, victim.id, 2);
  sealed[20] = sealed[20]! ^ 1;
  setStoredCiphertext(server, victim.id, 2, sealed);
  assert.deepEqual((await owner.json("GET", `${base}/secrets/${victim.id}`)).body, NOT_DECRYPTED_ONE);
  // Restoring the current version is the 400 it always is: nothing needs decrypting for it.
  const restoreCurrent = await owner.json("POST", `${base}/secrets/${victim.id}/versions/2/restore`, {});
  assert.deepEqual([restoreCurrent.status, restoreCurrent.body], [400, { error: "This version is already the current value." }]);
  // The export just made is remembered by the sealed bytes it opened too, not by versions
  // alone: the same rows with one byte flipped decrypt again, and fail.
  assert.deepEqual((await owner.json("GET", `${base}/export`)).body, NOT_DECRYPTED_SOME);
  assert.equal((await owner.json("GET", `${base}/secrets/${victim.id}/versions/1`)).status, 200);
  // A logged line names the secret but never a value.
  assert.ok(server.logs.some((line) => line.includes("did not decrypt") && line.includes(attacker.id)));
});

test("the project data key is itself bound to its project: a wrapped key copied to another project does not open", async (t) => {
  const { server, projectId, owner } = await startTeam(t);
  const other = await owner.createProject({ name: "other", environments: ["production"] });
  const secret = await createSecret(owner, projectId, "production", "BOUND", "bound-value-0001");
  await server.stop();
  copyWrappedKey(server.dataDir, other.id, projectId);
  const restarted = await server.restart();
  t.after(() => restarted.stop());
  const client = await restarted.signIn("olivia@example.test");
  const res = await client.json("GET", `${envPath(projectId, "production")}/secrets/${secret.id}`);
  assert.deepEqual([res.status, res.body], [500, NOT_DECRYPTED_ONE]);
  // An export loads the project's keys once, before opening any value: the same 500, nothing partial.
  const exported = await client.json("GET", `${envPath(projectId, "production")}/export?format=dotenv`);
  assert.deepEqual([exported.status, exported.body], [500, NOT_DECRYPTED_SOME]);
});
