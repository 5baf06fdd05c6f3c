// The import rules over HTTP: validation of the whole request first, all or nothing,
// overwrite semantics, size limits and the rate limit.
import assert from "node:assert/strict";
import crypto from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { test } from "node:test";
import { DATABASE_FILE } from "../src/core/db.ts";
import { auditEvents, onPostgres } from "./helpers.ts";
import { cliFor, createSecret, envPath, secretCount, secretCounts, startTeam } from "./secrets-helpers.ts";
import { clearDigests, storedDigest } from "./storage.ts";

const INVALID = { error: "invalid request" };
const TOO_LARGE = { error: "The import is too large." };

test("import creates, updates, leaves unchanged and skips, reporting in request order", async (t) => {
  const { projectId, owner, member } = await startTeam(t);
  const base = envPath(projectId, "development");
  const same = await createSecret(owner, projectId, "development", "SAME", "same-value-001");
  const changed = await createSecret(owner, projectId, "development", "CHANGED", "changed-value-001");
  const kept = await createSecret(owner, projectId, "development", "KEPT", "kept-value-001");
  await createSecret(owner, projectId, "staging", "NEW_ONE", "staging-copy-001");

  const res = await member.json("POST", `${base}/import`, {
    entries: [
      { key: "NEW_ONE", value: "new-one-value-001", overwrite: false },
      { key: "KEPT", value: "kept-value-002", overwrite: false },
      { key: "CHANGED", value: "changed-value-002", overwrite: true },
      { key: "SAME", value: "same-value-001", overwrite: true },
      { key: "NEW_TWO", value: "new-two-value-001", overwrite: true },
      { key: "KEPT_TOO", value: "kept-too-value-001" },
    ],
  });
  assert.equal(res.status, 200);
  assert.deepEqual(res.body, {
    summary: { created: 3, updated: 1, unchanged: 1, skipped: 1, failed: 0 },
    results: [
      { key: "NEW_ONE", status: "created" },
      { key: "KEPT", status: "skipped" },
      { key: "CHANGED", status: "updated" },
      { key: "SAME", status: "unchanged" },
      { key: "NEW_TWO", status: "created" },
      { key: "KEPT_TOO", status: "created" },
    ],
  });

  const exported = (await owner.json("GET", `${base}/export`)).body.secrets;
  assert.deepEqual(exported, [
    { key: "CHANGED", value: "changed-value-002" },
    { key: "KEPT", value: "kept-value-001" },
    { key: "KEPT_TOO", value: "kept-too-value-001" },
    { key: "NEW_ONE", value: "new-one-value-001" },
    { key: "NEW_TWO", value: "new-two-value-001" },
    { key: "SAME", value: "same-value-001" },
  ]);
  // Versions: an update adds one, unchanged and skipped do not.
  const listed = (await owner.json("GET", `${base}/secrets`)).body.secrets as { id: string; version: number }[];
  const versionOf = (id: string) => listed.find((secret) => secret.id === id)?.version;
  assert.deepEqual([versionOf(changed.id), versionOf(same.id), versionOf(kept.id)], [2, 1, 1]);
  const history = (await owner.json("GET", `${base}/secrets/${changed.id}/versions`)).body.versions;
  assert.deepEqual(
    history.map((v: any) => [v.versionNumber, v.changeType, v.changedBy.userId]),
    [
      [2, "UPDATED", member.user!.id],
      [1, "CREATED", owner.user!.id],
    ],
  );
  // The staging secret of the same key is untouched.
  assert.deepEqual((await owner.json("GET", `${envPath(projectId, "staging")}/export`)).body.secrets, [
    { key: "NEW_ONE", value: "staging-copy-001" },
  ]);

  assert.deepEqual(
    (await auditEvents(owner, projectId, "secrets.imported")).map((e) => [e.actor, e.targetType, e.metadata]),
    [[member.user!.id, "environment", { environment: "development", created: 3, updated: 1, unchanged: 1, skipped: 1, failed: 0 }]],
  );

  // Importing the same entries again changes nothing.
  const again = await member.json("POST", `${base}/import`, {
    entries: [
      { key: "CHANGED", value: "changed-value-002", overwrite: true },
      { key: "NEW_ONE", value: "something-else-01", overwrite: false },
    ],
  });
  assert.deepEqual(again.body.summary, { created: 0, updated: 0, unchanged: 1, skipped: 1, failed: 0 });
  // An empty import is valid and does nothing.
  const empty = await member.json("POST", `${base}/import`, { entries: [] });
  assert.deepEqual(empty.body, { summary: { created: 0, updated: 0, unchanged: 0, skipped: 0, failed: 0 }, results: [] });
});

