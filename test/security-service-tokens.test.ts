// Service tokens against misuse: odd client networks, tokens that outlive their creator's
// right to make them, floods of made-up tokens, and trusts that let any workload in.
import assert from "node:assert/strict";
import net from "node:net";
import { type TestContext, test } from "node:test";
import { createAccessTokensRepo } from "../src/cli-auth/access-tokens.repo.ts";
import { touchDueBefore } from "../src/core/auth.ts";
import { createServiceAccountsRepo } from "../src/service-accounts/service-accounts.repo.ts";
import { createBrowserSessionsRepo } from "../src/sign-in/browser-sessions.repo.ts";
import { type Client, cliClient, runMain, type TestServer, waitFor } from "./helpers.ts";
import { addMember, cliFor, startTeam, type Team } from "./secrets-helpers.ts";
import { createServiceAccount, serviceAccountsPath } from "./service-account-helpers.ts";
import { legacy, storedRows } from "./storage.ts";

const TOKEN_REFUSED = { error: "This service token is invalid, expired or revoked." };
const CLI_SESSION_ENDED = { error: "Your CLI session has expired or was revoked. Run the CLI login command." };
const INVALID_FIELDS = { error: "invalid fields" };

function createAccount(by: Client, projectId: string, name = "deploy-bot"): Promise<any> {
  return createServiceAccount(by, projectId, { name, role: "viewer", environments: ["production"] });
}

/** The raw answer: these tests look at refusals too. */
function requestToken(by: Client, projectId: string, accountId: string, input: Record<string, unknown>) {
  return by.json("POST", `${serviceAccountsPath(projectId)}/${accountId}/tokens`, input);
}

function me(team: Team, token: string, scheme = "Bearer") {
  return team.server
    .client()
    .request("GET", "/api/service-accounts/me", undefined, { authorization: `${scheme} ${token}` })
    .then(async (res) => ({ status: res.status, body: await res.json() }));
}

// ---------------------------------------------------------------------------------------
// Client networks

test("odd allowedCidrs forms are refused with 400 or matched as the IPv4 network they name; never a 500", async (t) => {
  const team = await startTeam(t);
  const account = await createAccount(team.owner, team.projectId);
  // The test client connects from 127.0.0.1.
  const cases: [string, number, number?][] = [
    ["::ffff:127.0.0.1", 201, 200],
    ["::ffff:127.0.0.0/104", 201, 200],
    ["::ffff:7f00:1", 201, 200],
    ["0:0:0:0:0:ffff:127.0.0.1/128", 201, 200],
    ["::ffff:0:0/96", 201, 200],
    ["::ffff:10.0.0.0/104", 201, 401],
    ["::ffff:127.0.0.2", 201, 401],
    ["::ffff:0:0/95", 400],
    ["::ffff:127.0.0.1/90", 400],
    ["fe80::1%eth0", 400],
    ["fe80::%eth0/64", 400],
    ["127.0.0.0/08", 400],
    ["::1/0128", 400],
    ["127.0.0.0/+8", 400],
    ["127.0.0.0/33", 400],
  ];
  for (const [n, [cidr, created, used]] of cases.entries()) {
    const res = await requestToken(team.owner, team.projectId, account.id, { name: `t${n}`, allowedCidrs: [cidr] });
    if (created === 400) {
      assert.deepEqual([res.status, res.body], [400, INVALID_FIELDS], cidr);
      continue;
    }
    assert.equal(res.status, 201, `${cidr}: ${JSON.stringify(res.body)}`);
    assert.deepEqual(res.body.tokenInfo.allowedCidrs, [cidr], "kept as given");
    const answer = await me(team, res.body.token);
    assert.equal(answer.status, used, `${cidr}: ${JSON.stringify(answer.body)}`);
    if (used === 401) assert.deepEqual(answer.body, TOKEN_REFUSED);
    // Revoked again, to stay under the 20 live tokens.
    await team.owner.json("DELETE", `${serviceAccountsPath(team.projectId)}/${account.id}/tokens/${res.body.tokenInfo.id}`);
  }

  // A list an older version accepted is refused with the one 401, not a 500 on every request.
  const stored = await requestToken(team.owner, team.projectId, account.id, { name: "stored", allowedCidrs: ["127.0.0.0/8"] });
  assert.equal((await me(team, stored.body.token)).status, 200);
  legacy.setAllowedCidrs(team.server, stored.body.tokenInfo.id, ["fe80::1%eth0", "127.0.0.0/08", "::ffff:127.0.0.1/90"]);
  assert.deepEqual(await me(team, stored.body.token).then((r) => [r.status, r.body]), [401, TOKEN_REFUSED]);
  // The owner's session is unaffected.
  assert.equal((await team.owner.json("GET", `${serviceAccountsPath(team.projectId)}/${account.id}`)).status, 200);
});

