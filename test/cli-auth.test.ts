import assert from "node:assert/strict";
import { test } from "node:test";
import { auditEvents, cliLogin, sha256Hex, startServer, type TestServer } from "./helpers.ts";
import { markUserDisabled, rowCount, storedRows } from "./storage.ts";

const SESSION_ENDED = { error: "Your CLI session has expired or was revoked. Run the CLI login command." };
const MINUTE = 60_000;

interface TokenPair {
  status: "approved";
  accessToken: string;
  refreshToken: string;
  accessExpiresAt: string;
  refreshExpiresAt: string;
  email: string;
}

async function startDevice(server: TestServer, deviceName?: string) {
  const res = await server.client().json("POST", "/api/cli/auth/device", deviceName === undefined ? {} : { deviceName });
  assert.equal(res.status, 200, JSON.stringify(res.body));
  assert.equal(res.headers.get("cache-control"), "no-store");
  return res.body as { deviceCode: string; userCode: string; verificationUrl: string; expiresIn: number; interval: number };
}

function poll(server: TestServer, deviceCode: unknown) {
  return server.client().json("POST", "/api/cli/auth/token", { deviceCode });
}

function refresh(server: TestServer, refreshToken: string) {
  return server.client().json("POST", "/api/cli/auth/refresh", { refreshToken });
}

async function projectsStatus(server: TestServer, accessToken: string): Promise<number> {
  return (await server.client().withBearer(accessToken).json("GET", "/api/projects")).status;
}

/** A table as stored, as text, to prove no token is in it. */
function dump(server: TestServer, table: string): string {
  return JSON.stringify(storedRows(server, table));
}

test("device start returns the documented shape and stores only hashes", async (t) => {
  const server = await startServer(t);
  const device = await startDevice(server, "build box");
  assert.deepEqual(Object.keys(device).sort(), ["deviceCode", "expiresIn", "interval", "userCode", "verificationUrl"]);
  assert.match(device.deviceCode, /^[A-Za-z0-9_-]{43,}$/);
  assert.match(device.userCode, /^[BCDFGHJKLMNPQRSTVWXZ]{4}-[BCDFGHJKLMNPQRSTVWXZ]{4}$/);
  assert.equal(device.verificationUrl, `${server.origin}/cli/authorize?code=${device.userCode}`);
  assert.equal(device.expiresIn, 600);
  assert.equal(device.interval, 3);

  const stored = dump(server, "cli_device_requests");
  assert.ok(!stored.includes(device.deviceCode));
  assert.ok(!stored.includes(device.userCode) && !stored.includes(device.userCode.replace("-", "")));

  // No body at all is fine too.
  const bare = await server.client().request("POST", "/api/cli/auth/device");
  assert.equal(bare.status, 200);
  const bad = await server.client().json("POST", "/api/cli/auth/device", { deviceName: 5 });
  assert.equal(bad.status, 400);
  const extra = await server.client().json("POST", "/api/cli/auth/device", { deviceName: "x", admin: true });
  assert.equal(extra.status, 400);
});

test("the device name is sanitised and cut to 60 characters", async (t) => {
  const server = await startServer(t);
  const alice = await server.signIn("alice@example.test");
  const cases: [string, string][] = [
    ["<script>alert(1)</script>my\u0000 laptop\n\u202e", "alert(1) my laptop"],
    ["a".repeat(100), "a".repeat(60)],
    ["<b></b>", "CLI"],
  ];
  for (const [input, expected] of cases) {
    const device = await startDevice(server, input);
    const res = await alice.json("POST", "/api/cli/auth/approve", { userCode: device.userCode, approve: false });
    assert.equal(res.status, 200);
    assert.equal(res.body.deviceName, expected);
  }
});

// Before the tag pattern stopped at the next "<", a name of 300,000 "<" kept the event loop
// busy for minutes (quadratic scan) on an endpoint that needs no sign-in.
test("a huge device name of markup characters is sanitised in linear time", { timeout: 30_000 }, async (t) => {
  const server = await startServer(t);
  const alice = await server.signIn("alice@example.test");
  for (const input of ["<".repeat(300_000), "<a".repeat(150_000), `x${"<".repeat(299_999)}`]) {
    const device = await startDevice(server, input);
    const res = await alice.json("POST", "/api/cli/auth/approve", { userCode: device.userCode, approve: false });
    assert.equal(res.status, 200);
    assert.equal(res.body.deviceName, input.startsWith("<a") ? "a ".repeat(30).trim() : input.startsWith("x") ? "x" : "CLI");
  }
});

