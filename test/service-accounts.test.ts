// Machine access (README, "Machine access") over HTTP against a real server: service accounts, service tokens and
// the access guard's third kind of caller.
import assert from "node:assert/strict";
import { test } from "node:test";
import { auditEvents, type Client, runMain, sha256Hex } from "./helpers.ts";
import { cliFor, createSecret, envPath, ISO_MS, startTeam, type Team, UUID } from "./secrets-helpers.ts";
import { createServiceAccount, createServiceToken, serviceAccountsPath } from "./service-account-helpers.ts";
import { rowCount, storedRows } from "./storage.ts";

const NOT_FOUND = { error: "Project not found." };
const FORBIDDEN = { error: "You do not have permission to do this in this project." };
const BROWSER_ONLY = { error: "This action needs a browser session; CLI tokens cannot be used here." };
const INVALID_FIELDS = { error: "invalid fields" };
const NOTHING = { error: "Nothing to update." };
const NAME_TAKEN = { error: "A service account with this name already exists." };
const ACCOUNT_NOT_FOUND = { error: "Service account not found." };
const TOKEN_NOT_FOUND = { error: "Token not found." };
const TRUST_NOT_FOUND = { error: "Trust not found." };
const TOO_MANY_TOKENS = { error: "This service account already has 20 tokens. Revoke one first." };
const TOO_MANY_TRUSTS = { error: "This service account already has 10 trusts. Remove one first." };
const TOKEN_REFUSED = { error: "This service token is invalid, expired or revoked." };
const NOT_SIGNED_IN = { error: "not signed in" };
const TOKEN_SHAPE = /^svc_st_[A-Za-z0-9_-]{43,}$/;
const DAY_MS = 24 * 60 * 60 * 1000;

/** A service account of the team's project with one token, as a client holding that token. */
async function machine(team: Team, input: { name: string; role: string; environments: string[] }, tokenInput?: Record<string, unknown>) {
  const account = await createServiceAccount(team.owner, team.projectId, input);
  const { token, tokenInfo } = await createServiceToken(team.owner, team.projectId, account.id, tokenInput);
  return { account, token, tokenInfo, client: team.server.client().withBearer(token) };
}

test("owner and admin manage accounts; the shapes are the document's and the token is shown once", async (t) => {
  const team = await startTeam(t);
  const { owner, admin, projectId } = team;
  const created = await owner.json("POST", serviceAccountsPath(projectId), {
    name: "deploy-bot",
    description: "Deploys production",
    role: "member",
    environments: ["production", "development"],
  });
  assert.equal(created.status, 201);
  const account = created.body.serviceAccount;
  assert.deepEqual(Object.keys(created.body), ["serviceAccount"]);
  // Not a person: never in the member list or the access matrix.
  const members = await owner.json("GET", `/api/projects/${projectId}/members`);
  assert.equal(members.status, 200);
  assert.ok(!JSON.stringify(members.body).includes(account.id) && !JSON.stringify(members.body).includes("deploy-bot"), "not a member");
  const matrix = await owner.json("GET", `/api/projects/${projectId}/environment-access`);
  assert.equal(matrix.status, 200);
  assert.ok(
    !JSON.stringify(matrix.body).includes(account.id) && !JSON.stringify(matrix.body).includes("deploy-bot"),
    "not in the access matrix",
  );
  assert.match(account.id, UUID);
  assert.match(account.createdAt, ISO_MS);
  assert.deepEqual(
    { ...account, id: undefined, createdAt: undefined },
    {
      id: undefined,
      createdAt: undefined,
      name: "deploy-bot",
      description: "Deploys production",
      role: "member",
      // Canonical order, whatever the request's.
      environments: ["development", "production"],
      createdBy: { userId: owner.user!.id, email: "olivia@example.test" },
      tokens: [],
      trusts: [],
    },
  );

  const second = await createServiceAccount(admin, projectId, { name: "Audit-Reader", role: "viewer", environments: ["staging"] });
  assert.equal(second.description, null);
  assert.deepEqual(second.createdBy, { userId: admin.user!.id, email: "adam@example.test" });

  // Ordered by name, without regard to case.
  const list = await admin.json("GET", serviceAccountsPath(projectId));
  assert.equal(list.status, 200);
  assert.deepEqual(
    list.body.serviceAccounts.map((a: any) => a.name),
    ["Audit-Reader", "deploy-bot"],
  );

  const minted = await owner.json("POST", `${serviceAccountsPath(projectId)}/${account.id}/tokens`, {
    name: "github",
    expiresInDays: 30,
    allowedCidrs: ["10.0.0.0/8", "2001:db8::/32"],
  });
  assert.equal(minted.status, 201);
  assert.deepEqual(Object.keys(minted.body).sort(), ["token", "tokenInfo"]);
  assert.match(minted.body.token, TOKEN_SHAPE);
  const info = minted.body.tokenInfo;
  assert.deepEqual(Object.keys(info).sort(), [
    "allowedCidrs",
    "createdAt",
    "createdBy",
    "expiresAt",
    "id",
    "lastUsedAt",
    "lastUsedIp",
    "name",
  ]);
  assert.equal(info.name, "github");
  assert.deepEqual(info.allowedCidrs, ["10.0.0.0/8", "2001:db8::/32"]);
  assert.equal(Date.parse(info.expiresAt) - Date.parse(info.createdAt), 30 * DAY_MS);
  assert.equal(info.lastUsedAt, null);
  assert.equal(info.lastUsedIp, null);
  assert.deepEqual(info.createdBy, { userId: owner.user!.id, email: "olivia@example.test" });

  const noExpiry = await createServiceToken(owner, projectId, account.id, { name: "forever", expiresInDays: null });
  assert.equal(noExpiry.tokenInfo.expiresAt, null);
  assert.deepEqual(noExpiry.tokenInfo.allowedCidrs, []);

  // Only the hash is stored; no GET carries a token.
  const got = await owner.json("GET", `${serviceAccountsPath(projectId)}/${account.id}`);
  assert.equal(got.status, 200);
  assert.deepEqual(
    got.body.serviceAccount.tokens.map((x: any) => x.name),
    ["github", "forever"],
  );
  const text = JSON.stringify(got.body) + JSON.stringify((await owner.json("GET", serviceAccountsPath(projectId))).body);
  assert.ok(!text.includes(minted.body.token) && !text.includes("svc_st_"));
  const stored = storedRows(team.server, "service_tokens").map((row) => row.token_hash as string);
  assert.ok(stored.length > 0 && stored.every((hash) => /^[0-9a-f]{64}$/.test(hash)));
  assert.ok(stored.includes(sha256Hex(minted.body.token)), "the token's SHA-256 is what is stored");
  assert.equal(rowCount(team.server, "service_tokens", { token_hash: minted.body.token }), 0);

  // PATCH: any field, description null clears; takes effect at once.
  const patched = await admin.json("PATCH", `${serviceAccountsPath(projectId)}/${account.id}`, {
    description: null,
    role: "viewer",
    name: "Deploy-Bot",
  });
  assert.equal(patched.status, 200);
  assert.equal(patched.body.serviceAccount.description, null);
  assert.equal(patched.body.serviceAccount.role, "viewer");
  assert.equal(patched.body.serviceAccount.name, "Deploy-Bot");

  // Audit of the management actions, with the people who did them.
  const actions = await auditEvents(owner, projectId, "service_");
  assert.deepEqual(
    actions.map((r) => [r.action, r.actor, r.serviceAccount]),
    [
      ["service_account.created", owner.user!.id, null],
      ["service_account.created", admin.user!.id, null],
      ["service_token.created", owner.user!.id, null],
      ["service_token.created", owner.user!.id, null],
      ["service_account.updated", admin.user!.id, null],
    ],
  );
  assert.deepEqual(actions[4]!.metadata, {
    name: "Deploy-Bot",
    previousName: "deploy-bot",
    role: "viewer",
    previousRole: "member",
    environments: ["development", "production"],
    descriptionChanged: true,
  });

  // DELETE of a token, then of the account; a second DELETE is 404.
  assert.deepEqual((await owner.json("DELETE", `${serviceAccountsPath(projectId)}/${account.id}/tokens/${info.id}`)).body, { ok: true });
  assert.deepEqual(
    await owner.json("DELETE", `${serviceAccountsPath(projectId)}/${account.id}/tokens/${info.id}`).then((r) => [r.status, r.body]),
    [404, TOKEN_NOT_FOUND],
  );
  assert.deepEqual((await owner.json("DELETE", `${serviceAccountsPath(projectId)}/${account.id}`)).body, { ok: true });
  assert.deepEqual(await owner.json("DELETE", `${serviceAccountsPath(projectId)}/${account.id}`).then((r) => [r.status, r.body]), [
    404,
    ACCOUNT_NOT_FOUND,
  ]);
  assert.equal(rowCount(team.server, "service_tokens"), 0);
});