// ---------------------------------------------------------------------------------------
// Tokens whose creator lost the right to manage service accounts

const LOSSES: { name: string; cause: string; actor: "owner" | "admin" | null; act(team: Team): Promise<void> }[] = [
  {
    name: "demoted to member",
    cause: "role_changed",
    actor: "owner",
    act: async (team) => {
      const res = await team.owner.json("PATCH", `/api/projects/${team.projectId}/members/${team.admin.user!.id}`, { role: "member" });
      assert.equal(res.status, 200, JSON.stringify(res.body));
    },
  },
  {
    name: "removed",
    cause: "removed",
    actor: "owner",
    act: async (team) => {
      const res = await team.owner.json("DELETE", `/api/projects/${team.projectId}/members/${team.admin.user!.id}`);
      assert.equal(res.status, 200, JSON.stringify(res.body));
    },
  },
  {
    name: "leaving",
    cause: "left",
    actor: "admin",
    act: async (team) => {
      const res = await team.admin.json("DELETE", `/api/projects/${team.projectId}/members/${team.admin.user!.id}`);
      assert.equal(res.status, 200, JSON.stringify(res.body));
    },
  },
  {
    name: "disabled (users disable)",
    cause: "disabled",
    actor: null,
    act: async (team) => {
      const res = await runMain(["users", "disable", "adam@example.test"], team.server.env);
      assert.equal(res.code, 0, res.stderr);
    },
  },
];

async function tokensAround(t: TestContext) {
  const team = await startTeam(t);
  const account = await createAccount(team.owner, team.projectId);
  const make = async (by: Client, name: string) => {
    const res = await requestToken(by, team.projectId, account.id, { name });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    return res.body as { token: string; tokenInfo: { id: string } };
  };
  return {
    team,
    account,
    byAdmin: [await make(team.admin, "admin-1"), await make(team.admin, "admin-2")],
    byOwner: await make(team.owner, "owner-1"),
  };
}

for (const loss of LOSSES) {
  test(`an admin ${loss.name}: the service tokens they created are revoked and audited; the owner's keep working`, async (t) => {
    const { team, account, byAdmin, byOwner } = await tokensAround(t);
    for (const made of [...byAdmin, byOwner]) assert.equal((await me(team, made.token)).status, 200);

    await loss.act(team);

    for (const made of byAdmin) assert.deepEqual(await me(team, made.token).then((r) => [r.status, r.body]), [401, TOKEN_REFUSED]);
    assert.equal((await me(team, byOwner.token)).status, 200);
    const listed = await team.owner.json("GET", `${serviceAccountsPath(team.projectId)}/${account.id}`);
    assert.deepEqual(
      listed.body.serviceAccount.tokens.map((x: { name: string }) => x.name),
      ["owner-1"],
    );

    const audit = await team.owner.json("GET", `/api/projects/${team.projectId}/audit?action=service_token.revoked`);
    assert.equal(audit.status, 200);
    const actorId = loss.actor === null ? null : team[loss.actor].user!.id;
    assert.deepEqual(
      audit.body.events
        .map((e: any) => ({ category: e.category, actor: e.actor?.userId ?? null, targetId: e.targetId, metadata: e.metadata }))
        .sort((a: any, b: any) => a.metadata.name.localeCompare(b.metadata.name)),
      byAdmin.map((made, n) => ({
        category: "access",
        actor: actorId,
        targetId: account.id,
        metadata: {
          serviceAccountName: "deploy-bot",
          tokenId: made.tokenInfo.id,
          name: `admin-${n + 1}`,
          reason: "creator_lost_access",
          createdBy: team.admin.user!.id,
          cause: loss.cause,
        },
      })),
    );
  });
}