test("the whole device flow: pending, approve, tokens exactly once, then expired", async (t) => {
  const server = await startServer(t);
  const alice = await server.signIn("alice@example.test");
  const device = await startDevice(server, "laptop");

  const pending = await poll(server, device.deviceCode);
  assert.equal(pending.status, 202);
  assert.deepEqual(pending.body, { status: "pending" });

  // The dash is optional and case does not matter.
  const typed = device.userCode.replace("-", "").toLowerCase();
  const approved = await alice.json("POST", "/api/cli/auth/approve", { userCode: typed });
  assert.equal(approved.status, 200);
  assert.deepEqual(approved.body, { ok: true, approved: true, deviceName: "laptop" });

  server.clock.advance(3000);
  const tokens = await poll(server, device.deviceCode);
  assert.equal(tokens.status, 200);
  const body = tokens.body as TokenPair;
  assert.deepEqual(Object.keys(body).sort(), ["accessExpiresAt", "accessToken", "email", "refreshExpiresAt", "refreshToken", "status"]);
  assert.equal(body.status, "approved");
  assert.equal(body.email, "alice@example.test");
  assert.match(body.accessToken, /^svc_at_[A-Za-z0-9_-]{40,}$/);
  assert.match(body.refreshToken, /^svc_rt_[A-Za-z0-9_-]{40,}$/);
  const now = server.clock.now().getTime();
  assert.ok(Math.abs(Date.parse(body.accessExpiresAt) - (now + 60 * MINUTE)) < 5000);
  assert.ok(Math.abs(Date.parse(body.refreshExpiresAt) - (now + 30 * 24 * 60 * MINUTE)) < 5000);

  // Tokens are stored only as SHA-256 hashes.
  const stored = dump(server, "cli_tokens");
  assert.ok(!stored.includes(body.accessToken.slice(7)) && !stored.includes(body.refreshToken.slice(7)));
  assert.ok(stored.includes(sha256Hex(body.accessToken)) && stored.includes(sha256Hex(body.refreshToken)), "their SHA-256s are");

  assert.equal(await projectsStatus(server, body.accessToken), 200);
  const me = await server.client().withBearer(body.accessToken).json("GET", "/api/auth/me");
  assert.equal(me.body.user.email, "alice@example.test");

  // Returned once: the next poll says expired, and the code cannot be approved again.
  server.clock.advance(3000);
  const again = await poll(server, device.deviceCode);
  assert.equal(again.status, 400);
  assert.deepEqual(again.body, { status: "expired" });
  const reapprove = await alice.json("POST", "/api/cli/auth/approve", { userCode: device.userCode });
  assert.equal(reapprove.status, 404);
  assert.deepEqual(reapprove.body, { error: "That code is invalid or has expired." });
});

test("a denied request answers denied and issues nothing", async (t) => {
  const server = await startServer(t);
  const alice = await server.signIn("alice@example.test");
  const device = await startDevice(server, "ci");
  const denied = await alice.json("POST", "/api/cli/auth/approve", { userCode: device.userCode, approve: false });
  assert.equal(denied.status, 200);
  assert.deepEqual(denied.body, { ok: true, approved: false, deviceName: "ci" });
  const res = await poll(server, device.deviceCode);
  assert.equal(res.status, 400);
  assert.deepEqual(res.body, { status: "denied" });
  assert.deepEqual((await alice.json("GET", "/api/cli/sessions")).body, { sessions: [] });
  // No endpoint lists tokens: only the storage shows none was issued.
  assert.equal(rowCount(server, "cli_tokens"), 0);
  assert.equal(rowCount(server, "cli_sessions"), 0);
});

