// The workload identity exchange against a real OpenID issuer run here: a
// small HTTP server on 127.0.0.1 publishing its configuration and key set, signing with jose.
import assert from "node:assert/strict";
import crypto from "node:crypto";
import { type TestContext, test } from "node:test";
import { SignJWT, UnsecuredJWT } from "jose";
import { dropStale, makeRoom } from "../src/core/bounded-map.ts";
import { isAllowedIssuerUrl, isAllowedKeySetUrl } from "../src/core/service-account-rules.ts";
import { ISSUER_DOCUMENT_MAX_BYTES } from "../src/service-accounts/workload-identity.service.ts";
import { auditEvents, type Client, freePort, startServer, type TestServer } from "./helpers.ts";
import { createSecret, envPath } from "./secrets-helpers.ts";
import { rowCount } from "./storage.ts";
import { AUDIENCE, SUBJECT, signingKey, startIssuer } from "./workload-issuer.ts";

const REFUSED = { error: "The identity token was not accepted." };
const TOKEN_REFUSED = { error: "This service token is invalid, expired or revoked." };
const BROWSER_ONLY = { error: "This action needs a browser session; CLI tokens cannot be used here." };

async function setUp(t: TestContext) {
  const server = await startServer(t);
  const issuer = await startIssuer(t);
  const rsa = await signingKey("rsa-1", "RS256");
  const ec = await signingKey("ec-1", "ES256");
  issuer.publish(rsa);
  issuer.publish(ec);
  const owner = await server.signIn("olivia@example.test");
  const project = await owner.createProject({ name: "api", environments: ["development", "production"] });
  const secret = await createSecret(owner, project.id, "production", "DATABASE_URL", "postgres://prod-db/app-6613");
  const created = await owner.json("POST", `/api/projects/${project.id}/service-accounts`, {
    name: "github-deploy",
    role: "viewer",
    environments: ["production"],
  });
  assert.equal(created.status, 201);
  const account = created.body.serviceAccount;
  const trust = await owner.json("POST", `/api/projects/${project.id}/service-accounts/${account.id}/trusts`, {
    issuer: issuer.url,
    audience: AUDIENCE,
    subject: "repo:acme/api:*",
    claims: { repository: "acme/api" },
  });
  assert.equal(trust.status, 201, JSON.stringify(trust.body));
  return { server, issuer, rsa, ec, owner, project, secret, account, trust: trust.body.trust };
}

function exchange(server: TestServer, serviceAccountId: unknown, token: unknown) {
  return server.client().json("POST", "/api/auth/workload/token", { serviceAccountId, token });
}

test("an identity token from a trusted issuer becomes a short access token that reads secrets", async (t) => {
  const { server, issuer, rsa, ec, owner, project, secret, account } = await setUp(t);
  const res = await exchange(server, account.id, await issuer.sign(rsa));
  assert.equal(res.status, 200, JSON.stringify(res.body));
  assert.deepEqual(Object.keys(res.body).sort(), ["accessToken", "expiresIn", "tokenType"]);
  assert.match(res.body.accessToken, /^svc_wt_[A-Za-z0-9_-]{43,}$/);
  assert.equal(res.body.tokenType, "Bearer");
  assert.equal(res.body.expiresIn, 900);

  const workload = server.client().withBearer(res.body.accessToken);
  const read = await workload.json("GET", `${envPath(project.id, "production")}/secrets/${secret.id}`);
  assert.equal(read.status, 200);
  assert.equal(read.body.secret.value, "postgres://prod-db/app-6613");
  assert.equal((await workload.json("GET", `${envPath(project.id, "development")}/secrets`)).status, 403);
  const me = await workload.json("GET", "/api/service-accounts/me");
  assert.equal(me.body.serviceAccount.id, account.id);
  assert.ok(Math.abs(Date.parse(me.body.expiresAt) - (server.clock.now().getTime() + 900_000)) < 5000);
  // Used exactly like a service token: browser-only endpoints refuse it.
  assert.deepEqual(await workload.json("GET", `/api/projects/${project.id}/service-accounts`).then((r) => [r.status, r.body]), [
    403,
    BROWSER_ONLY,
  ]);

  // ES256 too; and never longer than the identity token itself lives.
  const short = await exchange(server, account.id, await issuer.sign(ec, {}, { expiresInSeconds: 120 }));
  assert.equal(short.status, 200, JSON.stringify(short.body));
  assert.ok(short.body.expiresIn <= 120 && short.body.expiresIn >= 110, String(short.body.expiresIn));

  // Audited as the account, at most once a minute per trust.
  const events = () => auditEvents(owner, project.id, "service_account.token_exchanged");
  assert.equal((await events()).length, 1);
  const [event] = await events();
  assert.equal(event!.actor, null);
  assert.deepEqual(event!.serviceAccount, { id: account.id, name: "github-deploy" });
  assert.equal(event!.metadata.via, "workload");
  assert.equal(event!.metadata.subject, SUBJECT);
  server.clock.advance(61_000);
  assert.equal((await exchange(server, account.id, await issuer.sign(rsa))).status, 200);
  assert.equal((await events()).length, 2);
  const page = await owner.json("GET", `/api/projects/${project.id}/audit?action=secret.revealed`);
  assert.deepEqual(page.body.events[0].serviceAccount, { id: account.id, name: "github-deploy" });
  assert.equal(page.body.events[0].actor, null);
  assert.equal(page.body.events[0].metadata.via, "workload");

  // 15 minutes later the access token is refused with the service token's message.
  server.clock.advance(15 * 60_000);
  assert.deepEqual(await workload.json("GET", "/api/service-accounts/me").then((r) => [r.status, r.body]), [401, TOKEN_REFUSED]);
});

