import assert from "node:assert/strict";
import crypto from "node:crypto";
import { type TestContext, test } from "node:test";
import { type FakeVercel, isEnvCreate, isEnvList, isEnvUpdate, startFakeVercel } from "./fake-vercel.ts";
import {
  type AuditRow,
  auditEvents,
  automaticRunElsewhere,
  Client,
  onPostgres,
  randomMasterKey,
  runMain,
  startServer,
  startServerProcess,
  type TestServer,
  waitFor,
} from "./helpers.ts";
import { auditRows, rowCount, setSyncLock, storedRows } from "./storage.ts";
import { committedVersion, SyncGate, settlesWithin } from "./sync-gate.ts";

// The Vercel integration and its sync engine, against a fake Vercel API (test/fake-vercel.ts).

const ISO_MS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const ALL_ENVS = ["development", "staging", "production"];
const M = {
  enterToken: { error: "Enter a Vercel access token." },
  teamShape: { error: "Team ID should look like team_xxxxxxxx." },
  tokenRejected: { error: "Vercel did not accept this access token. Check it and try again." },
  teamNotFound: { error: "This access token cannot reach that Vercel team. Check the team ID." },
  unreachable: { error: "Vercel could not be reached. Try again in a few minutes." },
  notConnected: { error: "Connect Vercel first." },
  linkFirst: { error: "Link a Vercel project first." },
  reconnect: { error: "Reconnect Vercel before syncing." },
  busy: { error: "A sync is already running. It will pick up your changes." },
  savedTokenRejected: { error: "Vercel rejected the saved access token. Reconnect Vercel with a new token." },
  syncUnavailable: { error: "Vercel could not be reached or kept failing. Try the sync again in a few minutes." },
  forbidden: { error: "You do not have permission to do this in this project." },
  notFound: { error: "Project not found." },
};

function newToken(): string {
  return `vcp_${crypto.randomBytes(18).toString("hex")}`;
}

interface Setup {
  fake: FakeVercel;
  server: TestServer;
  owner: Client;
  projectId: string;
  base: string;
  token: string;
}

async function setup(
  t: TestContext,
  options: { env?: Record<string, string>; environments?: string[]; beforeWalSync?: () => Promise<void> } = {},
): Promise<Setup> {
  const fake = await startFakeVercel();
  t.after(() => fake.stop());
  const token = newToken();
  fake.addToken(token, ["team_acme1234"]);
  fake.addTeam("team_acme1234", "Acme");
  fake.addTeam("team_other999", "Other");
  fake.addProject("prj_web", "web");
  fake.addProject("prj_team", "team-site", "team_acme1234");
  const server = await startServer(t, {
    env: { VERCEL_API_URL: fake.url, SYNC_DEBOUNCE_MS: "40", VERCEL_RETRY_BASE_MS: "5", ...options.env },
    beforeWalSync: options.beforeWalSync,
  });
  const owner = await server.signIn("owner@example.test");
  const project = await owner.createProject({ name: "api", environments: options.environments ?? ALL_ENVS });
  return { fake, server, owner, projectId: project.id, base: `/api/projects/${project.id}/integrations/hosting`, token };
}

/** Connected and linked: development → development, production → production. */
async function linked(t: TestContext, link: Record<string, unknown> = {}, options: Parameters<typeof setup>[1] = {}): Promise<Setup> {
  const s = await setup(t, options);
  const connected = await s.owner.json("POST", s.base, { token: s.token });
  assert.equal(connected.status, 201, JSON.stringify(connected.body));
  const put = await s.owner.json("PUT", s.base, {
    hostProjectId: "prj_web",
    mappings: { development: "development", production: "production" },
    ...link,
  });
  assert.equal(put.status, 200, JSON.stringify(put.body));
  return s;
}

/** Connected and linked with a deploy hook and autoRedeploy: development → development. */
async function autoRedeploying(t: TestContext, options: Parameters<typeof setup>[1] = {}): Promise<Setup> {
  const s = await setup(t, options);
  await s.owner.json("POST", s.base, { token: s.token });
  const put = await s.owner.json("PUT", s.base, {
    hostProjectId: "prj_web",
    mappings: { development: "development" },
    autoRedeploy: true,
    deployHookUrl: s.fake.addHook("prj_web"),
  });
  assert.equal(put.status, 200, JSON.stringify(put.body));
  return s;
}

async function addSecret(s: Setup, environment: string, key: string, value: string): Promise<string> {
  const res = await s.owner.json("POST", `/api/projects/${s.projectId}/environments/${environment}/secrets`, { key, value });
  assert.equal(res.status, 201, JSON.stringify(res.body));
  return res.body.secret.id as string;
}

/** The project's integration events, oldest first, as its owner reads the audit log. */
function integrationEvents(s: Setup): Promise<AuditRow[]> {
  return auditEvents(s.owner, s.projectId, "integration.");
}

/** The connection as stored, to prove the token and hook are stored encrypted (or gone). */
function integrationRow(s: Setup): Record<string, unknown> | undefined {
  return storedRows(s.server, "integrations", { project_id: s.projectId })[0];
}

/** Waits until no sync runs and nothing is pending, and returns the connection. */
async function settled(s: Setup): Promise<any> {
  return waitFor("the automatic sync", async () => {
    const res = await s.owner.json("GET", s.base);
    return !res.body.syncing && res.body.pending === 0 && res.body.lastRun?.status !== "running" ? res.body : undefined;
  });
}

function counts(summary: Record<string, unknown>) {
  const { created, updated, unchanged, skipped, deleted, failed } = summary;
  return { created, updated, unchanged, skipped, deleted, failed };
}

// ---------------------------------------------------------------------------------------
// Connect

test("connect: missing token and malformed team ids are 400 with the exact messages, and nothing is stored", async (t) => {
  const s = await setup(t);
  for (const body of [{}, { token: "" }, { token: "   " }, { token: 42 }, { teamId: "team_acme1234" }]) {
    const res = await s.owner.json("POST", s.base, body);
    assert.equal(res.status, 400, JSON.stringify(body));
    assert.deepEqual(res.body, M.enterToken);
  }
  for (const teamId of ["acme", "team_", "team acme", 7]) {
    const res = await s.owner.json("POST", s.base, { token: s.token, teamId });
    assert.equal(res.status, 400, JSON.stringify(teamId));
    assert.deepEqual(res.body, M.teamShape);
  }
  assert.deepEqual((await s.owner.json("GET", s.base)).body, { connected: false });
  assert.equal(s.fake.requests.length, 0, "nothing was sent to Vercel for invalid input");
});

test("connect: a token Vercel rejects is a 400 that never echoes it; an unreachable team too; nothing is stored", async (t) => {
  const s = await setup(t);
  const wrong = newToken();
  const rejected = await s.owner.json("POST", s.base, { token: wrong });
  assert.equal(rejected.status, 400);
  assert.deepEqual(rejected.body, M.tokenRejected);
  assert.ok(!JSON.stringify(rejected.body).includes(wrong));

  const otherTeam = await s.owner.json("POST", s.base, { token: s.token, teamId: "team_other999" });
  assert.equal(otherTeam.status, 400);
  assert.deepEqual(otherTeam.body, M.teamNotFound);
  const unknownTeam = await s.owner.json("POST", s.base, { token: s.token, teamId: "team_nowhere1" });
  assert.deepEqual([unknownTeam.status, unknownTeam.body], [400, M.teamNotFound]);

  assert.deepEqual((await s.owner.json("GET", s.base)).body, { connected: false });
  assert.equal(integrationRow(s), undefined);
  assert.deepEqual(await integrationEvents(s), []);
});

test("connect: 502 when Vercel is down or answers 5xx", async (t) => {
  const s = await setup(t);
  s.fake.inject(500, { times: 10 });
  const failing = await s.owner.json("POST", s.base, { token: s.token });
  assert.deepEqual([failing.status, failing.body], [502, M.unreachable]);
  // Retried a bounded number of times (GET is safe to repeat).
  assert.equal(s.fake.requests.filter((r) => r.path === "/v2/user").length, 4);

  await s.fake.stop();
  const down = await s.owner.json("POST", s.base, { token: s.token });
  assert.deepEqual([down.status, down.body], [502, M.unreachable]);
  assert.deepEqual((await s.owner.json("GET", s.base)).body, { connected: false });
  assert.equal(integrationRow(s), undefined);
});

test("connect: a good token (and team) is checked with Vercel, stored encrypted, answered 201 with the connection", async (t) => {
  const s = await setup(t);
  const res = await s.owner.json("POST", s.base, { token: s.token, teamId: "team_acme1234" });
  assert.equal(res.status, 201, JSON.stringify(res.body));
  assert.deepEqual(res.body, {
    connected: true,
    status: "connected",
    hostProjectId: null,
    hostProjectName: null,
    teamId: "team_acme1234",
    mappings: {},
    autoRedeploy: false,
    hookConfigured: false,
    conflictPolicy: "skip",
    lastSyncAt: null,
    lastSyncStatus: null,
    lastError: null,
    syncing: false,
    pending: 0,
    environments: ALL_ENVS,
    lastRun: null,
    lastDeployment: null,
    connectedBy: { userId: s.owner.user!.id, email: "owner@example.test" },
    paused: false,
    pausedAt: null,
    pausedReason: null,
  });
  assert.deepEqual((await s.owner.json("GET", s.base)).body, res.body);
  // Vercel saw the token as a Bearer header on /v2/user and /v2/teams.
  assert.deepEqual(
    s.fake.requests.map((r) => [r.method, r.path, r.authorization === `Bearer ${s.token}`]),
    [
      ["GET", "/v2/user", true],
      ["GET", "/v2/teams", true],
    ],
  );
  const row = integrationRow(s)!;
  assert.ok(Buffer.isBuffer(row.token_ciphertext));
  assert.ok(!(row.token_ciphertext as Buffer).toString("latin1").includes(s.token), "the token is encrypted at rest");
  assert.deepEqual(
    (await integrationEvents(s)).map((e) => [e.action, e.actor, e.metadata]),
    [["integration.connected", s.owner.user!.id, { provider: "vercel", teamId: "team_acme1234" }]],
  );

  // Connecting again replaces the token.
  const second = newToken();
  s.fake.addToken(second);
  const again = await s.owner.json("POST", s.base, { token: second });
  assert.equal(again.status, 201);
  assert.equal(again.body.teamId, null);
  const options = await s.owner.json("GET", `${s.base}/options`);
  assert.equal(options.status, 200);
  assert.equal(s.fake.requests.at(-1)!.authorization, `Bearer ${second}`);
});

test("reconnect: the link is kept only when the new token and team still reach the linked project; team scope is sent on every call", async (t) => {
  const s = await linked(t, {}, { env: { SYNC_DEBOUNCE_MS: "600000" } });
  const teamToken = newToken();
  s.fake.addToken(teamToken, ["team_acme1234"]);
  // prj_web lives in the personal account, not in the team: the link is cleared.
  const moved = await s.owner.json("POST", s.base, { token: teamToken, teamId: "team_acme1234" });
  assert.equal(moved.status, 201, JSON.stringify(moved.body));
  assert.deepEqual(
    [moved.body.status, moved.body.hostProjectId, moved.body.mappings, moved.body.teamId],
    ["connected", null, {}, "team_acme1234"],
  );
  const notLinked = await s.owner.json("POST", `${s.base}/sync`);
  assert.deepEqual([notLinked.status, notLinked.body], [400, M.linkFirst]);

  const put = await s.owner.json("PUT", s.base, { hostProjectId: "prj_team", mappings: { staging: "preview" } });
  assert.equal(put.status, 200, JSON.stringify(put.body));
  await addSecret(s, "staging", "TEAM_KEY", "team-scoped-value");
  const start = s.fake.requests.length;
  const res = await s.owner.json("POST", `${s.base}/sync`);
  assert.equal(res.status, 200, JSON.stringify(res.body));
  assert.equal(res.body.summary.created, 1);
  assert.deepEqual(s.fake.envFor("prj_team", "TEAM_KEY", "preview")!.target, ["preview"]);
  const calls = s.fake.requests.slice(start);
  assert.ok(calls.length >= 2);
  for (const call of calls) assert.equal(call.query.get("teamId"), "team_acme1234", `${call.method} ${call.path}`);
});