test("a request expires after 10 minutes by the server clock", async (t) => {
  const server = await startServer(t);
  const alice = await server.signIn("alice@example.test");
  const device = await startDevice(server);
  server.clock.advance(599_000);
  assert.equal((await poll(server, device.deviceCode)).status, 202);
  server.clock.advance(3000);
  const res = await poll(server, device.deviceCode);
  assert.equal(res.status, 400);
  assert.deepEqual(res.body, { status: "expired" });
  const approve = await alice.json("POST", "/api/cli/auth/approve", { userCode: device.userCode });
  assert.equal(approve.status, 404);
  assert.deepEqual(approve.body, { error: "That code is invalid or has expired." });
});

test("the approval page can show which device asks before the user decides", async (t) => {
  const server = await startServer(t);
  const alice = await server.signIn("alice@example.test");
  const device = await startDevice(server, "deploy box");
  const typed = device.userCode.toLowerCase().replace("-", "");
  const res = await alice.json("POST", "/api/cli/auth/pending", { userCode: typed });
  assert.equal(res.status, 200);
  assert.deepEqual(Object.keys(res.body.request).sort(), ["deviceName", "expiresAt", "userCode"]);
  assert.equal(res.body.request.deviceName, "deploy box");
  assert.equal(res.body.request.userCode, device.userCode);
  // Looking does not decide anything.
  assert.equal((await poll(server, device.deviceCode)).status, 202);

  const malformed = await alice.json("POST", "/api/cli/auth/pending", { userCode: "nope" });
  assert.deepEqual([malformed.status, malformed.body], [400, { error: "Enter the 8 character code from your terminal." }]);
  await alice.json("POST", "/api/cli/auth/approve", { userCode: device.userCode });
  const used = await alice.json("POST", "/api/cli/auth/pending", { userCode: device.userCode });
  assert.deepEqual([used.status, used.body], [404, { error: "That code is invalid or has expired." }]);
  assert.equal((await server.client().json("POST", "/api/cli/auth/pending", { userCode: device.userCode })).status, 401);
});

test("unknown and malformed device codes answer Invalid device code.", async (t) => {
  const server = await startServer(t);
  for (const code of ["A".repeat(43), "short", 42, null, undefined]) {
    const res = await poll(server, code);
    assert.equal(res.status, 400);
    assert.deepEqual(res.body, { error: "Invalid device code." });
  }
  const empty = await server.client().json("POST", "/api/cli/auth/token", {});
  assert.deepEqual([empty.status, empty.body], [400, { error: "Invalid device code." }]);
});

test("polling the same device code faster than the interval answers 429 and changes nothing", async (t) => {
  const server = await startServer(t);
  const alice = await server.signIn("alice@example.test");
  const device = await startDevice(server);
  const other = await startDevice(server);
  assert.equal((await poll(server, device.deviceCode)).status, 202);
  const fast = await poll(server, device.deviceCode);
  assert.equal(fast.status, 429);
  assert.equal(typeof fast.body.error, "string");
  assert.ok(fast.body.error.length > 0);
  // Per device code: another request is not slowed down.
  assert.equal((await poll(server, other.deviceCode)).status, 202);

  await alice.json("POST", "/api/cli/auth/approve", { userCode: device.userCode });
  assert.equal((await poll(server, device.deviceCode)).status, 429);
  server.clock.advance(3000);
  assert.equal((await poll(server, device.deviceCode)).status, 200);
});

