import assert from "node:assert/strict";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { type TestContext, test } from "node:test";
import { type Client, freePort, listUsers, makeTempDir, randomMasterKey, runMain, startServer, type TestServer } from "./helpers.ts";
import { Browser, startProvider, type TestAccount, type TestProvider } from "./oidc-fixture.ts";
import { rowCount, storedRows } from "./storage.ts";

const ACCOUNTS: Record<string, TestAccount> = {
  "alice-sub": { email: "Alice@Example.com", email_verified: true, name: "Alice Liddell" },
  "bob-sub": { email: "bob@example.com", email_verified: false, name: "Bob" },
  "carol-sub": { email: "carol@elsewhere.test", email_verified: true, name: "Carol" },
};

async function setup(t: TestContext, env: Record<string, string> = {}, accounts = ACCOUNTS) {
  const port = await freePort();
  const provider = await startProvider(t, `http://127.0.0.1:${port}/api/auth/oidc/callback`, structuredClone(accounts));
  const server = await startServer(t, { env: { ...productionOidcEnv(provider), PORT: String(port), ...env } });
  return { provider, server };
}

function productionOidcEnv(provider: TestProvider): Record<string, string> {
  return {
    NODE_ENV: "production",
    AUTH_PROVIDER: "oidc",
    OIDC_ISSUER: provider.issuer,
    OIDC_CLIENT_ID: provider.clientId,
    OIDC_CLIENT_SECRET: provider.clientSecret,
  };
}

/** Runs the whole dance; returns where the server finally sent the browser. */
async function signIn(server: TestServer, browser: Browser, returnTo = "/projects"): Promise<string> {
  const { location } = await browser.follow(
    `${server.url}/api/auth/oidc/start?returnTo=${encodeURIComponent(returnTo)}`,
    (next) => next.origin === server.origin && !next.pathname.startsWith("/api/"),
  );
  assert.ok(location, "the dance ends with a redirect into the UI");
  return location;
}

/** Runs the dance up to (not including) the callback and returns the callback URL. */
async function untilCallback(server: TestServer, browser: Browser): Promise<URL> {
  const { location } = await browser.follow(`${server.url}/api/auth/oidc/start`, (next) => next.pathname === "/api/auth/oidc/callback");
  assert.ok(location);
  return new URL(location);
}

/** A test-helper client holding the browser's session cookie, for the JSON API. */
function apiClient(server: TestServer, browser: Browser): Client {
  const client = server.client();
  for (const [name, value] of browser.cookies) if (name.startsWith("__Host-secrets_session")) client.cookies.set(name, value);
  return client;
}

/** Browser sessions stored: no endpoint lists them, so only the storage shows none was made. */
function sessions(server: TestServer): number {
  return rowCount(server, "browser_sessions");
}