test("access: admins may manage the integration; members get 403, non-members 404, CLI tokens 403, signed-out 401", async (t) => {
  const s = await setup(t);
  const admin = await s.server.signIn("admin@example.test");
  const member = await s.server.signIn("member@example.test");
  const outsider = await s.server.signIn("outsider@example.test");
  for (const [client, role] of [
    [admin, "admin"],
    [member, "member"],
  ] as const) {
    const invited = await s.owner.json("POST", `/api/projects/${s.projectId}/invitations`, { email: client.user!.email, role });
    assert.equal(invited.status, 201, JSON.stringify(invited.body));
    const accepted = await client.json("POST", "/api/invitations/accept", { token: new URL(invited.body.devAcceptUrl).hash.slice(1) });
    assert.equal(accepted.status, 200, JSON.stringify(accepted.body));
  }
  const byAdmin = await admin.json("POST", s.base, { token: s.token });
  assert.equal(byAdmin.status, 201);

  const routes: [string, string, unknown?][] = [
    ["GET", s.base],
    ["POST", s.base, { token: s.token }],
    ["GET", `${s.base}/options`],
    ["PUT", s.base, { hostProjectId: "prj_web", mappings: { development: "development" } }],
    ["POST", `${s.base}/sync`],
    ["DELETE", s.base],
  ];
  for (const [method, url, body] of routes) {
    const asMember = await member.json(method, url, body);
    assert.deepEqual([asMember.status, asMember.body], [403, M.forbidden], `${method} ${url} as member`);
    const asOutsider = await outsider.json(method, url, body);
    assert.deepEqual([asOutsider.status, asOutsider.body], [404, M.notFound], `${method} ${url} as outsider`);
    const signedOut = await s.server.client().json(method, url, body);
    assert.equal(signedOut.status, 401, `${method} ${url} signed out`);
  }

  // A CLI token is refused on every route (browser only).
  const device = await s.server.client().json("POST", "/api/cli/auth/device", { deviceName: "laptop" });
  await s.owner.json("POST", "/api/cli/auth/approve", { userCode: device.body.userCode });
  const tokens = await s.server.client().json("POST", "/api/cli/auth/token", { deviceCode: device.body.deviceCode });
  const cli = s.owner.withBearer(tokens.body.accessToken);
  for (const [method, url, body] of routes) {
    const res = await cli.json(method, url, body);
    assert.equal(res.status, 403, `${method} ${url} with a CLI token`);
  }
  assert.equal((await s.owner.json("GET", s.base)).body.connected, true, "nothing above changed the connection");
});

// ---------------------------------------------------------------------------------------
// Options

test("options: teams and projects visible to the token, every page followed, ids and names only", async (t) => {
  const s = await setup(t);
  s.fake.maxPageSize = 3;
  for (let i = 0; i < 8; i++) s.fake.addProject(`prj_p${i}`, `personal-${i}`);
  for (let i = 0; i < 5; i++) s.fake.addProject(`prj_t${i}`, `team-${i}`, "team_acme1234");
  for (let i = 0; i < 5; i++) {
    s.fake.addTeam(`team_more${i}x`, `More ${i}`);
    s.fake.tokens.get(s.token)!.add(`team_more${i}x`);
  }

  const notYet = await s.owner.json("GET", `${s.base}/options`);
  assert.deepEqual([notYet.status, notYet.body], [400, M.notConnected]);
  assert.equal((await s.owner.json("POST", s.base, { token: s.token })).status, 201);

  const res = await s.owner.json("GET", `${s.base}/options`);
  assert.equal(res.status, 200, JSON.stringify(res.body));
  assert.deepEqual(Object.keys(res.body).sort(), ["projects", "teams"]);
  const byId = <T extends { id: string }>(list: T[]) => [...list].sort((a, b) => a.id.localeCompare(b.id));
  assert.deepEqual(
    byId(res.body.teams),
    byId([{ id: "team_acme1234", name: "Acme" }, ...[0, 1, 2, 3, 4].map((i) => ({ id: `team_more${i}x`, name: `More ${i}` }))]),
  );
  assert.deepEqual(
    byId(res.body.projects),
    byId([{ id: "prj_web", name: "web" }, ...[0, 1, 2, 3, 4, 5, 6, 7].map((i) => ({ id: `prj_p${i}`, name: `personal-${i}` }))]),
  );
  for (const item of [...res.body.teams, ...res.body.projects]) assert.deepEqual(Object.keys(item).sort(), ["id", "name"]);
  // 9 projects at 3 per page: the cursor was passed back as received until next was null.
  const projectCalls = s.fake.requests.filter((r) => r.path === "/v10/projects");
  assert.equal(projectCalls.length, 3);
  assert.equal(projectCalls[0]!.query.get("from"), null);
  assert.match(projectCalls[1]!.query.get("from")!, /^\d+$/);

  const team = await s.owner.json("GET", `${s.base}/options?teamId=team_acme1234`);
  assert.equal(team.status, 200);
  assert.deepEqual(
    byId(team.body.projects),
    byId([{ id: "prj_team", name: "team-site" }, ...[0, 1, 2, 3, 4].map((i) => ({ id: `prj_t${i}`, name: `team-${i}` }))]),
  );
  assert.equal(s.fake.requests.at(-1)!.query.get("teamId"), "team_acme1234");

  const bad = await s.owner.json("GET", `${s.base}/options?teamId=acme`);
  assert.deepEqual([bad.status, bad.body], [400, M.teamShape]);
});

test("options: a token Vercel now rejects moves the connection to attention", async (t) => {
  const s = await setup(t);
  await s.owner.json("POST", s.base, { token: s.token });
  s.fake.revokeToken(s.token);
  const res = await s.owner.json("GET", `${s.base}/options`);
  assert.deepEqual([res.status, res.body], [400, M.savedTokenRejected]);
  const after = await s.owner.json("GET", s.base);
  assert.equal(after.body.status, "attention");
  assert.equal(after.body.lastError, M.savedTokenRejected.error);
  assert.ok(!after.body.lastError.includes(s.token));
});

// ---------------------------------------------------------------------------------------
// PUT

test("PUT: every rule of 4.4, then a valid link makes the connection active", async (t) => {
  const s = await setup(t, { environments: ["development", "production"] });
  const valid = { hostProjectId: "prj_web", mappings: { development: "development", production: "production" } };
  const notYet = await s.owner.json("PUT", s.base, valid);
  assert.deepEqual([notYet.status, notYet.body], [400, M.notConnected]);
  await s.owner.json("POST", s.base, { token: s.token });
  const hook = s.fake.addHook("prj_web");
  const otherHook = s.fake.addHook("prj_team");
  const fakeUrl = new URL(s.fake.url);
  const hookPath = new URL(hook).pathname;

  const cases: [unknown, string][] = [
    [{ mappings: valid.mappings }, "Choose a Vercel project (hostProjectId)."],
    [{ ...valid, hostProjectId: "" }, "Choose a Vercel project (hostProjectId)."],
    [{ hostProjectId: "prj_web" }, "Map at least one environment to a Vercel target (development, preview or production)."],
    [{ ...valid, mappings: {} }, "Map at least one environment to a Vercel target (development, preview or production)."],
    [{ ...valid, mappings: ["development"] }, "Map at least one environment to a Vercel target (development, preview or production)."],
    [{ ...valid, mappings: { development: "staging" } }, "Vercel targets are development, preview and production."],
    [
      { ...valid, mappings: { development: "production", production: "production" } },
      "Two environments cannot sync to the same Vercel target.",
    ],
    [{ ...valid, mappings: { staging: "preview" } }, "Mappings may only name this project's environments: development, production."],
    [{ ...valid, mappings: { qa: "preview" } }, "Mappings may only name this project's environments: development, production."],
    [{ ...valid, conflictPolicy: "replace" }, "conflictPolicy must be skip or overwrite."],
    [{ ...valid, autoRedeploy: "yes" }, "autoRedeploy must be true or false."],
    [{ ...valid, autoRedeploy: true }, "Automatic redeploy needs a deploy hook URL."],
    [{ ...valid, autoRedeploy: true, deployHookUrl: null }, "Automatic redeploy needs a deploy hook URL."],
    [{ ...valid, teamId: "acme" }, "Team ID should look like team_xxxxxxxx."],
    [{ ...valid, extra: 1 }, "Send a JSON object with the documented fields only."],
    [{ ...valid, hostProjectId: "prj_missing" }, "That Vercel project was not found for this token and team."],
    [{ ...valid, hostProjectId: "prj_team" }, "That Vercel project was not found for this token and team."],
    [{ ...valid, deployHookUrl: otherHook }, "This deploy hook belongs to another Vercel project."],
  ];
  for (const [body, error] of cases) {
    const res = await s.owner.json("PUT", s.base, body);
    assert.deepEqual([res.status, res.body], [400, { error }], JSON.stringify(body));
  }

  // The SSRF rule: only VERCEL_API_URL's host, https or its own scheme, /v1/integrations/deploy/…
  const hookMessage = `The deploy hook URL must look like ${s.fake.url}/v1/integrations/deploy/prj_…/…`;
  const refused = [
    `http://127.0.0.2:${fakeUrl.port}${hookPath}`,
    `http://localhost:${fakeUrl.port}${hookPath}`,
    `https://api.vercel.com${hookPath}`,
    `https://evil.example${hookPath}`,
    `http://127.0.0.1:${Number(fakeUrl.port) + 1}${hookPath}`,
    `ftp://127.0.0.1:${fakeUrl.port}${hookPath}`,
    `${s.fake.url}/v2/user`,
    `${s.fake.url}/v1/integrations/deploy/prj_web`,
    `${s.fake.url}/v1/integrations/deploy/../../v2/user/x`,
    `${s.fake.url}/v1/integrations/deploy/prj_web/%2e%2e/x`,
    `${s.fake.url}/v1/integrations/deploy/prj_web/abc/extra`,
    `http://user:pass@127.0.0.1:${fakeUrl.port}${hookPath}`,
    `${hook}#fragment`,
    "not a url",
    "/v1/integrations/deploy/prj_web/abc",
  ];
  for (const deployHookUrl of refused) {
    const res = await s.owner.json("PUT", s.base, { ...valid, deployHookUrl });
    assert.deepEqual([res.status, res.body], [400, { error: hookMessage }], deployHookUrl);
  }
  const hookCallsBefore = s.fake.requests.filter((r) => r.path.startsWith("/v1/integrations/deploy/")).length;
  assert.equal(hookCallsBefore, 0, "a PUT never calls the hook");
  assert.equal((await s.owner.json("GET", s.base)).body.status, "connected", "no rejected PUT changed anything");

  // https on VERCEL_API_URL's host passes the rule (the hook is then checked against Vercel's project).
  const httpsHook = `https://127.0.0.1:${fakeUrl.port}/v1/integrations/deploy/prj_web/abc123`;
  const httpsOk = await s.owner.json("PUT", s.base, { ...valid, deployHookUrl: httpsHook });
  assert.equal(httpsOk.status, 200, JSON.stringify(httpsOk.body));

  const res = await s.owner.json("PUT", s.base, { ...valid, autoRedeploy: true, deployHookUrl: hook, conflictPolicy: "overwrite" });
  assert.equal(res.status, 200, JSON.stringify(res.body));
  assert.equal(res.body.status, "active");
  assert.equal(res.body.hostProjectId, "prj_web");
  assert.equal(res.body.hostProjectName, "web");
  assert.deepEqual(res.body.mappings, valid.mappings);
  assert.equal(res.body.conflictPolicy, "overwrite");
  assert.equal(res.body.autoRedeploy, true);
  assert.equal(res.body.hookConfigured, true);
  assert.ok(!JSON.stringify(res.body).includes(hookPath.split("/").at(-1)!), "the hook URL is never returned");
  const row = integrationRow(s)!;
  assert.ok(!(row.hook_ciphertext as Buffer).toString("latin1").includes(hookPath), "the hook is encrypted at rest");

  // Defaults: conflictPolicy skip, autoRedeploy false; an omitted hook is kept; by name works.
  const byName = await s.owner.json("PUT", s.base, { hostProjectId: "web", mappings: { production: "production" } });
  assert.equal(byName.status, 200);
  assert.deepEqual(
    [byName.body.hostProjectId, byName.body.conflictPolicy, byName.body.autoRedeploy, byName.body.hookConfigured],
    ["prj_web", "skip", false, true],
  );
  const removed = await s.owner.json("PUT", s.base, { ...valid, deployHookUrl: null });
  assert.equal(removed.body.hookConfigured, false);
  assert.equal(integrationRow(s)!.hook_ciphertext, null);

  // A team project needs its team.
  const team = await s.owner.json("PUT", s.base, { ...valid, hostProjectId: "prj_team", teamId: "team_acme1234" });
  assert.equal(team.status, 200, JSON.stringify(team.body));
  assert.deepEqual([team.body.hostProjectId, team.body.teamId], ["prj_team", "team_acme1234"]);

  const updates = (await integrationEvents(s)).filter((e) => e.action === "integration.updated");
  assert.equal(updates.length, 5);
  assert.deepEqual(updates[1]!.metadata, {
    hostProjectId: "prj_web",
    hostProjectName: "web",
    teamId: null,
    mappings: valid.mappings,
    conflictPolicy: "overwrite",
    autoRedeploy: true,
    hookConfigured: true,
  });
});

// ---------------------------------------------------------------------------------------
// Sync