test("approve validates its input and needs a browser session", async (t) => {
  const server = await startServer(t);
  const alice = await server.signIn("alice@example.test");
  const device = await startDevice(server);
  const malformed = "Enter the 8 character code from your terminal.";
  for (const userCode of ["ABC", "BCDF-GHJ1", "AEIO-UBCD", 12345678, "", "B".repeat(65), "BCDF-GHJK".repeat(10_000)]) {
    const res = await alice.json("POST", "/api/cli/auth/approve", { userCode });
    assert.deepEqual([res.status, res.body], [400, { error: malformed }], String(userCode));
  }
  const missing = await alice.json("POST", "/api/cli/auth/approve", {});
  assert.deepEqual([missing.status, missing.body], [400, { error: malformed }]);

  // A string "false" is neither true nor false: refused, and the request stays pending.
  for (const approve of ["false", 0, null, "true"]) {
    const res = await alice.json("POST", "/api/cli/auth/approve", { userCode: device.userCode, approve });
    assert.equal(res.status, 400, JSON.stringify(approve));
  }
  assert.equal((await poll(server, device.deviceCode)).status, 202);

  const unknown = await alice.json("POST", "/api/cli/auth/approve", {
    userCode: "BCDF-GHJK" === device.userCode ? "BBBB-BBBB" : "BCDF-GHJK",
  });
  assert.deepEqual([unknown.status, unknown.body], [404, { error: "That code is invalid or has expired." }]);

  const anonymous = await server.client().json("POST", "/api/cli/auth/approve", { userCode: device.userCode });
  assert.deepEqual([anonymous.status, anonymous.body], [401, { error: "not signed in" }]);

  // A CLI token can never approve another device.
  const tokens = await cliLogin(server, alice, "laptop");
  const byCli = await server.client().withBearer(tokens.accessToken).json("POST", "/api/cli/auth/approve", { userCode: device.userCode });
  assert.equal(byCli.status, 403);
  const byBadToken = await server
    .client()
    .withBearer(`svc_at_${"x".repeat(43)}`)
    .json("POST", "/api/cli/auth/approve", {
      userCode: device.userCode,
    });
  assert.deepEqual([byBadToken.status, byBadToken.body], [401, { error: "not signed in" }]);
  server.clock.advance(3000);
  assert.equal((await poll(server, device.deviceCode)).status, 202);
});

test("approve is rate limited per user and per address", async (t) => {
  const server = await startServer(t);
  const alice = await server.signIn("alice@example.test");
  for (let i = 0; i < 10; i++) {
    const res = await alice.json("POST", "/api/cli/auth/approve", { userCode: "BBBB-BBBB" });
    assert.equal(res.status, 404);
  }
  const limited = await alice.json("POST", "/api/cli/auth/approve", { userCode: "BBBB-BBBB" });
  assert.equal(limited.status, 429);
  assert.match(limited.body.error, /Try again in \d+ seconds/);

  // Other users from the same address share the address limit of 30 a minute.
  let answered = 11;
  let firstLimited = -1;
  for (let u = 0; u < 3 && firstLimited < 0; u++) {
    const user = await server.signIn(`user${u}@example.test`);
    for (let i = 0; i < 10 && firstLimited < 0; i++) {
      const res = await user.json("POST", "/api/cli/auth/approve", { userCode: "BBBB-BBBB" });
      answered++;
      if (res.status === 429) firstLimited = answered;
      else assert.equal(res.status, 404);
    }
  }
  assert.equal(firstLimited, 31);
});

test("device start is rate limited per address", async (t) => {
  const server = await startServer(t);
  for (let i = 0; i < 10; i++) await startDevice(server);
  const res = await server.client().json("POST", "/api/cli/auth/device", {});
  assert.equal(res.status, 429);
  assert.equal(typeof res.body.error, "string");
});

