// The CLI as a real process (the same executable's entry point) against a real server.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { test } from "node:test";
import dotenv from "dotenv";
import { withCredentialsLock } from "../src/cli/credentials.ts";
import { type CliHome, cli, cliHome, login, startCli, startProxy } from "./cli-helpers.ts";
import { auditEvents, makeTempDir, runMain, startServer, type TestServer, waitFor } from "./helpers.ts";
import { addMember, createSecret } from "./secrets-helpers.ts";
import { createServiceAccount, createServiceToken } from "./service-account-helpers.ts";
import { rowCount, writeLegacyNames } from "./storage.ts";

const MINUTE = 60_000;

function readCredentials(home: CliHome): any {
  return JSON.parse(fs.readFileSync(home.credentialsFile, "utf8"));
}

function assertNoToken(home: CliHome, ...outputs: string[]): void {
  const stored = readCredentials(home);
  for (const credentials of Object.values(stored.servers) as any[]) {
    for (const output of outputs) {
      assert.ok(!output.includes(credentials.accessToken) && !output.includes(credentials.refreshToken), "a token was printed");
    }
  }
  for (const output of outputs) assert.ok(!/svc_(at|rt)_/.test(output), "a token was printed");
}

test("login through the browser, then whoami and projects; credentials 0600, no token printed", async (t) => {
  const server = await startServer(t);
  const home = cliHome(t);
  const alice = await server.signIn("alice@example.test", "Alice");
  const project = await alice.createProject({ name: "api", environments: ["development", "production"] });

  const result = await login(server, home, alice, ["--device-name", "test box"]);
  assert.match(result.stdout, new RegExp(`Signed in to ${server.url} as alice@example.test`));
  assert.equal(fs.statSync(home.credentialsFile).mode & 0o777, 0o600);
  const stored = readCredentials(home);
  assert.equal(stored.defaultServer, server.url);
  assert.equal(stored.servers[server.url].email, "alice@example.test");
  assert.match(stored.servers[server.url].accessToken, /^svc_at_/);
  assertNoToken(home, result.stdout, result.stderr);

  // The server knows the device by the name given.
  const sessions = (await alice.json("GET", "/api/cli/sessions")).body.sessions;
  assert.deepEqual(
    sessions.map((s: any) => s.deviceName),
    ["test box"],
  );

  const who = await cli(home, ["whoami"]);
  assert.equal(who.code, 0, who.stderr);
  assert.equal(who.stdout, `alice@example.test (Alice) on ${server.url}\n`);
  const whoJson = await cli(home, ["whoami", "--json"]);
  assert.equal(JSON.parse(whoJson.stdout).email, "alice@example.test");

  const projects = await cli(home, ["projects"]);
  assert.equal(projects.code, 0, projects.stderr);
  assert.match(projects.stdout, /^NAME\s+ID\s+ROLE\s+ENVIRONMENTS\napi\s+[0-9a-f-]{36}\s+owner\s+development,production\n$/);
  const projectsJson = await cli(home, ["projects", "--json"]);
  assert.equal(JSON.parse(projectsJson.stdout)[0].name, "api");
  assertNoToken(home, who.stdout, who.stderr, projects.stdout, projects.stderr, projectsJson.stdout);

  // Text the server sends never drives the terminal, even from rows older than the
  // server's own refusal of control characters.
  writeLegacyNames(server, {
    projectId: project.id,
    projectName: "api\u001b[2J\u202e",
    userId: alice.user!.id,
    userName: "Alice\u001b]0;owned\u0007",
  });
  const escaped = await cli(home, ["projects"]);
  assert.match(escaped.stdout, /\napi\ufffd\[2J\ufffd\s+[0-9a-f-]{36}\s+owner/);
  const whoEscaped = await cli(home, ["whoami"]);
  assert.equal(whoEscaped.stdout, `alice@example.test (Alice\ufffd]0;owned\ufffd) on ${server.url}\n`);
  for (const output of [escaped.stdout, whoEscaped.stdout]) assert.doesNotMatch(output, /[\u0000-\u0008\u000b-\u001f\u007f\u202e]/);

  // A second login on this machine ends the first session rather than leave it live, even
  // once the first one's access token has expired (a logout with it would end nothing).
  server.clock.advance(61 * 60 * 1000);
  await login(server, home, alice, ["--device-name", "test box again"]);
  const after = (await alice.json("GET", "/api/cli/sessions")).body.sessions;
  assert.deepEqual(
    after.map((s: any) => s.deviceName),
    ["test box again"],
  );
});

test("a denied login saves nothing and fails with a clear message", async (t) => {
  const server = await startServer(t);
  const home = cliHome(t);
  const alice = await server.signIn("alice@example.test");
  const proc = startCli(["login", "--server", server.url], home.env);
  const [, userCode] = await proc.waitFor(/\b([BCDFGHJKLMNPQRSTVWXZ]{4}-[BCDFGHJKLMNPQRSTVWXZ]{4})\b/);
  await alice.json("POST", "/api/cli/auth/approve", { userCode, approve: false });
  const result = await proc.done;
  assert.equal(result.code, 3);
  assert.match(result.stderr, /denied/);
  assert.ok(!fs.existsSync(home.credentialsFile));
});

test("a damaged credentials file fails login before the device flow, and a file that cannot be saved ends the new session", async (t) => {
  const server = await startServer(t);
  const alice = await server.signIn("alice@example.test");
  const home = cliHome(t);
  fs.mkdirSync(path.dirname(home.credentialsFile), { recursive: true, mode: 0o700 });
  fs.writeFileSync(home.credentialsFile, "{not json", { mode: 0o600 });
  const damaged = await cli(home, ["login", "--server", server.url, "--no-browser"]);
  assert.equal(damaged.code, 1, damaged.stderr);
  assert.match(damaged.stderr, /is damaged\. Delete it/);
  assert.doesNotMatch(damaged.stderr, /open this page/, "no login code was asked for");
  assert.equal(rowCount(server, "cli_device_requests"), 0);

  // The file becomes unreadable while the login waits (a folder in its place): approved, not saved.
  fs.rmSync(home.credentialsFile);
  const proc = startCli(["login", "--server", server.url, "--no-browser"], home.env);
  const [, userCode] = await proc.waitFor(/\b([BCDFGHJKLMNPQRSTVWXZ]{4}-[BCDFGHJKLMNPQRSTVWXZ]{4})\b/);
  fs.mkdirSync(home.credentialsFile);
  assert.equal((await alice.json("POST", "/api/cli/auth/approve", { userCode, approve: true })).status, 200);
  const result = await proc.done;
  assert.equal(result.code, 1, result.stderr);
  assert.match(result.stderr, /Cannot read/);
  assert.equal(rowCount(server, "cli_device_requests"), 1, "the login was approved and its tokens fetched");
  assert.deepEqual((await alice.json("GET", "/api/cli/sessions")).body.sessions, [], "the session nobody holds is over");
});

test("login keeps asking through a proxy's 502 and a dropped connection while the approval waits", async (t) => {
  const server = await startServer(t);
  const alice = await server.signIn("alice@example.test");
  const home = cliHome(t);
  const polls: string[] = [];
  const url = await startProxy(t, server.url, (req, res) => {
    if (req.url !== "/api/cli/auth/token") return false;
    polls.push("poll");
    if (polls.length === 1) {
      res.writeHead(502, { "content-type": "text/html" }).end("<h1>Bad Gateway</h1>");
      return true;
    }
    if (polls.length === 2) {
      req.socket.destroy();
      return true;
    }
    return false;
  });
  const proc = startCli(["login", "--server", url, "--no-browser"], home.env);
  const [, userCode] = await proc.waitFor(/\b([BCDFGHJKLMNPQRSTVWXZ]{4}-[BCDFGHJKLMNPQRSTVWXZ]{4})\b/);
  await waitFor("two failed polls", async () => polls.length >= 2);
  assert.equal((await alice.json("POST", "/api/cli/auth/approve", { userCode })).status, 200);
  const result = await proc.done;
  assert.equal(result.code, 0, result.output);
  assert.match(result.stdout, /Signed in to .* as alice@example\.test/);
  // The two failed polls came first; a slow approval may add a pending one before the tokens.
  assert.ok(polls.length >= 3, String(polls.length));
});

test("login and refresh refuse answers that are not the API's: nothing is saved that works nowhere", async (t) => {
  const server = await startServer(t);
  const alice = await server.signIn("alice@example.test");
  const home = cliHome(t);
  let answer: "page" | "no interval" | "no tokens" | "through" = "page";
  const url = await startProxy(t, server.url, (req, res) => {
    if (answer === "page" && req.url === "/api/cli/auth/device") {
      // A server URL with a path, or a proxy's sign-in page: 200 with HTML.
      res.writeHead(200, { "content-type": "text/html" }).end("<!doctype html><title>Sign in</title>");
      return true;
    }
    if (answer === "no interval" && req.url === "/api/cli/auth/device") {
      // Without an interval and a lifetime the CLI would poll without pause, and forever.
      res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ deviceCode: "d", userCode: "BCDF-GHJK" }));
      return true;
    }
    if (answer === "no tokens" && (req.url === "/api/cli/auth/token" || req.url === "/api/cli/auth/refresh")) {
      res.writeHead(200, { "content-type": "application/json" }).end("{}");
      return true;
    }
    return false;
  });
  const page = await cli(home, ["login", "--server", url, "--no-browser"]);
  assert.deepEqual(
    [page.code, page.stdout, page.stderr],
    [
      1,
      "",
      `secrets-server: ${url} answered /api/cli/auth/device with text/html, not the API's JSON: is ${url} the secrets server's address?\n`,
    ],
  );

  answer = "no interval";
  const noInterval = await cli(home, ["login", "--server", url, "--no-browser"]);
  assert.equal(noInterval.code, 1, noInterval.stderr);
  assert.match(noInterval.stderr, /answered \/api\/cli\/auth\/device without what the API sends/);

  answer = "no tokens";
  const noTokens = startCli(["login", "--server", url, "--no-browser"], home.env);
  const [, userCode] = await noTokens.waitFor(/\b([BCDFGHJKLMNPQRSTVWXZ]{4}-[BCDFGHJKLMNPQRSTVWXZ]{4})\b/);
  assert.equal((await alice.json("POST", "/api/cli/auth/approve", { userCode })).status, 200);
  const refused = await noTokens.done;
  assert.equal(refused.code, 1, refused.output);
  assert.match(refused.stderr, /answered \/api\/cli\/auth\/token without the tokens the API sends/);
  assert.equal(fs.existsSync(home.credentialsFile), false, "nothing saved");

  // Signed in for real; then a refresh answered without tokens leaves the saved pair as it was.
  answer = "through";
  await login(server, home, alice, ["--server", url, "--no-browser"]);
  const saved = fs.readFileSync(home.credentialsFile, "utf8");
  server.clock.advance(61 * 60 * 1000);
  answer = "no tokens";
  const refresh = await cli(home, ["projects", "--server", url]);
  assert.equal(refresh.code, 1, refresh.stderr);
  assert.match(refresh.stderr, /answered \/api\/cli\/auth\/refresh without the tokens the API sends/);
  assert.equal(fs.readFileSync(home.credentialsFile, "utf8"), saved);
});