test("import compares values by the digest stored beside each version; versions without one are compared by value and get one", async (t) => {
  const { server, projectId, owner } = await startTeam(t);
  const base = envPath(projectId, "development");
  const kept = await createSecret(owner, projectId, "development", "KEPT", "kept-value-001");
  const old = await createSecret(owner, projectId, "development", "OLD", "old-value-001");
  // A keyed digest, not the value or a plain hash of it.
  const keptDigest = storedDigest(server, kept.id, 1);
  assert.match(keptDigest ?? "", /^[A-Za-z0-9_-]{43}$/);
  // Members read digests (/secrets/compare): a plain hash of a guessable value could be tried offline.
  for (const algorithm of ["sha256", "sha512-256", "sha3-256"]) {
    for (const encoding of ["base64url", "hex"] as const) {
      const plain = crypto.createHash(algorithm).update("kept-value-001").digest(encoding);
      assert.ok(!plain.startsWith(keptDigest!.slice(0, 20)) && !keptDigest!.startsWith(plain.slice(0, 20)), `not a plain ${algorithm}`);
    }
  }
  // Keyed per project (compare matches values across its environments): another project's differs.
  const other = await owner.createProject({ name: "other", environments: ["development"] });
  const elsewhere = await createSecret(owner, other.id, "development", "KEPT", "kept-value-001");
  assert.match(storedDigest(server, elsewhere.id, 1) ?? "", /^[A-Za-z0-9_-]{43}$/);
  assert.notEqual(storedDigest(server, elsewhere.id, 1), keptDigest);
  // As a version written before digests existed.
  clearDigests(server, old.id);

  const same = await owner.json("POST", `${base}/import`, {
    entries: [
      { key: "KEPT", value: "kept-value-001", overwrite: true },
      { key: "OLD", value: "old-value-001", overwrite: true },
    ],
  });
  assert.deepEqual(same.body.summary, { created: 0, updated: 0, unchanged: 2, skipped: 0, failed: 0 });
  assert.match(storedDigest(server, old.id, 1) ?? "", /^[A-Za-z0-9_-]{43}$/);

  const changed = await owner.json("POST", `${base}/import`, {
    entries: [
      { key: "KEPT", value: "kept-value-002", overwrite: true },
      { key: "OLD", value: "old-value-002", overwrite: true },
    ],
  });
  assert.deepEqual(changed.body.summary, { created: 0, updated: 2, unchanged: 0, skipped: 0, failed: 0 });
  assert.notEqual(storedDigest(server, kept.id, 2), keptDigest);
  const exported = (await owner.json("GET", `${base}/export`)).body.secrets;
  assert.deepEqual(exported, [
    { key: "KEPT", value: "kept-value-002" },
    { key: "OLD", value: "old-value-002" },
  ]);
});