test("sync: creates missing vars, skips others' vars, counts unchanged ones, never touches other targets", async (t) => {
  const s = await setup(t, { env: { SYNC_DEBOUNCE_MS: "600000" } });
  await s.owner.json("POST", s.base, { token: s.token });
  const notLinked = await s.owner.json("POST", `${s.base}/sync`);
  assert.deepEqual([notLinked.status, notLinked.body], [400, M.linkFirst]);
  await s.owner.json("PUT", s.base, { hostProjectId: "prj_web", mappings: { development: "development", production: "production" } });

  await addSecret(s, "development", "API_URL", "https://dev.example.test");
  await addSecret(s, "development", "SHARED_KEY", "dev-shared-value");
  await addSecret(s, "production", "API_URL", "https://prod.example.test");
  await addSecret(s, "production", "SAME_VALUE", "identical-value");
  await addSecret(s, "staging", "STAGING_ONLY", "not-mapped-value");
  const others = s.fake.addEnv("prj_web", { key: "SHARED_KEY", value: "someone-elses", type: "encrypted", target: ["development"] });
  const same = s.fake.addEnv("prj_web", { key: "SAME_VALUE", value: "identical-value", type: "encrypted", target: ["production"] });
  const preview = s.fake.addEnv("prj_web", {
    key: "API_URL",
    value: "https://preview.example.test",
    type: "encrypted",
    target: ["preview"],
  });
  const unrelated = s.fake.addEnv("prj_web", { key: "THEIRS", value: "left-alone", type: "plain", target: ["production"] });
  assert.equal((await s.owner.json("GET", s.base)).body.pending, 4);

  const res = await s.owner.json("POST", `${s.base}/sync`);
  assert.equal(res.status, 200, JSON.stringify(res.body));
  const summary = res.body.summary;
  assert.deepEqual(counts(summary), { created: 2, updated: 0, unchanged: 1, skipped: 1, deleted: 0, failed: 0 });
  assert.equal(summary.status, "ok");
  assert.equal(summary.trigger, "manual");
  assert.match(summary.startedAt, ISO_MS);
  assert.match(summary.finishedAt, ISO_MS);
  assert.deepEqual(summary.results, [
    { environment: "development", target: "development", key: "SHARED_KEY", result: "skipped", reason: "exists" },
  ]);

  const devVar = s.fake.envFor("prj_web", "API_URL", "development")!;
  assert.deepEqual([devVar.value, devVar.type, devVar.target], ["https://dev.example.test", "encrypted", ["development"]]);
  const prodVar = s.fake.envFor("prj_web", "API_URL", "production")!;
  assert.deepEqual([prodVar.value, prodVar.target], ["https://prod.example.test", ["production"]]);
  assert.notEqual(devVar.id, prodVar.id, "one var per target");
  assert.equal(others.value, "someone-elses");
  assert.equal(same.value, "identical-value");
  assert.equal(preview.value, "https://preview.example.test");
  assert.equal(unrelated.value, "left-alone");
  assert.equal(
    s.fake.envs("prj_web").some((e) => e.key === "STAGING_ONLY"),
    false,
  );
  assert.equal(s.fake.envs("prj_web").length, 6);
  // Values were read decrypted, never compared with ciphertext.
  assert.ok(s.fake.requests.filter(isEnvList).every((r) => r.query.get("decrypt") === "true"));

  // A second run finds everything in place: unchanged, not updated.
  const again = await s.owner.json("POST", `${s.base}/sync`);
  assert.deepEqual(counts(again.body.summary), { created: 0, updated: 0, unchanged: 3, skipped: 1, deleted: 0, failed: 0 });

  const view = (await s.owner.json("GET", s.base)).body;
  assert.equal(view.lastSyncStatus, "ok");
  assert.match(view.lastSyncAt, ISO_MS);
  assert.equal(view.lastError, null);
  assert.deepEqual(view.lastRun, again.body.summary);
  const synced = (await integrationEvents(s)).filter((e) => e.action === "integration.synced");
  assert.deepEqual(synced[0]!.metadata, { trigger: "manual", created: 2, updated: 0, unchanged: 1, skipped: 1, deleted: 0, failed: 0 });
  assert.equal(synced[0]!.actor, s.owner.user!.id);
});

test("sync: overwrite updates others' vars in place, sensitive ones too; vars shared with other targets are left", async (t) => {
  const s = await linked(t, { conflictPolicy: "overwrite" }, { env: { SYNC_DEBOUNCE_MS: "600000" } });
  await addSecret(s, "production", "DB_URL", "postgres://new-value");
  await addSecret(s, "production", "MULTI", "multi-new-value");
  await addSecret(s, "production", "HIDDEN", "hidden-new-value");
  await addSecret(s, "production", "PLAIN_SAME", "plain-value-1");
  const theirs = s.fake.addEnv("prj_web", { key: "DB_URL", value: "postgres://old-value", type: "encrypted", target: ["production"] });
  const multi = s.fake.addEnv("prj_web", { key: "MULTI", value: "multi-old", type: "encrypted", target: ["production", "preview"] });
  const hidden = s.fake.addEnv("prj_web", { key: "HIDDEN", value: "hidden-old", type: "sensitive", target: ["production"] });
  s.fake.addEnv("prj_web", { key: "PLAIN_SAME", value: "plain-value-1", type: "plain", target: ["production"] });
  const plain = s.fake.addEnv("prj_web", { key: "PLAIN_OLD", value: "plain-old", type: "plain", target: ["production"] });
  await addSecret(s, "production", "PLAIN_OLD", "plain-new-value");

  const res = await s.owner.json("POST", `${s.base}/sync`);
  assert.equal(res.status, 200, JSON.stringify(res.body));
  // DB_URL and PLAIN_OLD overwritten, HIDDEN (unreadable, so never "unchanged") overwritten, MULTI shared.
  assert.deepEqual(counts(res.body.summary), { created: 0, updated: 3, unchanged: 1, skipped: 1, deleted: 0, failed: 0 });
  assert.deepEqual(res.body.summary.results, [
    { environment: "production", target: "production", key: "MULTI", result: "skipped", reason: "shared" },
  ]);
  assert.equal(theirs.value, "postgres://new-value");
  assert.equal(s.fake.envs("prj_web").filter((e) => e.key === "DB_URL").length, 1, "updated in place, same id");
  assert.equal(hidden.value, "hidden-new-value");
  assert.equal(hidden.type, "sensitive", "stays unreadable");
  // A plain var is readable by anyone on the Vercel project: our value makes it encrypted.
  assert.deepEqual([plain.value, plain.type], ["plain-new-value", "encrypted"]);
  assert.equal(multi.value, "multi-old");
  assert.deepEqual(multi.target, ["production", "preview"]);
});

test("sync: our own vars follow the secret (update, delete) under skip; others' are never deleted; a partial failure records per-key results", async (t) => {
  // Both changes below must land in one debounced run: a debounce long enough for two
  // requests on a busy machine, and the two sent together.
  const s = await linked(t, {}, { env: { SYNC_DEBOUNCE_MS: "400" } });
  const id = await addSecret(s, "development", "TOKEN_A", "first-value-a");
  const goneId = await addSecret(s, "development", "GONE_SOON", "will-be-deleted");
  await addSecret(s, "development", "_LEADING", "vercel-refuses-this");
  await addSecret(s, "development", "TZ", "reserved-at-vercel");
  const theirs = s.fake.addEnv("prj_web", { key: "KEEP_THEIRS", value: "theirs-value", type: "encrypted", target: ["development"] });
  const first = await settled(s);
  // The automatic run created TOKEN_A and GONE_SOON; two keys Vercel refused.
  assert.equal(first.lastSyncStatus, "partial");
  assert.deepEqual(counts(first.lastRun), { created: 2, updated: 0, unchanged: 0, skipped: 0, deleted: 0, failed: 2 });
  assert.deepEqual(
    [...first.lastRun.results].sort((a: any, b: any) => (a.key < b.key ? -1 : 1)),
    [
      { environment: "development", target: "development", key: "TZ", result: "failed", reason: "rejected" },
      { environment: "development", target: "development", key: "_LEADING", result: "failed", reason: "rejected" },
    ],
  );
  // The claims written before the create are gone for the keys Vercel refused.
  assert.deepEqual(
    storedRows(s.server, "integration_vars", { project_id: s.projectId })
      .map((r) => r.key)
      .sort(),
    ["GONE_SOON", "TOKEN_A"],
  );

  const [patched, deleted] = await Promise.all([
    s.owner.json("PATCH", `/api/projects/${s.projectId}/environments/development/secrets/${id}`, { value: "second-value-a" }),
    s.owner.json("DELETE", `/api/projects/${s.projectId}/environments/development/secrets/${goneId}`),
  ]);
  assert.equal(patched.status, 200, JSON.stringify(patched.body));
  assert.equal(deleted.status, 200, JSON.stringify(deleted.body));
  const after = await settled(s);
  assert.deepEqual(counts(after.lastRun), { created: 0, updated: 1, unchanged: 0, skipped: 0, deleted: 1, failed: 2 });
  assert.equal(s.fake.envFor("prj_web", "TOKEN_A", "development")!.value, "second-value-a");
  assert.equal(s.fake.envFor("prj_web", "GONE_SOON", "development"), undefined);
  assert.equal(theirs.value, "theirs-value");
  assert.ok(s.fake.envs("prj_web").includes(theirs));
});

test("automatic sync: a secret change in a mapped environment increments pending, one debounced run clears it, redeploy once", async (t) => {
  const s = await setup(t, { env: { SYNC_DEBOUNCE_MS: "400" } });
  await s.owner.json("POST", s.base, { token: s.token });
  const hook = s.fake.addHook("prj_web");
  await s.owner.json("PUT", s.base, {
    hostProjectId: "prj_web",
    mappings: { development: "development", production: "production" },
    autoRedeploy: true,
    deployHookUrl: hook,
  });
  await addSecret(s, "production", "FIRST_KEY", "first-auto-value");
  await addSecret(s, "production", "SECOND_KEY", "second-auto-value");
  await addSecret(s, "staging", "UNMAPPED_KEY", "unmapped-value");
  const pending = await s.owner.json("GET", s.base);
  assert.equal(pending.body.pending, 2, "two changes in mapped environments, none for staging");

  const done = await settled(s);
  assert.equal(done.pending, 0);
  assert.equal(done.lastRun.trigger, "automatic");
  assert.deepEqual(counts(done.lastRun), { created: 2, updated: 0, unchanged: 0, skipped: 0, deleted: 0, failed: 0 });
  assert.equal(s.fake.envFor("prj_web", "FIRST_KEY", "production")!.value, "first-auto-value");
  const deployed = await waitFor("the redeploy", async () => {
    const res = await s.owner.json("GET", s.base);
    return res.body.lastDeployment ?? undefined;
  });
  assert.equal(s.fake.hookCalls.length, 1, "one redeploy for both changes");
  assert.equal(deployed.ok, true);
  assert.equal(deployed.trigger, "automatic");
  assert.equal(deployed.jobId, s.fake.hookCalls[0]!.jobId);
  assert.equal(deployed.state, "PENDING");
  assert.match(deployed.at, ISO_MS);
  const hookRequest = s.fake.requests.find((r) => r.path.startsWith("/v1/integrations/deploy/"))!;
  assert.equal(hookRequest.authorization, undefined, "no token is sent to a deploy hook");

  const events = await integrationEvents(s);
  const synced = events.filter((e) => e.action === "integration.synced");
  assert.equal(synced.length, 1);
  assert.deepEqual([synced[0]!.actor, synced[0]!.metadata.trigger], [null, "automatic"]);
  const redeployed = events.filter((e) => e.action === "integration.redeployed");
  assert.deepEqual(
    redeployed.map((e) => e.metadata),
    [{ trigger: "automatic", jobId: deployed.jobId, state: "PENDING" }],
  );
});

test("automatic redeploy: only when a run changed something at Vercel that no deployment has picked up", async (t) => {
  const s = await autoRedeploying(t);
  s.fake.addEnv("prj_web", { key: "THEIRS_KEY", value: "set-at-vercel", type: "encrypted", target: ["development"] });
  const redeploys = async () => (await integrationEvents(s)).filter((e) => e.action === "integration.redeployed").length;

  // A change that Vercel never sees (the key is someone else's, policy skip): no rebuild.
  const theirs = await addSecret(s, "development", "THEIRS_KEY", "ours-differs");
  const skipped = await settled(s);
  assert.deepEqual(counts(skipped.lastRun), { created: 0, updated: 0, unchanged: 0, skipped: 1, deleted: 0, failed: 0 });
  // A redeploy would follow the run's end at once: give it time to show.
  await new Promise((resolve) => setTimeout(resolve, 500));
  assert.equal((await s.owner.json("GET", s.base)).body.lastDeployment, null);
  assert.equal(s.fake.hookCalls.length, 0);

  // A change that reaches Vercel: one rebuild.
  await addSecret(s, "development", "NEW_KEY", "new-value");
  await settled(s);
  await waitFor("the redeploy", async () => (s.fake.hookCalls.length === 1 ? true : undefined));
  assert.equal(await redeploys(), 1);

  // A run that changes something but has a follow-up waits; the follow-up, which changes
  // nothing itself, redeploys what the first one changed.
  const held = s.fake.hold(isEnvList);
  await addSecret(s, "development", "HELD_KEY", "held-value");
  await held.reached;
  const patched = await s.owner.json("PATCH", `/api/projects/${s.projectId}/environments/development/secrets/${theirs}`, {
    value: "ours-differs-again",
  });
  assert.equal(patched.status, 200);
  held.release();
  await waitFor("the follow-up run's redeploy", async () => (s.fake.hookCalls.length === 2 ? true : undefined));
  const done = await settled(s);
  assert.equal(done.lastRun.skipped, 1, "the follow-up run only skipped");
  assert.equal(s.fake.envFor("prj_web", "HELD_KEY", "development")!.value, "held-value");
  assert.equal(await redeploys(), 2);
  const synced = (await integrationEvents(s)).filter((e) => e.action === "integration.synced");
  assert.equal(synced.length, 4);
  assert.equal(Boolean(integrationRow(s)!.deploy_due), false, "nothing left to deploy");
});