test("who may manage: members and viewers 403, non-members 404, CLI and service tokens 403 browser-only", async (t) => {
  const team = await startTeam(t);
  const { owner, member, viewer, outsider, projectId, server } = team;
  const { account, tokenInfo, client: bot } = await machine(team, { name: "bot", role: "member", environments: ["development"] });
  const trust = await owner.json("POST", `${serviceAccountsPath(projectId)}/${account.id}/trusts`, {
    issuer: "https://token.actions.githubusercontent.com",
    audience: "secrets",
    subject: "repo:acme/api:*",
  });
  assert.equal(trust.status, 201);
  const ownerCli = await cliFor(server, owner);
  const p = serviceAccountsPath(projectId);
  const a = `${p}/${account.id}`;
  const endpoints: [string, string, unknown?][] = [
    ["GET", p],
    ["POST", p, { name: "x", role: "viewer", environments: ["development"] }],
    ["GET", a],
    ["PATCH", a, { name: "y" }],
    ["DELETE", a],
    ["POST", `${a}/tokens`, { name: "t" }],
    ["DELETE", `${a}/tokens/${tokenInfo.id}`],
    ["POST", `${a}/trusts`, { issuer: "https://issuer.example", audience: "a", subject: "s" }],
    ["DELETE", `${a}/trusts/${trust.body.trust.id}`],
  ];
  for (const [method, path, body] of endpoints) {
    for (const [who, client, status, expected] of [
      ["member", member, 403, FORBIDDEN],
      ["viewer", viewer, 403, FORBIDDEN],
      ["outsider", outsider, 404, NOT_FOUND],
      ["cli token", ownerCli, 403, BROWSER_ONLY],
      ["service token", bot, 403, BROWSER_ONLY],
    ] as const) {
      const res = await client.json(method, path, body);
      assert.deepEqual([res.status, res.body], [status, expected], `${who} ${method} ${path}`);
    }
  }
  // Nothing changed.
  const after = await owner.json("GET", a);
  assert.equal(after.body.serviceAccount.name, "bot");
  assert.equal(after.body.serviceAccount.tokens.length, 1);
  assert.equal(after.body.serviceAccount.trusts.length, 1);
});