test("OIDC: the whole redirect dance signs in, in production mode, and refreshes e-mail and name", async (t) => {
  const { provider, server } = await setup(t);
  const browser = new Browser();

  const start = await browser.get(`${server.url}/api/auth/oidc/start?returnTo=${encodeURIComponent("/projects?tab=1")}`);
  assert.equal(start.status, 302);
  const authorize = new URL(start.headers.get("location")!);
  assert.equal(authorize.origin, provider.issuer);
  assert.equal(authorize.searchParams.get("client_id"), provider.clientId);
  assert.equal(authorize.searchParams.get("scope"), "openid email profile");
  assert.equal(authorize.searchParams.get("code_challenge_method"), "S256");
  assert.equal(authorize.searchParams.get("redirect_uri"), `${server.origin}/api/auth/oidc/callback`);
  assert.ok(authorize.searchParams.get("state"));
  assert.ok(authorize.searchParams.get("nonce"));
  const stateCookie = start.headers.getSetCookie().find((c) => c.startsWith("__Host-secrets_oidc="))!;
  assert.match(stateCookie, /HttpOnly/i);
  assert.match(stateCookie, /Secure/i);
  assert.match(stateCookie, /SameSite=Lax/i);
  assert.match(stateCookie, /Path=\//);
  // Sealed: neither the state, the nonce nor the verifier can be read from it.
  assert.ok(!stateCookie.includes(authorize.searchParams.get("state")!));

  const { location } = await browser.follow(authorize.href, (next) => next.origin === server.origin && !next.pathname.startsWith("/api/"));
  assert.equal(location, `${server.origin}/projects?tab=1`);
  assert.ok(!browser.cookies.has("__Host-secrets_oidc"), "the state cookie is single-use");
  assert.ok(browser.cookies.has("__Host-secrets_session"), "the session cookie is __Host- prefixed in production");

  const me = await apiClient(server, browser).json("GET", "/api/auth/me");
  assert.equal(me.status, 200);
  assert.equal(me.body.user.email, "alice@example.com");
  assert.equal(me.body.user.name, "Alice Liddell");
  const [row] = storedRows(server, "users");
  // The subject is the user's identity at the provider; no endpoint or command shows it.
  assert.equal(row?.auth_subject, "alice-sub");
  assert.deepEqual(await listUsers(server), [
    { email: "alice@example.com", name: "Alice Liddell", provider: provider.issuer, status: "active", verified: true },
  ]);

  // E-mail and name follow the provider at each sign-in; the user stays the same.
  // A name with terminal escapes or a bidi override is kept readable and harmless.
  provider.accounts["alice-sub"] = { email: "alice@example.org", email_verified: true, name: "Alice\u001b[2J\u202e L.\n" };
  const again = new Browser();
  await signIn(server, again);
  const me2 = await apiClient(server, again).json("GET", "/api/auth/me");
  assert.deepEqual(me2.body.user, { id: me.body.user.id, email: "alice@example.org", name: "Alice [2J L." });
  assert.deepEqual(
    (await listUsers(server)).map((u) => u.email),
    ["alice@example.org"],
  );

  // The security overview names the provider by the issuer's host.
  const alice = apiClient(server, again);
  const project = await alice.createProject({ name: "overview", environments: ["production"] });
  const overview = await alice.json("GET", `/api/projects/${project.id}/security`);
  assert.equal(overview.body.authentication.provider, new URL(provider.issuer).host);

  // Production mode: no dev sign-in; nothing secret in the log.
  const dev = await server.client().json("POST", "/api/auth/dev/sign-in", { email: "x@example.com" });
  assert.equal(dev.status, 404);
  const logs = server.logs.join("\n");
  assert.ok(!logs.includes(browser.cookies.get("__Host-secrets_session")!));
  assert.ok(!logs.includes(provider.clientSecret));
  assert.ok(!/[?&]code=/.test(logs), "no authorization code in the log");
});

test("OIDC: returnTo only ever leads to this server", async (t) => {
  const { server } = await setup(t);
  for (const returnTo of [
    "https://evil.test/x",
    "//evil.test/x",
    "/\\evil.test",
    "/api/projects",
    "/%61pi/projects",
    "/%61%70%69/projects/x/environments/production/secrets/y",
    "/API/projects",
    "/%E0%A4%A",
    "javascript:alert(1)",
    "/..//evil.test/x",
    "/.//evil.test/x",
    "/a/..//evil.test",
    "/%2e%2e//evil.test",
  ]) {
    assert.equal(await signIn(server, new Browser(), returnTo), `${server.origin}/`, returnTo);
  }
});

test("OIDC: a wrong state is refused and starts no session", async (t) => {
  const { server } = await setup(t);
  const browser = new Browser();
  const callback = await untilCallback(server, browser);
  callback.searchParams.set("state", "forged-state-value");
  const res = await browser.get(callback.href);
  assert.equal(res.status, 302);
  assert.equal(res.headers.get("location"), "/sign-in?error=state_mismatch");
  assert.equal(sessions(server), 0);

  // Without the state cookie (another browser, or an expired sign-in) the callback is refused too.
  const other = new Browser();
  const callback2 = await untilCallback(server, other);
  other.cookies.delete("__Host-secrets_oidc");
  const res2 = await other.get(callback2.href);
  assert.equal(res2.headers.get("location"), "/sign-in?error=sign_in_expired");
  assert.equal(sessions(server), 0);
});

test("OIDC: a started sign-in expires after ten minutes", async (t) => {
  const { server } = await setup(t);
  const browser = new Browser();
  const callback = await untilCallback(server, browser);
  server.clock.advance(10 * 60 * 1000 + 1);
  const res = await browser.get(callback.href);
  assert.equal(res.headers.get("location"), "/sign-in?error=sign_in_expired");
  assert.equal(sessions(server), 0);
});

test("OIDC: a replayed authorization code is refused by the provider", async (t) => {
  const { server } = await setup(t);
  const browser = new Browser();
  const callback = await untilCallback(server, browser);
  const stateCookie = browser.cookies.get("__Host-secrets_oidc")!;
  const first = await browser.get(callback.href);
  assert.equal(first.status, 302);
  assert.equal(first.headers.get("location"), "/");
  assert.equal(sessions(server), 1);

  // An attacker holding the callback URL and the sealed cookie still cannot use the code twice.
  const attacker = new Browser();
  attacker.cookies.set("__Host-secrets_oidc", stateCookie);
  const replay = await attacker.get(callback.href);
  assert.equal(replay.headers.get("location"), "/sign-in?error=sign_in_failed");
  assert.equal(sessions(server), 1);
  assert.ok(!attacker.cookies.has("__Host-secrets_session"));
});

test("OIDC: an unverified e-mail signs in but does not count as verified", async (t) => {
  const { provider, server } = await setup(t);
  provider.loginAs = "bob-sub";
  const browser = new Browser();
  assert.equal(await signIn(server, browser), `${server.origin}/projects`);
  assert.deepEqual(
    (await listUsers(server)).map(({ email, verified }) => ({ email, verified })),
    [{ email: "bob@example.com", verified: false }],
  );
});

test("OIDC: a subject or an e-mail with a control character (a NUL, which PostgreSQL refuses) or too long is no identity", async (t) => {
  const { provider, server } = await setup(
    t,
    {},
    {
      ...ACCOUNTS,
      "nul\u0000sub": { email: "nul@example.com", email_verified: true, name: "Nul" },
      "dave-sub": { email: "dave\u0000@example.com", email_verified: true, name: "Dave" },
      ["s".repeat(256)]: { email: "long@example.com", email_verified: true, name: "Long" },
      "erin-sub": { email: `${"e".repeat(3000)}@example.com`, email_verified: true, name: "Erin" },
    },
  );
  // Longer than PostgreSQL's indexes take, too.
  for (const sub of ["nul\u0000sub", "s".repeat(256)]) {
    provider.loginAs = sub;
    assert.equal(await signIn(server, new Browser()), `${server.origin}/sign-in?error=sign_in_failed`);
  }
  assert.equal(sessions(server), 0);
  // No address rather than that one: the person signs in, unverified and without an e-mail
  // (which the users command shows as -).
  for (const sub of ["dave-sub", "erin-sub"]) {
    provider.loginAs = sub;
    assert.equal(await signIn(server, new Browser()), `${server.origin}/projects`);
  }
  assert.deepEqual(
    (await listUsers(server)).map(({ email, verified }) => ({ email, verified })),
    [
      { email: "-", verified: false },
      { email: "-", verified: false },
    ],
  );
});

test("OIDC_ALLOWED_DOMAINS: other domains and unverified addresses are refused, and no user is created", async (t) => {
  const { provider, server } = await setup(t, { OIDC_ALLOWED_DOMAINS: "example.com, example.org" });
  provider.loginAs = "carol-sub";
  assert.equal(await signIn(server, new Browser()), `${server.origin}/sign-in?error=domain_not_allowed`);
  provider.loginAs = "bob-sub";
  assert.equal(await signIn(server, new Browser()), `${server.origin}/sign-in?error=email_not_verified`);
  assert.deepEqual(await listUsers(server), []);
  assert.equal(sessions(server), 0);

  provider.loginAs = "alice-sub";
  assert.equal(await signIn(server, new Browser()), `${server.origin}/projects`);
});

test("OIDC: an address that only lower-cases to another person's (with the Kelvin sign) is kept as sent and matches none of their invitations", async (t) => {
  const kelvin = { email: "\u212Aate@Example.com", email_verified: true, name: "Not Kate" };
  const { provider, server } = await setup(t, {}, { ...ACCOUNTS, "kelvin-sub": kelvin });
  const ownerBrowser = new Browser();
  assert.equal(await signIn(server, ownerBrowser), `${server.origin}/projects`);
  const owner = apiClient(server, ownerBrowser);
  const project = await owner.createProject({ name: "kelvin", environments: ["development"] });
  const invited = await owner.json("POST", `/api/projects/${project.id}/invitations`, { email: "kate@example.com", role: "member" });
  assert.equal(invited.status, 201, JSON.stringify(invited.body));
  // Nor can anyone invite the look-alike: it is not an address the invitation form takes.
  const lookAlike = await owner.json("POST", `/api/projects/${project.id}/invitations`, { email: kelvin.email, role: "member" });
  assert.equal(lookAlike.status, 400);

  provider.loginAs = "kelvin-sub";
  const browser = new Browser();
  assert.equal(await signIn(server, browser), `${server.origin}/projects`);
  const other = apiClient(server, browser);
  assert.equal((await other.json("GET", "/api/auth/me")).body.user.email, "\u212Aate@example.com");
  assert.deepEqual((await other.json("GET", "/api/invitations")).body, { emailVerified: true, invitations: [] });
  const accept = await other.json("POST", `/api/invitations/${invited.body.invitation.id}/accept`);
  assert.equal(accept.status, 404);
  assert.equal((await other.json("GET", `/api/projects/${project.id}`)).status, 404);
});

test("OIDC_ALLOWED_DOMAINS: a look-alike domain (the Kelvin sign) is another domain; ASCII capitals are not", async (t) => {
  const accounts = {
    ...ACCOUNTS,
    "kelvin-sub": { email: "mallory@\u212Aexample.com", email_verified: true, name: "Mallory" },
    "capital-sub": { email: "Dana@KEXAMPLE.com", email_verified: true, name: "Dana" },
  };
  const { provider, server } = await setup(t, { OIDC_ALLOWED_DOMAINS: "KExample.com" }, accounts);
  provider.loginAs = "kelvin-sub";
  assert.equal(await signIn(server, new Browser()), `${server.origin}/sign-in?error=domain_not_allowed`);
  assert.deepEqual(await listUsers(server), []);
  provider.loginAs = "capital-sub";
  assert.equal(await signIn(server, new Browser()), `${server.origin}/projects`);
});

test("OIDC: a cancelled sign-in at the provider says so", async (t) => {
  const { provider, server } = await setup(t);
  provider.deny = true;
  assert.equal(await signIn(server, new Browser()), `${server.origin}/sign-in?error=access_denied`);
  assert.equal(sessions(server), 0);

  // The same error from a link elsewhere, without the sign-in's state, is not the provider's.
  provider.deny = false;
  const browser = new Browser();
  const callback = await untilCallback(server, browser);
  const forged = new URL("/api/auth/oidc/callback?error=access_denied", callback);
  assert.equal((await browser.get(forged.href)).headers.get("location"), "/sign-in?error=state_mismatch");
});

test("OIDC: a disabled account cannot sign in", async (t) => {
  const { server } = await setup(t);
  await signIn(server, new Browser());
  const disabled = await runMain(["users", "disable", "alice@example.com"], server.env);
  assert.equal(disabled.code, 0, disabled.stderr);
  assert.equal(sessions(server), 0, "disabling ended the session from before");
  assert.equal(await signIn(server, new Browser()), `${server.origin}/sign-in?error=account_disabled`);
  assert.equal(sessions(server), 0, "and the refused sign-in made none");
});

test("OIDC: the provider going down mid-sign-in gives a readable error", async (t) => {
  const { provider, server } = await setup(t);
  const browser = new Browser();
  const callback = await untilCallback(server, browser);
  await provider.stop();
  const res = await browser.get(callback.href);
  assert.equal(res.headers.get("location"), "/sign-in?error=provider_unavailable");
  assert.equal(sessions(server), 0);
});

test("OIDC: production refuses to start with an unreachable or wrong issuer; development starts and retries", async (t) => {
  const down = `http://127.0.0.1:${await freePort()}`;
  const base = { OIDC_CLIENT_ID: "id", OIDC_CLIENT_SECRET: "secret", AUTH_PROVIDER: "oidc" };
  await assert.rejects(startServer(t, { env: { ...base, NODE_ENV: "production", OIDC_ISSUER: down } }), (error: Error) =>
    error.message.startsWith(`OIDC_ISSUER ${down} could not be reached`),
  );

  // A server that answers, but not as an OpenID provider.
  const notOidc = http.createServer((_req, res) => {
    res.statusCode = 404;
    res.end("no");
  });
  await new Promise<void>((resolve) => notOidc.listen(0, "127.0.0.1", resolve));
  t.after(() => new Promise<void>((resolve) => notOidc.close(() => resolve())));
  const wrong = `http://127.0.0.1:${(notOidc.address() as AddressInfo).port}`;
  await assert.rejects(startServer(t, { env: { ...base, NODE_ENV: "production", OIDC_ISSUER: wrong } }), (error: Error) =>
    error.message.startsWith(`OIDC_ISSUER ${wrong} is not a working OpenID Connect issuer`),
  );

  // https is required in production unless the issuer is on loopback.
  await assert.rejects(
    startServer(t, { env: { ...base, NODE_ENV: "production", OIDC_ISSUER: "http://idp.example.com" } }),
    /OIDC_ISSUER must use https in production/,
  );

  // As a process: one clear line and exit code 1.
  const run = await runMain(["serve"], {
    ...base,
    NODE_ENV: "production",
    OIDC_ISSUER: down,
    MASTER_KEY: randomMasterKey(),
    DATA_DIR: makeTempDir(),
    PORT: String(await freePort()),
    APP_URL: "http://127.0.0.1:9",
  });
  assert.equal(run.code, 1);
  assert.match(run.stderr, /^secrets-server: configuration error: OIDC_ISSUER http:\/\/127\.0\.0\.1:\d+ could not be reached/);

  // Development starts anyway, logs the problem, and a sign-in says the provider is unavailable.
  const dev = await startServer(t, { env: { ...base, OIDC_ISSUER: down } });
  assert.ok(dev.logs.some((l) => l.includes("could not be reached") && l.includes("retries at the next sign-in")));
  const res = await new Browser().get(`${dev.url}/api/auth/oidc/start`);
  assert.equal(res.status, 302);
  assert.equal(res.headers.get("location"), "/sign-in?error=provider_unavailable");
});

test("OIDC: only a verified e-mail sees and accepts invitations", async (t) => {
  const { provider, server } = await setup(t);
  const aliceBrowser = new Browser();
  await signIn(server, aliceBrowser);
  const alice = apiClient(server, aliceBrowser);
  const project = await alice.createProject({ name: "infra", environments: ["production"] });
  const invited = await alice.json("POST", `/api/projects/${project.id}/invitations`, { email: "bob@example.com", role: "viewer" });
  assert.equal(invited.status, 201);

  // Bob's provider has not verified his address: the invitation is not his to see or take.
  provider.loginAs = "bob-sub";
  const bobBrowser = new Browser();
  await signIn(server, bobBrowser);
  const bob = apiClient(server, bobBrowser);
  assert.deepEqual((await bob.json("GET", "/api/invitations")).body, { emailVerified: false, invitations: [] });
  const refused = await bob.json("POST", `/api/invitations/${invited.body.invitation.id}/accept`);
  assert.deepEqual([refused.status, refused.body], [404, { error: "Invitation not found." }]);

  // Once the provider verifies it, the next sign-in refreshes the flag and the invitation shows.
  provider.accounts["bob-sub"]!.email_verified = true;
  const again = new Browser();
  await signIn(server, again);
  const bob2 = apiClient(server, again);
  const list = await bob2.json("GET", "/api/invitations");
  assert.equal(list.body.invitations.length, 1);
  const accepted = await bob2.json("POST", `/api/invitations/${invited.body.invitation.id}/accept`);
  assert.deepEqual([accepted.status, accepted.body], [200, { projectId: project.id, role: "viewer" }]);
});
