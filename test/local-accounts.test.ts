import assert from "node:assert/strict";
import crypto from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { type TestContext, test } from "node:test";
import { hashToken } from "../src/core/crypto.ts";
import { createBrowserSessionsRepo } from "../src/sign-in/browser-sessions.repo.ts";
import {
  type Client,
  cliClient,
  cliLogin,
  makeTempDir,
  onPostgres,
  randomMasterKey,
  runMain,
  startServer,
  type TestServer,
} from "./helpers.ts";
import { rowCount, storedRows } from "./storage.ts";

const PRODUCTION_LOCAL = { NODE_ENV: "production", AUTH_PROVIDER: "local" };
const GOOD_PASSWORD = "correct horse battery staple";

function setupLinkFromLogs(server: TestServer): string {
  const line = server.logs.find((l) => l.includes("No account exists yet"));
  assert.ok(line, "the first start logs a setup link");
  const match = line.match(/(http:\/\/\S+\/set-password#[A-Za-z0-9_-]+)/);
  assert.ok(match, line);
  return match[1]!;
}

function tokenOf(link: string): string {
  return link.slice(link.indexOf("#") + 1);
}

/**
 * The setup token is logged on purpose (for the operator), so it is sent with plain fetch
 * rather than the helpers' client, whose leak scan would rightly flag any other token seen
 * in a log line.
 */
async function postRaw(server: TestServer, path: string, body: unknown): Promise<{ status: number; body: any; cookies: string[] }> {
  const res = await fetch(server.url + path, {
    method: "POST",
    headers: { "content-type": "application/json", origin: server.origin },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: await res.json(), cookies: res.headers.getSetCookie() };
}

function linkFromOutput(stdout: string): string {
  const match = stdout.match(/(http:\/\/\S+\/set-password#[A-Za-z0-9_-]+)/);
  assert.ok(match, stdout);
  return match[1]!;
}

async function cli(server: TestServer, ...args: string[]) {
  return runMain(args, server.env);
}

async function signIn(server: TestServer, email: string, password: string): Promise<{ status: number; body: any; client: Client }> {
  const client = server.client();
  const res = await client.json("POST", "/api/auth/local/sign-in", { email, password });
  return { ...res, client };
}

async function firstAccount(t: TestContext, env: Record<string, string> = {}) {
  const server = await startServer(t, { env: { ...PRODUCTION_LOCAL, ...env } });
  const token = tokenOf(setupLinkFromLogs(server));
  const created = await postRaw(server, "/api/auth/local/set-password", {
    token,
    email: "Admin@Example.com",
    name: "Ada Admin",
    password: GOOD_PASSWORD,
  });
  assert.equal(created.status, 200, JSON.stringify(created.body));
  return { server, token, created };
}

test("local: the first start logs a one-time setup link that creates the first, verified account", async (t) => {
  const server = await startServer(t, { env: PRODUCTION_LOCAL });
  const link = setupLinkFromLogs(server);
  assert.ok(link.startsWith(`${server.origin}/set-password#`));
  const token = tokenOf(link);
  // Only the hash is stored.
  const stored = storedRows(server, "account_links");
  assert.equal(stored.length, 1);
  assert.equal(stored[0]!.purpose, "setup");
  assert.notEqual(stored[0]!.token_hash, token);
  assert.match(stored[0]!.token_hash, /^[0-9a-f]{64}$/);

  const info = await postRaw(server, "/api/auth/local/link", { token });
  assert.equal(info.status, 200);
  assert.equal(info.body.link.purpose, "setup");
  assert.equal(info.body.link.email, null);

  const noEmail = await postRaw(server, "/api/auth/local/set-password", { token, password: GOOD_PASSWORD });
  assert.deepEqual([noEmail.status, noEmail.body], [400, { error: "Enter your e-mail address." }]);
  const short = await postRaw(server, "/api/auth/local/set-password", { token, email: "a@example.com", password: "short" });
  assert.equal(short.status, 400);
  assert.match(short.body.error, /^Choose a password of 12 to 256 characters/);

  const created = await postRaw(server, "/api/auth/local/set-password", {
    token,
    email: "Admin@Example.com",
    name: "Ada Admin",
    password: GOOD_PASSWORD,
  });
  assert.equal(created.status, 200);
  assert.equal(created.body.user.email, "admin@example.com");
  assert.equal(created.body.user.name, "Ada Admin");
  const cookie = created.cookies.find((c) => c.startsWith("__Host-secrets_session="))!;
  assert.match(cookie, /; Secure/i);
  assert.match(cookie, /HttpOnly/i);
  const [user] = storedRows(server, "users");
  assert.ok(user);
  assert.equal(user.email_verified, 1);
  assert.equal(user.auth_issuer, "local");
  assert.match(user.password_hash, /^scrypt\$15\$8\$3\$[A-Za-z0-9_-]{22}\$[A-Za-z0-9_-]{43}$/);
  assert.ok(!user.password_hash.includes(GOOD_PASSWORD));

  // The link works once; the first account exists, so no other setup is possible.
  const again = await postRaw(server, "/api/auth/local/set-password", { token, email: "x@example.com", password: GOOD_PASSWORD });
  assert.deepEqual(
    [again.status, again.body],
    [410, { error: "This link is invalid, expired, or already used. Ask your administrator for a new one." }],
  );
  const setupLink = await cli(server, "setup-link");
  assert.equal(setupLink.code, 1);
  assert.match(setupLink.stderr, /The first account exists already/);

  // A restart does not print another link; the dev sign-in does not exist in production.
  const restarted = await server.restart();
  t.after(() => restarted.stop());
  assert.ok(!restarted.logs.some((l) => l.includes("No account exists yet")));
  assert.equal((await restarted.client().json("POST", "/api/auth/dev/sign-in", { email: "a@example.com" })).status, 404);
  const signedIn = await signIn(restarted, "admin@example.com", GOOD_PASSWORD);
  assert.equal(signedIn.status, 200);
});

test("local: setup-link prints a new link that replaces the old one; setup links expire after 24 hours", async (t) => {
  const server = await startServer(t, { env: PRODUCTION_LOCAL });
  const first = tokenOf(setupLinkFromLogs(server));
  const printed = await cli(server, "setup-link");
  assert.equal(printed.code, 0, printed.stderr);
  const second = tokenOf(linkFromOutput(printed.stdout));
  assert.equal((await postRaw(server, "/api/auth/local/link", { token: first })).status, 410);
  assert.equal((await postRaw(server, "/api/auth/local/link", { token: second })).status, 200);
  server.clock.advance(24 * 60 * 60 * 1000 + 1);
  assert.equal((await postRaw(server, "/api/auth/local/link", { token: second })).status, 410);

  const oidc = await runMain(["setup-link"], {
    ...server.env,
    AUTH_PROVIDER: "oidc",
    OIDC_ISSUER: "http://127.0.0.1:9",
    OIDC_CLIENT_ID: "x",
    OIDC_CLIENT_SECRET: "y",
  });
  assert.equal(oidc.code, 1);
  assert.match(oidc.stderr, /setup-link is for local accounts, but AUTH_PROVIDER is oidc/);

  // Refused before anything is made: no database in a new install's DATA_DIR.
  const empty = makeTempDir();
  for (const command of [["setup-link"], ["users", "add", "new@example.com"], ["users", "reset-password", "new@example.com"]]) {
    const refused = await runMain(command, { DATA_DIR: empty });
    assert.equal(refused.code, 1, command.join(" "));
    assert.match(refused.stderr, /is for local accounts, but AUTH_PROVIDER is dev/, command.join(" "));
    assert.deepEqual(fs.readdirSync(empty), [], command.join(" "));
  }
});

test("local: sign-in answers the same generic message for a wrong password and an unknown account", async (t) => {
  const { server } = await firstAccount(t);
  const ok = await signIn(server, "ADMIN@example.com", GOOD_PASSWORD);
  assert.equal(ok.status, 200);
  assert.equal(ok.body.user.email, "admin@example.com");
  assert.ok(ok.client.cookies.has("__Host-secrets_session"));
  assert.equal((await ok.client.json("GET", "/api/auth/me")).body.user.email, "admin@example.com");

  const wrong = await signIn(server, "admin@example.com", "not the password at all");
  const unknown = await signIn(server, "nobody@example.com", "not the password at all");
  assert.deepEqual([wrong.status, wrong.body], [401, { error: "Incorrect e-mail or password." }]);
  assert.deepEqual([unknown.status, unknown.body], [401, { error: "Incorrect e-mail or password." }]);
  assert.equal(wrong.client.cookies.size, 0);

  const bad = await server.client().json("POST", "/api/auth/local/sign-in", { email: "admin@example.com" });
  assert.deepEqual([bad.status, bad.body], [400, { error: "Enter your e-mail address and password." }]);
  const extra = await server.client().json("POST", "/api/auth/local/sign-in", { email: "a@example.com", password: "x", admin: true });
  assert.equal(extra.status, 400);
});

test("local: an address no account has is limited like one that has (the answer tells neither apart)", async (t) => {
  const { server } = await firstAccount(t);
  const answers: string[] = [];
  for (let i = 0; i < 11; i++) {
    const res = await signIn(server, "nobody@example.com", `wrong password ${i}`);
    answers.push(`${res.status} ${res.body.error}`);
  }
  assert.deepEqual(answers.slice(0, 10), Array(10).fill("401 Incorrect e-mail or password."));
  assert.equal(answers[10], "429 Too many failed sign-ins for this account. Try again in 15 minutes.");
});

test("local: failed sign-ins are limited per account and address (10 per 15 minutes), whether or not the account exists", async (t) => {
  const { server } = await firstAccount(t);
  for (let i = 0; i < 10; i++) assert.equal((await signIn(server, "admin@example.com", `wrong password ${i}`)).status, 401);
  const limited = await signIn(server, "admin@example.com", GOOD_PASSWORD);
  assert.equal(limited.status, 429, "even the right password waits");
  assert.equal(limited.body.error, "Too many failed sign-ins for this account. Try again in 15 minutes.");
  assert.equal(limited.client.cookies.size, 0);

  // The count lives in the database: a restart does not hand out a fresh set of tries.
  // Made-up addresses are not kept in the clear.
  assert.equal((await signIn(server, "made-up@example.com", "wrong password")).status, 401);
  // A NUL is no account's address (PostgreSQL would refuse it as a parameter): the same 401.
  const nul = await signIn(server, "made-up\u0000@example.com", "wrong password");
  assert.deepEqual([nul.status, nul.body], [401, { error: "Incorrect e-mail or password." }]);
  const stored = storedRows(server, "sign_in_failures");
  assert.equal(stored.length, 12, "the refused attempt is not counted");
  assert.ok(
    stored.every((r) => /^[0-9a-f]{64}$/.test(r.account_hash)),
    "hashed, not the e-mail",
  );
  assert.ok(
    stored.every((r) => /^[0-9a-f]{64}$/.test(r.address_hash)),
    "hashed, not the address",
  );
  // Keyed hashes: hashing every candidate e-mail or IPv4 address finds nothing.
  const plain = new Set(["admin@example.com", "made-up@example.com", "127.0.0.1", "::ffff:127.0.0.1"].map(hashToken));
  assert.ok(
    stored.every((r) => !plain.has(r.account_hash) && !plain.has(r.address_hash)),
    "a plain SHA-256 of the e-mail or the address",
  );
  assert.equal(new Set(stored.map((r) => r.address_hash)).size, 1, "one address, one pseudonym");
  const restarted = await server.restart();
  t.after(() => restarted.stop());
  assert.equal((await signIn(restarted, "admin@example.com", GOOD_PASSWORD)).status, 429);

  restarted.clock.advance(15 * 60 * 1000);
  assert.equal((await signIn(restarted, "admin@example.com", GOOD_PASSWORD)).status, 200);
  // A success clears the failures of its account and address; failures older than the
  // longest window (an hour) go with the next failure, whoever's they are.
  // No endpoint lists failures: only the storage shows which are kept.
  assert.equal(rowCount(restarted, "sign_in_failures"), 2, "the two made-up accounts' failures stay");
  restarted.clock.advance(45 * 60 * 1000);
  assert.equal((await signIn(restarted, "other@example.com", "wrong password")).status, 401);
  assert.equal(rowCount(restarted, "sign_in_failures"), 1);
});

test("local: sign-in is limited per address (20 a minute)", async (t) => {
  const { server } = await firstAccount(t);
  const statuses: number[] = [];
  for (let i = 0; i < 21; i++) statuses.push((await signIn(server, `person${i}@example.com`, "some wrong password")).status);
  assert.deepEqual(statuses.slice(0, 20), new Array(20).fill(401));
  assert.equal(statuses[20], 429);
});

test("users add before the first start makes the database and the first account: the server then prints no setup link; the other commands refuse an empty DATA_DIR", {
  skip: onPostgres("an empty DATA_DIR holds SQLite's database; PostgreSQL's is DATABASE_URL's"),
}, async (t) => {
  const dataDir = makeTempDir();
  const env = { ...PRODUCTION_LOCAL, DATA_DIR: dataDir, MASTER_KEY: randomMasterKey(), APP_URL: "http://localhost:8080" };
  const database = path.join(dataDir, "secrets.db");

  // A command that only reads or changes users names the missing file and creates nothing.
  for (const args of [
    ["users", "list"],
    ["users", "disable", "nobody@example.com"],
  ]) {
    const refused = await runMain(args, env);
    assert.equal(refused.code, 1, args.join(" "));
    assert.equal(refused.stderr.trim(), `secrets-server: configuration error: There is no database at ${database}: check DATA_DIR.`);
    assert.equal(fs.existsSync(database), false, args.join(" "));
  }

  const added = await runMain(["users", "add", "First@Example.com"], env);
  assert.equal(added.code, 0, added.stderr);
  assert.match(added.stdout, /^Created first@example\.com\. Give them this link to set their password:/);
  const token = tokenOf(linkFromOutput(added.stdout));

  const server = await startServer(t, { dataDir, env });
  assert.ok(!server.logs.some((l) => l.includes("No account exists yet")), "an account exists: no setup link");
  const set = await postRaw(server, "/api/auth/local/set-password", { token, password: GOOD_PASSWORD });
  assert.equal(set.status, 200, JSON.stringify(set.body));
  const signedIn = await signIn(server, "first@example.com", GOOD_PASSWORD);
  assert.equal(signedIn.status, 200, JSON.stringify(signedIn.body));
  // setup-link is for a database without accounts: this one has its first.
  const setupLink = await cli(server, "setup-link");
  assert.equal(setupLink.code, 1);
  assert.match(setupLink.stderr, /The first account exists already/);
});

test("users commands: add, list, set the password through the link, reset, disable and enable", async (t) => {
  const { server } = await firstAccount(t);

  const added = await cli(server, "users", "add", "Bob@Example.com", "--name", "Bob Builder");
  assert.equal(added.code, 0, added.stderr);
  assert.match(added.stdout, /^Created bob@example\.com\. Give them this link to set their password:/);
  const bobLink = tokenOf(linkFromOutput(added.stdout));
  const duplicate = await cli(server, "users", "add", "bob@example.com");
  assert.equal(duplicate.code, 1);
  assert.match(duplicate.stderr, /exists already/);

  let list = await cli(server, "users", "list");
  assert.equal(list.code, 0);
  assert.match(list.stdout, /^admin@example\.com\tAda Admin\tlocal\tactive\tyes\t/m);
  assert.match(list.stdout, /^bob@example\.com\tBob Builder\tlocal\tinvited\tno\t/m);
  // Without a password yet, Bob cannot sign in.
  assert.equal((await signIn(server, "bob@example.com", GOOD_PASSWORD)).status, 401);

  const bob = server.client();
  const info = await bob.json("POST", "/api/auth/local/link", { token: bobLink });
  assert.equal(info.status, 200);
  assert.equal(info.body.link.purpose, "invite");
  assert.equal(info.body.link.email, "bob@example.com");
  const set = await bob.json("POST", "/api/auth/local/set-password", { token: bobLink, password: "bobs own long password" });
  assert.equal(set.status, 200);
  assert.equal(set.body.user.email, "bob@example.com");
  assert.equal((await bob.json("GET", "/api/auth/me")).status, 200);
  list = await cli(server, "users", "list");
  assert.match(list.stdout, /^bob@example\.com\tBob Builder\tlocal\tactive\tyes\t/m);

  // A CLI session approved from Bob's browser session, to see the reset end it too.
  const bobCli = await cliClient(server, bob, "bob laptop");
  assert.equal((await bobCli.json("GET", "/api/projects")).status, 200);

  // A reset link: using it sets the new password and ends the sessions of the old one.
  const reset = await cli(server, "users", "reset-password", "bob@example.com");
  assert.equal(reset.code, 0, reset.stderr);
  const resetToken = tokenOf(linkFromOutput(reset.stdout));
  const other = server.client();
  assert.equal(
    (await other.json("POST", "/api/auth/local/set-password", { token: resetToken, password: "bobs newer long password" })).status,
    200,
  );
  assert.equal((await bob.json("GET", "/api/auth/me")).status, 401, "the old session ended");
  assert.equal((await bobCli.json("GET", "/api/projects")).status, 401, "the CLI session ended too");
  assert.equal((await signIn(server, "bob@example.com", "bobs own long password")).status, 401);
  assert.equal((await signIn(server, "bob@example.com", "bobs newer long password")).status, 200);
  assert.equal(
    (await other.json("POST", "/api/auth/local/set-password", { token: resetToken, password: "yet another password" })).status,
    410,
  );

  // Disable: the open session stops at once; sign-in says the account is disabled.
  const disabled = await cli(server, "users", "disable", "bob@example.com");
  assert.equal(disabled.code, 0, disabled.stderr);
  assert.match(disabled.stdout, /^Disabled bob@example\.com \(local\): ended 2 browser and 0 CLI sessions\./);
  assert.equal((await other.json("GET", "/api/auth/me")).status, 401);
  const refused = await signIn(server, "bob@example.com", "bobs newer long password");
  assert.deepEqual([refused.status, refused.body], [403, { error: "This account is disabled. Ask your administrator." }]);
  assert.equal((await signIn(server, "bob@example.com", "a wrong password")).status, 401, "only the right password learns that");
  const resetDisabled = await cli(server, "users", "reset-password", "bob@example.com");
  assert.equal(resetDisabled.code, 1);
  list = await cli(server, "users", "list");
  assert.match(list.stdout, /^bob@example\.com\tBob Builder\tlocal\tdisabled\t/m);

  const enabled = await cli(server, "users", "enable", "bob@example.com");
  assert.equal(enabled.code, 0);
  assert.equal((await signIn(server, "bob@example.com", "bobs newer long password")).status, 200);

  const missing = await cli(server, "users", "disable", "nobody@example.com");
  assert.equal(missing.code, 1);
  assert.match(missing.stderr, /No user has the e-mail nobody@example\.com\./);
  assert.equal((await cli(server, "users", "add")).code, 2);
  assert.equal((await cli(server, "users", "frobnicate")).code, 2);
});

test("users commands take exactly the arguments their usage names, and an address that could never sign in is refused", async (t) => {
  const { server } = await firstAccount(t);
  assert.equal((await cli(server, "users", "add", "bob@example.com")).code, 0);
  assert.equal((await cli(server, "users", "add", "carol@example.com")).code, 0);
  const statuses = async () => {
    const list = await cli(server, "users", "list");
    assert.equal(list.code, 0, list.stderr);
    return list.stdout
      .trim()
      .split("\n")
      .slice(1)
      .map((line) => line.split("\t").slice(0, 4).join(" "));
  };
  const before = await statuses();

  // A second address is refused, not dropped: neither is disabled.
  const two = await cli(server, "users", "disable", "bob@example.com", "carol@example.com");
  assert.equal(two.code, 2);
  assert.equal(
    two.stderr,
    "secrets-server: One e-mail address at a time: run the command once for each.\nUsage: secrets-server users disable EMAIL\n",
  );
  assert.equal(two.stdout, "");
  for (const args of [
    ["enable", "bob@example.com", "carol@example.com"],
    ["reset-password", "bob@example.com", "--force"],
    ["list", "everyone"],
    ["add", "dave@example.com", "--name"],
    ["add", "dave@example.com", "--name", "Dave", "extra"],
    ["add", "dave@example.com", "--nmae", "Dave"],
  ]) {
    const refused = await cli(server, "users", ...args);
    assert.equal(refused.code, 2, `${args.join(" ")}: ${refused.stdout}${refused.stderr}`);
    assert.match(refused.stderr, /^secrets-server: .*\nUsage: secrets-server users /, args.join(" "));
  }
  assert.deepEqual(await statuses(), before, "nothing changed");

  // --name=VALUE is the same option as --name VALUE.
  const named = await cli(server, "users", "add", "dave@example.com", "--name=Dave Davis");
  assert.equal(named.code, 0, named.stderr);
  assert.ok((await statuses()).includes("dave@example.com Dave Davis local invited"));

  // Control characters, a line break or a bidirectional override: one line each, and no account.
  for (const email of ["e\u0007ve@example.com", "eve@example.com\r", "eve@exa\nmple.com", "\u202eeve@example.com"]) {
    const refused = await cli(server, "users", "add", email);
    assert.equal(refused.code, 2, JSON.stringify(email));
    assert.match(
      refused.stderr,
      /^secrets-server: ".*" is not an e-mail address: one line with one @, no spaces or control characters\.\n/,
    );
    assert.doesNotMatch(refused.stderr.split("\n")[0]!, /[\u0000-\u001f\u202e]/);
  }
  assert.ok(!(await statuses()).some((line) => line.includes("eve")), "no account for eve");
});

test("users disable cuts off an active CLI token at once", async (t) => {
  const { server } = await firstAccount(t);
  const added = await cli(server, "users", "add", "carol@example.com");
  const carol = server.client();
  await carol.json("POST", "/api/auth/local/set-password", {
    token: tokenOf(linkFromOutput(added.stdout)),
    password: "carols long password",
  });

  const tokens = await cliLogin(server, carol, "carol laptop");
  const carolCli = server.client().withBearer(tokens.accessToken);
  assert.equal((await carolCli.json("GET", "/api/projects")).status, 200);

  const disabled = await cli(server, "users", "disable", "carol@example.com");
  assert.match(disabled.stdout, /ended 1 browser and 1 CLI sessions/);
  const after = await carolCli.json("GET", "/api/projects");
  assert.deepEqual([after.status, after.body], [401, { error: "Your CLI session has expired or was revoked. Run the CLI login command." }]);
  const refresh = await server.client().json("POST", "/api/cli/auth/refresh", { refreshToken: tokens.refreshToken });
  assert.equal(refresh.status, 401);
  assert.equal((await carol.json("GET", "/api/auth/me")).status, 401);
  // The sessions list shows live sessions only: the storage shows it was revoked, not deleted.
  const revoked = storedRows(server, "cli_sessions")[0]?.revoked_at;
  assert.ok(revoked, "the CLI session is revoked, not just refused");
});

test("a reset voids the rest: an older invite link, a sign-in approved for a terminal not picked up yet, and a session begun with the old password", async (t) => {
  const { server } = await firstAccount(t);
  const added = await cli(server, "users", "add", "dana@example.com");
  const invite = tokenOf(linkFromOutput(added.stdout));
  // The invite link leaked; the operator hands out a reset link instead.
  const reset = await cli(server, "users", "reset-password", "dana@example.com");
  assert.equal(reset.code, 0, reset.stderr);
  assert.equal((await server.client().json("POST", "/api/auth/local/link", { token: invite })).status, 410, "replaced at once");
  const dana = server.client();
  assert.equal(
    (
      await dana.json("POST", "/api/auth/local/set-password", {
        token: tokenOf(linkFromOutput(reset.stdout)),
        password: "danas long password",
      })
    ).status,
    200,
  );
  const leaked = await server.client().json("POST", "/api/auth/local/set-password", { token: invite, password: "an intruders password" });
  assert.equal(leaked.status, 410, "the invite link died with the reset link that replaced it");
  assert.equal((await signIn(server, "dana@example.com", "danas long password")).status, 200);

  // A terminal's sign-in approved from Dana's session, not yet picked up by the terminal.
  const device = await server.client().json("POST", "/api/cli/auth/device", { deviceName: "someone's laptop" });
  assert.equal((await dana.json("POST", "/api/cli/auth/approve", { userCode: device.body.userCode })).status, 200);
  const again = await cli(server, "users", "reset-password", "dana@example.com");
  assert.equal(
    (
      await server
        .client()
        .json("POST", "/api/auth/local/set-password", { token: tokenOf(linkFromOutput(again.stdout)), password: "danas newer password" })
    ).status,
    200,
  );
  const polled = await server.client().json("POST", "/api/cli/auth/token", { deviceCode: device.body.deviceCode });
  assert.deepEqual([polled.status, polled.body], [400, { status: "denied" }]);
  assert.equal(rowCount(server, "cli_sessions"), 0);

  // A sign-in that verified the old password, finishing after the reset: no session.
  const sessions = createBrowserSessionsRepo(server.app.db);
  const user = storedRows(server, "users", { email: "dana@example.com" })[0]!;
  const row = (tokenHash: string) => ({
    id: crypto.randomUUID(),
    userId: user.id as string,
    tokenHash,
    createdAt: new Date().toISOString(),
    expiresAt: new Date(Date.now() + 86_400_000).toISOString(),
  });
  const before = rowCount(server, "browser_sessions");
  assert.equal(await sessions.insert(row(hashToken("stale-password-session-token")), { passwordHash: "scrypt$15$8$1$old$hash" }), false);
  assert.equal(rowCount(server, "browser_sessions"), before);
  assert.equal(
    await sessions.insert(row(hashToken("current-password-session-token")), { passwordHash: user.password_hash as string }),
    true,
  );
  // Disabled meanwhile: no session either, even for the current password.
  assert.equal((await cli(server, "users", "disable", "dana@example.com")).code, 0);
  assert.equal(await sessions.insert(row(hashToken("disabled-user-session-token")), { passwordHash: user.password_hash as string }), false);
  assert.equal(await sessions.insert(row(hashToken("disabled-oidc-style-token"))), false);
  assert.deepEqual(storedRows(server, "browser_sessions", { user_id: user.id }), []);
});