test("tokens of a creator who still manages service accounts are untouched", async (t) => {
  const { team, byAdmin } = await tokensAround(t);
  const bob = await team.server.signIn("bob@example.test");
  await addMember(team.owner, bob, team.projectId, "admin");
  // Someone else's demotion, and a role change that keeps the right (viewer to admin), revoke nothing.
  const demoted = await team.owner.json("PATCH", `/api/projects/${team.projectId}/members/${bob.user!.id}`, { role: "viewer" });
  assert.equal(demoted.status, 200);
  const promoted = await team.owner.json("PATCH", `/api/projects/${team.projectId}/members/${bob.user!.id}`, { role: "admin" });
  assert.equal(promoted.status, 200);
  for (const made of byAdmin) assert.equal((await me(team, made.token)).status, 200);
  const audit = await team.owner.json("GET", `/api/projects/${team.projectId}/audit?action=service_token.revoked`);
  assert.deepEqual(audit.body.events, []);
});

// ---------------------------------------------------------------------------------------
// The Authorization header and floods of made-up tokens

test("the Bearer scheme is matched without regard to case, for service and CLI tokens", async (t) => {
  const team = await startTeam(t);
  const account = await createAccount(team.owner, team.projectId);
  const { token } = (await requestToken(team.owner, team.projectId, account.id, { name: "ci" })).body;
  for (const scheme of ["bearer", "BEARER", "Bearer"]) {
    const good = await me(team, token, scheme);
    assert.equal(good.status, 200, `${scheme}: ${JSON.stringify(good.body)}`);
    assert.equal(good.body.serviceAccount.id, account.id);
    assert.deepEqual(await me(team, `svc_st_${"A".repeat(43)}`, scheme).then((r) => [r.status, r.body]), [401, TOKEN_REFUSED], scheme);
    assert.deepEqual(await me(team, "svc_wt_short", scheme).then((r) => [r.status, r.body]), [401, TOKEN_REFUSED], scheme);
  }
  const cli = await cliFor(team.server, team.owner);
  const lower = await team.server.client().request("GET", "/api/projects", undefined, { authorization: `bearer ${cli.bearer}` });
  assert.equal(lower.status, 200);
  const badCli = await team.server
    .client()
    .request("GET", "/api/projects", undefined, { authorization: `bearer svc_at_${"C".repeat(43)}` });
  assert.deepEqual([badCli.status, await badCli.json()], [401, CLI_SESSION_ENDED]);
});

test("refused service tokens are limited per client address on every path: 429 after 60 a minute; good tokens unaffected", async (t) => {
  const team = await startTeam(t);
  const account = await createAccount(team.owner, team.projectId);
  const { token } = (await requestToken(team.owner, team.projectId, account.id, { name: "ci" })).body;
  const bad = (n: number) => `svc_st_${String(n).padStart(43, "x")}`;
  const paths = ["/api/service-accounts/me", "/healthz", "/api/projects", "/some/ui/page"];
  for (let n = 0; n < 60; n++) {
    const res = await team.server
      .client()
      .withBearer(bad(n))
      .json("GET", paths[n % paths.length]!);
    assert.deepEqual([res.status, res.body], [401, TOKEN_REFUSED], `attempt ${n + 1}`);
  }
  for (const path of paths) {
    const res = await team.server.client().withBearer(bad(100)).json("GET", path);
    assert.equal(res.status, 429, path);
    assert.match(res.body.error, /^Too many requests\. Try again in \d+ seconds\.$/);
    assert.match(res.headers.get("retry-after") ?? "", /^\d+$/);
  }
  // A body is not read for them either.
  const posted = await team.server
    .client()
    .withBearer(bad(101))
    .json("POST", `/api/projects/${team.projectId}/environments/production/secrets`, { key: "K", value: "v" });
  assert.equal(posted.status, 429);
  // The limit counts refusals only: the good token and people go on.
  assert.equal((await me(team, token)).status, 200);
  assert.equal((await team.owner.json("GET", "/api/projects")).status, 200);
});