test("validation: 400 invalid fields, PATCH nothing, duplicate names 409 without regard to case", async (t) => {
  const team = await startTeam(t, { environments: ["development", "production"] });
  const { owner, projectId } = team;
  const p = serviceAccountsPath(projectId);
  const bad: unknown[] = [
    {},
    { name: "", role: "viewer", environments: ["development"] },
    { name: "x".repeat(61), role: "viewer", environments: ["development"] },
    // UTF-16 units: 31 emoji are 62.
    { name: "🔑".repeat(31), role: "viewer", environments: ["development"] },
    { name: "ok", role: "viewer", environments: ["development"], description: `${"🔑".repeat(140)}d` },
    { name: "two\nlines", role: "viewer", environments: ["development"] },
    { name: "\u200b\u00ad", role: "viewer", environments: ["development"] },
    { name: "ok", role: "admin", environments: ["development"] },
    { name: "ok", role: "owner", environments: ["development"] },
    { name: "ok", role: "viewer", environments: [] },
    { name: "ok", role: "viewer", environments: ["staging"] },
    { name: "ok", role: "viewer", environments: ["development", "development"] },
    { name: "ok", role: "viewer", environments: ["moon"] },
    { name: "ok", role: "viewer", environments: ["development"], description: "d".repeat(281) },
    { name: "ok", role: "viewer", environments: ["development"], extra: true },
    { name: "ok", role: "viewer" },
  ];
  for (const body of bad) {
    const res = await owner.json("POST", p, body);
    assert.deepEqual([res.status, res.body], [400, INVALID_FIELDS], JSON.stringify(body));
  }
  const account = await createServiceAccount(owner, projectId, { name: "Deploy", role: "viewer", environments: ["development"] });
  await createServiceAccount(owner, projectId, { name: "other", role: "viewer", environments: ["development"] });
  assert.deepEqual(
    await owner.json("POST", p, { name: "deploy", role: "member", environments: ["production"] }).then((r) => [r.status, r.body]),
    [409, NAME_TAKEN],
  );
  assert.deepEqual(await owner.json("PATCH", `${p}/${account.id}`, { name: "OTHER" }).then((r) => [r.status, r.body]), [409, NAME_TAKEN]);
  // An invisible character or a fullwidth letter makes no other name.
  for (const name of ["de\u200bploy", "Ｄeploy"]) {
    const res = await owner.json("POST", p, { name, role: "viewer", environments: ["development"] });
    assert.deepEqual([res.status, res.body], [409, NAME_TAKEN], JSON.stringify(name));
  }
  // Renaming to its own name in another case is not a clash.
  assert.equal((await owner.json("PATCH", `${p}/${account.id}`, { name: "DEPLOY" })).status, 200);

  assert.deepEqual(await owner.json("PATCH", `${p}/${account.id}`, {}).then((r) => [r.status, r.body]), [400, NOTHING]);
  for (const body of [{ role: "admin" }, { environments: [] }, { environments: ["staging"] }, { name: "" }, { role: null }, { bogus: 1 }]) {
    const res = await owner.json("PATCH", `${p}/${account.id}`, body);
    assert.deepEqual([res.status, res.body], [400, INVALID_FIELDS], JSON.stringify(body));
  }

  const tokens = `${p}/${account.id}/tokens`;
  for (const body of [
    {},
    { name: "" },
    { name: "t", expiresInDays: 0 },
    { name: "t", expiresInDays: 366 },
    { name: "t", expiresInDays: 1.5 },
    { name: "t", expiresInDays: "7" },
    { name: "t", allowedCidrs: ["10.0.0.0/33"] },
    { name: "t", allowedCidrs: ["not-an-address"] },
    { name: "t", allowedCidrs: ["2001:db8::/129"] },
    { name: "t", allowedCidrs: "10.0.0.0/8" },
  ]) {
    const res = await owner.json("POST", tokens, body);
    assert.deepEqual([res.status, res.body], [400, INVALID_FIELDS], JSON.stringify(body));
  }
  const trusts = `${p}/${account.id}/trusts`;
  for (const body of [
    { issuer: "http://issuer.example", audience: "a", subject: "s" },
    { issuer: "not a url", audience: "a", subject: "s" },
    // The URL parser would drop or escape these, and PostgreSQL refuses a NUL: a 500 there.
    { issuer: "https://issuer.example/\u0000", audience: "a", subject: "s" },
    { issuer: "https://iss\nuer.example", audience: "a", subject: "s" },
    { issuer: " https://issuer.example", audience: "a", subject: "s" },
    { issuer: "https://issuer.example/a b", audience: "a", subject: "s" },
    { issuer: "https://issuer.example", audience: "", subject: "s" },
    { issuer: "https://issuer.example", audience: "a", subject: "" },
    { issuer: "https://issuer.example", audience: "a", subject: "s", claims: { ref: 1 } },
    { issuer: "https://issuer.example", audience: "a" },
  ]) {
    const res = await owner.json("POST", trusts, body);
    assert.deepEqual([res.status, res.body], [400, INVALID_FIELDS], JSON.stringify(body));
  }
  // http is fine on a loopback host.
  assert.equal((await owner.json("POST", trusts, { issuer: "http://127.0.0.1:9999", audience: "a", subject: "s" })).status, 201);
});