test("refresh rotates the pair; the old access token lives until its own expiry", async (t) => {
  const server = await startServer(t);
  const alice = await server.signIn("alice@example.test");
  const first = await cliLogin(server, alice, "laptop");

  server.clock.advance(10 * MINUTE);
  const res = await refresh(server, first.refreshToken);
  assert.equal(res.status, 200);
  assert.equal(res.headers.get("cache-control"), "no-store");
  const second = res.body as TokenPair;
  assert.equal(second.status, "approved");
  assert.equal(second.email, "alice@example.test");
  assert.notEqual(second.accessToken, first.accessToken);
  assert.notEqual(second.refreshToken, first.refreshToken);
  assert.equal(await projectsStatus(server, second.accessToken), 200);
  assert.equal(await projectsStatus(server, first.accessToken), 200);

  // 51 minutes later the first access token has reached its 60 minutes; the second has not.
  server.clock.advance(51 * MINUTE);
  assert.equal(await projectsStatus(server, first.accessToken), 401);
  assert.equal(await projectsStatus(server, second.accessToken), 200);
  server.clock.advance(10 * MINUTE);
  const expired = await server.client().withBearer(second.accessToken).json("GET", "/api/projects");
  assert.deepEqual([expired.status, expired.body], [401, SESSION_ENDED]);

  // One session in the list, the same one all along.
  const sessions = await alice.json("GET", "/api/cli/sessions");
  assert.equal(sessions.body.sessions.length, 1);
  const third = await refresh(server, second.refreshToken);
  assert.equal(third.status, 200);
  assert.equal(await projectsStatus(server, third.body.accessToken), 200);

  // Expired access tokens of a live session are pruned (with the next device start): a session
  // refreshed every hour would otherwise keep a row per hour for as long as it lives.
  const accessRows = () => rowCount(server, "cli_tokens", { kind: "access" });
  assert.equal(accessRows(), 3);
  await startDevice(server);
  assert.equal(accessRows(), 1, "only the live access token is kept");
  assert.equal(await projectsStatus(server, third.body.accessToken), 200);
  // Used refresh tokens are kept while the session lives, past their own 30 days too:
  // presenting one still ends the session.
  server.clock.advance(29 * 24 * 60 * MINUTE);
  const fourth = (await refresh(server, third.body.refreshToken)).body as TokenPair;
  server.clock.advance(29 * 24 * 60 * MINUTE);
  const fifth = (await refresh(server, fourth.refreshToken)).body as TokenPair;
  assert.equal(await projectsStatus(server, fifth.accessToken), 200, "58 days on, refreshed in time");
  await startDevice(server);
  assert.deepEqual((await refresh(server, first.refreshToken)).body, SESSION_ENDED, "the first refresh token, 58 days old");
  assert.equal(await projectsStatus(server, fifth.accessToken), 401, "its reuse ended the whole session");
});

test("presenting a rotated refresh token revokes the whole session", async (t) => {
  const server = await startServer(t);
  const alice = await server.signIn("alice@example.test");
  const first = await cliLogin(server, alice, "laptop");
  const second = (await refresh(server, first.refreshToken)).body as TokenPair;
  const third = (await refresh(server, second.refreshToken)).body as TokenPair;
  assert.equal(await projectsStatus(server, third.accessToken), 200);

  const reused = await refresh(server, first.refreshToken);
  assert.deepEqual([reused.status, reused.body], [401, SESSION_ENDED]);
  // Every token of the session stops working at once, the newest included.
  for (const token of [first.accessToken, second.accessToken, third.accessToken]) {
    assert.equal(await projectsStatus(server, token), 401);
  }
  assert.deepEqual((await refresh(server, third.refreshToken)).body, SESSION_ENDED);
  assert.deepEqual((await alice.json("GET", "/api/cli/sessions")).body, { sessions: [] });
  assert.ok(server.logs.some((line) => line.includes("refresh token reused")));

  // Another session of the same user is untouched.
  const other = await cliLogin(server, alice, "laptop");
  assert.equal(await projectsStatus(server, other.accessToken), 200);
});

test("concurrent refreshes with the same token: exactly one wins", async (t) => {
  const server = await startServer(t);
  const alice = await server.signIn("alice@example.test");
  const first = await cliLogin(server, alice, "laptop");
  const results = await Promise.all([
    refresh(server, first.refreshToken),
    refresh(server, first.refreshToken),
    refresh(server, first.refreshToken),
  ]);
  const statuses = results.map((r) => r.status).sort();
  assert.deepEqual(statuses, [200, 401, 401]);
  for (const r of results.filter((r) => r.status === 401)) assert.deepEqual(r.body, SESSION_ENDED);
});

test("unknown, malformed and expired refresh tokens answer 401", async (t) => {
  const server = await startServer(t);
  const alice = await server.signIn("alice@example.test");
  const pair = await cliLogin(server, alice, "laptop");
  for (const token of [`svc_rt_${"a".repeat(43)}`, "nonsense", pair.accessToken]) {
    const res = await refresh(server, token);
    assert.deepEqual([res.status, res.body], [401, SESSION_ENDED]);
  }
  assert.equal((await server.client().json("POST", "/api/cli/auth/refresh", {})).status, 400);
  assert.equal((await server.client().json("POST", "/api/cli/auth/refresh", { refreshToken: 5 })).status, 400);

  server.clock.advance(30 * 24 * 60 * MINUTE + 1000);
  const res = await refresh(server, pair.refreshToken);
  assert.deepEqual([res.status, res.body], [401, SESSION_ENDED]);
});