test("automatic redeploy: a key Vercel refuses to create does not stop it; a key that failed to update does", async (t) => {
  const s = await autoRedeploying(t, { env: { SYNC_DEBOUNCE_MS: "400" } });
  // TZ is reserved at Vercel: refused on every run, and nothing old of it is left there.
  await addSecret(s, "development", "TZ", "Europe/Berlin");
  await addSecret(s, "development", "API_URL", "https://one.example.test");
  const first = await settled(s);
  assert.equal(first.lastRun.status, "partial");
  await waitFor("the redeploy after a partial run", async () => (s.fake.hookCalls.length === 1 ? true : undefined));

  // An update Vercel refuses leaves the old value there: no redeploy with it, though a new
  // key of the same run is waiting to be deployed.
  s.fake.inject(400, { match: (r) => r.method === "PATCH" && r.path.startsWith("/v9/projects/prj_web/env/") });
  // One import, so that both changes are one change for the sync, whatever the machine's load.
  const imported = await s.owner.json("POST", `/api/projects/${s.projectId}/environments/development/import`, {
    entries: [
      { key: "API_URL", value: "https://two.example.test", overwrite: true },
      { key: "NEW_TOO", value: "new-too", overwrite: false },
    ],
  });
  assert.deepEqual([imported.status, imported.body.summary], [200, { created: 1, updated: 1, unchanged: 0, skipped: 0, failed: 0 }]);
  const second = await settled(s);
  assert.equal(second.lastRun.status, "partial");
  assert.equal(second.lastRun.created, 1);
  assert.ok(
    second.lastRun.results.some((r: { key: string; result: string }) => r.key === "API_URL" && r.result === "failed"),
    JSON.stringify(second.lastRun.results),
  );
  await new Promise((resolve) => setTimeout(resolve, 500));
  assert.equal(s.fake.hookCalls.length, 1, "no rebuild with the old API_URL");
  assert.equal(Boolean(integrationRow(s)!.deploy_due), true, "NEW_TOO waits for the next redeploy");
});

test("a run stops before its next call once the connection is reconnected with a new token, or disconnected: the old token is used for nothing more", async (t) => {
  const s = await linked(t, {}, { env: { SYNC_DEBOUNCE_MS: "600000" } });
  const ids = [await addSecret(s, "development", "FIRST_KEY", "one"), await addSecret(s, "development", "SECOND_KEY", "two")];
  assert.equal((await s.owner.json("POST", `${s.base}/sync`)).status, 200);
  const changeBoth = async (suffix: string) => {
    for (const id of ids) {
      const res = await s.owner.json("PATCH", `/api/projects/${s.projectId}/environments/development/secrets/${id}`, { value: suffix });
      assert.equal(res.status, 200);
    }
  };
  s.fake.addToken("vcp_new_token_123456", []);

  for (const step of ["reconnect", "disconnect"] as const) {
    await changeBoth(`value-before-${step}`);
    const held = s.fake.hold(isEnvUpdate);
    const before = s.fake.requests.length;
    const sync = s.owner.json("POST", `${s.base}/sync`);
    await held.reached;
    if (step === "reconnect") assert.equal((await s.owner.json("POST", s.base, { token: "vcp_new_token_123456" })).status, 201);
    else assert.equal((await s.owner.json("DELETE", s.base)).status, 200);
    held.release();
    const answer = await sync;
    // Disconnected: no sync follows, so the answer promises none.
    const expected = step === "reconnect" ? [409, M.busy] : [400, M.linkFirst];
    assert.deepEqual([answer.status, answer.body], expected);
    // The run's token: the first one, then (for the disconnect) the one the reconnect saved.
    const runToken = `Bearer ${step === "reconnect" ? s.token : "vcp_new_token_123456"}`;
    const runCalls = s.fake.requests.slice(before).filter((r) => r.authorization === runToken);
    assert.equal(runCalls.filter(isEnvUpdate).length, 1, `${step}: the held update only, not the second`);
    assert.equal(runCalls.at(-1)!.method, "PATCH", `${step}: nothing after the held update`);
  }
});

test("an automatic run stopped by a reconnect leaves its changes to a run with the new token", async (t) => {
  const s = await linked(t);
  await addSecret(s, "development", "RECONNECTED_ONE", "one");
  await addSecret(s, "development", "RECONNECTED_TWO", "one");
  await settled(s);
  const held = s.fake.hold(isEnvUpdate);
  // One import: both changes are one run's, which the reconnect stops after its first update.
  const imported = await s.owner.json("POST", `/api/projects/${s.projectId}/environments/development/import`, {
    entries: [
      { key: "RECONNECTED_ONE", value: "two", overwrite: true },
      { key: "RECONNECTED_TWO", value: "two", overwrite: true },
    ],
  });
  assert.equal(imported.status, 200);
  await held.reached;
  s.fake.addToken("vcp_new_token_123456", []);
  assert.equal((await s.owner.json("POST", s.base, { token: "vcp_new_token_123456" })).status, 201);
  held.release();
  const done = await settled(s);
  assert.equal(done.lastRun.status, "ok", JSON.stringify(done.lastRun));
  for (const key of ["RECONNECTED_ONE", "RECONNECTED_TWO"]) assert.equal(s.fake.envFor("prj_web", key, "development")!.value, "two", key);
  const updates = s.fake.requests.filter(isEnvUpdate);
  assert.equal(updates.at(-1)!.authorization, "Bearer vcp_new_token_123456", "the second update was the new token's run");
});

test("automatic sync: changes that land during a run are picked up by a follow-up run", async (t) => {
  const s = await linked(t);
  const held = s.fake.hold(isEnvList);
  await addSecret(s, "development", "DURING_ONE", "value-before-run");
  await held.reached;
  await addSecret(s, "development", "DURING_TWO", "value-during-run");
  const during = await s.owner.json("GET", s.base);
  assert.equal(during.body.syncing, true);
  assert.equal(during.body.pending, 2);
  held.release();
  const done = await settled(s);
  assert.equal(done.pending, 0);
  assert.equal(s.fake.envFor("prj_web", "DURING_TWO", "development")!.value, "value-during-run");
  assert.equal((await integrationEvents(s)).filter((e) => e.action === "integration.synced").length, 2);
});

test("redeploy: POST /sync { redeploy: true } calls the deploy hook once after a successful sync", async (t) => {
  const s = await linked(t);
  const noHook = await s.owner.json("POST", `${s.base}/sync`, { redeploy: true });
  assert.deepEqual([noHook.status, noHook.body], [400, { error: "Add a deploy hook URL before asking for a redeploy." }]);
  const bad = await s.owner.json("POST", `${s.base}/sync`, { redeploy: "yes" });
  assert.deepEqual([bad.status, bad.body], [400, { error: "Send no body, or { redeploy: true | false }." }]);

  const hook = s.fake.addHook("prj_web");
  await s.owner.json("PUT", s.base, { hostProjectId: "prj_web", mappings: { production: "production" }, deployHookUrl: hook });
  const plain = await s.owner.json("POST", `${s.base}/sync`, {});
  assert.equal(plain.status, 200);
  assert.equal(s.fake.hookCalls.length, 0, "no redeploy unless asked (autoRedeploy is off)");
  const res = await s.owner.json("POST", `${s.base}/sync`, { redeploy: true });
  assert.equal(res.status, 200, JSON.stringify(res.body));
  assert.equal(s.fake.hookCalls.length, 1);
  assert.deepEqual(res.body.summary.deployment, {
    at: res.body.summary.deployment.at,
    trigger: "manual",
    ok: true,
    jobId: s.fake.hookCalls[0]!.jobId,
    state: "PENDING",
  });
  const view = (await s.owner.json("GET", s.base)).body;
  assert.deepEqual(view.lastDeployment, res.body.summary.deployment);

  // A hook Vercel no longer knows: recorded, not retried, never a second call.
  s.fake.projects.get("prj_web")!.hooks.length = 0;
  const missing = await s.owner.json("POST", `${s.base}/sync`, { redeploy: true });
  assert.equal(missing.status, 200);
  assert.equal(missing.body.summary.deployment.ok, false);
  assert.equal(missing.body.summary.deployment.error, "Vercel did not find the deploy hook. Add a new deploy hook URL.");
  assert.equal(s.fake.requests.filter((r) => r.path.startsWith("/v1/integrations/deploy/")).length, 2);
  assert.equal((await integrationEvents(s)).filter((e) => e.action === "integration.redeployed").length, 1);
});

test("redeploy asked for after a key failed to update: no deployment with its old value, and the answer says why", async (t) => {
  const s = await linked(t, {}, { env: { SYNC_DEBOUNCE_MS: "600000" } });
  const put = await s.owner.json("PUT", s.base, {
    hostProjectId: "prj_web",
    mappings: { development: "development" },
    deployHookUrl: s.fake.addHook("prj_web"),
  });
  assert.equal(put.status, 200, JSON.stringify(put.body));
  const id = await addSecret(s, "development", "API_URL", "https://one.example.test");
  assert.equal((await s.owner.json("POST", `${s.base}/sync`)).status, 200);
  const patched = await s.owner.json("PATCH", `/api/projects/${s.projectId}/environments/development/secrets/${id}`, {
    value: "https://two.example.test",
  });
  assert.equal(patched.status, 200);
  s.fake.inject(400, { match: (r) => r.method === "PATCH" && r.path.startsWith("/v9/projects/prj_web/env/") });
  const res = await s.owner.json("POST", `${s.base}/sync`, { redeploy: true });
  assert.equal(res.status, 200, JSON.stringify(res.body));
  assert.equal(res.body.summary.status, "partial");
  assert.deepEqual(res.body.summary.deployment, {
    at: res.body.summary.deployment?.at,
    trigger: "manual",
    ok: false,
    jobId: null,
    state: null,
    error: "Not redeployed: a key failed to update or delete at Vercel, and its old value would be deployed. See the keys that failed.",
  });
  assert.match(res.body.summary.deployment.at, ISO_MS);
  assert.equal(s.fake.hookCalls.length, 0);
});

test("attention: a token Vercel rejects during a sync moves the connection to attention; reconnecting leaves it", async (t) => {
  const s = await linked(t);
  s.fake.revokeToken(s.token);
  const res = await s.owner.json("POST", `${s.base}/sync`);
  assert.deepEqual([res.status, res.body], [400, M.savedTokenRejected]);
  const view = (await s.owner.json("GET", s.base)).body;
  assert.equal(view.status, "attention");
  assert.equal(view.lastError, M.savedTokenRejected.error);
  assert.equal(view.lastSyncStatus, "failed");
  assert.equal(view.syncing, false);
  const failedEvents = (await integrationEvents(s)).filter((e) => e.action === "integration.sync_failed");
  assert.deepEqual(
    failedEvents.map((e) => e.metadata),
    [{ trigger: "manual", error: M.savedTokenRejected.error }],
  );

  const blocked = await s.owner.json("POST", `${s.base}/sync`);
  assert.deepEqual([blocked.status, blocked.body], [400, M.reconnect]);

  // Changes wait while the connection needs attention...
  await addSecret(s, "development", "WAITING_KEY", "waiting-value");
  assert.equal((await s.owner.json("GET", s.base)).body.pending, 1);
  const requestsBefore = s.fake.requests.length;
  const marker = await automaticRunElsewhere(s.owner, s.fake);
  assert.equal((await s.owner.json("GET", s.base)).body.pending, 1, "no automatic run in attention");
  assert.deepEqual(
    s.fake.requests.slice(requestsBefore).filter((r) => r.authorization !== `Bearer ${marker.token}`),
    [],
    "nothing of this project reached Vercel",
  );

  // ...and go out once a new token is connected; the link is kept.
  const fresh = newToken();
  s.fake.addToken(fresh);
  const reconnected = await s.owner.json("POST", s.base, { token: fresh });
  assert.equal(reconnected.status, 201, JSON.stringify(reconnected.body));
  assert.deepEqual([reconnected.body.status, reconnected.body.hostProjectId, reconnected.body.lastError], ["active", "prj_web", null]);
  const done = await settled(s);
  assert.equal(done.status, "active");
  assert.equal(s.fake.envFor("prj_web", "WAITING_KEY", "development")!.value, "waiting-value");
});