test("clear failures: not signed in, server unreachable, bad usage", async (t) => {
  const server = await startServer(t);
  const home = cliHome(t);
  const notSignedIn = await cli(home, ["projects", "--server", server.url]);
  assert.equal(notSignedIn.code, 3);
  assert.equal(notSignedIn.stderr, `secrets-server: Not signed in to ${server.url}. Run: secrets-server login --server ${server.url}\n`);

  const alice = await server.signIn("alice@example.test");
  await login(server, home, alice, ["--device-name", "test box"]);
  await server.stop();
  const down = await cli(home, ["projects"]);
  assert.equal(down.code, 5);
  assert.match(down.stderr, new RegExp(`^secrets-server: Could not reach ${server.url} \\(ECONNREFUSED\\)`));

  const usage = await cli(home, ["run", "--project", "x", "--env", "development"]);
  assert.equal(usage.code, 2);
  assert.match(usage.stderr, /Put the command after --/);
  const badEnv = await cli(home, ["secrets", "list", "--project", "x", "--env", "qa"]);
  assert.equal(badEnv.code, 2);
  assert.match(badEnv.stderr, /Unknown environment "qa"/);
  const unknownFlag = await cli(home, ["projects", "--bogus"]);
  assert.equal(unknownFlag.code, 2);
});