test("a verified subject holding a NUL is audited without it, and the filtered audit list still answers", async (t) => {
  const { server, issuer, rsa, account, project, owner } = await setUp(t);
  // The trust's subject ends in *: the issuer vouches for whatever follows.
  const res = await exchange(server, account.id, await issuer.sign(rsa, { sub: "repo:acme/api:ref\u0000x" }));
  assert.equal(res.status, 200, JSON.stringify(res.body));
  const [event] = await auditEvents(owner, project.id, "service_account.token_exchanged");
  assert.equal(event!.metadata.subject, "repo:acme/api:ref\ufffdx");
  // PostgreSQL's ->> refuses a \u0000 in the JSON it reads: the filters would answer 500.
  for (const filter of ["environment=production", "key=DATABASE_URL"]) {
    const page = await owner.json("GET", `/api/projects/${project.id}/audit?${filter}`);
    assert.equal(page.status, 200, `${filter}: ${JSON.stringify(page.body)}`);
  }
});

test("EdDSA keys verify, and an aud array containing the trust's audience is accepted (one not containing it is not)", async (t) => {
  const { server, issuer, account } = await setUp(t);
  const ed = await signingKey("ed-1", "EdDSA");
  issuer.publish(ed);
  const signed = await exchange(server, account.id, await issuer.sign(ed));
  assert.equal(signed.status, 200, JSON.stringify(signed.body));
  const inArray = await exchange(server, account.id, await issuer.sign(ed, { aud: ["https://elsewhere.example.test", AUDIENCE] }));
  assert.equal(inArray.status, 200, JSON.stringify(inArray.body));
  const notInArray = await exchange(
    server,
    account.id,
    await issuer.sign(ed, { aud: ["https://elsewhere.example.test", `${AUDIENCE}/other`] }),
  );
  assert.deepEqual([notInArray.status, notInArray.body], [401, REFUSED]);
});