test("one sync at a time: a second sync answers 409 while one runs, and a sync a dead process left is marked failed at start", async (t) => {
  const s = await linked(t);
  const held = s.fake.hold(isEnvList);
  const first = s.owner.json("POST", `${s.base}/sync`);
  await held.reached;
  const second = await s.owner.json("POST", `${s.base}/sync`);
  assert.deepEqual([second.status, second.body], [409, M.busy]);
  const running = (await s.owner.json("GET", s.base)).body;
  assert.equal(running.syncing, true);
  assert.deepEqual(running.lastRun, { status: "running", trigger: "manual", startedAt: running.lastRun.startedAt });
  held.release();
  assert.equal((await first).status, 200);
  assert.equal((await s.owner.json("GET", s.base)).body.syncing, false);

  // A lock this process does not hold: honoured while recent, taken over once far too old.
  setSyncLock(s.server, s.projectId, new Date(s.server.clock.now().getTime() - 60_000).toISOString());
  const recent = await s.owner.json("POST", `${s.base}/sync`);
  assert.deepEqual([recent.status, recent.body], [409, M.busy]);
  s.server.clock.advance(2 * 60 * 60 * 1000);
  const takenOver = await s.owner.json("POST", `${s.base}/sync`);
  assert.equal(takenOver.status, 200, JSON.stringify(takenOver.body));
  assert.equal((await s.owner.json("GET", s.base)).body.syncing, false);

  // The lock lives in the database: simulate a process that died mid-sync.
  await s.server.stop();
  setSyncLock(s.server.dataDir, s.projectId, "2026-01-01T00:00:00.000Z", {
    status: "running",
    trigger: "automatic",
    startedAt: "2026-01-01T00:00:00.000Z",
  });
  const restarted = await s.server.restart();
  t.after(() => restarted.stop());
  const owner = await restarted.signIn("owner@example.test");
  const view = (await owner.json("GET", s.base)).body;
  assert.equal(view.syncing, false);
  assert.equal(view.lastSyncStatus, "failed");
  assert.equal(view.lastError, "The server stopped while a sync was running. Run the sync again.");
  assert.equal(view.lastRun.status, "failed");
  assert.equal(view.lastRun.trigger, "automatic");
  const res = await owner.json("POST", `${s.base}/sync`);
  assert.equal(res.status, 200, JSON.stringify(res.body));
});

test("a reconnect while a sync runs: the old token's rejection does not put the new connection in attention", async (t) => {
  const s = await linked(t);
  await addSecret(s, "development", "RACE_KEY", "race-value-1");
  await settled(s);
  const held = s.fake.hold(isEnvList);
  const run = s.owner.json("POST", `${s.base}/sync`);
  await held.reached;
  // The old token is revoked at Vercel and a new one connected while the run waits.
  s.fake.revokeToken(s.token);
  const fresh = newToken();
  s.fake.addToken(fresh);
  const reconnected = await s.owner.json("POST", s.base, { token: fresh });
  assert.equal(reconnected.status, 201, JSON.stringify(reconnected.body));
  assert.equal(reconnected.body.status, "active");
  held.release();
  const res = await run;
  // The reconnect stopped the run, not a rejected token: the one saved now is fine.
  assert.deepEqual([res.status, res.body], [409, M.busy]);
  const view = (await s.owner.json("GET", s.base)).body;
  assert.equal(view.status, "active", "the new token was never rejected");
  assert.equal(view.lastError, "Vercel was reconnected while the sync ran. The sync that follows uses the new token.");
  assert.equal(view.syncing, false);
  const again = await s.owner.json("POST", `${s.base}/sync`);
  assert.equal(again.status, 200, JSON.stringify(again.body));
});

test("a sync that ends after a disconnect and a new connection writes nothing into the new connection", async (t) => {
  const s = await linked(t);
  const hook = s.fake.addHook("prj_web");
  assert.equal(
    (await s.owner.json("PUT", s.base, { hostProjectId: "prj_web", mappings: { production: "production" }, deployHookUrl: hook })).status,
    200,
  );
  await addSecret(s, "production", "HOOK_RACE_KEY", "hook-race-value");
  await settled(s);
  const held = s.fake.hold((r) => r.method === "POST" && r.path.startsWith("/v1/integrations/deploy/"));
  const run = s.owner.json("POST", `${s.base}/sync`, { redeploy: true });
  await held.reached;
  assert.deepEqual((await s.owner.json("DELETE", s.base)).body, { ok: true });
  s.server.clock.advance(1000);
  assert.equal((await s.owner.json("POST", s.base, { token: s.token })).status, 201);
  assert.equal((await s.owner.json("PUT", s.base, { hostProjectId: "prj_web", mappings: { production: "production" } })).status, 200);
  held.release();
  assert.equal((await run).status, 200);
  const view = (await s.owner.json("GET", s.base)).body;
  assert.equal(view.status, "active");
  assert.equal(view.lastDeployment, null, "the old run's deployment is not the new connection's");
  assert.equal(view.lastRun, null, "the new connection has not synced yet");
  assert.equal(view.hookConfigured, false);
  // The deployment did start at Vercel, so the log says so.
  const redeployed = (await integrationEvents(s)).filter((e) => e.action === "integration.redeployed");
  assert.equal(redeployed.length, 1);
  assert.equal(redeployed[0]!.metadata.trigger, "manual");
});

test("a value changed while a sync runs is sent to Vercel only once the change is on disk", {
  skip: onPostgres("group commit syncs SQLite's WAL"),
}, async (t) => {
  const gate = new SyncGate();
  t.after(() => gate.release());
  // No automatic run: the manual one below is the one under test.
  const s = await linked(t, {}, { env: { SYNC_DEBOUNCE_MS: "600000" }, beforeWalSync: gate.beforeSync });
  await addSecret(s, "development", "DEV_KEY", "dev-value");
  const prodId = await addSecret(s, "production", "PROD_KEY", "first-value");
  assert.equal((await s.owner.json("POST", `${s.base}/sync`)).status, 200);
  // The next sync finds development unchanged (nothing to write) and reads production after
  // its list at Vercel, which is held until production's value has changed.
  const listing = s.fake.hold(isEnvList);
  const run = s.owner.json("POST", `${s.base}/sync`);
  await listing.reached;
  gate.hold();
  const patch = s.owner.json("PATCH", `/api/projects/${s.projectId}/environments/production/secrets/${prodId}`, { value: "second-value" });
  await waitFor("the PATCH to commit", async () => committedVersion(s.server, prodId) === 2);
  listing.release();
  // Production's value is read from the database now, committed but not yet on disk: it stays here.
  assert.equal(await settlesWithin(run, 500), false, "the sync ended while the change it read was not on disk");
  assert.equal(s.fake.envFor("prj_web", "PROD_KEY", "production")!.value, "first-value", "a value was sent before it was on disk");
  gate.release();
  assert.equal((await patch).status, 200);
  assert.equal((await run).status, 200);
  assert.equal(s.fake.envFor("prj_web", "PROD_KEY", "production")!.value, "second-value");
});

test("a sync cut short by a disconnect still audits what it did at Vercel, and recreates nothing", async (t) => {
  // No automatic run: the manual one below must be the one that is cut short.
  const s = await linked(t, {}, { env: { SYNC_DEBOUNCE_MS: "600000" } });
  const syncedBefore = (await integrationEvents(s)).filter((e) => e.action === "integration.synced").length;
  await addSecret(s, "development", "LATE_KEY", "late-value");
  const held = s.fake.hold((r) => r.method === "POST" && r.path === "/v10/projects/prj_web/env");
  const run = s.owner.json("POST", `${s.base}/sync`);
  await held.reached;
  assert.deepEqual((await s.owner.json("DELETE", s.base)).body, { ok: true });
  held.release();
  assert.equal((await run).status, 200);
  assert.equal(s.fake.envFor("prj_web", "LATE_KEY", "development")!.value, "late-value");
  const synced = (await integrationEvents(s)).filter((e) => e.action === "integration.synced");
  assert.equal(synced.length, syncedBefore + 1);
  assert.equal(synced.at(-1)!.metadata.created, 1);
  assert.equal(integrationRow(s), undefined, "the deleted connection stays deleted");
  // What we created at Vercel is remembered per connection; no endpoint lists it.
  assert.equal(rowCount(s.server, "integration_vars", { project_id: s.projectId }), 0);
  assert.deepEqual((await s.owner.json("GET", s.base)).body, { connected: false });
});

test("faults: another 4xx from Vercel for the run itself answers 502 with a sentence, never 500", async (t) => {
  const s = await linked(t);
  await addSecret(s, "development", "REFUSED_KEY", "refused-value");
  await settled(s);
  s.fake.inject(422, { match: isEnvList });
  const refused = await s.owner.json("POST", `${s.base}/sync`);
  const sentence = "Vercel refused a request of the sync. Check the linked project at Vercel, then try the sync again.";
  assert.deepEqual([refused.status, refused.body], [502, { error: sentence }]);
  const view = (await s.owner.json("GET", s.base)).body;
  assert.equal(view.status, "active", "not a token problem");
  assert.equal(view.lastSyncStatus, "failed");
  assert.equal(view.lastError, sentence);
  assert.deepEqual((await integrationEvents(s)).filter((e) => e.action === "integration.sync_failed").at(-1)!.metadata, {
    trigger: "manual",
    error: sentence,
  });
  assert.ok(!s.server.logs.some((line) => /"level":50/.test(line)), "no error in the log: Vercel's answer is not our fault");
  assert.equal((await s.owner.json("POST", `${s.base}/sync`)).status, 200, "the next sync works");
});

test("changes that waited while the linked project was gone go out once another project is linked", async (t) => {
  const s = await linked(t);
  await addSecret(s, "development", "BEFORE_KEY", "before-value");
  await settled(s);
  s.fake.projects.delete("prj_web");
  await addSecret(s, "development", "WAITING_KEY", "waiting-value");
  const failed = await waitFor("the run to find the project gone", async () => {
    const view = (await s.owner.json("GET", s.base)).body;
    return !view.syncing && view.lastRun?.status === "failed" ? view : undefined;
  });
  assert.equal(failed.lastError, "The linked Vercel project was not found. Link a Vercel project again.");
  assert.equal(failed.pending, 1);

  s.fake.addProject("prj_new", "new");
  const relinked = await s.owner.json("PUT", s.base, { hostProjectId: "prj_new", mappings: { development: "development" } });
  assert.equal(relinked.status, 200, JSON.stringify(relinked.body));
  const done = await settled(s);
  assert.deepEqual([done.lastRun.status, done.lastRun.trigger], ["ok", "automatic"]);
  assert.equal(s.fake.envFor("prj_new", "WAITING_KEY", "development")!.value, "waiting-value");
});

test("a copy into a mapped environment is synced like any write, once the copy has committed", async (t) => {
  const s = await linked(t);
  const id = await addSecret(s, "development", "COPIED_KEY", "copied-value");
  await settled(s);
  const copied = await s.owner.json("POST", `/api/projects/${s.projectId}/environments/development/secrets/${id}/copy`, {
    to: "production",
  });
  assert.equal(copied.status, 201, JSON.stringify(copied.body));
  const done = await settled(s);
  assert.deepEqual([done.lastRun.status, done.lastRun.created], ["ok", 1]);
  assert.equal(s.fake.envFor("prj_web", "COPIED_KEY", "production")!.value, "copied-value");
});

test("an env list in pages is followed to its end: vars on its last pages are updated and deleted like the rest", async (t) => {
  // Debounced past the test: only the manual syncs below run.
  const s = await linked(t, {}, { env: { SYNC_DEBOUNCE_MS: "600000" } });
  const ids: string[] = [];
  for (let i = 0; i < 25; i++) ids.push(await addSecret(s, "development", `PAGED_${i}`, `paged-value-${i}`));
  const first = await s.owner.json("POST", `${s.base}/sync`);
  assert.equal(first.body.summary.created, 25, JSON.stringify(first.body));

  // One var a page, newest first: PAGED_0 and PAGED_1 are on the 25th and 24th pages.
  s.fake.envPageSize = 1;
  const secretPath = (id: string) => `/api/projects/${s.projectId}/environments/development/secrets/${id}`;
  assert.equal((await s.owner.json("DELETE", secretPath(ids[0]!))).status, 200);
  assert.equal((await s.owner.json("PATCH", secretPath(ids[1]!), { value: "paged-value-1-new" })).status, 200);
  const second = await s.owner.json("POST", `${s.base}/sync`);
  assert.equal(second.status, 200, JSON.stringify(second.body));
  assert.deepEqual(counts(second.body.summary), { created: 0, updated: 1, unchanged: 23, skipped: 0, deleted: 1, failed: 0 });
  assert.equal(s.fake.envFor("prj_web", "PAGED_0", "development"), undefined);
  assert.equal(s.fake.envFor("prj_web", "PAGED_1", "development")!.value, "paged-value-1-new");
});

test("an env list that never ends fails the run before it writes anything, rather than sync against part of it", async (t) => {
  const s = await linked(t, {}, { env: { SYNC_DEBOUNCE_MS: "600000" } });
  await addSecret(s, "development", "ENDLESS_KEY", "endless-value");
  s.fake.envPagesNeverEnd = true;
  const start = s.fake.requests.length;
  const run = await s.owner.json("POST", `${s.base}/sync`);
  assert.deepEqual([run.status, run.body], [502, M.syncUnavailable]);
  const sent = s.fake.requests.slice(start);
  assert.ok(sent.length > 20, `followed ${sent.length} pages`);
  assert.ok(
    sent.every((r) => r.method === "GET"),
    "nothing written",
  );
  assert.equal(s.fake.envFor("prj_web", "ENDLESS_KEY", "development"), undefined);
  assert.equal((await s.owner.json("GET", s.base)).body.pending, 1);
});