test("unknown ids and ids of another account or project answer 404; 21st token and 11th trust 409", async (t) => {
  const team = await startTeam(t);
  const { owner, projectId } = team;
  const otherProject = await owner.createProject({ name: "web", environments: ["development"] });
  const mine = await createServiceAccount(owner, projectId, { name: "a", role: "viewer", environments: ["development"] });
  const sibling = await createServiceAccount(owner, projectId, { name: "b", role: "viewer", environments: ["development"] });
  const foreign = await createServiceAccount(owner, otherProject.id, { name: "c", role: "viewer", environments: ["development"] });
  const siblingToken = await createServiceToken(owner, projectId, sibling.id);
  const siblingTrust = await owner.json("POST", `${serviceAccountsPath(projectId)}/${sibling.id}/trusts`, {
    issuer: "https://issuer.example",
    audience: "a",
    subject: "s",
  });
  const p = serviceAccountsPath(projectId);
  const unknown = "00000000-0000-4000-8000-000000000000";
  for (const [method, path, expected] of [
    ["GET", `${p}/${unknown}`, ACCOUNT_NOT_FOUND],
    ["GET", `${p}/${foreign.id}`, ACCOUNT_NOT_FOUND],
    ["PATCH", `${p}/${foreign.id}`, ACCOUNT_NOT_FOUND],
    ["DELETE", `${p}/${foreign.id}`, ACCOUNT_NOT_FOUND],
    ["POST", `${p}/${foreign.id}/tokens`, ACCOUNT_NOT_FOUND],
    ["DELETE", `${p}/${mine.id}/tokens/${unknown}`, TOKEN_NOT_FOUND],
    ["DELETE", `${p}/${mine.id}/tokens/${siblingToken.tokenInfo.id}`, TOKEN_NOT_FOUND],
    ["DELETE", `${p}/${mine.id}/trusts/${unknown}`, TRUST_NOT_FOUND],
    ["DELETE", `${p}/${mine.id}/trusts/${siblingTrust.body.trust.id}`, TRUST_NOT_FOUND],
  ] as const) {
    const body = method === "PATCH" ? { name: "z" } : method === "POST" ? { name: "t" } : undefined;
    const res = await owner.json(method, path, body);
    assert.deepEqual([res.status, res.body], [404, expected], `${method} ${path}`);
  }

  for (let i = 0; i < 20; i++) await createServiceToken(owner, projectId, mine.id, { name: `t${i}` });
  assert.deepEqual(await owner.json("POST", `${p}/${mine.id}/tokens`, { name: "t20" }).then((r) => [r.status, r.body]), [
    409,
    TOO_MANY_TOKENS,
  ]);
  // A revoked token leaves room for one more.
  const listed = (await owner.json("GET", `${p}/${mine.id}`)).body.serviceAccount.tokens;
  assert.equal(listed.length, 20);
  await owner.json("DELETE", `${p}/${mine.id}/tokens/${listed[0].id}`);
  assert.equal((await owner.json("POST", `${p}/${mine.id}/tokens`, { name: "t20" })).status, 201);

  for (let i = 0; i < 10; i++) {
    const res = await owner.json("POST", `${p}/${mine.id}/trusts`, {
      issuer: "https://issuer.example",
      audience: "a",
      subject: `s${i}`,
      claims: { ref: "refs/heads/main" },
    });
    assert.equal(res.status, 201);
    if (i === 0) {
      assert.deepEqual(Object.keys(res.body.trust).sort(), ["audience", "claims", "createdAt", "id", "issuer", "subject"]);
      assert.deepEqual(res.body.trust.claims, { ref: "refs/heads/main" });
    }
  }
  assert.deepEqual(
    await owner
      .json("POST", `${p}/${mine.id}/trusts`, { issuer: "https://issuer.example", audience: "a", subject: "s10" })
      .then((r) => [r.status, r.body]),
    [409, TOO_MANY_TRUSTS],
  );
  const trustId = (await owner.json("GET", `${p}/${mine.id}`)).body.serviceAccount.trusts[0].id;
  assert.deepEqual((await owner.json("DELETE", `${p}/${mine.id}/trusts/${trustId}`)).body, { ok: true });
  assert.deepEqual(await owner.json("DELETE", `${p}/${mine.id}/trusts/${trustId}`).then((r) => [r.status, r.body]), [404, TRUST_NOT_FOUND]);
  // Both changes are audited in the access category under the person who made them.
  const trustEvents = await auditEvents(owner, projectId, "service_account_trust.");
  assert.ok(trustEvents.every((e) => e.category === "access"));
  const createdSubjects = trustEvents
    .filter((e) => e.action === "service_account_trust.created" && e.metadata.serviceAccountName === mine.name)
    .map((e) => e.metadata.subject);
  assert.deepEqual(
    createdSubjects,
    Array.from({ length: 10 }, (_, i) => `s${i}`),
  );
  const deleted = trustEvents.filter((e) => e.action === "service_account_trust.deleted");
  assert.equal(deleted.length, 1);
  assert.equal(deleted[0]!.actor, owner.user!.id);
  assert.deepEqual(deleted[0]!.metadata, {
    serviceAccountName: mine.name,
    trustId,
    issuer: "https://issuer.example",
    subject: "s0",
  });

  // Deleting the project deletes its accounts, tokens and trusts.
  await owner.json("DELETE", `/api/projects/${projectId}`);
  // The API answers 404 for everything of a deleted project: only the storage shows nothing is left.
  assert.equal(rowCount(team.server, "service_accounts", { project_id: projectId }), 0);
  assert.equal(rowCount(team.server, "service_tokens", { service_account_id: mine.id }), 0);
  assert.equal(rowCount(team.server, "service_account_trusts", { service_account_id: mine.id }), 0);
});