test("every refusal is one 401, with the reason only in the log and never the token", async (t) => {
  const { server, issuer, rsa, account, project, owner } = await setUp(t);
  const hmacKey = crypto.randomBytes(32);
  const hs256 = await new SignJWT({ iss: issuer.url, aud: AUDIENCE, sub: SUBJECT, repository: "acme/api" })
    .setProtectedHeader({ alg: "HS256", kid: "rsa-1" })
    .setIssuedAt()
    .setExpirationTime("1h")
    .sign(hmacKey);
  const none = new UnsecuredJWT({ iss: issuer.url, aud: AUDIENCE, sub: SUBJECT, repository: "acme/api" })
    .setIssuedAt()
    .setExpirationTime("1h")
    .encode();
  const stranger = await signingKey("rsa-1", "RS256");
  const unknownKid = await signingKey("rsa-unknown", "RS256");
  const other = await owner.json("POST", `/api/projects/${project.id}/service-accounts`, {
    name: "other",
    role: "viewer",
    environments: ["production"],
  });

  const cases: [string, unknown, unknown][] = [
    ["wrong audience", account.id, await issuer.sign(rsa, { aud: "https://other.example" })],
    ["audience array without ours", account.id, await issuer.sign(rsa, { aud: ["a", "b"] })],
    ["wrong subject", account.id, await issuer.sign(rsa, { sub: "repo:evil/api:ref:refs/heads/main" })],
    ["subject prefix only", account.id, await issuer.sign(rsa, { sub: "repo:acme/api-fork:ref" })],
    ["wrong claim", account.id, await issuer.sign(rsa, { repository: "acme/other" })],
    ["missing claim", account.id, await issuer.sign(rsa, { repository: null })],
    ["expired", account.id, await issuer.sign(rsa, {}, { expiresInSeconds: -120 })],
    // Inside jose's leeway, but nothing is left of it to give the access token.
    ["expired within the leeway", account.id, await issuer.sign(rsa, {}, { expiresInSeconds: -30 })],
    ["no exp", account.id, await issuer.sign(rsa, { exp: null })],
    ["not yet valid", account.id, await issuer.sign(rsa, { nbf: Math.floor(Date.now() / 1000) + 600 })],
    ["issued an hour from now", account.id, await issuer.sign(rsa, { iat: Math.floor(Date.now() / 1000) + 3600 })],
    ["issued 2 minutes from now", account.id, await issuer.sign(rsa, { iat: Math.floor(Date.now() / 1000) + 120 })],
    ["wrong issuer", account.id, await issuer.sign(rsa, { iss: "https://issuer.example" })],
    ["alg none", account.id, none],
    ["HMAC", account.id, hs256],
    ["signed by another key with the same kid", account.id, await issuer.sign(stranger)],
    ["unknown kid", account.id, await issuer.sign(unknownKid)],
    ["account without this trust", other.body.serviceAccount.id, await issuer.sign(rsa)],
    ["unknown account", "00000000-0000-4000-8000-000000000000", await issuer.sign(rsa)],
    // Not an id: never looked up (PostgreSQL would fail on the NUL) nor logged.
    ["account id with a NUL", `${account.id}\u0000`, await issuer.sign(rsa)],
    ["a token pasted as the account id", "svc_st_pasted-here-by-mistake-0123456789abcdefghijklmnop", await issuer.sign(rsa)],
    ["not a JWT", account.id, "not-a-jwt-at-all"],
    ["no token", account.id, undefined],
    ["no account", undefined, await issuer.sign(rsa)],
  ];
  for (const [why, id, token] of cases) {
    const res = await exchange(server, id, token);
    assert.deepEqual([res.status, res.body], [401, REFUSED], why);
  }
  // Still fine after all that.
  assert.equal((await exchange(server, account.id, await issuer.sign(rsa))).status, 200);
  const refusals = server.logs.filter((line) => line.includes("workload identity exchange refused"));
  assert.equal(refusals.length, cases.length);
  assert.ok(
    refusals.every((line) => JSON.parse(line).reason),
    "each refusal says why",
  );
  for (const [, , token] of cases) {
    if (typeof token === "string") assert.ok(!server.logs.some((line) => line.includes(token)), "no identity token in the log");
  }
  assert.ok(!server.logs.some((line) => line.includes("svc_st_pasted")), "what is not an id is not logged");

  // A body that is not JSON, of another type, or too large: the same 401, the reason logged.
  const client = server.client();
  for (const [why, body, type] of [
    ["not JSON", "{not json", "application/json"],
    ["not a JSON body", "token=abc", "application/x-www-form-urlencoded"],
    ["past the body limit", JSON.stringify({ serviceAccountId: account.id, token: "x".repeat(1024 * 1024) }), "application/json"],
  ] as const) {
    const res = await client.request("POST", "/api/auth/workload/token", body, { "content-type": type });
    assert.deepEqual([res.status, await res.json()], [401, REFUSED], why);
  }
  assert.equal(server.logs.filter((line) => line.includes("workload identity exchange refused")).length, cases.length + 3);
  // The exchange takes no credential: an Authorization header is not looked at, a stale service token's included.
  const withHeader = await client.request(
    "POST",
    "/api/auth/workload/token",
    { serviceAccountId: account.id, token: await issuer.sign(rsa) },
    { authorization: `Bearer svc_st_${"A".repeat(43)}` },
  );
  assert.equal(withHeader.status, 200, await withHeader.text());
});