test("an answer larger than 64 MiB fails the run as unavailable, writes nothing, and is not read to its end", async (t) => {
  const s = await linked(t, {}, { env: { SYNC_DEBOUNCE_MS: "600000" } });
  await addSecret(s, "development", "HUGE_KEY", "huge-value");
  // Valid JSON, the real list after 80 MiB of white space: read whole, it would sync.
  s.fake.inject(200, { match: isEnvList, padToBytes: 80 * 1024 * 1024 });
  const start = s.fake.requests.length;
  const run = await s.owner.json("POST", `${s.base}/sync`);
  assert.deepEqual([run.status, run.body], [502, M.syncUnavailable]);
  const sent = s.fake.requests.slice(start);
  assert.deepEqual(
    sent.map((r) => `${r.method} ${r.path}`),
    ["GET /v10/projects/prj_web/env"],
    "one list, not retried, and nothing written",
  );
  assert.equal(s.fake.envFor("prj_web", "HUGE_KEY", "development"), undefined);
  assert.equal((await s.owner.json("GET", s.base)).body.pending, 1);
  // The server stopped reading past 64 MiB: the fake, waiting for it to drain, could not send all 80.
  assert.ok(s.fake.paddingSent < 79 * 1024 * 1024, `sent ${s.fake.paddingSent} bytes`);
});

test("faults: 429 honours Retry-After, 5xx is retried with backoff, a create is not repeated, and failures keep pending", async (t) => {
  const s = await linked(t);
  await addSecret(s, "development", "RETRY_KEY", "retry-value-1");
  await settled(s);

  s.fake.inject(429, { retryAfterSeconds: 1, match: isEnvList });
  const start = s.fake.requests.length;
  const limited = await s.owner.json("POST", `${s.base}/sync`);
  assert.equal(limited.status, 200, JSON.stringify(limited.body));
  const lists = s.fake.requests.slice(start).filter(isEnvList);
  assert.equal(lists.length, 2);
  assert.ok(lists[1]!.at - lists[0]!.at >= 950, `waited ${lists[1]!.at - lists[0]!.at} ms for Retry-After: 1`);

  // Without Retry-After the window's end (X-RateLimit-Reset) says how long: not the backoff's few milliseconds.
  s.fake.inject(429, { retryAfterSeconds: 1, resetOnly: true, match: isEnvList });
  const resetStart = s.fake.requests.length;
  assert.equal((await s.owner.json("POST", `${s.base}/sync`)).status, 200);
  const resetLists = s.fake.requests.slice(resetStart).filter(isEnvList);
  assert.equal(resetLists.length, 2);
  assert.ok(resetLists[1]!.at - resetLists[0]!.at >= 950, `waited ${resetLists[1]!.at - resetLists[0]!.at} ms for the reset`);

  s.fake.inject(503, { times: 2, match: isEnvList });
  const flaky = await s.owner.json("POST", `${s.base}/sync`);
  assert.equal(flaky.status, 200);
  assert.deepEqual(counts(flaky.body.summary), { created: 0, updated: 0, unchanged: 1, skipped: 0, deleted: 0, failed: 0 });

  s.fake.inject(500, { times: 50, match: isEnvList });
  const down = await s.owner.json("POST", `${s.base}/sync`);
  assert.deepEqual([down.status, down.body], [502, M.syncUnavailable]);
  const view = (await s.owner.json("GET", s.base)).body;
  assert.deepEqual([view.status, view.lastSyncStatus, view.lastError, view.syncing], ["active", "failed", M.syncUnavailable.error, false]);
  s.fake.clearInjections();

  // A create (POST without upsert) is not repeated on a 5xx, and the change stays pending.
  const createsBefore = s.fake.requests.filter(isEnvCreate).length;
  s.fake.inject(500, { times: 1, match: isEnvCreate });
  await addSecret(s, "development", "NEW_AFTER_FAULT", "created-later");
  await waitFor("the failed automatic run", async () => {
    const res = await s.owner.json("GET", s.base);
    return res.body.lastRun?.status === "failed" && res.body.lastRun.trigger === "automatic" ? true : undefined;
  });
  assert.equal(s.fake.requests.filter(isEnvCreate).length, createsBefore + 1);
  assert.equal((await s.owner.json("GET", s.base)).body.pending, 1);
  const retried = await s.owner.json("POST", `${s.base}/sync`);
  assert.equal(retried.status, 200);
  assert.equal(retried.body.summary.created, 1);
  assert.equal((await s.owner.json("GET", s.base)).body.pending, 0);
  assert.equal(s.server.logs.filter((l) => l.includes("retrying")).length >= 3, true);
});

test("a create rate limited until the retries run out wrote nothing: no claim is kept for it, and nothing waits for a deployment", async (t) => {
  const s = await linked(t, {}, { env: { SYNC_DEBOUNCE_MS: "600000" } });
  await addSecret(s, "development", "LIMITED_KEY", "limited-value");
  s.fake.inject(429, { times: 10, retryAfterSeconds: 0, match: isEnvCreate });
  const res = await s.owner.json("POST", `${s.base}/sync`);
  assert.deepEqual([res.status, res.body], [502, M.syncUnavailable]);
  assert.ok(s.fake.requests.filter(isEnvCreate).length > 1, "a 429 is tried again");
  assert.equal(s.fake.envFor("prj_web", "LIMITED_KEY", "development"), undefined);
  assert.deepEqual(storedRows(s.server, "integration_vars", { project_id: s.projectId }), []);
  assert.equal(Boolean(integrationRow(s)!.deploy_due), false);
  assert.equal((await s.owner.json("GET", s.base)).body.pending, 1);
});

test("retries: a run Vercel fails is tried again, later each time, until it goes through; a refused run is not", async (t) => {
  const s = await linked(t, {}, { env: { SYNC_RETRY_MS: "250" } });
  // The first two runs fail: each one asks for the list four times (the client's own retries).
  s.fake.inject(503, { times: 8, match: isEnvList });
  const listsBefore = s.fake.requests.filter(isEnvList).length;
  await addSecret(s, "development", "RETRIED_KEY", "retried-value");
  const done = await settled(s);
  assert.deepEqual([done.lastRun.status, done.lastRun.trigger, done.lastRun.created], ["ok", "automatic", 1]);
  assert.equal(s.fake.envFor("prj_web", "RETRIED_KEY", "development")!.value, "retried-value");
  const runs = (await integrationEvents(s)).filter((e) => e.action === "integration.sync_failed" || e.action === "integration.synced");
  assert.deepEqual(
    runs.map((e) => [e.action, e.metadata.trigger, e.actor]),
    [
      ["integration.sync_failed", "automatic", null],
      ["integration.sync_failed", "automatic", null],
      ["integration.synced", "automatic", null],
    ],
  );
  assert.equal(runs[0]!.metadata.error, M.syncUnavailable.error);
  // Waits of the first retry (250 ms, give or take a tenth) and the second (twice that).
  const lists = s.fake.requests.filter(isEnvList).slice(listsBefore);
  assert.equal(lists.length, 9);
  const firstWait = lists[4]!.at - lists[3]!.at;
  const secondWait = lists[8]!.at - lists[7]!.at;
  assert.ok(firstWait >= 220, `first retry after ${firstWait} ms`);
  assert.ok(secondWait >= 445, `second retry after ${secondWait} ms`);
  assert.equal(s.server.logs.filter((l) => l.includes("runs again later")).length, 2);

  // Vercel refusing the run (another 4xx) needs a person: no retry.
  s.fake.inject(422, { times: 1, match: isEnvList });
  await addSecret(s, "development", "REFUSED_ONCE", "refused-value");
  await waitFor("the refused automatic run", async () => {
    const res = await s.owner.json("GET", s.base);
    return res.body.lastRun?.status === "failed" ? true : undefined;
  });
  const listsAfterRefusal = s.fake.requests.filter(isEnvList).length;
  await new Promise((resolve) => setTimeout(resolve, 1000));
  assert.equal(s.fake.requests.filter(isEnvList).length, listsAfterRefusal, "nothing reached Vercel after the refusal");
  assert.equal((await s.owner.json("GET", s.base)).body.pending, 1, "the change waits for the next one or a manual sync");
});

test("retries: a manual sync Vercel fails leaves its pending changes to a retry; retries end after eight", async (t) => {
  // Changes never start an automatic run here: whatever runs on its own is a retry.
  const s = await linked(t, {}, { env: { SYNC_DEBOUNCE_MS: "600000", SYNC_RETRY_MS: "10" } });
  await addSecret(s, "development", "MANUAL_KEY", "manual-value");
  s.fake.inject(500, { times: 4, match: isEnvList });
  const failed = await s.owner.json("POST", `${s.base}/sync`);
  assert.deepEqual([failed.status, failed.body], [502, M.syncUnavailable]);
  const done = await settled(s);
  assert.deepEqual([done.lastRun.status, done.lastRun.trigger], ["ok", "automatic"]);
  assert.equal(s.fake.envFor("prj_web", "MANUAL_KEY", "development")!.value, "manual-value");

  // Vercel down for good: the manual run, then eight retries, then nothing until a person acts.
  const failedBefore = (await integrationEvents(s)).filter((e) => e.action === "integration.sync_failed").length;
  s.fake.inject(500, { times: 100_000, match: isEnvList });
  await addSecret(s, "development", "NEVER_SENT", "never-sent-value");
  assert.equal((await s.owner.json("POST", `${s.base}/sync`)).status, 502);
  await waitFor("the last retry", async () => s.server.logs.some((l) => l.includes("no more automatic retries")) || undefined);
  const failedRuns = async () => (await integrationEvents(s)).filter((e) => e.action === "integration.sync_failed").slice(failedBefore);
  const triggers = (await failedRuns()).map((e) => e.metadata.trigger);
  assert.deepEqual(triggers, ["manual", ...Array(8).fill("automatic")]);
  const listsAtTheEnd = s.fake.requests.filter(isEnvList).length;
  // A ninth retry would come 2.3 to 2.8 s after the eighth failed.
  await new Promise((resolve) => setTimeout(resolve, 3000));
  assert.equal(s.fake.requests.filter(isEnvList).length, listsAtTheEnd, "no ninth retry");
  assert.equal((await failedRuns()).length, 9);
  assert.equal((await s.owner.json("GET", s.base)).body.pending, 1);
  assert.equal(s.fake.envFor("prj_web", "NEVER_SENT", "development"), undefined);
});

test("a create whose answer was lost: the var Vercel made anyway is taken as ours and follows the secret under skip", async (t) => {
  const s = await linked(t, {}, { env: { SYNC_DEBOUNCE_MS: "600000" } });
  const id = await addSecret(s, "development", "LOST_ANSWER", "first-value");
  // Vercel writes the var, but its answer never arrives (a 502 from its edge).
  s.fake.inject(502, { match: isEnvCreate, afterDoing: true });
  const lost = await s.owner.json("POST", `${s.base}/sync`);
  assert.deepEqual([lost.status, lost.body], [502, M.syncUnavailable]);
  const made = s.fake.envFor("prj_web", "LOST_ANSWER", "development")!;
  assert.equal(made.value, "first-value");
  const claims = storedRows(s.server, "integration_vars", { project_id: s.projectId }).map((r) => [r.key, r.host_env_id]);
  assert.equal(claims.length, 1);
  assert.equal(claims[0]![0], "LOST_ANSWER");
  // A claim, not an id: the key version and a keyed digest of the value sent, never the value.
  assert.match(String(claims[0]![1]), /^unanswered:1:[A-Za-z0-9_-]{43}$/);
  assert.ok(!String(claims[0]![1]).includes("first-value"));
  assert.equal(Boolean(integrationRow(s)!.deploy_due), true, "what Vercel may have written waits for a deployment");

  const next = await s.owner.json("POST", `${s.base}/sync`);
  assert.equal(next.status, 200, JSON.stringify(next.body));
  assert.deepEqual(counts(next.body.summary), { created: 0, updated: 0, unchanged: 1, skipped: 0, deleted: 0, failed: 0 });
  assert.deepEqual(
    storedRows(s.server, "integration_vars", { project_id: s.projectId }).map((r) => [r.key, r.host_env_id]),
    [["LOST_ANSWER", made.id]],
  );
  // Ours now: under skip it follows the secret, and goes with it.
  const patched = await s.owner.json("PATCH", `/api/projects/${s.projectId}/environments/development/secrets/${id}`, {
    value: "second-value",
  });
  assert.equal(patched.status, 200);
  const updated = await s.owner.json("POST", `${s.base}/sync`);
  assert.deepEqual(counts(updated.body.summary), { created: 0, updated: 1, unchanged: 0, skipped: 0, deleted: 0, failed: 0 });
  assert.equal(s.fake.envFor("prj_web", "LOST_ANSWER", "development")!.value, "second-value");
  assert.equal(s.fake.envs("prj_web").filter((e) => e.key === "LOST_ANSWER").length, 1, "never created twice");
});