test("the access token is refreshed by itself after expiry, once, even by two processes at a time", async (t) => {
  const server = await startServer(t);
  const home = cliHome(t);
  const alice = await server.signIn("alice@example.test");
  await alice.createProject({ name: "api", environments: ["development"] });
  await login(server, home, alice, ["--device-name", "test box"]);
  const first = readCredentials(home).servers[server.url];

  // The server's clock moves past the 60 minutes; the CLI's own clock does not, so it
  // learns of the expiry from the 401 and refreshes.
  server.clock.advance(61 * MINUTE);
  const after = await cli(home, ["projects"]);
  assert.equal(after.code, 0, after.stderr);
  const second = readCredentials(home).servers[server.url];
  assert.notEqual(second.accessToken, first.accessToken);
  assert.notEqual(second.refreshToken, first.refreshToken);
  assert.equal(fs.statSync(home.credentialsFile).mode & 0o777, 0o600);

  // Two processes find the token expired at once: the lock makes one refresh and the
  // other use its result. Presenting the same refresh token twice would revoke the session.
  server.clock.advance(61 * MINUTE);
  const both = await Promise.all([cli(home, ["projects"]), cli(home, ["whoami"])]);
  for (const r of both) assert.equal(r.code, 0, r.stderr);
  const third = await cli(home, ["projects"]);
  assert.equal(third.code, 0, third.stderr);
  assert.equal((await alice.json("GET", "/api/cli/sessions")).body.sessions.length, 1);
  assert.ok(!fs.existsSync(`${home.credentialsFile}.lock`));
  assert.ok(!server.logs.some((l) => l.includes("refresh token reused")));
});

test("the credentials lock: a dead holder's lock is broken; a release leaves a lock another process took over", async (t) => {
  const home = cliHome(t);
  const lock = `${home.credentialsFile}.lock`;
  fs.mkdirSync(path.dirname(lock), { recursive: true });
  // A pid no process has: its lock is stale at once.
  fs.writeFileSync(lock, "2147483646\n");
  const inside = await withCredentialsLock(async () => fs.readFileSync(lock, "utf8"), home.env);
  assert.match(inside, new RegExp(`^${process.pid} [0-9a-f]{16} pid:\\[\\d+\\]\n$`));
  assert.ok(!fs.existsSync(lock));

  // Held too long, the lock was broken and taken by another process: releasing ours keeps theirs.
  await withCredentialsLock(async () => fs.writeFileSync(lock, "1 another\n"), home.env);
  assert.equal(fs.readFileSync(lock, "utf8"), "1 another\n");
  fs.rmSync(lock);

  // A lock written in another PID namespace (another container on a shared volume): its pid
  // says nothing here, dead or alive, so only its age makes it stale.
  fs.writeFileSync(lock, "2147483646 abcdef pid:[1]\n");
  const waiting = withCredentialsLock(async () => fs.readFileSync(lock, "utf8"), home.env);
  await new Promise((resolve) => setTimeout(resolve, 300));
  assert.equal(fs.readFileSync(lock, "utf8"), "2147483646 abcdef pid:[1]\n", "not broken for its pid");
  const minuteAgo = new Date(Date.now() - 61_000);
  fs.utimesSync(lock, minuteAgo, minuteAgo);
  assert.match(await waiting, new RegExp(`^${process.pid} [0-9a-f]{16} `));

  // Two holders in one process (requests refreshing at once) take turns: the second does not
  // take the first's lock, with our pid in it, for a stale one.
  const order: string[] = [];
  const hold = (name: string) =>
    withCredentialsLock(async () => {
      order.push(`${name} in`);
      await new Promise((resolve) => setTimeout(resolve, 150));
      order.push(`${name} out`);
    }, home.env);
  await Promise.all([hold("first"), hold("second")]);
  assert.deepEqual(order, ["first in", "first out", "second in", "second out"]);

  // A stale lock another process is breaking (its .break file) is left to it; a .break left
  // by a breaker that died is cleared after 10 s, and then the stale lock is broken.
  const breaker = `${lock}.break`;
  fs.writeFileSync(lock, "2147483646\n");
  fs.writeFileSync(breaker, "2147483645 breaking\n");
  const old = new Date(Date.now() - 11_000);
  fs.utimesSync(breaker, old, old);
  await withCredentialsLock(async () => undefined, home.env);
  assert.ok(!fs.existsSync(lock));
  assert.ok(!fs.existsSync(breaker));
});

test("a revoked session: exit code 3 and the login hint; logout ends the session on the server", async (t) => {
  const server = await startServer(t);
  const home = cliHome(t);
  const alice = await server.signIn("alice@example.test");
  await login(server, home, alice, ["--device-name", "test box"]);
  assert.deepEqual((await alice.json("DELETE", "/api/cli/sessions")).body, { revoked: 1 });
  const revoked = await cli(home, ["projects"]);
  assert.equal(revoked.code, 3);
  assert.equal(
    revoked.stderr,
    // The server of the last login: `login` alone goes back to it.
    `secrets-server: Your CLI session for ${server.url} has expired or was revoked. Run: secrets-server login\n`,
  );

  await login(server, home, alice, ["--device-name", "test box"]);
  const out = await cli(home, ["logout"]);
  assert.equal(out.code, 0, out.stderr);
  assert.equal(out.stdout, `Signed out of ${server.url}.\n`);
  assert.deepEqual((await alice.json("GET", "/api/cli/sessions")).body, { sessions: [] });
  assert.deepEqual(readCredentials(home).servers, {});
  const again = await cli(home, ["logout", "--server", server.url]);
  assert.equal(again.code, 0);
  assert.equal(again.stdout, `Not signed in to ${server.url}.\n`);
});