test("an issuer that is down or redirects is refused", async (t) => {
  const { server, issuer, rsa, owner, project, account } = await setUp(t);
  issuer.redirectDiscovery = true;
  assert.deepEqual(await exchange(server, account.id, await issuer.sign(rsa)).then((r) => [r.status, r.body]), [401, REFUSED]);
  assert.ok(
    server.logs.some((line) => line.includes("the issuer's OpenID configuration could not be fetched (a redirect to")),
    "refused for the redirect",
  );
  issuer.redirectDiscovery = false;

  // A trusted issuer nobody answers for.
  const down = `http://127.0.0.1:${await freePort()}`;
  const downKey = await signingKey("down-1", "RS256");
  await owner.json("POST", `/api/projects/${project.id}/service-accounts/${account.id}/trusts`, {
    issuer: down,
    audience: AUDIENCE,
    subject: "*",
  });
  const jwt = await new SignJWT({ iss: down, aud: AUDIENCE, sub: SUBJECT })
    .setProtectedHeader({ alg: "RS256", kid: "down-1" })
    .setIssuedAt()
    .setExpirationTime("1h")
    .sign(downKey.privateKey);
  assert.deepEqual(await exchange(server, account.id, jwt).then((r) => [r.status, r.body]), [401, REFUSED]);
  assert.ok(server.logs.some((line) => line.includes("workload identity exchange refused") && line.includes("OpenID configuration")));
});

test("the exchange takes no cookie, so a browser's Origin plays no part: a refusal is its 401, a valid token its 200", async (t) => {
  const { server, issuer, rsa, account } = await setUp(t);
  const from = (origin: string, token: string) =>
    server
      .client()
      .request("POST", "/api/auth/workload/token", { serviceAccountId: account.id, token }, { origin, "sec-fetch-site": "cross-site" })
      .then(async (res) => [res.status, await res.json()]);
  assert.deepEqual(await from("https://evil.example", "not-a-jwt"), [401, REFUSED]);
  const [status, body] = await from("https://evil.example", await issuer.sign(rsa));
  assert.equal(status, 200, JSON.stringify(body));
});

test("an issuer's key set must be https, unless the issuer itself is http on a loopback host", () => {
  assert.equal(isAllowedKeySetUrl("https://keys.example/jwks", "https://issuer.example"), true);
  assert.equal(isAllowedKeySetUrl("http://127.0.0.1:8200/jwks", "http://127.0.0.1:9000"), true);
  assert.equal(isAllowedKeySetUrl("http://127.0.0.1:8200/jwks", "https://issuer.example"), false);
  assert.equal(isAllowedKeySetUrl("http://localhost/jwks", "https://issuer.example"), false);
  assert.equal(isAllowedKeySetUrl("http://keys.example/jwks", "http://127.0.0.1:9000"), false);
  // A key set named with a query (Okta's), but no credentials or fragment; an issuer takes no query.
  assert.equal(isAllowedKeySetUrl("https://acme.okta.com/oauth2/v1/keys?client_id=0oa1", "https://acme.okta.com"), true);
  assert.equal(isAllowedKeySetUrl("https://user:pw@keys.example/jwks", "https://issuer.example"), false);
  assert.equal(isAllowedKeySetUrl("https://keys.example/jwks#x", "https://issuer.example"), false);
  assert.equal(isAllowedIssuerUrl("https://issuer.example?tenant=1"), false);
  assert.equal(isAllowedIssuerUrl("https://issuer.example/tenant"), true);
});

test("the issuers held are bounded: expired ones go first, then the oldest", () => {
  const held = new Map([
    ["https://a.example", 1],
    ["https://b.example", 100],
    ["https://c.example", 2],
  ]);
  makeRoom(held, 3, (at) => at < 10);
  assert.deepEqual([...held.keys()], ["https://b.example"]);
  held.set("https://d.example", 200);
  held.set("https://e.example", 300);
  makeRoom(held, 3, () => false);
  assert.deepEqual([...held.keys()], ["https://d.example", "https://e.example"]);
  // dropStale (for cooldowns, which are never evicted early) lets nothing live go.
  held.set("https://f.example", 400);
  dropStale(held, (at) => at < 250);
  assert.deepEqual([...held.keys()], ["https://e.example", "https://f.example"]);
});