test("a var of ours moved to a custom environment (listed without `target`), its secret then deleted: forgotten, left at Vercel, no 500", async (t) => {
  const s = await linked(t, {}, { env: { SYNC_DEBOUNCE_MS: "600000" } });
  const id = await addSecret(s, "development", "MOVED_AWAY", "moved-value");
  assert.equal((await s.owner.json("POST", `${s.base}/sync`)).status, 200);
  const made = s.fake.envFor("prj_web", "MOVED_AWAY", "development")!;
  made.target = [];
  made.customEnvironmentIds = ["env_custom_qa"];
  assert.equal((await s.owner.json("DELETE", `/api/projects/${s.projectId}/environments/development/secrets/${id}`)).status, 200);

  const next = await s.owner.json("POST", `${s.base}/sync`);
  assert.equal(next.status, 200, JSON.stringify(next.body));
  assert.deepEqual(counts(next.body.summary), { created: 0, updated: 0, unchanged: 0, skipped: 0, deleted: 0, failed: 0 });
  assert.ok(
    s.fake.envs("prj_web").some((e) => e.id === made.id),
    "a var that covers none of our targets is not ours to delete",
  );
  assert.deepEqual(storedRows(s.server, "integration_vars", { project_id: s.projectId }), []);
});

test("a create answered 2xx with a body that names none of the vars: failed as unanswered, its claim kept, and the var taken as ours next time", async (t) => {
  const s = await linked(t, {}, { env: { SYNC_DEBOUNCE_MS: "600000" } });
  await addSecret(s, "development", "CUT_ANSWER", "cut-value");
  // Vercel writes the var; the answer that reaches us is a 201 without `created` (cut by a proxy, say).
  s.fake.inject(201, { match: isEnvCreate, afterDoing: true });
  const cut = await s.owner.json("POST", `${s.base}/sync`);
  assert.equal(cut.status, 200, JSON.stringify(cut.body));
  assert.deepEqual(counts(cut.body.summary), { created: 0, updated: 0, unchanged: 0, skipped: 0, deleted: 0, failed: 1 });
  assert.deepEqual(cut.body.summary.results, [
    { environment: "development", target: "development", key: "CUT_ANSWER", result: "failed", reason: "unanswered" },
  ]);
  const made = s.fake.envFor("prj_web", "CUT_ANSWER", "development")!;
  assert.match(String(storedRows(s.server, "integration_vars", { key: "CUT_ANSWER" })[0]!.host_env_id), /^unanswered:1:/);

  const next = await s.owner.json("POST", `${s.base}/sync`);
  assert.deepEqual(counts(next.body.summary), { created: 0, updated: 0, unchanged: 1, skipped: 0, deleted: 0, failed: 0 });
  assert.deepEqual(
    storedRows(s.server, "integration_vars", { project_id: s.projectId }).map((r) => [r.key, r.host_env_id]),
    [["CUT_ANSWER", made.id]],
  );
});

test("a create whose answer was lost, then its secret changed or deleted before the next run: the var Vercel made is still known as ours", async (t) => {
  const s = await linked(t, {}, { env: { SYNC_DEBOUNCE_MS: "600000" } });
  const changedId = await addSecret(s, "development", "LOST_CHANGED", "sent-value");
  const deletedId = await addSecret(s, "development", "LOST_DELETED", "sent-value-2");
  s.fake.inject(502, { match: isEnvCreate, afterDoing: true });
  assert.equal((await s.owner.json("POST", `${s.base}/sync`)).status, 502);
  assert.equal(s.fake.envFor("prj_web", "LOST_CHANGED", "development")!.value, "sent-value");
  assert.equal(s.fake.envFor("prj_web", "LOST_DELETED", "development")!.value, "sent-value-2");

  // Before the next run: one secret changes, the other is deleted.
  const secret = (id: string) => `/api/projects/${s.projectId}/environments/development/secrets/${id}`;
  assert.equal((await s.owner.json("PATCH", secret(changedId), { value: "changed-value" })).status, 200);
  assert.equal((await s.owner.json("DELETE", secret(deletedId))).status, 200);
  const next = await s.owner.json("POST", `${s.base}/sync`);
  assert.equal(next.status, 200, JSON.stringify(next.body));
  assert.deepEqual(counts(next.body.summary), { created: 0, updated: 1, unchanged: 0, skipped: 0, deleted: 1, failed: 0 });
  assert.equal(s.fake.envFor("prj_web", "LOST_CHANGED", "development")!.value, "changed-value");
  assert.equal(s.fake.envFor("prj_web", "LOST_DELETED", "development"), undefined, "the deleted secret's value is gone from Vercel");
  const made = s.fake.envFor("prj_web", "LOST_CHANGED", "development")!;
  assert.deepEqual(
    storedRows(s.server, "integration_vars", { project_id: s.projectId }).map((r) => [r.key, r.host_env_id]),
    [["LOST_CHANGED", made.id]],
  );
});

test("a claim made under a master key version rotated away since is judged by the secret's value, as an older claim is", async (t) => {
  const [key1, key2] = [randomMasterKey(), randomMasterKey()];
  const s = await linked(t, {}, { env: { SYNC_DEBOUNCE_MS: "600000", MASTER_KEY: key1 } });
  await addSecret(s, "development", "ROTATED_CLAIM", "claimed-value");
  s.fake.inject(502, { match: isEnvCreate, afterDoing: true });
  assert.equal((await s.owner.json("POST", `${s.base}/sync`)).status, 502);
  assert.match(String(storedRows(s.server, "integration_vars", { key: "ROTATED_CLAIM" })[0]!.host_env_id), /^unanswered:1:/);

  // Key 2 replaces key 1 for good: rotate-key re-encrypts everything and drops the old data keys.
  await s.server.stop();
  const rotated = await runMain(["rotate-key"], {
    ...s.server.env,
    MASTER_KEY: key2,
    MASTER_KEY_VERSION: "2",
    MASTER_KEYS_PREVIOUS: `1:${key1}`,
  });
  assert.equal(rotated.code, 0, rotated.stderr);
  const server = await s.server.restart({ MASTER_KEY: key2, MASTER_KEY_VERSION: "2", MASTER_KEYS_PREVIOUS: undefined });
  t.after(() => server.stop());
  const owner = await server.signIn("owner@example.test");

  // The claim's digest cannot be checked any more: the var holding the secret's value is ours all the same.
  const next = await owner.json("POST", `${s.base}/sync`);
  assert.equal(next.status, 200, JSON.stringify(next.body));
  assert.deepEqual(counts(next.body.summary), { created: 0, updated: 0, unchanged: 1, skipped: 0, deleted: 0, failed: 0 });
  const made = s.fake.envFor("prj_web", "ROTATED_CLAIM", "development")!;
  assert.deepEqual(
    storedRows(server, "integration_vars", { key: "ROTATED_CLAIM" }).map((r) => r.host_env_id),
    [made.id],
  );
});

test("a claim is not proof against a var someone else made under the key with another value: it is left alone", async (t) => {
  const s = await linked(t, {}, { env: { SYNC_DEBOUNCE_MS: "600000" } });
  const id = await addSecret(s, "development", "CLAIMED_KEY", "our-value");
  // No answer, and nothing written: then someone creates the key at Vercel with a value of theirs.
  s.fake.inject(502, { match: isEnvCreate });
  assert.equal((await s.owner.json("POST", `${s.base}/sync`)).status, 502);
  s.fake.addEnv("prj_web", { key: "CLAIMED_KEY", value: "their-value", type: "encrypted", target: ["development"] });
  assert.equal((await s.owner.json("DELETE", `/api/projects/${s.projectId}/environments/development/secrets/${id}`)).status, 200);
  const next = await s.owner.json("POST", `${s.base}/sync`);
  assert.equal(next.status, 200, JSON.stringify(next.body));
  assert.deepEqual(counts(next.body.summary), { created: 0, updated: 0, unchanged: 0, skipped: 0, deleted: 0, failed: 0 });
  assert.equal(s.fake.envFor("prj_web", "CLAIMED_KEY", "development")!.value, "their-value");
  assert.deepEqual(storedRows(s.server, "integration_vars", { project_id: s.projectId }), [], "the claim is dropped");
});

test("an update whose var was removed at Vercel after the run listed it is made anew in the same run", async (t) => {
  const s = await linked(t, {}, { env: { SYNC_DEBOUNCE_MS: "600000" } });
  const id = await addSecret(s, "development", "API_KEY", "first-value");
  assert.equal((await s.owner.json("POST", `${s.base}/sync`)).status, 200);
  const patched = await s.owner.json("PATCH", `/api/projects/${s.projectId}/environments/development/secrets/${id}`, {
    value: "second-value",
  });
  assert.equal(patched.status, 200);

  // Someone deletes the var at Vercel between the run's list and its update.
  const held = s.fake.hold((r) => r.method === "PATCH");
  const run = s.owner.json("POST", `${s.base}/sync`);
  await held.reached;
  const envs = s.fake.envs("prj_web");
  envs.splice(
    envs.findIndex((e) => e.key === "API_KEY"),
    1,
  );
  held.release();
  const res = await run;
  assert.equal(res.status, 200, JSON.stringify(res.body));
  assert.deepEqual(counts(res.body.summary), { created: 1, updated: 0, unchanged: 0, skipped: 0, deleted: 0, failed: 0 });
  const made = s.fake.envFor("prj_web", "API_KEY", "development")!;
  assert.equal(made.value, "second-value");
  assert.deepEqual(
    storedRows(s.server, "integration_vars", { project_id: s.projectId }).map((r) => [r.key, r.host_env_id]),
    [["API_KEY", made.id]],
  );
  assert.equal((await s.owner.json("GET", s.base)).body.pending, 0);
});

test("linking another Vercel project forgets the vars and claims of the old one: a var there with our key and value stays someone else's", async (t) => {
  const s = await linked(t, {}, { env: { SYNC_DEBOUNCE_MS: "600000" } });
  // MADE_KEY created; LOST_KEY's create answered with a 502 after Vercel made it: a claim.
  const ids = [await addSecret(s, "development", "MADE_KEY", "made-value")];
  assert.equal((await s.owner.json("POST", `${s.base}/sync`)).status, 200);
  ids.push(await addSecret(s, "development", "LOST_KEY", "lost-value"));
  s.fake.inject(502, { match: (r) => r.method === "POST" && r.path === "/v10/projects/prj_web/env", afterDoing: true });
  assert.equal((await s.owner.json("POST", `${s.base}/sync`)).status, 502);
  const recorded = storedRows(s.server, "integration_vars", { project_id: s.projectId }).map((r) => String(r.host_env_id));
  assert.equal(recorded.length, 2);
  assert.ok(recorded.some((id) => id.startsWith("unanswered:")));

  // Another project where a teammate keeps the same keys and values.
  s.fake.addProject("prj_new", "new");
  const theirs = ["MADE_KEY", "LOST_KEY"].map((key) =>
    s.fake.addEnv("prj_new", { key, value: key === "MADE_KEY" ? "made-value" : "lost-value", type: "encrypted", target: ["development"] }),
  );
  const relinked = await s.owner.json("PUT", s.base, { hostProjectId: "prj_new", mappings: { development: "development" } });
  assert.equal(relinked.status, 200, JSON.stringify(relinked.body));
  assert.deepEqual(storedRows(s.server, "integration_vars", { project_id: s.projectId }), []);
  const synced = await s.owner.json("POST", `${s.base}/sync`);
  assert.deepEqual(counts(synced.body.summary), { created: 0, updated: 0, unchanged: 2, skipped: 0, deleted: 0, failed: 0 });

  // Theirs, not ours: deleting the secrets leaves them.
  for (const id of ids) {
    assert.equal((await s.owner.json("DELETE", `/api/projects/${s.projectId}/environments/development/secrets/${id}`)).status, 200);
  }
  const after = await s.owner.json("POST", `${s.base}/sync`);
  assert.deepEqual(counts(after.body.summary), { created: 0, updated: 0, unchanged: 0, skipped: 0, deleted: 0, failed: 0 });
  for (const env of theirs) assert.ok(s.fake.envs("prj_new").includes(env), `${env.key} stays`);
});

test("a sync whose link changes while it runs creates nothing in the old project, says so, and the changes reach the new one", async (t) => {
  const s = await linked(t, {}, { env: { SYNC_DEBOUNCE_MS: "600000" } });
  await addSecret(s, "development", "MOVING_KEY", "moving-value");
  s.fake.addProject("prj_new", "new");
  const held = s.fake.hold(isEnvList);
  const run = s.owner.json("POST", `${s.base}/sync`);
  await held.reached;
  const relinked = await s.owner.json("PUT", s.base, { hostProjectId: "prj_new", mappings: { development: "development" } });
  assert.equal(relinked.status, 200, JSON.stringify(relinked.body));
  held.release();
  const res = await run;
  assert.deepEqual([res.status, res.body], [409, M.busy]);
  assert.equal(s.fake.envFor("prj_web", "MOVING_KEY", "development"), undefined, "nothing created in the old project");
  const view = (await s.owner.json("GET", s.base)).body;
  assert.equal(view.lastError, "The Vercel link changed while the sync ran. The sync that follows sends the changes as the link is now.");
  assert.equal(view.pending, 1);
  assert.ok(!s.server.logs.some((line) => line.includes("another server process took it over")));
  const next = await s.owner.json("POST", `${s.base}/sync`);
  assert.equal(next.status, 200, JSON.stringify(next.body));
  assert.equal(s.fake.envFor("prj_new", "MOVING_KEY", "development")!.value, "moving-value");
});