// ---------------------------------------------------------------------------------------
// Trusts that accept any workload

test('the security overview warns about a trust with subject "*" and no claims', async (t) => {
  const team = await startTeam(t);
  const open = await createAccount(team.owner, team.projectId, "open-bot");
  const narrow = await createAccount(team.owner, team.projectId, "narrow-bot");
  const note = (notes: string[]) => notes.filter((n) => n.includes("any workload"));
  const trust = (accountId: string, body: Record<string, unknown>) =>
    team.owner.json("POST", `${serviceAccountsPath(team.projectId)}/${accountId}/trusts`, {
      issuer: "https://token.actions.githubusercontent.com",
      audience: "https://secrets.example.test",
      ...body,
    });

  // Narrow ones: a pattern with more than stars, or "*" with a claim.
  assert.equal((await trust(narrow.id, { subject: "repo:acme/api:*" })).status, 201);
  assert.equal((await trust(narrow.id, { subject: "*", claims: { repository: "acme/api" } })).status, 201);
  let overview = await team.owner.json("GET", `/api/projects/${team.projectId}/security`);
  assert.equal(overview.status, 200);
  assert.deepEqual(note(overview.body.notes), []);

  // Still accepted (the contract allows it), and shown.
  const created = await trust(open.id, { subject: "*" });
  assert.equal(created.status, 201, JSON.stringify(created.body));
  overview = await team.owner.json("GET", `/api/projects/${team.projectId}/security`);
  assert.deepEqual(note(overview.body.notes), [
    'The service account "open-bot" accepts an identity token from any workload of a trusted issuer: a trust with subject "*" and no claims. On GitHub Actions that is a workflow in any repository anywhere that asks for the audience. Narrow the subject (for example repo:OWNER/NAME:ref:refs/heads/main) or require claims, such as repository.',
  ]);
  assert.deepEqual(
    overview.body.findings
      .filter((f: { code: string }) => f.code === "open_workload_trust")
      .map((f: { severity: string; where: unknown }) => [f.severity, f.where]),
    [["critical", { page: "service-accounts" }]],
  );

  await team.owner.json("DELETE", `${serviceAccountsPath(team.projectId)}/${open.id}/trusts/${created.body.trust.id}`);
  overview = await team.owner.json("GET", `/api/projects/${team.projectId}/security`);
  assert.deepEqual(note(overview.body.notes), []);
});

// ---------------------------------------------------------------------------------------
// A body that arrives after the credential changed

/**
 * Sends a request's headers and the first half of its body now; `finish()` sends the rest
 * and resolves with the whole answer. The credential is checked as the headers arrive.
 */
async function sendInTwoHalves(server: TestServer, head: string, body: string) {
  const socket = net.connect(Number(new URL(server.url).port), "127.0.0.1");
  let received = "";
  const answered = new Promise<string>((resolve, reject) => {
    socket.on("data", (d) => {
      received += d;
      if (/\r\n\r\n[\s\S]*\}$/.test(received)) resolve(received);
    });
    socket.on("close", () => resolve(received));
    socket.on("error", reject);
  });
  await new Promise((resolve) => socket.once("connect", resolve));
  const half = Math.floor(body.length / 2);
  socket.write(`${head}Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body.slice(0, half)}`);
  // The server has the headers, and has resolved the credential, once it answers a later request.
  await server.client().request("GET", "/healthz");
  await new Promise((resolve) => setTimeout(resolve, 100));
  return {
    async finish(): Promise<{ status: number; body: unknown }> {
      socket.write(body.slice(half));
      const answer = await answered;
      socket.destroy();
      const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(answer)?.[1]);
      return { status, body: JSON.parse(answer.slice(answer.indexOf("\r\n\r\n") + 4)) };
    },
  };
}