test("subjects match case-sensitively, each * any run of characters (none included); an issuer with another trailing slash is another issuer", async (t) => {
  const { server, issuer, rsa, owner, project, account } = await setUp(t);
  const status = async (id: string, claims: Record<string, unknown>) => (await exchange(server, id, await issuer.sign(rsa, claims))).status;
  // The set-up trust: repo:acme/api:* with repository acme/api.
  assert.equal(await status(account.id, { sub: "REPO:acme/api:ref:refs/heads/main" }), 401);
  assert.equal(await status(account.id, { sub: "repo:acme/api:" }), 200);
  const accountWith = async (name: string, trustIssuer: string, subject: string) => {
    const created = await owner.json("POST", `/api/projects/${project.id}/service-accounts`, {
      name,
      role: "viewer",
      environments: ["production"],
    });
    const trust = await owner.json("POST", `/api/projects/${project.id}/service-accounts/${created.body.serviceAccount.id}/trusts`, {
      issuer: trustIssuer,
      audience: AUDIENCE,
      subject,
    });
    assert.equal(trust.status, 201, JSON.stringify(trust.body));
    return created.body.serviceAccount.id as string;
  };
  const starred = await accountWith("starred", issuer.url, "repo:*/api:ref:refs/*");
  assert.equal(await status(starred, { sub: "repo:acme/api:ref:refs/heads/main" }), 200);
  assert.equal(await status(starred, { sub: "repo:acme/web:ref:refs/heads/main" }), 401);
  const slashed = await accountWith("slashed", `${issuer.url}/`, "*");
  assert.equal(await status(slashed, {}), 401);
  assert.ok(server.logs.some((line) => line.includes("no trust of the account names the token's issuer")));
});

test("iat and nbf within the 60 s leeway are accepted", async (t) => {
  const { server, issuer, rsa, account } = await setUp(t);
  const res = await exchange(server, account.id, await issuer.sign(rsa, { iat: Math.floor(Date.now() / 1000) + 30 }));
  assert.equal(res.status, 200, JSON.stringify(res.body));
  const early = await exchange(server, account.id, await issuer.sign(rsa, { nbf: Math.floor(Date.now() / 1000) + 30 }));
  assert.equal(early.status, 200, JSON.stringify(early.body));
});

test("an issuer whose configuration or key set fails is not asked again within the cooldown", async (t) => {
  // The default 30 s cooldown: every attempt below falls within it.
  const { server, issuer, rsa, account } = await setUp(t);
  issuer.failing = "discovery";
  for (let i = 0; i < 5; i++) {
    assert.deepEqual(await exchange(server, account.id, await issuer.sign(rsa)).then((r) => [r.status, r.body]), [401, REFUSED]);
  }
  assert.deepEqual([issuer.discoveryFetches, issuer.jwksFetches], [1, 0]);
  // Recovered, but still within the cooldown: not asked yet.
  issuer.failing = null;
  assert.equal((await exchange(server, account.id, await issuer.sign(rsa))).status, 401);
  assert.equal(issuer.discoveryFetches, 1);

  const again = await setUp(t);
  again.issuer.failing = "jwks";
  for (let i = 0; i < 5; i++)
    assert.equal((await exchange(again.server, again.account.id, await again.issuer.sign(again.rsa))).status, 401);
  assert.deepEqual([again.issuer.discoveryFetches, again.issuer.jwksFetches], [1, 1]);
  assert.ok(again.server.logs.some((line) => line.includes("key set could not be fetched")));
});

test("an issuer answering more than 256 KiB is refused without reading it all, with its length announced or not", async (t) => {
  for (const huge of ["huge", "huge-chunked"] as const) {
    const { server, issuer, rsa, account } = await setUp(t);
    issuer.failing = huge;
    assert.deepEqual(await exchange(server, account.id, await issuer.sign(rsa)).then((r) => [r.status, r.body]), [401, REFUSED]);
    assert.ok(
      server.logs.some(
        (line) =>
          line.includes("key set could not be fetched") &&
          line.includes(`the answer is larger than ${ISSUER_DOCUMENT_MAX_BYTES / 1024} KiB`),
      ),
      huge,
    );
    // Once it answers as an issuer does (after the cooldown), the exchange goes through.
    issuer.failing = null;
    server.clock.advance(30_000);
    assert.equal((await exchange(server, account.id, await issuer.sign(rsa))).status, 200);
  }
});