test("a sync whose mappings or conflict policy change while it runs writes nothing under the old ones, and the next run follows the new", async (t) => {
  const s = await linked(t, { conflictPolicy: "overwrite" }, { env: { SYNC_DEBOUNCE_MS: "600000" } });
  await addSecret(s, "development", "REMAPPED_KEY", "remapped-value");
  await addSecret(s, "production", "THEIR_KEY", "our-value");
  const theirs = s.fake.addEnv("prj_web", { key: "THEIR_KEY", value: "their-value", type: "encrypted", target: ["production"] });
  const changes = [
    { mappings: { development: "preview", production: "production" }, conflictPolicy: "overwrite" },
    { mappings: { development: "preview", production: "production" }, conflictPolicy: "skip" },
  ];
  for (const change of changes) {
    const held = s.fake.hold(isEnvList);
    const run = s.owner.json("POST", `${s.base}/sync`);
    await held.reached;
    const put = await s.owner.json("PUT", s.base, { hostProjectId: "prj_web", ...change });
    assert.equal(put.status, 200, JSON.stringify(put.body));
    held.release();
    const res = await run;
    assert.deepEqual([res.status, res.body], [409, M.busy], JSON.stringify(change));
    const view = (await s.owner.json("GET", s.base)).body;
    assert.equal(view.lastError, "The Vercel link changed while the sync ran. The sync that follows sends the changes as the link is now.");
    assert.equal(view.pending, 2, "what was pending still is");
  }
  assert.equal(s.fake.envFor("prj_web", "REMAPPED_KEY", "development"), undefined, "nothing written for the old mapping");
  assert.equal(theirs.value, "their-value", "not overwritten once the policy is skip");

  // The same link sent again, its mappings in another order: nothing changed, the run goes on.
  const held = s.fake.hold(isEnvList);
  const unchanged = s.owner.json("POST", `${s.base}/sync`);
  await held.reached;
  const again = { hostProjectId: "prj_web", mappings: { production: "production", development: "preview" }, conflictPolicy: "skip" };
  assert.equal((await s.owner.json("PUT", s.base, again)).status, 200);
  held.release();
  const ran = await unchanged;
  assert.equal(ran.status, 200, JSON.stringify(ran.body));
  assert.equal(s.fake.envFor("prj_web", "REMAPPED_KEY", "preview")!.value, "remapped-value");

  const next = await s.owner.json("POST", `${s.base}/sync`);
  assert.equal(next.status, 200, JSON.stringify(next.body));
  assert.equal(s.fake.envFor("prj_web", "REMAPPED_KEY", "preview")!.value, "remapped-value");
  assert.equal(theirs.value, "their-value");
  assert.deepEqual(next.body.summary.results, [
    { environment: "production", target: "production", key: "THEIR_KEY", result: "skipped", reason: "exists" },
  ]);
});

test("lists from Vercel with items that are not objects, and project ids that are no path segment, never answer 500", async (t) => {
  const s = await setup(t);
  const teams = { teams: [null, 7, { id: "team_acme1234", name: "Acme" }], pagination: { next: null } };
  s.fake.inject(200, { match: (r) => r.path === "/v2/teams", body: teams, times: 2 });
  const connected = await s.owner.json("POST", s.base, { token: s.token, teamId: "team_acme1234" });
  assert.equal(connected.status, 201, JSON.stringify(connected.body));
  s.fake.inject(200, { match: (r) => r.path === "/v10/projects", body: { projects: [null, { id: "prj_team", name: "team-site" }] } });
  const options = await s.owner.json("GET", `${s.base}/options?teamId=team_acme1234`);
  assert.equal(options.status, 200, JSON.stringify(options.body));
  assert.deepEqual(
    options.body.projects.map((p: { id: string }) => p.id),
    ["prj_team"],
  );

  const before = s.fake.requests.length;
  for (const hostProjectId of ["\ud800", "..", "."]) {
    const put = await s.owner.json("PUT", s.base, { hostProjectId, mappings: { development: "development" } });
    assert.deepEqual([put.status, put.body], [400, { error: "Choose a Vercel project (hostProjectId)." }], JSON.stringify(hostProjectId));
  }
  assert.equal(s.fake.requests.length, before, "nothing asked of Vercel for them");

  const put = await s.owner.json("PUT", s.base, { hostProjectId: "prj_team", mappings: { development: "development" } });
  assert.equal(put.status, 200, JSON.stringify(put.body));
  await addSecret(s, "development", "LISTED_KEY", "listed-value");
  s.fake.inject(200, { match: (r) => r.method === "GET" && r.path === "/v10/projects/prj_team/env", body: { envs: [null, "x"] } });
  const synced = await s.owner.json("POST", `${s.base}/sync`);
  assert.equal(synced.status, 200, JSON.stringify(synced.body));
  assert.equal(s.fake.envFor("prj_team", "LISTED_KEY", "development")!.value, "listed-value");
});

test("a server that closes during a sync ends it at once as interrupted, and says so after the restart", async (t) => {
  const s = await linked(t, {}, { env: { SYNC_DEBOUNCE_MS: "600000" } });
  await addSecret(s, "development", "CLOSING_KEY", "closing-value");
  const held = s.fake.hold(isEnvList);
  t.after(() => held.release());
  const run = s.owner.json("POST", `${s.base}/sync`);
  await held.reached;
  // Held at Vercel for good: the close ends the run instead of waiting for its timeouts and retries.
  await s.server.stop();
  const res = await run;
  assert.deepEqual([res.status, res.body], [503, { error: "The server stopped while a sync was running. Run the sync again." }]);

  const restarted = await s.server.restart();
  t.after(() => restarted.stop());
  const owner = await restarted.signIn("owner@example.test");
  const view = (await owner.json("GET", s.base)).body;
  assert.equal(view.syncing, false);
  assert.equal(view.lastError, "The server stopped while a sync was running. Run the sync again.");
  assert.equal(view.pending, 1, "still to go out");
  const failed = (await auditEvents(owner, s.projectId, "integration.")).filter((e) => e.action === "integration.sync_failed");
  assert.deepEqual(
    failed.map((e) => e.metadata),
    [{ trigger: "manual", error: "The server stopped while a sync was running. Run the sync again." }],
  );
  assert.equal(s.fake.envFor("prj_web", "CLOSING_KEY", "development"), undefined);
});

test("SIGTERM during a manual sync: the sync is cut as the stop begins and answers 503 interrupted before the drain ends", async (t) => {
  const fake = await startFakeVercel();
  t.after(() => fake.stop());
  const token = newToken();
  fake.addToken(token);
  fake.addProject("prj_web", "web");
  // A drain long enough that a sync left to run would still hold its connection at the end of the test.
  const server = await startServerProcess(t, { VERCEL_API_URL: fake.url, SYNC_DEBOUNCE_MS: "600000", SHUTDOWN_DRAIN_SECONDS: "60" });
  // APP_URL follows the port the system gave (http://localhost:<port>): the Origin the server expects.
  const owner = new Client(server.url, server.url.replace("127.0.0.1", "localhost"));
  assert.equal((await owner.post("/api/auth/dev/sign-in", { email: "owner@example.test" })).status, 200);
  const project = await owner.createProject({ name: "stopping", environments: ["development"] });
  const base = `/api/projects/${project.id}/integrations/hosting`;
  assert.equal((await owner.json("POST", base, { token })).status, 201);
  assert.equal((await owner.json("PUT", base, { hostProjectId: "prj_web", mappings: { development: "development" } })).status, 200);
  const created = await owner.json("POST", `/api/projects/${project.id}/environments/development/secrets`, {
    key: "STOP_KEY",
    value: "stop-value-1",
  });
  assert.equal(created.status, 201);

  const held = fake.hold(isEnvList);
  t.after(() => held.release());
  const run = owner.json("POST", `${base}/sync`);
  await held.reached;
  server.child.kill("SIGTERM");
  const res = await run;
  assert.deepEqual([res.status, res.body], [503, { error: "The server stopped while a sync was running. Run the sync again." }]);
  const exited = await server.exited;
  assert.equal(exited.code, 0);
  assert.equal(fake.envFor("prj_web", "STOP_KEY", "development"), undefined);
});

test("rate limits: connect 10, options 20, sync 6 per minute", async (t) => {
  const s = await linked(t);
  // linked() connected once already.
  for (let i = 0; i < 9; i++) assert.equal((await s.owner.json("POST", s.base, { token: s.token })).status, 201);
  const connect = await s.owner.json("POST", s.base, { token: s.token });
  assert.equal(connect.status, 429);
  assert.match(connect.body.error, /^Too many requests/);

  for (let i = 0; i < 20; i++) assert.equal((await s.owner.json("GET", `${s.base}/options`)).status, 200);
  assert.equal((await s.owner.json("GET", `${s.base}/options`)).status, 429);

  for (let i = 0; i < 6; i++) assert.equal((await s.owner.json("POST", `${s.base}/sync`)).status, 200);
  assert.equal((await s.owner.json("POST", `${s.base}/sync`)).status, 429);
  // Other routes are not limited by these.
  assert.equal((await s.owner.json("GET", s.base)).status, 200);
});

test("DELETE removes the connection, its token and hook; vars at Vercel stay", async (t) => {
  const s = await linked(t, { deployHookUrl: undefined });
  await addSecret(s, "production", "STAYS_AT_VERCEL", "stays-value");
  await settled(s);
  const res = await s.owner.json("DELETE", s.base);
  assert.deepEqual([res.status, res.body], [200, { ok: true }]);
  assert.deepEqual((await s.owner.json("GET", s.base)).body, { connected: false });
  assert.equal(integrationRow(s), undefined);
  // What we created at Vercel is remembered per connection; no endpoint lists it.
  assert.equal(rowCount(s.server, "integration_vars"), 0);
  assert.equal(s.fake.envFor("prj_web", "STAYS_AT_VERCEL", "production")!.value, "stays-value");
  assert.deepEqual((await integrationEvents(s)).at(-1)!.metadata, { provider: "vercel" });
  assert.equal((await integrationEvents(s)).at(-1)!.action, "integration.disconnected");
  // Changes after disconnecting schedule nothing.
  await addSecret(s, "production", "AFTER_DISCONNECT", "after-value");
  assert.deepEqual((await s.owner.json("GET", s.base)).body, { connected: false });
  const sync = await s.owner.json("POST", `${s.base}/sync`);
  assert.deepEqual([sync.status, sync.body], [400, M.linkFirst]);
});

test("the token and the deploy hook URL never appear in a response, a log line or an audit event", async (t) => {
  const s = await setup(t, { env: { LOG_LEVEL: "debug" } });
  const responses: string[] = [];
  const call = async (method: string, url: string, body?: unknown) => {
    const res = await s.owner.request(method, url, body);
    const text = await res.text();
    responses.push(`${[...res.headers].map(([k, v]) => `${k}: ${v}`).join("\n")}\n${text}`);
    return { status: res.status, body: text ? JSON.parse(text) : undefined };
  };
  const wrongToken = newToken();
  await call("POST", s.base, { token: wrongToken });
  await call("POST", s.base, { token: s.token, teamId: "team_other999" });
  assert.equal((await call("POST", s.base, { token: s.token })).status, 201);
  await call("GET", `${s.base}/options`);
  const hook = s.fake.addHook("prj_web");
  const hookId = hook.split("/").at(-1)!;
  await call("PUT", s.base, { hostProjectId: "prj_web", mappings: { development: "development" }, deployHookUrl: `${hook}/x` });
  await call("PUT", s.base, { hostProjectId: "prj_team", mappings: { development: "development" }, deployHookUrl: hook });
  assert.equal(
    (
      await call("PUT", s.base, {
        hostProjectId: "prj_web",
        mappings: { development: "development" },
        autoRedeploy: true,
        deployHookUrl: hook,
      })
    ).status,
    200,
  );
  await addSecret(s, "development", "SCAN_KEY", "scan-secret-value");
  await settled(s);
  await call("POST", `${s.base}/sync`, { redeploy: true });
  s.fake.inject(500, { times: 20 });
  await call("POST", `${s.base}/sync`);
  s.fake.clearInjections();
  s.fake.revokeToken(s.token);
  await call("POST", `${s.base}/sync`);
  await call("GET", `${s.base}/options`);
  await call("GET", s.base);
  assert.ok(s.fake.hookCalls.length >= 1);

  // Every stored event, of every project and none.
  const audit = auditRows(s.server).map(({ action, target_id, metadata }) => ({ action, target_id, metadata }));
  const places: [string, string[]][] = [
    ["responses", responses],
    ["log lines", s.server.logs],
    ["audit events", audit.map((a) => JSON.stringify(a))],
  ];
  for (const [name, texts] of places) {
    for (const text of texts) {
      for (const secret of [s.token, wrongToken, hook, hookId, "scan-secret-value"]) {
        assert.ok(!text.includes(secret), `${name} contain a credential: ${text.slice(0, 300)}`);
      }
    }
  }
  assert.ok(s.server.logs.length > 10, "the server did log");
});