test("a write whose body arrives after its service token was revoked, its account deleted or demoted, or its person disabled, is refused and writes nothing", async (t) => {
  const team = await startTeam(t);
  const secrets = `/api/projects/${team.projectId}/environments/development/secrets`;
  const cases: {
    name: string;
    token?: Record<string, unknown>;
    expect: [number, unknown];
    act(accountId: string, tokenId: string): Promise<unknown>;
  }[] = [
    {
      name: "token revoked",
      expect: [401, TOKEN_REFUSED],
      act: (accountId, tokenId) => team.owner.json("DELETE", `${serviceAccountsPath(team.projectId)}/${accountId}/tokens/${tokenId}`),
    },
    {
      name: "account deleted",
      expect: [401, TOKEN_REFUSED],
      act: (accountId) => team.owner.json("DELETE", `${serviceAccountsPath(team.projectId)}/${accountId}`),
    },
    {
      name: "token expired",
      token: { name: "ci", expiresInDays: 1 },
      expect: [401, TOKEN_REFUSED],
      act: async () => {
        team.server.clock.advance(2 * 24 * 60 * 60 * 1000);
        return { status: 200 };
      },
    },
    {
      name: "account demoted to viewer",
      expect: [403, { error: "You do not have permission to do this in this project." }],
      act: (accountId) => team.owner.json("PATCH", `${serviceAccountsPath(team.projectId)}/${accountId}`, { role: "viewer" }),
    },
    {
      name: "account's environment taken away",
      expect: [403, { error: "You do not have access to the development environment of this project." }],
      act: (accountId) => team.owner.json("PATCH", `${serviceAccountsPath(team.projectId)}/${accountId}`, { environments: ["production"] }),
    },
  ];
  for (const [n, c] of cases.entries()) {
    const account = await createServiceAccount(team.owner, team.projectId, {
      name: `bot-${n}`,
      role: "member",
      environments: ["development"],
    });
    const issued = await requestToken(team.owner, team.projectId, account.id, c.token ?? { name: "ci" });
    assert.equal(issued.status, 201);
    const key = `SLOW_${n}`;
    const request = await sendInTwoHalves(
      team.server,
      `POST ${secrets} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${issued.body.token}\r\n`,
      JSON.stringify({ key, value: "written-after-the-change" }),
    );
    // The token was looked up as the headers arrived (its first use is recorded then), before the change.
    await waitFor("the token's first use", async () => {
      const view = await team.owner.json("GET", `${serviceAccountsPath(team.projectId)}/${account.id}`);
      return view.body.serviceAccount.tokens.some((token: { id: string; lastUsedAt: string | null }) => token.lastUsedAt !== null);
    });
    const acted = (await c.act(account.id, issued.body.tokenInfo.id)) as { status: number };
    assert.equal(acted.status, 200, c.name);
    const answer = await request.finish();
    assert.deepEqual([answer.status, answer.body], c.expect, c.name);
    const listed = await team.owner.json("GET", secrets);
    assert.deepEqual(
      listed.body.secrets.map((s: { key: string }) => s.key).filter((k: string) => k.startsWith("SLOW_")),
      [],
      c.name,
    );
  }

  // A person disabled (by the server command) while their write's body was on its way.
  const cookie = team.member.cookieHeader();
  const request = await sendInTwoHalves(
    team.server,
    `POST ${secrets} HTTP/1.1\r\nHost: x\r\nCookie: ${cookie}\r\nOrigin: ${team.server.origin}\r\n`,
    JSON.stringify({ key: "SLOW_PERSON", value: "written-after-the-change" }),
  );
  const disabled = await runMain(["users", "disable", "mia@example.test"], team.server.env);
  assert.equal(disabled.code, 0, disabled.stderr);
  const answer = await request.finish();
  assert.deepEqual([answer.status, answer.body], [401, { error: "not signed in" }]);

  // The same with a CLI token: the CLI's own sentence.
  const cli = await cliClient(team.server, team.admin);
  const cliRequest = await sendInTwoHalves(
    team.server,
    `POST ${secrets} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${cli.bearer}\r\n`,
    JSON.stringify({ key: "SLOW_CLI", value: "written-after-the-change" }),
  );
  assert.equal((await runMain(["users", "disable", "adam@example.test"], team.server.env)).code, 0);
  const cliAnswer = await cliRequest.finish();
  assert.deepEqual(
    [cliAnswer.status, cliAnswer.body],
    [401, { error: "Your CLI session has expired or was revoked. Run the CLI login command." }],
  );
  const listed = await team.owner.json("GET", secrets);
  assert.deepEqual(listed.body.secrets, []);

  // An import checks access before its body (preParsing): the service must still see the change.
  assert.equal((await runMain(["users", "enable", "mia@example.test"], team.server.env)).code, 0);
  const miaAgain = await team.server.signIn("mia@example.test");
  const importCookie = miaAgain.cookieHeader();
  const importRequest = await sendInTwoHalves(
    team.server,
    `POST ${secrets.replace(/\/secrets$/, "/import")} HTTP/1.1\r\nHost: x\r\nCookie: ${importCookie}\r\nOrigin: ${team.server.origin}\r\n`,
    JSON.stringify({ entries: [{ key: "SLOW_IMPORT", value: "written-after-the-change" }] }),
  );
  assert.equal((await runMain(["users", "disable", "mia@example.test"], team.server.env)).code, 0);
  const imported = await importRequest.finish();
  assert.deepEqual([imported.status, imported.body], [401, { error: "not signed in" }]);
  assert.deepEqual((await team.owner.json("GET", secrets)).body.secrets, []);
});

