// Local sign-in under attack: parallel guesses, guesses from many addresses, and forged
// client addresses.
import assert from "node:assert/strict";
import fs from "node:fs";
import { type TestContext, test } from "node:test";
import { addressNetwork } from "../src/core/client-address.ts";
import { ConfigError, loadConfig } from "../src/core/config.ts";
import { HttpError } from "../src/core/errors.ts";
import { hashPassword, isCurrentHash, MAX_PASSWORD_WORK, PASSWORDS_BUSY, withPasswordCapacity } from "../src/sign-in/passwords.ts";
import { createUsersRepo } from "../src/users/users.repo.ts";
import { makeTempDir, runMain, startServer, type TestServer } from "./helpers.ts";
import { rowCount, setPasswordHash, storedRows } from "./storage.ts";

const PASSWORD = "correct horse battery staple";
const EMAIL = "owner@example.com";
const INCORRECT = { error: "Incorrect e-mail or password." };
const limitedFor = (minutes: number) => ({ error: `Too many failed sign-ins for this account. Try again in ${minutes} minutes.` });
const TRUST_PROXY_TRUE =
  "TRUST_PROXY=true would let any client choose its address through X-Forwarded-For: set it to the number of proxies in front of the server (a hop count from 1 to 10) or a comma-separated list of their addresses (IP, IP/prefix, loopback, linklocal, uniquelocal).";