test("logout ends the session and is idempotent", async (t) => {
  const server = await startServer(t);
  const alice = await server.signIn("alice@example.test");
  const pair = await cliLogin(server, alice, "laptop");
  const cli = server.client().withBearer(pair.accessToken);
  assert.deepEqual((await cli.json("POST", "/api/cli/auth/logout")).body, { ok: true });
  assert.equal(await projectsStatus(server, pair.accessToken), 401);
  assert.deepEqual((await refresh(server, pair.refreshToken)).body, SESSION_ENDED);
  for (const client of [cli, server.client().withBearer("garbage"), server.client()]) {
    const res = await client.json("POST", "/api/cli/auth/logout");
    assert.deepEqual([res.status, res.body], [200, { ok: true }]);
  }
  // A browser session calling logout keeps its own session.
  assert.deepEqual((await alice.json("POST", "/api/cli/auth/logout")).body, { ok: true });
  assert.equal((await alice.json("GET", "/api/cli/sessions")).status, 200);

  // The ended session stays on record for 30 days, its tokens do not; then a device start deletes it.
  const live = await cliLogin(server, alice, "desktop");
  await startDevice(server);
  assert.deepEqual(
    storedRows(server, "cli_sessions").map((r) => [r.device_name, r.revoked_at !== null]),
    [
      ["laptop", true],
      ["desktop", false],
    ],
  );
  assert.equal(rowCount(server, "cli_tokens"), 2, "the live session's pair only");
  server.clock.advance(29 * 24 * 60 * MINUTE);
  assert.equal((await refresh(server, live.refreshToken)).status, 200, "the live one is kept alive");
  await startDevice(server);
  assert.equal(rowCount(server, "cli_sessions"), 2);
  server.clock.advance(2 * 24 * 60 * MINUTE);
  await startDevice(server);
  assert.deepEqual(
    storedRows(server, "cli_sessions").map((r) => r.device_name),
    ["desktop"],
  );
});

test("sessions: list without token material, revoke one, revoke all, never another user's", async (t) => {
  const server = await startServer(t);
  const alice = await server.signIn("alice@example.test");
  const bob = await server.signIn("bob@example.test");
  const laptop = await cliLogin(server, alice, "laptop");
  const ci = await cliLogin(server, alice, "ci runner");
  const bobs = await cliLogin(server, bob, "bob's");

  const list = await alice.json("GET", "/api/cli/sessions");
  assert.equal(list.status, 200);
  assert.equal(list.body.sessions.length, 2);
  for (const session of list.body.sessions) {
    assert.deepEqual(Object.keys(session).sort(), ["createdAt", "deviceName", "expiresAt", "id", "lastUsedAt"]);
  }
  assert.deepEqual(list.body.sessions.map((s: any) => s.deviceName).sort(), ["ci runner", "laptop"]);
  assert.ok(!JSON.stringify(list.body).includes("svc_"));

  const bobSessionId = (await bob.json("GET", "/api/cli/sessions")).body.sessions[0].id;
  const foreign = await alice.json("DELETE", `/api/cli/sessions/${bobSessionId}`);
  assert.deepEqual([foreign.status, foreign.body], [404, { error: "Session not found." }]);
  assert.equal(await projectsStatus(server, bobs.accessToken), 200);
  const unknown = await alice.json("DELETE", "/api/cli/sessions/nope");
  assert.deepEqual([unknown.status, unknown.body], [404, { error: "Session not found." }]);

  const laptopId = list.body.sessions.find((s: any) => s.deviceName === "laptop").id;
  const one = await alice.json("DELETE", `/api/cli/sessions/${laptopId}`);
  assert.deepEqual([one.status, one.body], [200, { ok: true }]);
  assert.equal(await projectsStatus(server, laptop.accessToken), 401);
  assert.deepEqual((await refresh(server, laptop.refreshToken)).body, SESSION_ENDED);
  assert.equal(await projectsStatus(server, ci.accessToken), 200);
  assert.equal((await alice.json("DELETE", `/api/cli/sessions/${laptopId}`)).status, 404);

  await cliLogin(server, alice, "third");
  // A terminal's sign-in Alice approved a moment ago, not collected yet: ending every
  // session denies it too, or it would become a session right after.
  const device = await server.client().json("POST", "/api/cli/auth/device", { deviceName: "just approved" });
  assert.equal((await alice.json("POST", "/api/cli/auth/approve", { userCode: device.body.userCode })).status, 200);
  const all = await alice.json("DELETE", "/api/cli/sessions");
  assert.deepEqual([all.status, all.body], [200, { revoked: 2 }]);
  const collected = await server.client().json("POST", "/api/cli/auth/token", { deviceCode: device.body.deviceCode });
  assert.deepEqual([collected.status, collected.body], [400, { status: "denied" }]);
  assert.equal(await projectsStatus(server, ci.accessToken), 401);
  assert.deepEqual((await alice.json("GET", "/api/cli/sessions")).body, { sessions: [] });
  assert.equal(await projectsStatus(server, bobs.accessToken), 200);

  // Browser only.
  const cliBob = server.client().withBearer(bobs.accessToken);
  for (const [method, path] of [
    ["GET", "/api/cli/sessions"],
    ["DELETE", "/api/cli/sessions"],
    ["DELETE", `/api/cli/sessions/${bobSessionId}`],
  ]) {
    assert.equal((await cliBob.json(method!, path!)).status, 403);
    assert.equal((await server.client().json(method!, path!)).status, 401);
  }
  assert.equal(await projectsStatus(server, bobs.accessToken), 200);
});