test("a service token acts with its role's permissions in its environments only", async (t) => {
  const team = await startTeam(t);
  const { owner, projectId } = team;
  const secrets: Record<string, any> = {};
  for (const env of ["development", "staging", "production"])
    secrets[env] = await createSecret(owner, projectId, env, "API_KEY", `value-of-${env}-8812`);
  const viewerBot = await machine(team, { name: "viewer-bot", role: "viewer", environments: ["staging"] });
  const memberBot = await machine(team, { name: "member-bot", role: "member", environments: ["staging", "production"] });

  const envForbidden = (env: string) => ({ error: `You do not have access to the ${env} environment of this project.` });
  const cases: {
    who: string;
    client: Client;
    method: string;
    path: (env: string) => string;
    body?: unknown;
    expect: Record<string, [number, unknown?]>;
  }[] = [
    {
      who: "viewer",
      client: viewerBot.client,
      method: "GET",
      path: (e) => `${envPath(projectId, e)}/secrets`,
      expect: { staging: [200], production: [403, envForbidden("production")] },
    },
    {
      who: "viewer",
      client: viewerBot.client,
      method: "GET",
      path: (e) => `${envPath(projectId, e)}/secrets/${secrets[e].id}`,
      expect: { staging: [200], development: [403, envForbidden("development")] },
    },
    {
      who: "viewer",
      client: viewerBot.client,
      method: "GET",
      path: (e) => `${envPath(projectId, e)}/export`,
      expect: { staging: [200], production: [403, envForbidden("production")] },
    },
    {
      who: "viewer",
      client: viewerBot.client,
      method: "POST",
      path: (e) => `${envPath(projectId, e)}/secrets`,
      body: { key: "NEW", value: "new-value-1" },
      expect: { staging: [403, FORBIDDEN] },
    },
    {
      who: "viewer",
      client: viewerBot.client,
      method: "PATCH",
      path: (e) => `${envPath(projectId, e)}/secrets/${secrets[e].id}`,
      body: { value: "changed-1" },
      expect: { staging: [403, FORBIDDEN] },
    },
    {
      who: "member",
      client: memberBot.client,
      method: "POST",
      path: (e) => `${envPath(projectId, e)}/secrets`,
      body: { key: "NEW", value: "new-value-2" },
      expect: { staging: [201], development: [403, envForbidden("development")] },
    },
    {
      who: "member",
      client: memberBot.client,
      method: "PATCH",
      path: (e) => `${envPath(projectId, e)}/secrets/${secrets[e].id}`,
      body: { value: "changed-value-2" },
      expect: { production: [200], development: [403, envForbidden("development")] },
    },
    {
      who: "member",
      client: memberBot.client,
      method: "GET",
      path: (e) => `${envPath(projectId, e)}/export?format=dotenv`,
      expect: { production: [200] },
    },
    // Browser-only endpoints: the CLI token's answer, whatever the role grants.
    {
      who: "member",
      client: memberBot.client,
      method: "DELETE",
      path: (e) => `${envPath(projectId, e)}/secrets/${secrets[e].id}`,
      expect: { production: [403, BROWSER_ONLY] },
    },
    {
      who: "member",
      client: memberBot.client,
      method: "GET",
      path: (e) => `${envPath(projectId, e)}/secrets/${secrets[e].id}/versions`,
      expect: { production: [403, BROWSER_ONLY] },
    },
    {
      who: "member",
      client: memberBot.client,
      method: "GET",
      path: (e) => `${envPath(projectId, e)}/secrets/${secrets[e].id}/versions/1`,
      expect: { production: [403, BROWSER_ONLY] },
    },
    {
      who: "member",
      client: memberBot.client,
      method: "POST",
      path: (e) => `${envPath(projectId, e)}/secrets/${secrets[e].id}/versions/1/restore`,
      body: {},
      expect: { production: [403, BROWSER_ONLY] },
    },
    {
      who: "member",
      client: memberBot.client,
      method: "POST",
      path: (e) => `${envPath(projectId, e)}/import`,
      body: { entries: [] },
      expect: { production: [403, BROWSER_ONLY] },
    },
    {
      who: "member",
      client: memberBot.client,
      method: "PATCH",
      path: () => `/api/projects/${projectId}`,
      body: { name: "renamed" },
      expect: { production: [403, BROWSER_ONLY] },
    },
    {
      who: "member",
      client: memberBot.client,
      method: "GET",
      path: () => `/api/projects/${projectId}/members`,
      expect: { production: [403, BROWSER_ONLY] },
    },
    {
      who: "member",
      client: memberBot.client,
      method: "GET",
      path: () => `/api/projects/${projectId}/audit`,
      expect: { production: [403, BROWSER_ONLY] },
    },
    {
      who: "member",
      client: memberBot.client,
      method: "POST",
      path: () => "/api/projects",
      body: { name: "mine", environments: ["development"] },
      expect: { production: [403, BROWSER_ONLY] },
    },
    {
      who: "member",
      client: memberBot.client,
      method: "POST",
      path: () => "/api/cli/auth/approve",
      body: { userCode: "ABCD-EFGH" },
      expect: { production: [403, BROWSER_ONLY] },
    },
    {
      who: "member",
      client: memberBot.client,
      method: "GET",
      path: () => "/api/cli/sessions",
      expect: { production: [403, BROWSER_ONLY] },
    },
  ];
  for (const c of cases) {
    for (const [env, [status, body]] of Object.entries(c.expect)) {
      const res = await c.client.request(c.method, c.path(env), c.body);
      const text = await res.text();
      assert.equal(res.status, status, `${c.who} ${c.method} ${c.path(env)}: ${text}`);
      if (body !== undefined) assert.deepEqual(JSON.parse(text), body, `${c.who} ${c.method} ${c.path(env)}`);
    }
  }
  const revealed = await viewerBot.client.json("GET", `${envPath(projectId, "staging")}/secrets/${secrets.staging.id}`);
  assert.equal(revealed.body.secret.value, "value-of-staging-8812");
  assert.deepEqual(await viewerBot.client.json("GET", `${envPath(projectId, "staging")}/export`).then((r) => r.body), {
    secrets: [
      { key: "API_KEY", value: "value-of-staging-8812" },
      { key: "NEW", value: "new-value-2" },
    ],
  });

  // The version written by the account names it, not a person; people's shapes are unchanged.
  const history = await owner.json("GET", `${envPath(projectId, "production")}/secrets/${secrets.production.id}/versions`);
  assert.equal(history.status, 200);
  assert.deepEqual(history.body.versions[0].changedBy, null);
  assert.deepEqual(history.body.versions[0].changedByServiceAccount, { id: memberBot.account.id, name: "member-bot" });
  assert.deepEqual(history.body.versions[1].changedBy, {
    userId: owner.user!.id,
    email: "olivia@example.test",
    isYou: true,
    isMember: true,
  });
  assert.equal("changedByServiceAccount" in history.body.versions[1], false);
});