test("import validates the whole request first: one invalid 500th entry and nothing is written", async (t) => {
  const { projectId, owner, admin, member } = await startTeam(t);
  const base = envPath(projectId, "development");
  const existing = await createSecret(owner, projectId, "development", "EXISTING", "existing-value-001");
  // Import is limited to 10 a minute per user: spread the attempts over three users.
  const importers = [owner, admin, member];
  let turn = 0;
  const importAs = (body: unknown) => importers[turn++ % importers.length]!.json("POST", `${base}/import`, body);
  const auditBefore = (await auditEvents(owner, projectId)).length;
  const valid = Array.from({ length: 499 }, (_, i) => ({ key: `KEY_${i}`, value: `imported-value-${i}`, overwrite: true }));
  valid[0] = { key: "EXISTING", value: "existing-value-002", overwrite: true };

  const invalidEntries: unknown[] = [
    { key: "1_STARTS_WITH_DIGIT", value: "v", overwrite: true },
    { key: "BAD-DASH", value: "v", overwrite: true },
    { key: "K".repeat(129), value: "v", overwrite: true },
    { key: "EMPTY_VALUE", value: "", overwrite: true },
    { key: "TOO_LONG", value: "x".repeat(10_001), overwrite: true },
    { key: "NOT_BOOL", value: "v", overwrite: "yes" },
    { key: "EXTRA", value: "v", overwrite: true, note: "x" },
    { key: "NUMBER", value: 5, overwrite: true },
    { key: "KEY_1", value: "duplicate key in the same request", overwrite: true },
    // Shaped like one of our tokens: refused like at create.
    { key: `svc_rt_${"I".repeat(24)}`, value: "v", overwrite: true },
    null,
    "KEY=value",
  ];
  for (const last of invalidEntries) {
    const res = await importAs({ entries: [...valid, last] });
    assert.equal(res.status, 400, JSON.stringify(last)?.slice(0, 80));
    assert.deepEqual(res.body, INVALID);
  }
  for (const body of [{}, { entries: "x" }, { entries: {} }, { entries: [], extra: 1 }, [], "text", null]) {
    const res = await importAs(body);
    assert.deepEqual([res.status, res.body], [400, INVALID], JSON.stringify(body));
  }
  assert.deepEqual(await secretCounts(owner, projectId), { secrets: 1, versions: 1 });
  assert.equal((await auditEvents(owner, projectId)).length, auditBefore);
  assert.equal((await owner.json("GET", `${base}/secrets/${existing.id}`)).body.secret.value, "existing-value-001");

  // The same 500 entries, all valid, go in as one.
  const res = await importAs({ entries: [...valid, { key: "LAST_ONE", value: "last-value-001", overwrite: false }] });
  assert.equal(res.status, 200);
  assert.deepEqual(res.body.summary, { created: 499, updated: 1, unchanged: 0, skipped: 0, failed: 0 });
  assert.equal(res.body.results.length, 500);
  assert.equal(await secretCount(owner, projectId), 500);
});

test("import limits: more than 500 entries or 2,000,000 bytes is 413 The import is too large.", async (t) => {
  const { server, projectId, owner } = await startTeam(t);
  const url = `${envPath(projectId, "development")}/import`;
  const entries = (n: number, size = 5) =>
    Array.from({ length: n }, (_, i) => ({ key: `K${i}`, value: "v".repeat(size), overwrite: false }));

  const tooMany = await owner.json("POST", url, { entries: entries(501) });
  assert.deepEqual([tooMany.status, tooMany.body], [413, TOO_LARGE]);
  // Too many wins over invalid entries: it is checked first.
  const tooManyInvalid = await owner.json("POST", url, { entries: [...entries(500), { key: "1" }] });
  assert.deepEqual([tooManyInvalid.status, tooManyInvalid.body], [413, TOO_LARGE]);

  // Exactly 2,000,000 bytes is allowed (and here invalid, because values are too long); one more byte is too large.
  const body = (bytes: number) => {
    const base = JSON.stringify({ entries: [{ key: "BIG", value: "", overwrite: false }] });
    return base.replace('"value":""', `"value":"${"x".repeat(bytes - base.length)}"`);
  };
  assert.equal(Buffer.byteLength(body(2_000_000)), 2_000_000);
  const atLimit = await owner.request("POST", url, body(2_000_000), { "content-type": "application/json" });
  assert.deepEqual([atLimit.status, await atLimit.json()], [400, INVALID]);
  const over = await owner.request("POST", url, body(2_000_001), { "content-type": "application/json" });
  assert.deepEqual([over.status, await over.json()], [413, TOO_LARGE]);
  // 500 entries of 3,900 characters: under both limits, accepted.
  const full = await owner.json("POST", url, { entries: entries(500, 3_900) });
  assert.equal(full.status, 200);
  assert.equal(full.body.summary.created, 500);
  // Without a content length (chunked), the same limit and message.
  const stream = new ReadableStream({
    start(controller) {
      const text = new TextEncoder().encode(body(2_000_001));
      for (let i = 0; i < text.length; i += 65_536) controller.enqueue(text.subarray(i, i + 65_536));
      controller.close();
    },
  });
  const res = await fetch(server.url + url, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      origin: owner.origin,
      cookie: owner.cookieHeader(),
    },
    body: stream,
    duplex: "half",
  } as RequestInit);
  assert.deepEqual([res.status, await res.json()], [413, TOO_LARGE]);
});