test("lastUsedAt follows use, written at most once a minute", async (t) => {
  const server = await startServer(t);
  const alice = await server.signIn("alice@example.test");
  const pair = await cliLogin(server, alice, "laptop");
  const lastUsed = async () => (await alice.json("GET", "/api/cli/sessions")).body.sessions[0].lastUsedAt as string;
  const start = await lastUsed();
  server.clock.advance(30_000);
  await projectsStatus(server, pair.accessToken);
  assert.equal(await lastUsed(), start);
  server.clock.advance(31_000);
  await projectsStatus(server, pair.accessToken);
  const later = await lastUsed();
  assert.ok(Date.parse(later) - Date.parse(start) >= 61_000);
});

test("a disabled user's tokens stop working and cannot be refreshed", async (t) => {
  const server = await startServer(t);
  const alice = await server.signIn("alice@example.test");
  const pair = await cliLogin(server, alice, "laptop");
  markUserDisabled(server, { email: "alice@example.test" });
  assert.equal(await projectsStatus(server, pair.accessToken), 401);
  assert.deepEqual((await refresh(server, pair.refreshToken)).body, SESSION_ENDED);
});

test("a login approved by someone disabled before the terminal polls is denied, and starts no session", async (t) => {
  const server = await startServer(t);
  const bob = await server.signIn("bob@example.test");
  const device = await startDevice(server, "laptop");
  assert.equal((await bob.json("POST", "/api/cli/auth/approve", { userCode: device.userCode })).status, 200);
  markUserDisabled(server, { email: "bob@example.test" });
  server.clock.advance(3000);
  const polled = await poll(server, device.deviceCode);
  assert.deepEqual([polled.status, polled.body], [400, { status: "denied" }]);
  assert.equal(rowCount(server, "cli_sessions"), 0);
  assert.equal(rowCount(server, "cli_tokens"), 0);
});