test("secrets set, get and list; run passes secrets, stdin and the exit code; export reads back with dotenv", async (t) => {
  const server = await startServer(t);
  const home = cliHome(t);
  const alice = await server.signIn("alice@example.test");
  const project = await alice.createProject({ name: "api", environments: ["development", "production"] });
  await login(server, home, alice, ["--device-name", "test box"]);
  const tricky = "multi\nline 'quoted' \"double\" $HOME # not a comment";
  await createSecret(alice, project.id, "production", "TRICKY_VALUE", tricky);
  await createSecret(alice, project.id, "production", "DATABASE_URL", "postgres://u:p@db/app");
  const target = ["--project", "api", "--env", "prod"];

  // Production writes without a terminal to confirm on take --yes (see cli-commands.test.ts).
  const set = await cli(home, ["secrets", "set", "API_KEY", ...target, "--from-stdin", "--yes"], { input: "s3cr3t-from-stdin\n" });
  assert.equal(set.code, 0, set.stderr);
  assert.equal(set.stdout, "Created API_KEY in production (version 1).\n");
  const update = await cli(home, ["secrets", "set", "API_KEY", "second value", ...target, "--yes"]);
  assert.equal(update.stdout, "Updated API_KEY in production (version 2).\n");
  assert.ok(!set.stdout.includes("s3cr3t") && !update.stdout.includes("second value"));
  const same = await cli(home, ["secrets", "set", "API_KEY", "second value", ...target, "--yes"]);
  assert.equal(same.code, 0, same.stderr);
  assert.equal(same.stdout, "API_KEY in production already has this value (version 2): nothing changed.\n");

  const get = await cli(home, ["secrets", "get", "API_KEY", ...target]);
  assert.equal(get.code, 0, get.stderr);
  assert.equal(get.stdout, "second value\n");
  const list = await cli(home, ["secrets", "list", ...target, "--json"]);
  assert.deepEqual(
    JSON.parse(list.stdout).map((s: any) => s.key),
    ["API_KEY", "DATABASE_URL", "TRICKY_VALUE"],
  );
  assert.ok(!list.stdout.includes("second value"));
  const listTable = await cli(home, ["secrets", "list", ...target]);
  assert.match(listTable.stdout, /^API_KEY\t2\t\S+Z\nDATABASE_URL\t1\t\S+Z\nTRICKY_VALUE\t1\t\S+Z\n$/);
  const missing = await cli(home, ["secrets", "get", "NOPE", ...target]);
  assert.equal(missing.code, 4);

  // run: the secrets arrive in the environment, stdin goes through, the exit code comes back.
  const script =
    "let s='';process.stdin.on('data',d=>s+=d).on('end',()=>{process.stdout.write(JSON.stringify({api:process.env.API_KEY,tricky:process.env.TRICKY_VALUE,stdin:s}));process.exit(7)})";
  const ran = await cli(home, ["run", ...target, "--", process.execPath, "-e", script], { input: "piped in" });
  assert.equal(ran.code, 7, ran.stderr);
  assert.deepEqual(JSON.parse(ran.stdout), { api: "second value", tricky, stdin: "piped in" });
  const ok = await cli(home, ["run", ...target, "--", process.execPath, "-e", "process.exit(0)"]);
  assert.equal(ok.code, 0);
  const notFound = await cli(home, ["run", ...target, "--", "no-such-command-here"]);
  assert.equal(notFound.code, 127);

  // export: a dotenv file, owner-only, that the dotenv package reads back exactly.
  const file = path.join(home.dir, "prod.env");
  const exported = await cli(home, ["export", ...target, "--output", file]);
  assert.equal(exported.code, 0, exported.stderr);
  assert.equal(fs.statSync(file).mode & 0o777, 0o600);
  assert.deepEqual(dotenv.parse(fs.readFileSync(file, "utf8")), {
    API_KEY: "second value",
    DATABASE_URL: "postgres://u:p@db/app",
    TRICKY_VALUE: tricky,
  });
  const json = await cli(home, ["export", ...target, "--format", "json"]);
  assert.deepEqual(JSON.parse(json.stdout), { API_KEY: "second value", DATABASE_URL: "postgres://u:p@db/app", TRICKY_VALUE: tricky });
  assertNoToken(home, set.stdout, get.stdout, ran.stdout, ran.stderr, exported.stderr, json.stdout);

  // Audit entries of these reads and writes say via: cli.
  const rows = (await auditEvents(alice, project.id)).filter(
    (e) => ["secret.created", "secret.updated", "secret.revealed", "secrets.exported"].includes(e.action) && e.actor === alice.user!.id,
  );
  const viaCli = rows.filter((r) => r.metadata.via === "cli");
  assert.ok(viaCli.length >= 5);
});

test("link remembers project and environment for the folder", async (t) => {
  const server = await startServer(t);
  const home = cliHome(t);
  const alice = await server.signIn("alice@example.test");
  const project = await alice.createProject({ name: "web", environments: ["staging"] });
  await createSecret(alice, project.id, "staging", "GREETING_TEXT", "hello");
  await login(server, home, alice, ["--device-name", "test box"]);
  const folder = path.join(home.dir, "app");
  fs.mkdirSync(path.join(folder, "sub"), { recursive: true });

  const wrongEnv = await cli(home, ["link", "--project", "web", "--env", "production"], { cwd: folder });
  assert.equal(wrongEnv.code, 4, wrongEnv.stderr);
  const linked = await cli(home, ["link", "--project", "WEB", "--env", "staging"], { cwd: folder });
  assert.equal(linked.code, 0, linked.stderr);
  const link = JSON.parse(fs.readFileSync(path.join(folder, ".secrets-server.json"), "utf8"));
  assert.deepEqual(link, { server: server.url, projectId: project.id, projectName: "web", environment: "staging" });

  const ran = await cli(home, ["run", "--", process.execPath, "-e", "process.stdout.write(process.env.GREETING_TEXT)"], {
    cwd: path.join(folder, "sub"),
  });
  assert.equal(ran.code, 0, ran.stderr);
  assert.equal(ran.stdout, "hello");

  // Joining someone's project of the same name gives alice two "web"s: a name no longer says which.
  const bob = await server.signIn("bob@example.test");
  const bobs = await bob.createProject({ name: "Web", environments: ["staging"] });
  await addMember(bob, alice, bobs.id, "member", ["staging"]);
  const ambiguous = await cli(home, ["secrets", "list", "--project", "web", "--env", "staging"]);
  assert.equal(ambiguous.code, 2, ambiguous.stderr);
  assert.match(ambiguous.stderr, /2 of your projects are named "web": name one by its id with --project/);
  assert.ok(ambiguous.stderr.includes(project.id) && ambiguous.stderr.includes(bobs.id), ambiguous.stderr);
  const byId = await cli(home, ["secrets", "list", "--project", project.id, "--env", "staging"]);
  assert.equal(byId.code, 0, byId.stderr);

  // A damaged link file above the folder is reported, unless everything is named anyway.
  const outside = path.join(home.dir, "outside");
  fs.mkdirSync(path.join(outside, "work"), { recursive: true });
  fs.writeFileSync(path.join(outside, ".secrets-server.json"), "{ not json");
  const print = ["--", process.execPath, "-e", "process.stdout.write(process.env.GREETING_TEXT)"];
  const damaged = await cli(home, ["run", ...print], { cwd: path.join(outside, "work") });
  assert.equal(damaged.code, 2, damaged.stderr);
  assert.match(damaged.stderr, /is not a valid link file/);
  const named = ["--project", project.id, "--env", "staging", "--server", server.url];
  const allNamed = await cli(home, ["run", ...named, ...print], { cwd: path.join(outside, "work") });
  assert.deepEqual([allNamed.code, allNamed.stdout], [0, "hello"], allNamed.stderr);
});