test("exchanges arriving together wait for one discovery of the issuer, not one each", async (t) => {
  const { server, issuer, rsa, account } = await setUp(t);
  const answers = await Promise.all(
    Array.from({ length: 8 }, async () => (await exchange(server, account.id, await issuer.sign(rsa))).status),
  );
  assert.deepEqual(answers, Array(8).fill(200));
  assert.deepEqual([issuer.discoveryFetches, issuer.jwksFetches], [1, 1]);
});

test("after a failed fetch the issuer is asked again once the cooldown is over; keys held meanwhile still verify", async (t) => {
  const { server, issuer, rsa, account } = await setUp(t);
  issuer.failing = "discovery";
  assert.equal((await exchange(server, account.id, await issuer.sign(rsa))).status, 401);
  issuer.failing = null;
  server.clock.advance(29_000);
  assert.equal((await exchange(server, account.id, await issuer.sign(rsa))).status, 401, "still within the 30 s cooldown");
  assert.equal(issuer.discoveryFetches, 1);
  server.clock.advance(1_000);
  assert.equal((await exchange(server, account.id, await issuer.sign(rsa))).status, 200);
  assert.deepEqual([issuer.discoveryFetches, issuer.jwksFetches], [2, 1]);

  // The key set fails on a refetch for an unknown kid: known keys go on working without a
  // fetch, and unknown kids do not reach the issuer until the cooldown is over.
  server.clock.advance(30_000);
  issuer.failing = "jwks";
  const unknown = await signingKey("rsa-unknown", "RS256");
  assert.equal((await exchange(server, account.id, await issuer.sign(unknown))).status, 401);
  const fetched = issuer.jwksFetches;
  for (let i = 0; i < 3; i++) assert.equal((await exchange(server, account.id, await issuer.sign(unknown))).status, 401);
  assert.equal((await exchange(server, account.id, await issuer.sign(rsa))).status, 200);
  assert.equal(issuer.jwksFetches, fetched);
});

test("a key rotated in at the issuer is picked up; an unknown kid refetches at most once per cooldown", async (t) => {
  const { server, issuer, rsa, account } = await setUp(t);
  assert.equal((await exchange(server, account.id, await issuer.sign(rsa))).status, 200);
  const fetched = issuer.jwksFetches;
  assert.equal(fetched, 1);

  const rotated = await signingKey("rsa-2", "RS256");
  const early = await signingKey("rsa-3", "RS256");
  // Within the cooldown a flood of unknown kids costs the issuer nothing.
  for (let i = 0; i < 3; i++) assert.equal((await exchange(server, account.id, await issuer.sign(early))).status, 401);
  assert.equal(issuer.jwksFetches, fetched, "fetched moments ago: unknown kids do not refetch within the cooldown");

  issuer.publish(rotated);
  server.clock.advance(29_000);
  assert.equal((await exchange(server, account.id, await issuer.sign(rotated))).status, 401, "not refetched within the cooldown");
  assert.equal(issuer.jwksFetches, fetched);
  server.clock.advance(1_000);
  const res = await exchange(server, account.id, await issuer.sign(rotated));
  assert.equal(res.status, 200, JSON.stringify(res.body));
  assert.equal(issuer.jwksFetches, fetched + 1, "one refetch once the cooldown is over");
  // And the next unknown kid waits for the next cooldown.
  for (let i = 0; i < 3; i++) assert.equal((await exchange(server, account.id, await issuer.sign(early))).status, 401);
  assert.equal(issuer.jwksFetches, fetched + 1);
  // The old key still works while the issuer publishes it.
  assert.equal((await exchange(server, account.id, await issuer.sign(rsa))).status, 200);
});

test("a token without a kid verifies with whichever published key of its algorithm signed it; its claims are still checked", async (t) => {
  const { server, issuer, rsa, account } = await setUp(t);
  // Alone for RS256 first, then beside a second RS256 key (an issuer in the middle of a rotation).
  assert.equal((await exchange(server, account.id, await issuer.sign(rsa, {}, { kid: null }))).status, 200);
  const rotated = await signingKey("rsa-2", "RS256");
  issuer.publish(rotated);
  server.clock.advance(10 * 60 * 1000 + 1);
  for (const key of [rsa, rotated]) {
    const res = await exchange(server, account.id, await issuer.sign(key, {}, { kid: null }));
    assert.equal(res.status, 200, `${key.kid}: ${JSON.stringify(res.body)}`);
  }
  // Signed by no published key, or expired, or for another subject: refused all the same.
  const stranger = await signingKey("rsa-x", "RS256");
  const refused = [
    await issuer.sign(stranger, {}, { kid: null }),
    await issuer.sign(rotated, {}, { kid: null, expiresInSeconds: -120 }),
    await issuer.sign(rotated, { sub: "repo:evil/api:ref:refs/heads/main" }, { kid: null }),
  ];
  for (const token of refused) {
    const res = await exchange(server, account.id, token);
    assert.deepEqual([res.status, res.body], [401, REFUSED]);
  }
});

