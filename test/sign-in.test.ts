import assert from "node:assert/strict";
import { test } from "node:test";
import { auditEvents, listUsers, randomMasterKey, sha256Hex, startServer } from "./helpers.ts";
import { rowCount, storedRows } from "./storage.ts";

test("dev sign-in sets an HttpOnly SameSite=Lax cookie and /me answers the user", async (t) => {
  const server = await startServer(t);
  const client = server.client();
  const res = await client.post("/api/auth/dev/sign-in", { email: "Alice@Example.test", name: "Alice" });
  assert.equal(res.status, 200);
  const body = (await res.json()) as { user: { id: string; email: string; name: string } };
  assert.equal(body.user.email, "alice@example.test");
  assert.equal(body.user.name, "Alice");
  assert.match(body.user.id, /^[0-9a-f-]{36}$/);
  const cookie = res.headers.getSetCookie()[0]!;
  assert.match(cookie, /HttpOnly/i);
  assert.match(cookie, /SameSite=Lax/i);
  assert.doesNotMatch(cookie, /Secure/i, "not Secure in development over http");

  const token = [...client.cookies.values()][0]!;
  assert.ok(Buffer.from(token, "base64url").length >= 32, "at least 32 random bytes");
  const stored = storedRows(server, "browser_sessions").map((row) => row.token_hash as string);
  assert.equal(stored.length, 1);
  assert.equal(stored[0], sha256Hex(token), "only its SHA-256 is stored");

  const me = await client.json("GET", "/api/auth/me");
  assert.equal(me.status, 200);
  assert.deepEqual(me.body, { user: body.user });
});

test("signed out, /me answers 401 not signed in", async (t) => {
  const server = await startServer(t);
  const me = await server.client().json("GET", "/api/auth/me");
  assert.equal(me.status, 401);
  assert.deepEqual(me.body, { error: "not signed in" });
});

test("bad sign-in input is a 400 and creates no user", async (t) => {
  const server = await startServer(t);
  const client = server.client();
  for (const body of [
    {},
    { email: "nope" },
    { email: 42 },
    { email: "a@b.test", extra: { nested: true } },
    { email: "a@b.test", name: "x".repeat(101) },
    { email: "a@b.test", name: "Eve\u001b[2J" },
    [],
  ]) {
    const res = await client.json("POST", "/api/auth/dev/sign-in", body);
    assert.equal(res.status, 400, JSON.stringify(body));
    assert.equal(typeof res.body.error, "string");
  }
  const bad = await client.request("POST", "/api/auth/dev/sign-in", "{not json", { "content-type": "application/json" });
  assert.equal(bad.status, 400);
  assert.deepEqual(await bad.json(), { error: "The request body is not valid JSON." });
  assert.deepEqual(await listUsers(server), []);
});

test("sign-out ends the session on the server, not only in the browser", async (t) => {
  const server = await startServer(t);
  const client = await server.signIn("alice@example.test");
  const cookieHeader = [...client.cookies].map(([k, v]) => `${k}=${v}`).join("; ");
  const out = await client.json("POST", "/api/auth/sign-out");
  assert.equal(out.status, 200);
  assert.deepEqual(out.body, { ok: true });
  // Replaying the old cookie must not work.
  const replay = await server.client().get("/api/auth/me", { cookie: cookieHeader });
  assert.equal(replay.status, 401);
  // Deleted, not only refused: no endpoint lists browser sessions.
  assert.equal(rowCount(server, "browser_sessions"), 0);
});

test("signing in again, as anyone, ends the session the browser held before", async (t) => {
  const server = await startServer(t);
  const client = await server.signIn("alice@example.test");
  const before = [...client.cookies].map(([k, v]) => `${k}=${v}`).join("; ");
  const again = await client.json("POST", "/api/auth/dev/sign-in", { email: "bob@example.test" });
  assert.equal(again.status, 200);
  assert.equal((await client.json("GET", "/api/auth/me")).body.user.email, "bob@example.test");
  assert.equal((await server.client().get("/api/auth/me", { cookie: before })).status, 401, "Alice's session is over");
  assert.equal(rowCount(server, "browser_sessions"), 1);
});