test("a link file another user owns (planted in a shared folder above) is not followed, unless by root", {
  skip: process.getuid?.() !== 0 && "acting as other users needs root",
}, async (t) => {
  const server = await startServer(t);
  const alice = await server.signIn("alice@example.test");
  const project = await alice.createProject({ name: "web", environments: ["development", "staging"] });
  await createSecret(alice, project.id, "staging", "GREETING_TEXT", "hello");
  // A service token for both environments: the link file says which one.
  const account = await createServiceAccount(alice, project.id, { name: "ci", role: "viewer", environments: ["development", "staging"] });
  const { token } = await createServiceToken(alice, project.id, account.id);
  const me = 4243;
  const shared = makeTempDir();
  fs.mkdirSync(path.join(shared, "work", "home"), { recursive: true });
  for (const dir of [shared, path.join(shared, "work")]) fs.chmodSync(dir, 0o755);
  fs.chownSync(path.join(shared, "work", "home"), me, me);
  const link = path.join(shared, ".secrets-server.json");
  fs.writeFileSync(link, JSON.stringify({ server: server.url, projectId: project.id, projectName: "web", environment: "staging" }));
  const env = { HOME: path.join(shared, "work", "home"), SECRETS_SERVER_TOKEN: token, SECRETS_SERVER_URL: server.url };
  const print = ["run", "--", process.execPath, "-e", "process.stdout.write(process.env.GREETING_TEXT ?? 'unset')"];
  const runAs = (uid?: number) => runMain(print, env, { cwd: path.join(shared, "work"), uid, timeoutMs: 60_000 });

  fs.chownSync(link, me, me);
  const own = await runAs(me);
  assert.deepEqual([own.code, own.stdout], [0, "hello"], `a link file of one's own is followed: ${own.stderr}`);

  fs.chownSync(link, 4242, 4242);
  const planted = await runAs(me);
  assert.equal(planted.code, 2, planted.stderr);
  assert.match(planted.stderr, /\.secrets-server\.json belongs to another user \(uid 4242\): it is not used\./);
  assert.equal(planted.stdout, "");
  // A symbolic link of another user's to a file of one's own counts with its own owner.
  fs.chownSync(link, me, me);
  fs.renameSync(link, path.join(shared, "work", "home", "mine.json"));
  fs.symlinkSync(path.join(shared, "work", "home", "mine.json"), link);
  fs.lchownSync(link, 4242, 4242);
  const linked = await runAs(me);
  assert.deepEqual([linked.code, linked.stdout], [2, ""]);
  assert.match(linked.stderr, /\.secrets-server\.json belongs to another user \(uid 4242\): it is not used\./);

  // Root works in checkouts another uid owns (a container job): it follows them.
  const asRoot = await runAs(undefined);
  assert.deepEqual([asRoot.code, asRoot.stdout], [0, "hello"], asRoot.stderr);
});

test("run --fallback uses the encrypted last copy when the server is down, within --fallback-max-age", async (t) => {
  const server = await startServer(t);
  const home = cliHome(t);
  const alice = await server.signIn("alice@example.test");
  const project = await alice.createProject({ name: "api", environments: ["development"] });
  await createSecret(alice, project.id, "development", "RAINY_DAY_TOKEN", "kept-for-a-rainy-day");
  await login(server, home, alice, ["--device-name", "test box"]);
  const target = ["--project", project.id, "--env", "development"];
  const print = ["--", process.execPath, "-e", "process.stdout.write(process.env.RAINY_DAY_TOKEN ?? 'unset')"];

  const online = await cli(home, ["run", "--fallback", ...target, ...print]);
  assert.equal(online.code, 0, online.stderr);
  assert.equal(online.stdout, "kept-for-a-rainy-day");
  // The copy is encrypted: the value is nowhere in the config folder in the clear.
  const configDir = path.join(home.dir, "config", "secrets-server");
  const files = fs.readdirSync(path.join(configDir, "fallback")).filter((f) => f.endsWith(".bin"));
  assert.equal(files.length, 1);
  for (const f of files) {
    const full = path.join(configDir, "fallback", f);
    assert.equal(fs.statSync(full).mode & 0o777, 0o600);
    assert.ok(!fs.readFileSync(full).toString("latin1").includes("kept-for-a-rainy-day"));
  }
  assert.match(readCredentials(home).fallbackKey, /^[A-Za-z0-9+/]{43}=$/);
  // The index that lets logout find a server's copies: 0600 too, and no temporary file left.
  const index = path.join(configDir, "fallback", "index.json");
  assert.deepEqual(JSON.parse(fs.readFileSync(index, "utf8")), { [server.url]: files });
  assert.equal(fs.statSync(index).mode & 0o777, 0o600);
  assert.deepEqual(fs.readdirSync(path.join(configDir, "fallback")).sort(), [...files, "index.json"].sort());

  await server.stop();
  const offline = await cli(home, ["run", "--fallback", ...target, ...print]);
  assert.equal(offline.code, 0, offline.stderr);
  assert.equal(offline.stdout, "kept-for-a-rainy-day");
  assert.match(offline.stderr, /^Warning: Could not reach .*\nUsing the fallback copy of api \/ development saved \d+s ago\.\n$/);
  const exported = await cli(home, ["export", "--fallback", "--format", "json", ...target]);
  assert.deepEqual(JSON.parse(exported.stdout), { RAINY_DAY_TOKEN: "kept-for-a-rainy-day" });

  const tooOld = await cli(home, ["run", "--fallback", "--fallback-max-age", "0s", ...target, ...print]);
  assert.equal(tooOld.code, 5);
  assert.match(tooOld.stderr, /^secrets-server: Could not reach .*\n.*older than --fallback-max-age/);
  assert.equal(tooOld.stdout, "");
  const without = await cli(home, ["run", ...target, ...print]);
  assert.equal(without.code, 5);
  assert.equal(without.stdout, "");

  // Logout, even with the server down, deletes the server's copies.
  const out = await cli(home, ["logout"]);
  assert.equal(out.code, 0, out.stderr);
  assert.deepEqual(fs.readdirSync(path.join(configDir, "fallback")), ["index.json"]);
  assert.deepEqual(JSON.parse(fs.readFileSync(index, "utf8")), {});
});