/** A local-accounts server whose first account (EMAIL, PASSWORD) exists. */
async function ownerAccount(t: TestContext, env: Record<string, string> = {}): Promise<TestServer> {
  const server = await startServer(t, { env: { NODE_ENV: "production", AUTH_PROVIDER: "local", ...env } });
  const line = server.logs.find((l) => l.includes("No account exists yet"));
  const token = line?.match(/\/set-password#([A-Za-z0-9_-]+)/)?.[1];
  assert.ok(token, "the first start logs a setup link");
  // Plain fetch: the setup token is logged on purpose, and the helpers' leak scan would flag it.
  const res = await fetch(`${server.url}/api/auth/local/set-password`, {
    method: "POST",
    headers: { "content-type": "application/json", origin: server.origin },
    body: JSON.stringify({ token, email: EMAIL, password: PASSWORD }),
  });
  assert.equal(res.status, 200, await res.text());
  // Some 150 guesses in this file: each checks a hash of N = 2^10 instead of the server's
  // 2^15, which took 40 to 50 s of CPU. How many are checked is what these tests prove.
  setPasswordHash(server, EMAIL, await hashPassword(PASSWORD, 10));
  return server;
}

interface Answer {
  status: number;
  body: { error?: string; user?: { email: string } };
  retryAfter: string | null;
}

/** One sign-in; `address` is sent as X-Forwarded-For (only a server with TRUST_PROXY believes it). */
async function signIn(server: TestServer, password: string, address?: string): Promise<Answer> {
  const res = await server
    .client()
    .request("POST", "/api/auth/local/sign-in", { email: EMAIL, password }, address ? { "x-forwarded-for": address } : {});
  return { status: res.status, body: (await res.json()) as Answer["body"], retryAfter: res.headers.get("retry-after") };
}

/** How many answers had each status and message (the seconds of the generic limit left out). */
function tally(answers: Answer[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const { status, body } of answers) {
    const key = `${status} ${(body.error ?? "signed in").replace(/\d+ seconds/, "N seconds")}`;
    counts[key] = (counts[key] ?? 0) + 1;
  }
  return counts;
}

test("40 parallel wrong passwords: only 10 are checked, the rest wait; the owner still gets in from another address", async (t) => {
  const server = await ownerAccount(t, { TRUST_PROXY: "1" });
  const attacker = "198.51.100.7";
  const answers = await Promise.all(Array.from({ length: 40 }, (_, i) => signIn(server, `wrong guess number ${i}`, attacker)));
  // The route's own limit (20 attempts a minute per address) turns away half; of the other
  // 20, the first 10 are checked and the rest refused before any hashing.
  assert.deepEqual(tally(answers), {
    "401 Incorrect e-mail or password.": 10,
    "429 Too many failed sign-ins for this account. Try again in 15 minutes.": 10,
    "429 Too many requests. Try again in N seconds.": 20,
  });

  // A restart keeps both the failures and the per-minute counts (both are in the database);
  // a minute later the route's limit has room again, the account's 15 minutes have not passed.
  const restarted = await server.restart();
  t.after(() => restarted.stop());
  restarted.clock.advance(61 * 1000);
  const sameAddress = await signIn(restarted, PASSWORD, attacker);
  assert.deepEqual([sameAddress.status, sameAddress.body], [429, limitedFor(14)], "even the right password waits at that address");
  assert.ok(Number(sameAddress.retryAfter) > 0 && Number(sameAddress.retryAfter) <= 900, String(sameAddress.retryAfter));

  const owner = await signIn(restarted, PASSWORD, "203.0.113.20");
  assert.equal(owner.status, 200, JSON.stringify(owner.body));
  assert.equal(owner.body.user?.email, EMAIL);
  // The owner's success forgives the owner's address only, not the attacker's.
  const stillLimited = await signIn(restarted, PASSWORD, attacker);
  assert.deepEqual([stillLimited.status, stillLimited.body], [429, limitedFor(14)]);

  restarted.clock.advance(13 * 60 * 1000);
  const lastMinute = await signIn(restarted, PASSWORD, attacker);
  assert.deepEqual(lastMinute.body, { error: "Too many failed sign-ins for this account. Try again in 1 minute." });
  restarted.clock.advance(60 * 1000);
  const later = await signIn(restarted, PASSWORD, attacker);
  assert.equal(later.status, 200, JSON.stringify(later.body));
});

test("a right password clears the failures of its own address", async (t) => {
  const server = await ownerAccount(t, { TRUST_PROXY: "1" });
  const address = "192.0.2.44";
  for (let i = 0; i < 9; i++) assert.deepEqual((await signIn(server, `typo number ${i} here`, address)).body, INCORRECT);
  assert.equal((await signIn(server, PASSWORD, address)).status, 200);
  // Ten more tries: the nine before the success no longer count.
  const answers = await Promise.all(Array.from({ length: 10 }, (_, i) => signIn(server, `another typo ${i} here`, address)));
  assert.deepEqual(tally(answers), { "401 Incorrect e-mail or password.": 10 });
});

test("a hash made with weaker scrypt parameters is made again at the next sign-in; no session ends, and a reset meanwhile stands", async (t) => {
  const server = await ownerAccount(t);
  const storedHash = () => storedRows(server, "users", { email: EMAIL })[0]!.password_hash as string;
  const weak = storedHash();
  assert.match(weak, /^scrypt\$10\$8\$3\$/);
  assert.equal(isCurrentHash(weak), false);
  // The parameters of earlier versions (p = 1) are weaker too; stronger ones are kept.
  assert.equal(isCurrentHash("scrypt$15$8$1$c2FsdA$aGFzaA"), false);
  assert.equal(isCurrentHash("scrypt$16$8$3$c2FsdA$aGFzaA"), true);

  const first = await server.client().request("POST", "/api/auth/local/sign-in", { email: EMAIL, password: PASSWORD });
  assert.equal(first.status, 200);
  const cookie = first.headers.get("set-cookie")!.split(";")[0]!;
  const strong = storedHash();
  assert.match(strong, /^scrypt\$15\$8\$3\$[A-Za-z0-9_-]{22}\$[A-Za-z0-9_-]{43}$/);
  assert.equal(isCurrentHash(strong), true);
  // The session the sign-in began lives on: hashing again is no password change.
  const me = await fetch(`${server.url}/api/auth/me`, { headers: { cookie } });
  assert.equal(me.status, 200, await me.text());

  assert.deepEqual((await signIn(server, "not the password at all")).body, INCORRECT);
  assert.equal((await signIn(server, PASSWORD)).status, 200);
  assert.equal(storedHash(), strong, "a current hash is left as it is");

  // A reset between the sign-in's check and its write: the write finds another hash and leaves it.
  const users = createUsersRepo(server.app.db);
  const owner = storedRows(server, "users", { email: EMAIL })[0]!;
  assert.equal(await users.replacePasswordHash(owner.id as string, weak, await hashPassword(PASSWORD), new Date()), false);
  assert.equal(storedHash(), strong);
});

test("the account's ceiling (100 failures an hour) holds across many addresses, and refused tries do not count", async (t) => {
  const server = await ownerAccount(t, { TRUST_PROXY: "1" });
  const addresses = Array.from({ length: 10 }, (_, i) => `198.51.100.${i + 1}`);
  const guesses = addresses.flatMap((address) => Array.from({ length: 10 }, (_, i) => signIn(server, `distributed guess ${i}`, address)));
  assert.deepEqual(tally(await Promise.all(guesses)), { "401 Incorrect e-mail or password.": 100 });

  // An eleventh address, and the owner's own, are refused for the rest of the hour.
  const more = await Promise.all(Array.from({ length: 5 }, () => signIn(server, "one more distributed guess", "198.51.100.99")));
  assert.deepEqual(tally(more), { "429 Too many failed sign-ins for this account. Try again in 60 minutes.": 5 });
  const owner = await signIn(server, PASSWORD, "203.0.113.20");
  assert.deepEqual([owner.status, owner.body], [429, limitedFor(60)]);

  // After 15 minutes each address's own window is over, but the ceiling is not.
  server.clock.advance(15 * 60 * 1000);
  const first = await signIn(server, "distributed guess again", addresses[0]);
  assert.deepEqual([first.status, first.body], [429, limitedFor(45)]);

  server.clock.advance(45 * 60 * 1000);
  assert.equal((await signIn(server, PASSWORD, "203.0.113.20")).status, 200);
});

test("past MAX_PASSWORD_WORK (128) sign-ins and password changes under way, a new one answers 503 with Retry-After at once, with nothing recorded; room comes back as they end", async (t) => {
  const server = await ownerAccount(t, { TRUST_PROXY: "1" });
  const link = await runMain(["users", "reset-password", EMAIL], server.env);
  assert.equal(link.code, 0, link.stderr);
  const resetToken = link.stdout.match(/\/set-password#([A-Za-z0-9_-]+)/)?.[1];
  assert.ok(resetToken, link.stdout);
  // A flood from many addresses (each within its own limit) outruns scrypt's ~10 hashes a
  // second only when it lasts many seconds, too long for a test: the server runs in this
  // process, so the test holds the places itself, as such a flood would.
  const releases: (() => void)[] = [];
  let started = 0;
  assert.equal(MAX_PASSWORD_WORK, 128);
  const held = Array.from({ length: MAX_PASSWORD_WORK }, () =>
    withPasswordCapacity(() => {
      started += 1;
      return new Promise<void>((resolve) => releases.push(resolve));
    }),
  );
  assert.equal(started, MAX_PASSWORD_WORK);
  assert.equal(PASSWORDS_BUSY, "Too many sign-ins at once. Try again in a few seconds.");
  let ranRefused = false;
  const refused = await withPasswordCapacity(async () => {
    ranRefused = true;
  }).then(
    () => undefined,
    (error: unknown) => error,
  );
  assert.ok(refused instanceof HttpError, String(refused));
  assert.equal(ranRefused, false, "refused work never starts");

  const busy = await signIn(server, PASSWORD, "203.0.113.9");
  assert.deepEqual([busy.status, busy.body, busy.retryAfter], [503, { error: PASSWORDS_BUSY }, "5"]);
  assert.equal(rowCount(server, "sign_in_failures"), 0, "a refusal for the load is no guess: nothing recorded");
  const setBusy = await server
    .client()
    .json("POST", "/api/auth/local/set-password", { token: resetToken, password: "a brand new password" });
  assert.deepEqual([setBusy.status, setBusy.body], [503, { error: PASSWORDS_BUSY }]);

  releases.shift()!();
  await held[0];
  const signedIn = await signIn(server, PASSWORD, "203.0.113.9");
  assert.equal(signedIn.status, 200, JSON.stringify(signedIn.body));
  for (const release of releases) release();
  await Promise.all(held);
  // The link was not used up by the refusal.
  const set = await server.client().json("POST", "/api/auth/local/set-password", { token: resetToken, password: "a brand new password" });
  assert.equal(set.status, 200, JSON.stringify(set.body));
});

test("an IPv6 client is one client per /64: 40 addresses of one network are limited as one address", async (t) => {
  const server = await ownerAccount(t, { TRUST_PROXY: "1" });
  // Forty spellings and hosts of 2001:db8:a:b::/64, as a host that owns the /64 would send.
  const attackers = Array.from({ length: 40 }, (_, i) =>
    i % 2 ? `2001:db8:a:b::${(i + 1).toString(16)}` : `2001:0DB8:000A:000B:0:0:${i}:1`,
  );
  const answers = await Promise.all(attackers.map((address, i) => signIn(server, `wrong guess number ${i}`, address)));
  assert.deepEqual(tally(answers), {
    "401 Incorrect e-mail or password.": 10,
    "429 Too many failed sign-ins for this account. Try again in 15 minutes.": 10,
    "429 Too many requests. Try again in N seconds.": 20,
  });
  // The next /64 is another client: the owner gets in from it.
  const owner = await signIn(server, PASSWORD, "2001:db8:a:c::1");
  assert.equal(owner.status, 200, JSON.stringify(owner.body));

  // A device login start (10 a minute per client address) counts the /64 too.
  const starts = await Promise.all(
    Array.from({ length: 12 }, (_, i) =>
      server.client().request("POST", "/api/cli/auth/device", {}, { "x-forwarded-for": `2001:db8:d::${i + 1}` }),
    ),
  );
  assert.deepEqual(starts.map((res) => res.status).sort(), [...Array(10).fill(200), 429, 429]);
  const elsewhere = await server.client().request("POST", "/api/cli/auth/device", {}, { "x-forwarded-for": "2001:db8:e::1" });
  assert.equal(elsewhere.status, 200);

  // So do refused service tokens (60 a minute per client address, on every path).
  const refused = (address: string, n: number) =>
    server
      .client()
      .request("GET", "/healthz", undefined, { "x-forwarded-for": address, authorization: `Bearer svc_st_${String(n).padStart(43, "x")}` });
  for (let n = 0; n < 60; n++) assert.equal((await refused(`2001:db8:f::${(n + 1).toString(16)}`, n)).status, 401, `refusal ${n + 1}`);
  assert.equal((await refused("2001:db8:f::ffff", 60)).status, 429);
  assert.equal((await refused("2001:db8:f:1::1", 61)).status, 401, "the next /64 is another client");
});

test("the default limit counts a signed-out IPv6 client per /64", async (t) => {
  const server = await startServer(t, { env: { TRUST_PROXY: "1", RATE_LIMIT_PER_MINUTE: "5" } });
  const signedOut = (address: string) => server.client().request("GET", "/api/projects", undefined, { "x-forwarded-for": address });
  for (let i = 1; i <= 5; i++) assert.equal((await signedOut(`2001:db8:9::${i}`)).status, 401, `request ${i}`);
  assert.equal((await signedOut("2001:db8:9::6")).status, 429);
  assert.equal((await signedOut("2001:db8:9:1::1")).status, 401, "the next /64 is another client");
});

test("RATE_LIMIT_IPV6_PREFIX=128 counts every IPv6 address on its own (hosts sharing a /64: a cloud subnet, a pod network)", async (t) => {
  const server = await ownerAccount(t, { TRUST_PROXY: "1", RATE_LIMIT_IPV6_PREFIX: "128" });
  const starts = await Promise.all(
    Array.from({ length: 12 }, (_, i) =>
      server.client().request("POST", "/api/cli/auth/device", {}, { "x-forwarded-for": `2001:db8:d::${i + 1}` }),
    ),
  );
  assert.deepEqual(
    starts.map((res) => res.status),
    Array(12).fill(200),
  );
  // One address is still one client.
  const again = await Promise.all(
    Array.from({ length: 11 }, () => server.client().request("POST", "/api/cli/auth/device", {}, { "x-forwarded-for": "2001:db8:d::1" })),
  );
  assert.deepEqual(again.map((res) => res.status).sort(), [...Array(9).fill(200), 429, 429]);
});

test("an IPv4-mapped address is its IPv4 address: failures from one count for the other", async (t) => {
  const server = await ownerAccount(t, { TRUST_PROXY: "1" });
  for (let i = 0; i < 10; i++) assert.deepEqual((await signIn(server, `typo number ${i} here`, "198.51.100.23")).body, INCORRECT);
  const mapped = await signIn(server, PASSWORD, "::ffff:198.51.100.23");
  assert.deepEqual([mapped.status, mapped.body], [429, limitedFor(15)]);
  assert.equal((await signIn(server, PASSWORD, "198.51.100.24")).status, 200);
});

test("addressNetwork: IPv4 as it is, IPv6 by its prefix whatever the spelling, anything else untouched", () => {
  const cases: [string, string][] = [
    ["192.0.2.1", "192.0.2.1"],
    ["::ffff:192.0.2.1", "192.0.2.1"],
    ["::ffff:c000:201", "192.0.2.1"],
    ["::ffff:192.0.2.1%eth0", "192.0.2.1"],
    ["64:ff9b::192.0.2.1", "192.0.2.1"],
    ["64:ff9b::c000:201", "192.0.2.1"],
    ["2001:db8::1", "2001:db8:0:0:0:0:0:0/64"],
    ["2001:0DB8:0000:0000:ffff:1:2:3", "2001:db8:0:0:0:0:0:0/64"],
    ["2001:db8:1:2:3:4:5:6", "2001:db8:1:2:0:0:0:0/64"],
    ["2001:db8:1:2::", "2001:db8:1:2:0:0:0:0/64"],
    ["1:2:3:4:5:6:7::", "1:2:3:4:0:0:0:0/64"],
    ["1:2:3:4:5:6:1.2.3.4", "1:2:3:4:0:0:0:0/64"],
    ["::1", "0:0:0:0:0:0:0:0/64"],
    ["::", "0:0:0:0:0:0:0:0/64"],
    ["fe80::1%eth0", "fe80:0:0:0:0:0:0:0/64"],
    ["not an address", "not an address"],
    ["1.2.3.4%x", "1.2.3.4%x"],
    ["", ""],
  ];
  for (const [address, network] of cases) assert.equal(addressNetwork(address), network, address);
  assert.equal(addressNetwork("2001:db8:1:2:3:4:5:6", 128), "2001:db8:1:2:3:4:5:6/128");
  // A socket destroyed while its request waited has no address left: counted, not a TypeError.
  assert.equal(addressNetwork(undefined), "unknown");
  assert.equal(addressNetwork("2001:db8:1:2:3:4:5:6", 56), "2001:db8:1:0:0:0:0:0/56");
  assert.equal(addressNetwork("2001:db8:1:2ff:3:4:5:6", 56), "2001:db8:1:200:0:0:0:0/56");
  assert.equal(addressNetwork("192.0.2.1", 128), "192.0.2.1");
});

test("without TRUST_PROXY, X-Forwarded-For is ignored: a forged address does not escape the limit", async (t) => {
  const server = await ownerAccount(t);
  const answers = await Promise.all(Array.from({ length: 10 }, (_, i) => signIn(server, `wrong guess number ${i}`, `192.0.2.${i + 1}`)));
  assert.deepEqual(tally(answers), { "401 Incorrect e-mail or password.": 10 });
  const forged = await signIn(server, PASSWORD, "203.0.113.20");
  assert.deepEqual([forged.status, forged.body], [429, limitedFor(15)]);
});

test("TRUST_PROXY=true (or a spelling of it) is refused at start with one line", async () => {
  for (const value of ["true", "TRUE", "yes", "on", "*", "11", "1000"]) {
    assert.throws(
      () => loadConfig({ TRUST_PROXY: value }),
      (error: unknown) =>
        error instanceof ConfigError && error.message === TRUST_PROXY_TRUE.replace("TRUST_PROXY=true", `TRUST_PROXY=${value}`),
      value,
    );
  }
  assert.equal(loadConfig({ TRUST_PROXY: "1" }).trustProxy, 1);
  assert.equal(loadConfig({ TRUST_PROXY: "10" }).trustProxy, 10);
  assert.deepEqual(loadConfig({ TRUST_PROXY: "10.0.0.1, loopback" }).trustProxy, ["10.0.0.1", "loopback"]);

  const dataDir = makeTempDir();
  try {
    const result = await runMain(["serve"], { DATA_DIR: dataDir, PORT: "0", TRUST_PROXY: "true" });
    assert.equal(result.code, 1);
    assert.equal(result.stderr, `secrets-server: configuration error: ${TRUST_PROXY_TRUE}\n`);
    assert.equal(result.stdout, "");
  } finally {
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
});