test("the issuer's configuration and key set are discovered again after 10 minutes", async (t) => {
  const { server, issuer, rsa, account } = await setUp(t);
  assert.equal((await exchange(server, account.id, await issuer.sign(rsa))).status, 200);
  server.clock.advance(10 * 60 * 1000 - 1000);
  assert.equal((await exchange(server, account.id, await issuer.sign(rsa))).status, 200);
  assert.deepEqual([issuer.discoveryFetches, issuer.jwksFetches], [1, 1], "held for 10 minutes");
  server.clock.advance(1000);
  assert.equal((await exchange(server, account.id, await issuer.sign(rsa))).status, 200);
  assert.deepEqual([issuer.discoveryFetches, issuer.jwksFetches], [2, 2], "then fetched again");
});

test("an issuer that never answers is given up after its timeout: one 401, not a hanging exchange", async (t) => {
  const { server, issuer, rsa, account } = await setUp(t);
  issuer.failing = "hang";
  const res = await exchange(server, account.id, await issuer.sign(rsa));
  assert.deepEqual([res.status, res.body], [401, REFUSED]);
  assert.ok(
    server.logs.some((line) => line.includes("key set could not be fetched (no answer within 5 s)")),
    "the log says it timed out",
  );
});

test("access tokens die with their account or trust; the exchange is limited per client address", async (t) => {
  const { server, issuer, rsa, owner, project, account, trust } = await setUp(t);
  const first = (await exchange(server, account.id, await issuer.sign(rsa))).body.accessToken as string;
  const second = (await exchange(server, account.id, await issuer.sign(rsa))).body.accessToken as string;
  const as = (token: string): Client => server.client().withBearer(token);
  assert.equal((await as(first).json("GET", "/api/service-accounts/me")).status, 200);
  // Access tokens are not service tokens: they are not listed and do not count.
  const got = await owner.json("GET", `/api/projects/${project.id}/service-accounts/${account.id}`);
  assert.deepEqual(got.body.serviceAccount.tokens, []);

  await owner.json("DELETE", `/api/projects/${project.id}/service-accounts/${account.id}/trusts/${trust.id}`);
  assert.deepEqual(
    await as(first)
      .json("GET", "/api/service-accounts/me")
      .then((r) => [r.status, r.body]),
    [401, TOKEN_REFUSED],
  );
  assert.deepEqual(await exchange(server, account.id, await issuer.sign(rsa)).then((r) => [r.status, r.body]), [401, REFUSED]);

  const again = await owner.json("POST", `/api/projects/${project.id}/service-accounts/${account.id}/trusts`, {
    issuer: issuer.url,
    audience: AUDIENCE,
    subject: SUBJECT,
  });
  assert.equal(again.status, 201);
  const third = (await exchange(server, account.id, await issuer.sign(rsa))).body.accessToken as string;
  await owner.json("DELETE", `/api/projects/${project.id}/service-accounts/${account.id}`);
  for (const token of [second, third]) {
    assert.deepEqual(
      await as(token)
        .json("GET", "/api/service-accounts/me")
        .then((r) => [r.status, r.body]),
      [401, TOKEN_REFUSED],
    );
  }
  // The account's tokens were deleted with it, not only refused: no endpoint lists a deleted account's tokens.
  assert.equal(rowCount(server, "service_tokens"), 0);

  // 30 attempts a minute per address, refused or not (4 made above).
  let status = 0;
  for (let i = 0; i < 26 && status !== 429; i++) status = (await exchange(server, "00000000-0000-4000-8000-000000000000", "x.y.z")).status;
  assert.equal(status, 401);
  assert.equal((await exchange(server, "00000000-0000-4000-8000-000000000000", "x.y.z")).status, 429);
});
