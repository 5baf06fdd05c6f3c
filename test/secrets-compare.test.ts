// The cross-environment endpoints (README, "Secrets"): comparing keyed digests of
// values across environments, and copying a secret to another environment.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import type { Client } from "./helpers.ts";
import { randomMasterKey } from "./helpers.ts";
import { cliFor, startTeam } from "./secrets-helpers.ts";

const FORBIDDEN = "You do not have permission to do this in this project.";

async function put(client: Client, projectId: string, env: string, key: string, value: string): Promise<string> {
  const res = await client.json("POST", `/api/projects/${projectId}/environments/${env}/secrets`, { key, value });
  assert.equal(res.status, 201, JSON.stringify(res.body));
  return res.body.secret.id;
}

async function events(client: Client, projectId: string, action: string): Promise<any[]> {
  const res = await client.json("GET", `/api/projects/${projectId}/audit?action=${action}`);
  assert.equal(res.status, 200, JSON.stringify(res.body));
  return res.body.events;
}

async function keysIn(client: Client, projectId: string, env: string): Promise<string[]> {
  const res = await client.json("GET", `/api/projects/${projectId}/environments/${env}/secrets`);
  assert.equal(res.status, 200);
  return res.body.secrets.map((s: { key: string }) => s.key).sort();
}

describe("GET /api/projects/<id>/secrets/compare", () => {
  test("keys × environments with digests: same values match, different ones do not, missing is null; no value leaves; audited as a comparison, not a reveal", async (t) => {
    const { projectId, owner } = await startTeam(t);
    await put(owner, projectId, "development", "DATABASE_URL", "postgres://dev-value");
    await put(owner, projectId, "staging", "DATABASE_URL", "postgres://dev-value");
    await put(owner, projectId, "production", "DATABASE_URL", "postgres://prod-value");
    await put(owner, projectId, "development", "ONLY_DEV", "dev-only-value");
    await put(owner, projectId, "production", "API_KEY", "prod-key-value");

    const res = await owner.request("GET", `/api/projects/${projectId}/secrets/compare`);
    assert.equal(res.status, 200);
    const text = await res.text();
    for (const value of ["postgres://dev-value", "postgres://prod-value", "dev-only-value", "prod-key-value"]) {
      assert.ok(!text.includes(value), `the comparison carries no value (${value})`);
    }
    const body = JSON.parse(text);
    assert.deepEqual(body.environments, ["development", "staging", "production"]);
    assert.deepEqual(
      body.keys.map((k: { key: string }) => k.key),
      ["API_KEY", "DATABASE_URL", "ONLY_DEV"],
    );
    const db = body.keys[1].environments;
    assert.equal(db.development.digest, db.staging.digest);
    assert.notEqual(db.development.digest, db.production.digest);
    assert.match(db.development.digest, /^[A-Za-z0-9_-]{43}$/);
    assert.deepEqual(Object.keys(db.development).sort(), ["digest", "secretId", "updatedAt", "version"]);
    assert.equal(db.production.version, 1);
    const onlyDev = body.keys[2].environments;
    assert.deepEqual([onlyDev.staging, onlyDev.production], [null, null]);
    assert.equal(body.keys[0].environments.development, null);

    const compared = await events(owner, projectId, "secrets.compared");
    assert.equal(compared.length, 1);
    assert.deepEqual(compared[0].metadata, { environments: ["development", "staging", "production"], count: 3 });
    assert.equal((await events(owner, projectId, "secret.revealed")).length, 0);

    // Only the environments asked for, in canonical order whatever the query's.
    const two = await owner.json("GET", `/api/projects/${projectId}/secrets/compare?environments=production,development`);
    assert.equal(two.status, 200);
    assert.deepEqual(two.body.environments, ["development", "production"]);
    assert.deepEqual(Object.keys(two.body.keys[1].environments), ["development", "production"]);
    assert.equal(two.body.keys[1].environments.development.digest, db.development.digest, "stable across calls");
  });

  test("values sealed under different master key versions (mid-rotation) still compare: equal values, equal digests", async (t) => {
    const key1 = randomMasterKey();
    const team = await startTeam(t, { env: { MASTER_KEY: key1 } });
    await put(team.owner, team.projectId, "development", "DATABASE_URL", "postgres://same");
    await put(team.owner, team.projectId, "development", "FLAG", "old");
    await team.server.stop();
    const server = await team.server.restart({ MASTER_KEY: randomMasterKey(), MASTER_KEY_VERSION: "2", MASTER_KEYS_PREVIOUS: `1:${key1}` });
    t.after(() => server.stop());
    const owner = await server.signIn("olivia@example.test");
    // Written after the restart: sealed under key version 2, the development ones under 1.
    await put(owner, team.projectId, "staging", "DATABASE_URL", "postgres://same");
    await put(owner, team.projectId, "staging", "FLAG", "new");
    await put(owner, team.projectId, "production", "DATABASE_URL", "postgres://same");
    const res = await owner.json("GET", `/api/projects/${team.projectId}/secrets/compare`);
    assert.equal(res.status, 200);
    const [db, flag] = res.body.keys;
    assert.equal(db.environments.development.digest, db.environments.staging.digest);
    assert.equal(db.environments.staging.digest, db.environments.production.digest);
    assert.notEqual(flag.environments.development.digest, flag.environments.staging.digest);
  });

  test("authorization: membership, then permission, then each environment; browser only", async (t) => {
    const { server, projectId, owner, member, viewer, outsider } = await startTeam(t);
    await put(owner, projectId, "development", "SHARED", "one");
    await put(owner, projectId, "production", "SHARED", "two");
    const path = `/api/projects/${projectId}/secrets/compare`;
    const cases: [string, Client, string, number, unknown][] = [
      ["outsider", outsider, "", 404, { error: "Project not found." }],
      ["outsider with a bad query", outsider, `?environments=${"x".repeat(500)}`, 404, { error: "Project not found." }],
      [
        "member asks production",
        member,
        "?environments=development,production",
        403,
        { error: "You do not have access to the production environment of this project." },
      ],
      ["unknown environment", owner, "?environments=nowhere", 404, { error: "Environment not found." }],
      ["no environment named", owner, "?environments=,", 400, { error: "Name at least one environment to compare, separated by commas." }],
      ["over-long list", owner, `?environments=${"x".repeat(500)}`, 400, { error: "invalid request" }],
    ];
    for (const [name, who, query, status, body] of cases) {
      const res = await who.json("GET", path + query);
      assert.equal(res.status, status, name);
      assert.deepEqual(res.body, body, name);
    }
    // Without a list, the environments the caller may read and no others.
    for (const who of [member, viewer]) {
      const res = await who.json("GET", path);
      assert.equal(res.status, 200);
      assert.deepEqual(res.body.environments, ["development"]);
      assert.deepEqual(Object.keys(res.body.keys[0].environments), ["development"]);
    }
    const cli = await cliFor(server, owner);
    const byCli = await cli.json("GET", path);
    assert.equal(byCli.status, 403);
    assert.deepEqual(byCli.body, { error: "This action needs a browser session; CLI tokens cannot be used here." });
    assert.equal((await owner.json("GET", `/api/projects/${projectId}/secrets/compare`)).status, 200);
    // The refused calls were not audited as comparisons.
    assert.equal((await events(owner, projectId, "secrets.compared")).length, 3);
  });
});