// Every endpoint with the credential it takes (the security of each operation in /api/openapi.json).
const P = ":project";
const S = ":secret";
const BROWSER_ONLY: [string, string][] = [
  ["POST", "/api/projects"],
  ["PATCH", `/api/projects/${P}`],
  ["DELETE", `/api/projects/${P}`],
  ["DELETE", `/api/projects/${P}/environments/development/secrets/${S}`],
  ["GET", `/api/projects/${P}/environments/development/secrets/${S}/versions`],
  ["GET", `/api/projects/${P}/environments/development/secrets/${S}/versions/1`],
  ["POST", `/api/projects/${P}/environments/development/secrets/${S}/versions/1/restore`],
  ["POST", `/api/projects/${P}/environments/development/import`],
  ["GET", `/api/projects/${P}/audit`],
  ["GET", `/api/projects/${P}/security`],
  ["GET", `/api/projects/${P}/integrations/hosting`],
  ["POST", `/api/projects/${P}/integrations/hosting`],
  ["GET", `/api/projects/${P}/integrations/hosting/options`],
  ["PUT", `/api/projects/${P}/integrations/hosting`],
  ["POST", `/api/projects/${P}/integrations/hosting/sync`],
  ["DELETE", `/api/projects/${P}/integrations/hosting`],
  ["GET", `/api/projects/${P}/members`],
  ["PATCH", `/api/projects/${P}/members/:user`],
  ["DELETE", `/api/projects/${P}/members/:user`],
  ["GET", `/api/projects/${P}/invitations`],
  ["POST", `/api/projects/${P}/invitations`],
  ["DELETE", `/api/projects/${P}/invitations/some-invitation`],
  ["POST", "/api/invitations/accept"],
  ["GET", `/api/projects/${P}/environment-access`],
  ["PUT", `/api/projects/${P}/environments/development/access/:user`],
  ["DELETE", `/api/projects/${P}/environments/development/access/:user`],
  ["POST", "/api/cli/auth/approve"],
  ["POST", "/api/cli/auth/pending"],
  ["GET", "/api/cli/sessions"],
  ["DELETE", "/api/cli/sessions"],
  ["DELETE", "/api/cli/sessions/some-session"],
];

test("Bearer tokens work on every CLI endpoint and get 403 on every browser-only one", async (t) => {
  const server = await startServer(t);
  const alice = await server.signIn("alice@example.test");
  const project = await alice.createProject({ name: "api", environments: ["development"] });
  const pair = await cliLogin(server, alice, "laptop");
  const cli = server.client().withBearer(pair.accessToken);
  const fill = (p: string, secretId = "00000000-0000-0000-0000-000000000000") =>
    p.replaceAll(P, project.id).replaceAll(S, secretId).replaceAll(":user", alice.user!.id);

  // The CLI column: the token is accepted.
  assert.equal((await cli.json("GET", "/api/projects")).status, 200);
  assert.equal((await cli.json("GET", `/api/projects/${project.id}`)).status, 200);
  const base = `/api/projects/${project.id}/environments/development`;
  const created = await cli.json("POST", `${base}/secrets`, { key: "CLI_KEY", value: "from the cli" });
  assert.equal(created.status, 201);
  const id = created.body.secret.id;
  assert.equal((await cli.json("GET", `${base}/secrets`)).status, 200);
  assert.equal((await cli.json("GET", `${base}/secrets/${id}`)).status, 200);
  assert.equal((await cli.json("PATCH", `${base}/secrets/${id}`, { value: "changed" })).status, 200);
  assert.equal((await cli.json("GET", `${base}/export`)).status, 200);
  assert.equal((await cli.request("GET", `${base}/export?format=dotenv`)).status, 200);
  // Audit metadata of secret operations made with a CLI token says via: "cli".
  const rows = await auditEvents(alice, project.id, "secret");
  assert.ok(rows.length >= 4);
  for (const row of rows) assert.equal(row.metadata.via, "cli", row.action);

  // The browser column: a good token is refused with 403, a bad one with 401.
  const bad = server.client().withBearer(`svc_at_${"z".repeat(43)}`);
  for (const [method, template] of BROWSER_ONLY) {
    const path = fill(template);
    const body = method === "GET" || method === "DELETE" ? undefined : {};
    const res = await cli.json(method, path, body);
    assert.equal(res.status, 403, `${method} ${template}: ${JSON.stringify(res.body)}`);
    const badRes = await bad.json(method, path, body);
    assert.equal(badRes.status, 401, `${method} ${template} with a bad token`);
  }
  // Nothing of the above changed anything the token can see.
  assert.equal((await cli.json("GET", `/api/projects/${project.id}`)).status, 200);
});