test("a service token sees only its project, with the account's role", async (t) => {
  const team = await startTeam(t);
  const { owner, projectId } = team;
  const other = await owner.createProject({ name: "web", environments: ["development", "production"] });
  await createSecret(owner, projectId, "production", "ONE", "first-value-77");
  const { client, account } = await machine(team, { name: "bot", role: "viewer", environments: ["production"] });

  const projects = await client.json("GET", "/api/projects");
  assert.equal(projects.status, 200);
  assert.equal(projects.body.projects.length, 1);
  const [project] = projects.body.projects;
  assert.equal(project.id, projectId);
  assert.equal(project.role, "viewer");
  assert.deepEqual(project.permissions, ["project:read", "members:read", "secrets:read"]);
  assert.deepEqual(project.environments, ["production"]);
  assert.deepEqual(project.secretCounts, { production: 1 });
  const one = await client.json("GET", `/api/projects/${projectId}`);
  assert.equal(one.status, 200);
  assert.equal(one.body.project.role, "viewer");

  for (const path of [
    `/api/projects/${other.id}`,
    `${envPath(other.id, "production")}/secrets`,
    `${envPath(other.id, "production")}/export`,
  ]) {
    const res = await client.json("GET", path);
    assert.deepEqual([res.status, res.body], [404, NOT_FOUND], path);
  }

  const me = await client.json("GET", "/api/service-accounts/me");
  assert.deepEqual(me.body, {
    serviceAccount: { id: account.id, name: "bot", projectId, projectName: "api", role: "viewer", environments: ["production"] },
    expiresAt: null,
  });
  // Anything but a service credential: 401 not signed in.
  for (const who of [owner, await cliFor(team.server, owner), team.server.client()]) {
    const res = await who.json("GET", "/api/service-accounts/me");
    assert.deepEqual([res.status, res.body], [401, NOT_SIGNED_IN]);
  }
  // /api/auth/me is about people.
  assert.deepEqual(await client.json("GET", "/api/auth/me").then((r) => [r.status, r.body]), [401, NOT_SIGNED_IN]);

  // PATCH takes effect on the next request.
  await owner.json("PATCH", `${serviceAccountsPath(projectId)}/${account.id}`, { environments: ["development"], role: "member" });
  const after = await client.json("GET", "/api/service-accounts/me");
  assert.deepEqual([after.body.serviceAccount.role, after.body.serviceAccount.environments], ["member", ["development"]]);
  assert.equal((await client.json("GET", `${envPath(projectId, "production")}/secrets`)).status, 403);
});

test("one 401 for unknown, revoked, expired, deleted and out-of-network tokens, on every endpoint", async (t) => {
  const team = await startTeam(t);
  const { owner, projectId, server } = team;
  const secret = await createSecret(owner, projectId, "production", "DB", "db-value-5531");
  const account = await createServiceAccount(owner, projectId, { name: "bot", role: "viewer", environments: ["production"] });
  const expiring = await createServiceToken(owner, projectId, account.id, { name: "short", expiresInDays: 1 });
  const revoked = await createServiceToken(owner, projectId, account.id, { name: "revoked" });
  const elsewhere = await createServiceToken(owner, projectId, account.id, {
    name: "elsewhere",
    allowedCidrs: ["10.0.0.0/8", "2001:db8::/32"],
  });
  const local = await createServiceToken(owner, projectId, account.id, { name: "local", allowedCidrs: ["127.0.0.0/8"] });
  const read = `${envPath(projectId, "production")}/secrets/${secret.id}`;
  const as = (token: string) => server.client().withBearer(token);

  // All work before anything happens (the loopback client is inside 127.0.0.0/8, IPv4-mapped or not).
  for (const token of [expiring.token, revoked.token, local.token]) assert.equal((await as(token).json("GET", read)).status, 200);
  // Revocation counts on the very next request.
  await owner.json("DELETE", `${serviceAccountsPath(projectId)}/${account.id}/tokens/${revoked.tokenInfo.id}`);
  server.clock.advance(DAY_MS + 1000);

  const refused = [
    ["unknown", `svc_st_${"A".repeat(43)}`],
    ["malformed", "svc_st_short"],
    ["unknown workload", `svc_wt_${"B".repeat(43)}`],
    ["revoked", revoked.token],
    ["expired", expiring.token],
    ["outside its networks", elsewhere.token],
  ] as const;
  for (const [why, token] of refused) {
    for (const [method, path] of [
      ["GET", read],
      ["GET", "/api/projects"],
      ["GET", "/api/service-accounts/me"],
      ["GET", "/api/auth/me"],
      ["POST", "/api/cli/auth/logout"],
      ["GET", `/api/projects/${projectId}/members`],
      ["GET", "/healthz"],
      ["GET", "/api/no-such-route"],
    ] as const) {
      const res = await as(token).json(method, path);
      assert.deepEqual([res.status, res.body], [401, TOKEN_REFUSED], `${why}: ${method} ${path}`);
    }
  }
  assert.equal((await as(local.token).json("GET", read)).status, 200);

  // An expired token is listed nowhere, and revoking it is revoking an unknown token: 404, no event.
  const tokensPath = `${serviceAccountsPath(projectId)}/${account.id}/tokens`;
  const revokedEvents = async () => (await auditEvents(owner, projectId, "service_token.revoked")).length;
  const eventsBefore = await revokedEvents();
  assert.deepEqual(await owner.json("DELETE", `${tokensPath}/${expiring.tokenInfo.id}`).then((r) => [r.status, r.body]), [
    404,
    { error: "Token not found." },
  ]);
  assert.equal(await revokedEvents(), eventsBefore);

  // Deleting the account stops every token at once.
  await owner.json("DELETE", `${serviceAccountsPath(projectId)}/${account.id}`);
  assert.deepEqual(
    await as(local.token)
      .json("GET", read)
      .then((r) => [r.status, r.body]),
    [401, TOKEN_REFUSED],
  );
  const logged = server.logs.join("\n");
  for (const [, token] of refused) assert.ok(!logged.includes(token), "no token in the log");
});