test("logout deletes a server's fallback copies also when a revoked session was already forgotten", async (t) => {
  const server = await startServer(t);
  const home = cliHome(t);
  const alice = await server.signIn("alice@example.test");
  const project = await alice.createProject({ name: "api", environments: ["development"] });
  await createSecret(alice, project.id, "development", "RAINY_DAY_TOKEN", "kept-for-a-rainy-day");
  await login(server, home, alice);
  const target = ["--project", project.id, "--env", "development"];
  const online = await cli(home, ["run", "--fallback", ...target, "--", "true"]);
  assert.equal(online.code, 0, online.stderr);
  const fallbackDir = path.join(home.dir, "config", "secrets-server", "fallback");
  assert.equal(fs.readdirSync(fallbackDir).filter((f) => f.endsWith(".bin")).length, 1);

  // Revoked in the browser: the next command finds out and forgets the session.
  assert.equal((await alice.json("DELETE", "/api/cli/sessions")).status, 200);
  const refused = await cli(home, ["secrets", "list", ...target]);
  assert.equal(refused.code, 3, refused.stderr);
  assert.equal(readCredentials(home).servers[server.url], undefined);

  const out = await cli(home, ["logout"]);
  assert.equal(out.code, 0, out.stderr);
  assert.equal(out.stdout, `Not signed in to ${server.url}.\n`);
  assert.deepEqual(fs.readdirSync(fallbackDir), ["index.json"]);
  assert.deepEqual(JSON.parse(fs.readFileSync(path.join(fallbackDir, "index.json"), "utf8")), {});

  // On a machine that never signed in, logout creates nothing (a read-only HOME stays fine).
  const fresh = cliHome(t);
  const nothing = await cli(fresh, ["logout", "--server", server.url]);
  assert.deepEqual([nothing.code, nothing.stdout], [0, `Not signed in to ${server.url}.\n`], nothing.stderr);
  assert.equal(fs.existsSync(path.join(fresh.dir, "config")), false);
});

test("a redirect (a sign-in proxy in front of the server) is an answer: exit 1, and the fallback copy is not used", async (t) => {
  const server = await startServer(t);
  const home = cliHome(t);
  const alice = await server.signIn("alice@example.test");
  const project = await alice.createProject({ name: "api", environments: ["development"] });
  await createSecret(alice, project.id, "development", "RAINY_DAY_TOKEN", "kept-for-a-rainy-day");
  // A proxy that passes requests on, until it starts sending everyone to a sign-in page.
  let signInFirst = false;
  const proxyUrl = await startProxy(t, server.url, (_req, res) => {
    if (!signInFirst) return false;
    res.writeHead(302, { location: "https://sso.example.test/authorize?state=opaque-state-4242" });
    res.end();
    return true;
  });
  await login({ url: proxyUrl } as TestServer, home, alice);
  const args = [
    "--project",
    project.id,
    "--env",
    "development",
    "--",
    process.execPath,
    "-e",
    "process.stdout.write(process.env.RAINY_DAY_TOKEN ?? 'unset')",
  ];
  const online = await cli(home, ["run", "--fallback", ...args]);
  assert.deepEqual([online.code, online.stdout], [0, "kept-for-a-rainy-day"], online.stderr);

  signInFirst = true;
  const redirected = await cli(home, ["run", "--fallback", ...args]);
  assert.equal(redirected.code, 1, redirected.stderr);
  assert.equal(redirected.stdout, "", "the command did not run on the copy");
  assert.match(redirected.stderr, /answered with a redirect to https:\/\/sso\.example\.test, which the CLI does not follow/);
  assert.doesNotMatch(redirected.stderr, /opaque-state/);
});