test("a forged or expired cookie is 401", async (t) => {
  const server = await startServer(t);
  const client = await server.signIn("alice@example.test");
  const name = [...client.cookies.keys()][0]!;
  const forged = await server.client().get("/api/auth/me", { cookie: `${name}=${"A".repeat(43)}` });
  assert.equal(forged.status, 401);

  assert.equal((await client.get("/api/auth/me")).status, 200);
  server.clock.advance(8 * 24 * 60 * 60 * 1000); // past the 7-day idle lifetime
  const expired = await client.json("GET", "/api/auth/me");
  assert.equal(expired.status, 401);
  assert.deepEqual(expired.body, { error: "not signed in" });
});

test("a session slides with use but never outlives 30 days", async (t) => {
  const server = await startServer(t);
  const client = await server.signIn("alice@example.test");
  const day = 24 * 60 * 60 * 1000;
  for (const days of [6, 6, 6, 6, 5]) {
    server.clock.advance(days * day);
    assert.equal((await client.get("/api/auth/me")).status, 200);
  }
  server.clock.advance(2 * day); // day 31: past the 30-day cap, though used two days ago
  assert.equal((await client.get("/api/auth/me")).status, 401);
});

test("a cross-origin state-changing request is 403 and changes nothing", async (t) => {
  const server = await startServer(t);
  const client = await server.signIn("alice@example.test");
  for (const origin of ["https://evil.example", "null", "http://127.0.0.1:1"]) {
    const res = await client.json("POST", "/api/projects", { name: "x", environments: ["production"] });
    assert.equal(res.status, 201); // same origin works
    await client.json("DELETE", `/api/projects/${res.body.project.id}`);
    const cross = await client.request("POST", "/api/projects", { name: "y", environments: ["production"] }, { origin });
    assert.equal(cross.status, 403, origin);
    assert.deepEqual(await cross.json(), { error: "Cross-origin request refused." });
  }
  const { body } = await client.json("GET", "/api/projects");
  assert.deepEqual(body.projects, []);
  // Sign-in itself is protected as well (login CSRF).
  const csrf = await server.client().request("POST", "/api/auth/dev/sign-in", { email: "x@y.test" }, { origin: "https://evil.example" });
  assert.equal(csrf.status, 403);
});

test("a link on another site cannot make a signed-in browser reveal or export (Sec-Fetch-Site)", async (t) => {
  const server = await startServer(t);
  const client = await server.signIn("alice@example.test");
  const project = await client.createProject({ name: "shop", environments: ["production"] });
  const base = `/api/projects/${project.id}/environments/production`;
  const created = await client.json("POST", `${base}/secrets`, { key: "API_KEY", value: "cross-site-value" });
  const audited = async () =>
    (await auditEvents(client, project.id)).filter((e) => e.action === "secret.revealed" || e.action === "secrets.exported").length;
  for (const site of ["cross-site", "same-site"]) {
    for (const url of [`${base}/export?format=dotenv`, `${base}/secrets/${created.body.secret.id}`, "/api/projects"]) {
      const res = await client.request("GET", url, undefined, { "sec-fetch-site": site, "sec-fetch-mode": "navigate" });
      assert.equal(res.status, 403, `${site} ${url}`);
      const text = await res.text();
      assert.deepEqual(JSON.parse(text), { error: "Cross-origin request refused." });
    }
  }
  assert.equal(await audited(), 0, "nothing was revealed or exported");
  // Our own pages, and a URL typed into the address bar, still work.
  for (const site of ["same-origin", "none"]) {
    const res = await client.request("GET", `${base}/export?format=dotenv`, undefined, { "sec-fetch-site": site });
    assert.equal(res.status, 200, site);
    assert.match(await res.text(), /API_KEY=/);
  }
  assert.equal(await audited(), 2);
  // The identity provider's redirect back, cross-site by design, is tested where it happens:
  // test/oidc.test.ts's browser sends Sec-Fetch-Site as a real one does.
});

