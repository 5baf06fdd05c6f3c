// The export's ETag: If-None-Match answers 304 with no body, no decryption and no audit
// event while the environment is unchanged (what `run --watch` polls with).
import assert from "node:assert/strict";
import { test } from "node:test";
import { type Client, startServer } from "./helpers.ts";
import { addMember } from "./secrets-helpers.ts";

async function exportEvents(owner: Client, projectId: string): Promise<number> {
  const res = await owner.json("GET", `/api/projects/${projectId}/audit?action=secrets.exported&limit=100`);
  assert.equal(res.status, 200);
  return res.body.events.length;
}

test("export: ETag on 200, 304 without body or audit event while unchanged, a new tag after any change", async (t) => {
  const server = await startServer(t);
  const alice = await server.signIn("alice@example.test");
  const project = await alice.createProject({ name: "api", environments: ["development", "production"] });
  const base = `/api/projects/${project.id}/environments/production`;
  const created = await alice.json("POST", `${base}/secrets`, { key: "DATABASE_URL", value: "postgres://etag-db/app-1" });
  assert.equal(created.status, 201);

  const first = await alice.get(`${base}/export`);
  assert.equal(first.status, 200);
  const etag = first.headers.get("etag");
  assert.match(etag ?? "", /^"[A-Za-z0-9_-]{27}"$/);
  assert.deepEqual(await first.json(), { secrets: [{ key: "DATABASE_URL", value: "postgres://etag-db/app-1" }] });
  assert.equal(await exportEvents(alice, project.id), 1);

  // Unchanged: 304, empty body, the same tag, and nothing audited (nothing was read).
  for (const header of [etag!, `W/${etag}`, `"other", ${etag}`, "*"]) {
    const again = await alice.get(`${base}/export`, { "if-none-match": header });
    assert.equal(again.status, 304, header);
    assert.equal(await again.text(), "");
    assert.equal(again.headers.get("etag"), etag);
  }
  assert.equal(await exportEvents(alice, project.id), 1);

  // Another tag, another format or another environment: a real export, audited.
  const stale = await alice.get(`${base}/export`, { "if-none-match": '"not-this-one"' });
  assert.equal(stale.status, 200);
  assert.equal(stale.headers.get("etag"), etag);
  const dotenv = await alice.get(`${base}/export?format=dotenv`, { "if-none-match": etag! });
  assert.equal(dotenv.status, 200);
  assert.notEqual(dotenv.headers.get("etag"), etag);
  const development = await alice.get(`/api/projects/${project.id}/environments/development/export`, { "if-none-match": etag! });
  assert.equal(development.status, 200);
  assert.equal(await exportEvents(alice, project.id), 4);

  // Every kind of change gives a new tag: a new value, a rename, a new secret, a deletion.
  // (The deletion brings back an earlier state, and so that state's tag: the same content.)
  let last = etag!;
  const tagAfter = async (change: () => Promise<unknown>) => {
    await change();
    const res = await alice.get(`${base}/export`, { "if-none-match": last });
    assert.equal(res.status, 200);
    const tag = res.headers.get("etag");
    assert.ok(tag && tag !== last, "the tag did not change");
    last = tag;
    return res.json();
  };
  const id = created.body.secret.id;
  await tagAfter(() => alice.json("PATCH", `${base}/secrets/${id}`, { value: "postgres://etag-db/app-2" }));
  const renamed = await tagAfter(() => alice.json("PATCH", `${base}/secrets/${id}`, { key: "PRIMARY_DATABASE_URL" }));
  assert.deepEqual(renamed, { secrets: [{ key: "PRIMARY_DATABASE_URL", value: "postgres://etag-db/app-2" }] });
  const added = await tagAfter(() => alice.json("POST", `${base}/secrets`, { key: "REDIS_URL", value: "redis://etag-cache/0" }));
  const redis = (await alice.json("GET", `${base}/secrets`)).body.secrets.find((s: any) => s.key === "REDIS_URL");
  assert.equal(added.secrets.length, 2);
  await tagAfter(async () => assert.equal((await alice.json("DELETE", `${base}/secrets/${redis.id}`)).status, 200));
});

test("export: a matching tag does not get past the access checks", async (t) => {
  const server = await startServer(t);
  const alice = await server.signIn("alice@example.test");
  const project = await alice.createProject({ name: "api", environments: ["production"] });
  const base = `/api/projects/${project.id}/environments/production`;
  const etag = (await alice.get(`${base}/export`)).headers.get("etag")!;
  const mallory = await server.signIn("mallory@example.test");
  const res = await mallory.json("GET", `${base}/export`);
  assert.equal(res.status, 404);
  const guessed = await mallory.get(`${base}/export`, { "if-none-match": etag });
  assert.equal(guessed.status, 404);
  assert.deepEqual(await guessed.json(), { error: "Project not found." });
  const star = await mallory.get(`${base}/export`, { "if-none-match": "*" });
  assert.equal(star.status, 404);

  // A member who held the tag and lost the environment since: 403, not 304.
  const bob = await server.signIn("bob@example.test");
  await addMember(alice, bob, project.id, "member", ["production"]);
  const bobsTag = (await bob.get(`${base}/export`)).headers.get("etag")!;
  assert.equal((await bob.get(`${base}/export`, { "if-none-match": bobsTag })).status, 304);
  const revoked = await alice.json("DELETE", `/api/projects/${project.id}/environments/production/access/${bob.user!.id}`);
  assert.equal(revoked.status, 200, JSON.stringify(revoked.body));
  const stale = await bob.get(`${base}/export`, { "if-none-match": bobsTag });
  assert.equal(stale.status, 403);
  assert.deepEqual(await stale.json(), { error: "You do not have access to the production environment of this project." });
});

test("export: a second export of the same rows answers the same values, and any change shows in the very next one", async (t) => {
  const server = await startServer(t);
  const alice = await server.signIn("alice@example.test");
  const project = await alice.createProject({ name: "api", environments: ["production"] });
  const base = `/api/projects/${project.id}/environments/production`;
  const created = await alice.json("POST", `${base}/secrets`, { key: "API_KEY", value: "memo-value-1" });
  await alice.json("POST", `${base}/secrets`, { key: "OTHER", value: "other-value" });
  const exported = async (format = "") =>
    (await alice.get(`${base}/export${format}`)).text().then((text) => (format ? text : JSON.parse(text).secrets));
  const expect = (value: string) => [
    { key: "API_KEY", value },
    { key: "OTHER", value: "other-value" },
  ];
  assert.deepEqual(await exported(), expect("memo-value-1"));
  assert.deepEqual(await exported(), expect("memo-value-1"));
  assert.match(await exported("?format=dotenv"), /^API_KEY='memo-value-1'$/m);

  const id = created.body.secret.id;
  assert.equal((await alice.json("PATCH", `${base}/secrets/${id}`, { value: "memo-value-2" })).status, 200);
  assert.deepEqual(await exported(), expect("memo-value-2"));
  // A restore brings back the first value under a new version number (and so a new AAD).
  assert.equal((await alice.json("POST", `${base}/secrets/${id}/versions/1/restore`, {})).status, 200);
  assert.deepEqual(await exported(), expect("memo-value-1"));
  assert.match(await exported("?format=dotenv"), /^API_KEY='memo-value-1'$/m);
  // Every one of those exports was audited, remembered or not.
  const events = await alice.json("GET", `/api/projects/${project.id}/audit?action=secrets.exported&limit=100`);
  assert.equal(events.body.events.length, 6);
});