test("run passes signals to the command and returns its exit code", async (t) => {
  const server = await startServer(t);
  const home = cliHome(t);
  const alice = await server.signIn("alice@example.test");
  const project = await alice.createProject({ name: "api", environments: ["development"] });
  await login(server, home, alice, ["--device-name", "test box"]);
  const script =
    "process.on('SIGUSR1',()=>process.stdout.write('got SIGUSR1\\n'));" +
    "process.on('SIGTERM',()=>{process.stdout.write('got SIGTERM');process.exit(42)});process.stdout.write('ready\\n');setInterval(()=>{},1000)";
  const proc = startCli(["run", "--project", "api", "--env", "development", "--", process.execPath, "-e", script], home.env);
  await proc.waitFor(/ready/);
  // SIGUSR1 reaches the command, and opens no Node inspector in the CLI (which would let any
  // local user read its token and the secrets).
  proc.child.kill("SIGUSR1");
  await proc.waitFor(/got SIGUSR1/);
  assert.doesNotMatch(proc.stderr(), /Debugger listening/);
  proc.child.kill("SIGTERM");
  const result = await proc.done;
  assert.equal(result.code, 42, result.stderr);
  assert.match(result.stdout, /got SIGTERM/);

  // SIGUSR1 before run has a command to pass it to (its export held at a proxy): the CLI's
  // own answer, not Node's, which opens the inspector. Sent after run's listener (above), it
  // could not tell the two apart.
  const held = Promise.withResolvers<void>();
  const atExport = Promise.withResolvers<void>();
  const proxy = await startProxy(t, server.url, async (req) => {
    if (req.url?.includes("/export")) {
      atExport.resolve();
      await held.promise;
    }
    return false;
  });
  const account = await createServiceAccount(alice, project.id, { name: "signal-bot", role: "viewer", environments: ["development"] });
  const { token } = await createServiceToken(alice, project.id, account.id);
  const early = startCli(
    ["run", "--project", "api", "--env", "development", "--", process.execPath, "-e", "process.stdout.write('ran\\n')"],
    {
      ...home.env,
      SECRETS_SERVER_TOKEN: token,
      SECRETS_SERVER_URL: proxy,
    },
  );
  await atExport.promise;
  early.child.kill("SIGUSR1");
  // Node's inspector says so on stderr as soon as it listens.
  await new Promise((resolve) => setTimeout(resolve, 500));
  held.resolve();
  const earlyResult = await early.done;
  assert.equal(earlyResult.code, 0, earlyResult.stderr);
  assert.match(earlyResult.stdout, /ran/);
  assert.doesNotMatch(earlyResult.stderr, /Debugger listening/);

  // A command killed by a signal: the CLI ends the same way.
  const killed = await cli(home, [
    "run",
    "--project",
    "api",
    "--env",
    "development",
    "--",
    process.execPath,
    "-e",
    "process.kill(process.pid,'SIGKILL')",
  ]);
  assert.equal(killed.code, null);

  // A command that cannot start: the shell's codes and one line, never a stack.
  const missing = await cli(home, ["run", "--project", "api", "--env", "development", "--", "no-such-command-here"]);
  assert.deepEqual([missing.code, missing.stderr.trim()], [127, "secrets-server: cannot run no-such-command-here: command not found"]);
  // Arguments that just fit the kernel's limit (ARG_MAX, for arguments and environment
  // together) when the CLI starts, and 250 KB of secrets that do not: spawn throws E2BIG
  // rather than report an error event.
  const argMax = Number(execFileSync("getconf", ["ARG_MAX"], { encoding: "utf8" }).trim());
  const args = Array.from({ length: Math.floor((argMax - 150_000) / 100_000) }, () => "x".repeat(99_999));
  const entries = Array.from({ length: 25 }, (_, i) => ({ key: `LARGE_${i}`, value: "v".repeat(10_000), overwrite: false }));
  const imported = await alice.json("POST", `/api/projects/${project.id}/environments/development/import`, { entries });
  assert.equal(imported.status, 200, JSON.stringify(imported.body));
  const tooBig = await cli(home, ["run", "--project", "api", "--env", "development", "--", "true", ...args]);
  assert.deepEqual([tooBig.code, tooBig.stderr.trim()], [126, "secrets-server: cannot run true: spawn E2BIG"]);
});

test("run leaves out secrets that would choose which code runs, unless named with --allow-env", async (t) => {
  const server = await startServer(t);
  const home = cliHome(t);
  const alice = await server.signIn("alice@example.test");
  const project = await alice.createProject({ name: "deploy", environments: ["production"] });
  await createSecret(alice, project.id, "production", "LD_PRELOAD", "/tmp/planted.so");
  await createSecret(alice, project.id, "production", "NODE_OPTIONS", "--max-old-space-size=123");
  await createSecret(alice, project.id, "production", "PATH", "/tmp/planted-bin");
  await createSecret(alice, project.id, "production", "APP_MODE", "live");
  await login(server, home, alice, ["--device-name", "test box"]);
  const target = ["--project", "deploy", "--env", "production"];
  const show = [
    "--",
    process.execPath,
    "-e",
    "process.stdout.write(JSON.stringify([process.env.LD_PRELOAD, process.env.NODE_OPTIONS, process.env.PATH, process.env.APP_MODE]))",
  ];

  const guarded = await cli(home, ["run", ...target, ...show]);
  assert.equal(guarded.code, 0, guarded.stderr);
  const [ldPreload, nodeOptions, pathVar, appMode] = JSON.parse(guarded.stdout);
  assert.equal(ldPreload, null);
  assert.equal(nodeOptions, null);
  assert.equal(pathVar, process.env.PATH, "the inherited PATH, not the secret");
  assert.equal(appMode, "live");
  assert.match(
    guarded.stderr,
    /^secrets-server: left out LD_PRELOAD, NODE_OPTIONS, PATH: not named like application settings, and variables like these choose which code runs\. If you trust them, add --allow-env LD_PRELOAD --allow-env NODE_OPTIONS --allow-env PATH \(or SECRETS_SERVER_ALLOW_ENV=LD_PRELOAD,NODE_OPTIONS,PATH\)\. See secrets-server run --help\.\n$/,
  );
  assert.ok(!guarded.stderr.includes("/tmp/planted"), "values are never printed");

  const allowed = await cli(home, ["run", ...target, "--allow-env", "NODE_OPTIONS", ...show]);
  assert.equal(allowed.code, 0, allowed.stderr);
  assert.equal(JSON.parse(allowed.stdout)[1], "--max-old-space-size=123");
  assert.equal(JSON.parse(allowed.stdout)[0], null);
});

test("a link file cannot lead the CLI to a server it has not signed in to; plain http only on loopback", async (t) => {
  const server = await startServer(t);
  const home = cliHome(t);
  const alice = await server.signIn("alice@example.test");
  await alice.createProject({ name: "web", environments: ["staging"] });
  await login(server, home, alice, ["--device-name", "test box"]);
  // A repository arrives with a link file naming another server.
  const repo = path.join(home.dir, "cloned");
  fs.mkdirSync(repo);
  const elsewhere = "http://127.0.0.2:9";
  fs.writeFileSync(path.join(repo, ".secrets-server.json"), JSON.stringify({ server: elsewhere, projectId: "x", environment: "staging" }));

  const listed = await cli(home, ["secrets", "list"], { cwd: repo });
  assert.equal(listed.code, 3);
  assert.match(
    listed.stderr,
    /names the server http:\/\/127\.0\.0\.2:9, where this machine is not signed in\. If you trust that server, sign in to it first/,
  );
  // login never takes its server from a link file: here it goes to the last server signed in to.
  const started = startCli(["login", "--no-browser", "--device-name", "repo box"], home.env, { cwd: repo });
  await started.waitFor(/\b[BCDFGHJKLMNPQRSTVWXZ]{4}-[BCDFGHJKLMNPQRSTVWXZ]{4}\b/);
  assert.ok(started.stderr().includes(`signed in to ${server.url}`), started.stderr());
  started.child.kill("SIGINT");
  await started.done;

  // Tokens never travel in clear text to another machine.
  const plain = await cli(home, ["projects", "--server", "http://secrets.example.test"]);
  assert.equal(plain.code, 2);
  assert.match(
    plain.stderr,
    /http:\/\/secrets\.example\.test uses plain http, which would send your tokens and secrets unencrypted\. Use https, or set SECRETS_SERVER_ALLOW_HTTP=1/,
  );
});