test("allowedCidrs match the client address that rate limits use (TRUST_PROXY)", async (t) => {
  // A list of proxies: this Fastify refuses to honour a bare hop count (it cannot check the peer).
  const team = await startTeam(t, { env: { TRUST_PROXY: "loopback" } });
  const { owner, projectId, server } = team;
  const account = await createServiceAccount(owner, projectId, { name: "bot", role: "viewer", environments: ["production"] });
  const v4 = await createServiceToken(owner, projectId, account.id, { name: "v4", allowedCidrs: ["203.0.113.0/24"] });
  const v6 = await createServiceToken(owner, projectId, account.id, { name: "v6", allowedCidrs: ["2001:db8::/32"] });
  const me = (token: string) =>
    server
      .client()
      .withBearer(token)
      .json("GET", "/api/service-accounts/me")
      .then((r) => r.status);
  const meFrom = (token: string, forwarded: string) =>
    server
      .client()
      .withBearer(token)
      .request("GET", "/api/service-accounts/me", undefined, { "x-forwarded-for": forwarded })
      .then((r) => r.status);
  assert.equal(await meFrom(v4.token, "203.0.113.7"), 200, "v4 from 203.0.113.7");
  assert.equal(await meFrom(v4.token, "::ffff:203.0.113.7"), 200, "v4 from ::ffff:203.0.113.7");
  assert.equal(await meFrom(v4.token, "198.51.100.7"), 401, "v4 from 198.51.100.7");
  // Without the header the client is the loopback peer itself.
  assert.equal(await me(v4.token), 401);
  assert.equal(await meFrom(v6.token, "2001:db8::1"), 200, "v6 from 2001:db8::1");
  assert.equal(await meFrom(v6.token, "2001:db9::1"), 401, "v6 from 2001:db9::1");
  // A chain: the hop the trusted proxy saw is the client, whatever the client claimed before it.
  assert.equal(await meFrom(v4.token, "203.0.113.9, 198.51.100.7"), 401, "v4 from a spoofed chain");
  assert.equal(await meFrom(v4.token, "198.51.100.7, 203.0.113.9"), 200, "v4 through a chain");

  // lastUsedAt/lastUsedIp: written on use, then at most once a minute.
  let info = (await owner.json("GET", `${serviceAccountsPath(projectId)}/${account.id}`)).body.serviceAccount.tokens.find(
    (x: any) => x.name === "v4",
  );
  assert.equal(info.lastUsedIp, "203.0.113.7");
  const firstUse = info.lastUsedAt;
  assert.match(firstUse, ISO_MS);
  assert.equal(await meFrom(v4.token, "203.0.113.20"), 200, "v4 from 203.0.113.20");
  info = (await owner.json("GET", `${serviceAccountsPath(projectId)}/${account.id}`)).body.serviceAccount.tokens.find(
    (x: any) => x.name === "v4",
  );
  assert.deepEqual([info.lastUsedAt, info.lastUsedIp], [firstUse, "203.0.113.7"]);
  server.clock.advance(61_000);
  assert.equal(await meFrom(v4.token, "203.0.113.20"), 200, "v4 from 203.0.113.20");
  info = (await owner.json("GET", `${serviceAccountsPath(projectId)}/${account.id}`)).body.serviceAccount.tokens.find(
    (x: any) => x.name === "v4",
  );
  assert.equal(info.lastUsedIp, "203.0.113.20");
  assert.ok(info.lastUsedAt > firstUse);
});

test("token expiry follows the clock; /me reports it", async (t) => {
  const team = await startTeam(t);
  const { owner, projectId, server } = team;
  const account = await createServiceAccount(owner, projectId, { name: "bot", role: "viewer", environments: ["production"] });
  const { token, tokenInfo } = await createServiceToken(owner, projectId, account.id, { name: "week", expiresInDays: 7 });
  const client = server.client().withBearer(token);
  const me = await client.json("GET", "/api/service-accounts/me");
  assert.equal(me.body.expiresAt, tokenInfo.expiresAt);
  server.clock.advance(7 * DAY_MS - 60_000);
  assert.equal((await client.json("GET", "/api/service-accounts/me")).status, 200);
  server.clock.advance(61_000);
  assert.deepEqual(await client.json("GET", "/api/service-accounts/me").then((r) => [r.status, r.body]), [401, TOKEN_REFUSED]);
  // An expired token is no longer listed as live (a fresh session: the old one idled out).
  const again = await server.signIn("olivia@example.test");
  assert.deepEqual((await again.json("GET", `${serviceAccountsPath(projectId)}/${account.id}`)).body.serviceAccount.tokens, []);
});