test("every credential's last use is written once however many requests arrive together: a second write of the same minute changes nothing", async (t) => {
  const team = await startTeam(t);
  const { server } = team;
  const account = await createAccount(team.owner, team.projectId);
  const issued = await requestToken(team.owner, team.projectId, account.id, { name: "ci" });
  await cliClient(server, team.owner);
  server.clock.advance(61_000);
  // Two requests that both read the stored time before either wrote: the first writes, the second must not.
  const now = server.clock.now();
  const dueBefore = touchDueBefore(now);
  const [first, second] = [now.toISOString(), new Date(now.getTime() + 500).toISOString()];
  const later = new Date(now.getTime() + 7 * 24 * 60 * 60 * 1000).toISOString();
  const db = server.app.db;

  const tokens = createServiceAccountsRepo(db);
  await tokens.touchToken(issued.body.tokenInfo.id, first, "192.0.2.1", dueBefore);
  await tokens.touchToken(issued.body.tokenInfo.id, second, "192.0.2.2", dueBefore);
  const token = storedRows(server, "service_tokens", { id: issued.body.tokenInfo.id })[0]!;
  assert.deepEqual([token.last_used_at, token.last_used_ip], [first, "192.0.2.1"]);

  const cliSession = storedRows(server, "cli_sessions")[0]!;
  await createAccessTokensRepo(db).touchSession(cliSession.id, first, dueBefore);
  await createAccessTokensRepo(db).touchSession(cliSession.id, second, dueBefore);
  assert.equal(storedRows(server, "cli_sessions", { id: cliSession.id })[0]!.last_used_at, first);

  const browserSession = storedRows(server, "browser_sessions", { user_id: team.owner.user!.id })[0]!;
  const sessions = createBrowserSessionsRepo(db);
  await sessions.touch(browserSession.id, first, later, dueBefore);
  await sessions.touch(browserSession.id, second, later, dueBefore);
  assert.equal(storedRows(server, "browser_sessions", { id: browserSession.id })[0]!.last_seen_at, first);
});