test("export --output writes a new 0600 file in one step: a planted file or symlink is replaced, never written through", async (t) => {
  const server = await startServer(t);
  const home = cliHome(t);
  const alice = await server.signIn("alice@example.test");
  const project = await alice.createProject({ name: "api", environments: ["development"] });
  await createSecret(alice, project.id, "development", "TOKEN", "planted-test-value");
  await login(server, home, alice, ["--device-name", "test box"]);
  const folder = path.join(home.dir, "shared");
  fs.mkdirSync(folder);
  const victim = path.join(home.dir, "victim.txt");
  fs.writeFileSync(victim, "untouched");
  const target = path.join(folder, ".env");
  fs.symlinkSync(victim, target);

  const exported = await cli(home, ["export", "--project", "api", "--env", "development", "--output", target]);
  assert.equal(exported.code, 0, exported.stderr);
  assert.equal(fs.readFileSync(victim, "utf8"), "untouched");
  assert.equal(fs.lstatSync(target).isSymbolicLink(), false);
  assert.equal(fs.statSync(target).mode & 0o777, 0o600);
  assert.match(fs.readFileSync(target, "utf8"), /^TOKEN=/m);
  assert.deepEqual(fs.readdirSync(folder), [".env"], "no temporary file left behind");

  // A folder that is not there: one clear line and exit 1, not an unexpected error.
  const missing = path.join(folder, "no-such-folder", ".env");
  const refused = await cli(home, ["export", "--project", "api", "--env", "development", "--output", missing]);
  assert.equal(refused.code, 1, refused.stderr);
  assert.equal(refused.stderr.split("\n").at(-2), `secrets-server: Cannot write ${missing}: ENOENT. Nothing was written.`);
});

test("export --format shell, docker and yaml: the server's writers, 0600 files, run's rule for names with --allow-env, docker refusals naming keys", async (t) => {
  const server = await startServer(t);
  const home = cliHome(t);
  const alice = await server.signIn("alice@example.test");
  const project = await alice.createProject({ name: "api", environments: ["development"] });
  await createSecret(alice, project.id, "development", "API_KEY", "it's $HOME");
  await createSecret(alice, project.id, "development", "LD_PRELOAD", "/tmp/evil.so");
  await login(server, home, alice, ["--device-name", "test box"]);
  const target = ["--project", "api", "--env", "development"];

  const file = path.join(home.dir, "dev.sh");
  const shell = await cli(home, ["export", ...target, "--format", "shell", "--output", file]);
  assert.equal(shell.code, 0, shell.stderr);
  assert.equal(fs.statSync(file).mode & 0o777, 0o600);
  assert.equal(
    fs.readFileSync(file, "utf8"),
    "export API_KEY='it'\\''s $HOME'\n# LD_PRELOAD is left out: not named like an application setting, and a variable like it can choose which code runs in the shell that sources this file. Use the JSON export for it, or the CLI's export --format shell --allow-env LD_PRELOAD.\n",
  );
  assert.match(shell.stderr, /Warning: left out LD_PRELOAD: not named like application settings, .* add --allow-env LD_PRELOAD\.\n/);
  assert.match(shell.stderr, /\nWrote 1 secret to /, "what the file holds, not what the server sent");
  const allowed = await cli(home, ["export", ...target, "--format", "shell", "--allow-env", "LD_PRELOAD"]);
  assert.equal(allowed.code, 0, allowed.stderr);
  assert.equal(allowed.stdout, "export API_KEY='it'\\''s $HOME'\nexport LD_PRELOAD='/tmp/evil.so'\n");
  assert.equal(allowed.stderr, "");
  const byEnv = await cli({ ...home, env: { ...home.env, SECRETS_SERVER_ALLOW_ENV: "LD_PRELOAD" } }, [
    "export",
    ...target,
    "--format",
    "shell",
  ]);
  assert.equal(byEnv.stdout, allowed.stdout);

  const yaml = await cli(home, ["export", ...target, "--format", "yaml"]);
  assert.equal(yaml.code, 0, yaml.stderr);
  assert.equal(yaml.stdout, '"API_KEY": "it\'s $HOME"\n"LD_PRELOAD": "/tmp/evil.so"\n');

  // docker: the $ cannot be written; nothing is written, the key is named, the value is not.
  const dockerFile = path.join(home.dir, "dev.env");
  const refused = await cli(home, ["export", ...target, "--format", "docker", "--output", dockerFile]);
  assert.equal(refused.code, 1);
  assert.equal(
    refused.stderr.trim(),
    "secrets-server: These secrets cannot be written in Docker's env-file format: API_KEY. Use --format json or --format shell. Nothing was written.",
  );
  assert.equal(fs.existsSync(dockerFile), false);
  await createSecret(alice, project.id, "development", "API_KEY_2", "plain-value#1");
  const alicesDocker = await alice.json("GET", `/api/projects/${project.id}/environments/development/secrets`);
  const id = alicesDocker.body.secrets.find((s: { key: string }) => s.key === "API_KEY").id;
  assert.equal((await alice.json("DELETE", `/api/projects/${project.id}/environments/development/secrets/${id}`)).status, 200);
  const docker = await cli(home, ["export", ...target, "--format", "docker", "--output", dockerFile]);
  assert.equal(docker.code, 0, docker.stderr);
  assert.equal(fs.statSync(dockerFile).mode & 0o777, 0o600);
  assert.match(fs.readFileSync(dockerFile, "utf8"), /^API_KEY_2=plain-value#1\n# LD_PRELOAD is left out: /);

  const unknown = await cli(home, ["export", ...target, "--format", "toml"]);
  assert.equal(unknown.code, 2);
  assert.match(unknown.stderr, /--format is one of dotenv, shell, docker, json, yaml\./);
  const misplaced = await cli(home, ["export", ...target, "--allow-env", "LD_PRELOAD"]);
  assert.equal(misplaced.code, 2);
  assert.match(misplaced.stderr, /--allow-env applies to --format shell and docker/);
});