test("import permissions: browser only, secrets:create; a non-member gets 404 before the body is read", async (t) => {
  const { server, projectId, owner, viewer, member, outsider } = await startTeam(t);
  const url = `${envPath(projectId, "development")}/import`;
  const body = { entries: [{ key: "A_KEY", value: "a-key-value-01", overwrite: true }] };
  assert.deepEqual(await outsider.json("POST", url, body).then((r) => [r.status, r.body]), [404, { error: "Project not found." }]);
  assert.deepEqual(await viewer.json("POST", url, body).then((r) => [r.status, r.body]), [
    403,
    { error: "You do not have permission to do this in this project." },
  ]);
  const staging = await member.json("POST", `${envPath(projectId, "staging")}/import`, body);
  assert.deepEqual([staging.status, staging.body], [403, { error: "You do not have access to the staging environment of this project." }]);
  const cli = await cliFor(server, owner);
  assert.equal((await cli.json("POST", url, body)).status, 403);
  // Access is checked before the size: a non-member learns nothing from a huge body either.
  const huge = { entries: Array.from({ length: 600 }, (_, i) => ({ key: `K${i}`, value: "v", overwrite: true })) };
  assert.equal((await outsider.json("POST", url, huge)).status, 404);
  // Past the byte limit too: 404 for the outsider, where a member gets 413.
  const heavy = { entries: Array.from({ length: 3 }, (_, i) => ({ key: `HEAVY_${i}`, value: "x".repeat(800_000), overwrite: true })) };
  assert.equal((await outsider.json("POST", url, heavy)).status, 404);
  assert.deepEqual(await member.json("POST", url, heavy).then((r) => [r.status, r.body]), [413, { error: "The import is too large." }]);
  assert.equal(await secretCount(owner, projectId), 0);
  assert.equal((await member.json("POST", url, body)).status, 200);
});

test("refused imports count toward the limit of 10 a minute too: the 11th, valid, is a 429 and writes nothing", async (t) => {
  // The limit itself, per user and before the body is read: security-limits.test.ts.
  const { projectId, owner } = await startTeam(t);
  const url = `${envPath(projectId, "development")}/import`;
  for (let i = 0; i < 10; i++) {
    const res = await owner.json("POST", url, { entries: [{ key: "1_NOT_A_KEY", value: "x" }] });
    assert.equal(res.status, 400, `request ${i + 1}`);
  }
  const limited = await owner.json("POST", url, { entries: [{ key: "LATE_KEY", value: "late-value" }] });
  assert.equal(limited.status, 429);
  assert.match(limited.body.error, /^Too many requests\./);
  assert.deepEqual((await owner.json("GET", `${envPath(projectId, "development")}/secrets`)).body.secrets, []);
});

test("after an import of many entries the WAL file is checkpointed and truncated, off the request path", {
  skip: onPostgres("SQLite's WAL file"),
}, async (t) => {
  const { server, projectId, owner } = await startTeam(t);
  const wal = path.join(server.dataDir, `${DATABASE_FILE}-wal`);
  const entries = Array.from({ length: 300 }, (_, i) => ({
    key: `BULK_${i}`,
    value: `bulk-value-${i}-${"x".repeat(200)}`,
    overwrite: false,
  }));
  const res = await owner.json("POST", `${envPath(projectId, "development")}/import`, { entries });
  assert.equal(res.status, 200);
  assert.equal(res.body.summary.created, 300);
  // Truncated shortly after the answer, not inside it.
  const deadline = Date.now() + 5000;
  while (fs.statSync(wal).size > 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50));
  assert.equal(fs.statSync(wal).size, 0);
  assert.equal(await secretCount(owner, projectId), 300);
});