test("audit: events of a service account carry it and no actor, and the actor filter finds them after deletion", async (t) => {
  const team = await startTeam(t);
  const { owner, projectId } = team;
  const secret = await createSecret(owner, projectId, "production", "DB", "db-value-9921");
  const bot = await machine(team, { name: "writer-bot", role: "member", environments: ["production"] });
  await bot.client.json("GET", `${envPath(projectId, "production")}/secrets/${secret.id}`);
  await bot.client.json("PATCH", `${envPath(projectId, "production")}/secrets/${secret.id}`, { value: "db-value-9922" });
  await bot.client.json("GET", `${envPath(projectId, "production")}/export`);
  await owner.json("DELETE", `${serviceAccountsPath(projectId)}/${bot.account.id}`);

  const page = await owner.json("GET", `/api/projects/${projectId}/audit?actor=${bot.account.id}`);
  assert.equal(page.status, 200);
  assert.deepEqual(
    page.body.events.map((e: any) => [e.action, e.actor, e.serviceAccount, e.metadata.via]),
    [
      ["secrets.exported", null, { id: bot.account.id, name: "writer-bot" }, "service_token"],
      ["secret.updated", null, { id: bot.account.id, name: "writer-bot" }, "service_token"],
      ["secret.revealed", null, { id: bot.account.id, name: "writer-bot" }, "service_token"],
    ],
  );
  const all = await owner.json("GET", `/api/projects/${projectId}/audit?category=access`);
  const people = all.body.events.filter((e: any) => e.actor !== null);
  assert.ok(people.length > 0);
  assert.ok(people.every((e: any) => e.serviceAccount === null));
  assert.deepEqual(
    all.body.events.filter((e: any) => e.action.startsWith("service_")).map((e: any) => e.action),
    ["service_account.deleted", "service_token.created", "service_account.created"],
  );
  // The person filter still works as before.
  const byOwner = await owner.json("GET", `/api/projects/${projectId}/audit?actor=${owner.user!.id}&action=service_account.deleted`);
  assert.equal(byOwner.body.events.length, 1);
  assert.deepEqual(byOwner.body.events[0].actor.userId, owner.user!.id);
  const filtered = await owner.json("GET", `/api/projects/${projectId}/audit?actor=${bot.account.id}&action=secret.updated`);
  assert.equal(filtered.body.events.length, 1);

  // The chain still verifies with the service account in it.
  const verified = await runMain(["audit", "verify"], team.server.env);
  assert.equal(verified.code, 0, verified.stderr);
});

test("security overview counts accounts, live tokens and trusts", async (t) => {
  const team = await startTeam(t);
  const { owner, projectId, server } = team;
  const a = await createServiceAccount(owner, projectId, { name: "a", role: "viewer", environments: ["production"] });
  const b = await createServiceAccount(owner, projectId, { name: "b", role: "member", environments: ["production"] });
  await createServiceToken(owner, projectId, a.id, { name: "old" });
  const used = await createServiceToken(owner, projectId, a.id, { name: "used", expiresInDays: 365 });
  await createServiceToken(owner, projectId, b.id, { name: "short", expiresInDays: 1 });
  await owner.json("POST", `${serviceAccountsPath(projectId)}/${b.id}/trusts`, {
    issuer: "https://issuer.example",
    audience: "a",
    subject: "s",
  });
  server.clock.advance(91 * DAY_MS);
  await server.client().withBearer(used.token).json("GET", "/api/service-accounts/me");
  const again = await server.signIn("olivia@example.test");
  const overview = await again.json("GET", `/api/projects/${projectId}/security`);
  assert.equal(overview.status, 200);
  assert.deepEqual(overview.body.access.serviceAccounts, {
    accounts: 2,
    tokens: 2,
    tokensWithoutExpiry: 1,
    tokensUnusedFor90Days: 1,
    trusts: 1,
  });
  // The counts that call for action are findings too, after the critical ones, with the place to act.
  const findings = overview.body.findings as { severity: string; code: string; message: string; where: unknown }[];
  assert.deepEqual(
    findings.filter((f) => f.code.startsWith("service_tokens_")),
    [
      {
        severity: "warning",
        code: "service_tokens_without_expiry",
        message:
          "1 service token never expires: a leaked one works until someone revokes it. Replace it with tokens that expire, or with a trust.",
        where: { page: "service-accounts" },
      },
      {
        severity: "info",
        code: "service_tokens_unused",
        message: "1 service token has not been used for 90 days. Revoke it if nothing needs it.",
        where: { page: "service-accounts" },
      },
    ],
  );
  const order = ["critical", "warning", "info"];
  const ranks = findings.map((f) => order.indexOf(f.severity));
  assert.deepEqual(
    ranks,
    [...ranks].sort((x, y) => x - y),
    "most severe first",
  );
});

test("rate limits count per service account", async (t) => {
  const team = await startTeam(t);
  const { owner, projectId } = team;
  const first = await machine(team, { name: "first", role: "viewer", environments: ["production"] });
  const second = await machine(team, { name: "second", role: "viewer", environments: ["production"] });
  const exportPath = `${envPath(projectId, "production")}/export`;
  for (let i = 0; i < 30; i++) assert.equal((await first.client.json("GET", exportPath)).status, 200);
  const limited = await first.client.json("GET", exportPath);
  assert.equal(limited.status, 429);
  // Another token of the same account shares the count; another account and people do not.
  const sameAccount = await createServiceToken(owner, projectId, first.account.id, { name: "again" });
  assert.equal((await team.server.client().withBearer(sameAccount.token).json("GET", exportPath)).status, 429);
  assert.equal((await second.client.json("GET", exportPath)).status, 200);
  assert.equal((await owner.json("GET", exportPath)).status, 200);
});