test("comparisons are limited to 30 a minute per user, like exports", async (t) => {
  const { projectId, owner, admin } = await startTeam(t);
  const path = `/api/projects/${projectId}/secrets/compare`;
  for (let i = 0; i < 30; i++) assert.equal((await owner.json("GET", path)).status, 200);
  const over = await owner.json("GET", path);
  assert.equal(over.status, 429);
  assert.match(over.body.error, /^Too many requests\. Try again in \d+ seconds\.$/);
  assert.equal((await admin.json("GET", path)).status, 200, "another user has a limit of their own");
});

describe("POST …/environments/<env>/secrets/<id>/copy", () => {
  test("copies to another environment, refuses an existing key unless told to overwrite, and audits both sides", async (t) => {
    const { projectId, owner } = await startTeam(t);
    const id = await put(owner, projectId, "staging", "DATABASE_URL", "postgres://staging");
    const path = `/api/projects/${projectId}/environments/staging/secrets/${id}/copy`;

    const created = await owner.json("POST", path, { to: "production" });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    assert.equal(created.body.result, "created");
    assert.equal(created.body.secret.key, "DATABASE_URL");
    assert.equal(created.body.secret.version, 1);
    assert.ok(!JSON.stringify(created.body).includes("postgres://"));
    const copy = await owner.json("GET", `/api/projects/${projectId}/environments/production/secrets/${created.body.secret.id}`);
    assert.equal(copy.body.secret.value, "postgres://staging");

    const again = await owner.json("POST", path, { to: "production" });
    assert.equal(again.status, 409);
    assert.deepEqual(again.body, { error: "A secret with this key already exists in this environment." });
    const same = await owner.json("POST", path, { to: "production", overwrite: true });
    assert.equal(same.status, 200);
    assert.equal(same.body.result, "unchanged");
    assert.equal(same.body.secret.version, 1);

    assert.equal(
      (await owner.json("PATCH", `/api/projects/${projectId}/environments/staging/secrets/${id}`, { value: "postgres://staging-2" }))
        .status,
      200,
    );
    const updated = await owner.json("POST", path, { to: "production", overwrite: true });
    assert.equal(updated.status, 200);
    assert.equal(updated.body.result, "updated");
    assert.equal(updated.body.secret.version, 2);

    const copied = await events(owner, projectId, "secret.copied");
    assert.deepEqual(copied.map((e) => e.metadata).reverse(), [
      { key: "DATABASE_URL", environment: "staging", version: 1, toEnvironment: "production", toVersion: 1, result: "created" },
      { key: "DATABASE_URL", environment: "staging", version: 1, toEnvironment: "production", toVersion: 1, result: "unchanged" },
      { key: "DATABASE_URL", environment: "staging", version: 2, toEnvironment: "production", toVersion: 2, result: "updated" },
    ]);
    // The target side: its own events, as any create or update there.
    const createdInProduction = (await events(owner, projectId, "secret.created")).filter((e) => e.metadata.environment === "production");
    assert.equal(createdInProduction.length, 1);
    const updatedInProduction = (await events(owner, projectId, "secret.updated")).filter((e) => e.metadata.environment === "production");
    assert.equal(updatedInProduction.length, 1);
    assert.equal((await events(owner, projectId, "secret.revealed")).length, 1, "only the test's own read");
  });

  test("both environments are authorized before anything is read or written; bad input gets a 4xx", async (t) => {
    const { server, projectId, owner, member, viewer, outsider } = await startTeam(t);
    const devId = await put(owner, projectId, "development", "TOKEN", "dev-token");
    const prodId = await put(owner, projectId, "production", "PROD_ONLY", "p");
    const dev = `/api/projects/${projectId}/environments/development/secrets/${devId}/copy`;
    const cases: [string, Client, string, unknown, number, unknown][] = [
      ["outsider", outsider, dev, { to: "production" }, 404, { error: "Project not found." }],
      ["outsider, bad body", outsider, dev, { to: 1 }, 404, { error: "Project not found." }],
      [
        "member to an environment not granted",
        member,
        dev,
        { to: "production" },
        403,
        { error: "You do not have access to the production environment of this project." },
      ],
      [
        "member from an environment not granted",
        member,
        `/api/projects/${projectId}/environments/production/secrets/${prodId}/copy`,
        { to: "development" },
        403,
        { error: "You do not have access to the production environment of this project." },
      ],
      ["viewer cannot create", viewer, dev, { to: "staging" }, 403, { error: FORBIDDEN }],
      [
        "same environment",
        owner,
        dev,
        { to: "development" },
        400,
        { error: "Choose another environment to copy to: the secret is already in this one." },
      ],
      ["unknown target", owner, dev, { to: "qa" }, 400, { error: "invalid request" }],
      ["extra field", owner, dev, { to: "staging", value: "x" }, 400, { error: "invalid request" }],
      ["no body", owner, dev, undefined, 400, { error: "invalid request" }],
      [
        "unknown secret",
        owner,
        `/api/projects/${projectId}/environments/development/secrets/00000000-0000-0000-0000-000000000000/copy`,
        { to: "staging" },
        404,
        { error: "Secret not found." },
      ],
      [
        "a secret of another environment",
        owner,
        `/api/projects/${projectId}/environments/development/secrets/${prodId}/copy`,
        { to: "staging" },
        404,
        { error: "Secret not found." },
      ],
    ];
    for (const [name, who, path, body, status, expected] of cases) {
      const res = await who.json("POST", path, body);
      assert.equal(res.status, status, name);
      assert.deepEqual(res.body, expected, name);
    }
    const cli = await cliFor(server, owner);
    assert.equal((await cli.json("POST", dev, { to: "staging" })).status, 403);
    assert.deepEqual(await keysIn(owner, projectId, "staging"), []);
    assert.deepEqual(await keysIn(owner, projectId, "production"), ["PROD_ONLY"]);
    assert.equal((await events(owner, projectId, "secret.copied")).length, 0);

    // A member with both environments granted copies like anyone.
    assert.equal((await owner.json("PUT", `/api/projects/${projectId}/environments/staging/access/${member.user!.id}`)).status, 200);
    const ok = await member.json("POST", dev, { to: "staging" });
    assert.equal(ok.status, 201);
    assert.deepEqual(await keysIn(owner, projectId, "staging"), ["TOKEN"]);
  });
});