test("a request with an Authorization header is a CLI request: its cookie is ignored", async (t) => {
  const server = await startServer(t);
  const client = await server.signIn("alice@example.test");
  const res = await client.request(
    "POST",
    "/api/projects",
    { name: "x", environments: ["production"] },
    { authorization: "Bearer svc_at_notarealtokennotarealtoken" },
  );
  assert.equal(res.status, 401);
  const list = await client.request("GET", "/api/projects", undefined, { authorization: "Basic abc" });
  assert.equal(list.status, 401);
});

test("in production the dev sign-in does not exist and makes no user (Secure cookies: local-accounts.test.ts)", async (t) => {
  const server = await startServer(t, {
    env: { NODE_ENV: "production", AUTH_PROVIDER: "local", MASTER_KEY: randomMasterKey() },
  });
  const res = await server.client().json("POST", "/api/auth/dev/sign-in", { email: "alice@example.test" });
  assert.equal(res.status, 404);
  assert.deepEqual(res.body, { error: "Not found." });
  assert.deepEqual(await listUsers(server), []);
});

test("unknown API routes answer 404 Not found. and security headers are set", async (t) => {
  const server = await startServer(t);
  const res = await server.client().get("/api/nothing-here");
  assert.equal(res.status, 404);
  assert.deepEqual(await res.json(), { error: "Not found." });
  assert.match(res.headers.get("content-security-policy") ?? "", /default-src 'self'/);
  assert.equal(res.headers.get("x-content-type-options"), "nosniff");
});

test("bodies over 1 MB are refused with 413", async (t) => {
  const server = await startServer(t);
  const client = await server.signIn("alice@example.test");
  const res = await client.json("POST", "/api/projects", { name: "x", description: "y".repeat(1_100_000), environments: ["production"] });
  assert.equal(res.status, 413);
  assert.equal(typeof res.body.error, "string");
  assert.deepEqual((await client.json("GET", "/api/projects")).body, { projects: [] });
});

test("the default rate limit answers 429 with Retry-After and a message", async (t) => {
  const server = await startServer(t, { env: { RATE_LIMIT_PER_MINUTE: "5" } });
  const client = await server.signIn("alice@example.test");
  let last: Response | undefined;
  for (let i = 0; i < 8; i++) last = await client.get("/api/projects");
  assert.equal(last!.status, 429);
  assert.ok(Number(last!.headers.get("retry-after")) > 0);
  const body = (await last!.json()) as { error: string };
  assert.match(body.error, /Too many requests/);
});

test("errors raised before routing keep the { error } body; HEAD is not an alias of GET", async (t) => {
  const server = await startServer(t);
  const client = await server.signIn("alice@example.test");
  const badEscape = await client.get("/api/projects/%E0%A4%A");
  assert.equal(badEscape.status, 400);
  assert.deepEqual(await badEscape.json(), { error: "The address could not be understood." });
  const longParam = await client.delete(`/api/cli/sessions/${"a".repeat(200)}`);
  assert.equal(longParam.status, 414);
  assert.deepEqual(await longParam.json(), { error: "The address is too long." });
  // No hook runs for these, nor for a request the first hook refuses: the headers of every answer all the same.
  const gzipped = await client.request("POST", "/api/projects", "{}", { "content-type": "application/json", "content-encoding": "gzip" });
  assert.equal(gzipped.status, 415);
  const nul = await client.get("/api/projects/a%00b");
  assert.deepEqual([nul.status, await nul.json()], [400, { error: "The address could not be understood." }]);
  for (const res of [badEscape, longParam, gzipped, nul]) {
    assert.match(res.headers.get("content-security-policy") ?? "", /default-src 'self'/, res.url);
    assert.equal(res.headers.get("x-content-type-options"), "nosniff", res.url);
    assert.equal(res.headers.get("cache-control"), "no-store", res.url);
  }
  const head = await client.request("HEAD", "/api/projects");
  assert.equal(head.status, 404);
});
