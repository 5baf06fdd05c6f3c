// The CLI with machine access (README, "Machine access from the CLI"): a service token or an identity
// token instead of login, as a real process against a real server. Such a command reads
// and writes nothing in the home or config folder, except the copy --fallback keeps.
import assert from "node:assert/strict";
import fs from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import path from "node:path";
import { type TestContext, test } from "node:test";
import dotenv from "dotenv";
import { startCli, startProxy } from "./cli-helpers.ts";
import { type Client, makeTempDir, runMain, startServer } from "./helpers.ts";
import { createSecret } from "./secrets-helpers.ts";
import { createServiceAccount, createServiceToken } from "./service-account-helpers.ts";
import { setStoredCiphertext, storedCiphertext } from "./storage.ts";
import { AUDIENCE, signingKey, startIssuer } from "./workload-issuer.ts";

/** An empty HOME and XDG_CONFIG_HOME, and a work folder outside them. */
function emptyHome(t: TestContext) {
  const dir = makeTempDir("secrets-cli-machine-");
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const home = path.join(dir, "home");
  const config = path.join(dir, "config");
  const work = path.join(dir, "work");
  for (const d of [home, config, work]) fs.mkdirSync(d);
  return { dir, home, config, work, env: { HOME: home, XDG_CONFIG_HOME: config } };
}

type Home = ReturnType<typeof emptyHome>;

function filesUnder(dir: string): string[] {
  return fs.readdirSync(dir, { recursive: true }).map(String).sort();
}

function assertUntouched(home: Home): void {
  assert.deepEqual(filesUnder(home.home), [], "nothing written in HOME");
  assert.deepEqual(filesUnder(home.config), [], "nothing written in XDG_CONFIG_HOME");
}

function cli(home: Home, args: string[], env: Record<string, string | undefined>, options: { input?: string; cwd?: string } = {}) {
  return runMain(args, { ...home.env, ...env }, { timeoutMs: 60_000, cwd: options.cwd ?? home.work, input: options.input });
}

function assertNoSecretIn(secret: string, ...outputs: string[]): void {
  for (const output of outputs) assert.ok(!output.includes(secret), "a token was printed");
  for (const output of outputs) assert.doesNotMatch(output, /svc_(st|wt)_/, "a token was printed");
}

async function setUp(t: TestContext) {
  const server = await startServer(t);
  const owner = await server.signIn("olivia@example.test");
  const project = await owner.createProject({ name: "api", environments: ["development", "production"] });
  await createSecret(owner, project.id, "production", "DATABASE_URL", "postgres://prod-db/app-4711");
  await createSecret(owner, project.id, "development", "DATABASE_URL", "postgres://dev-db/app-0815");
  return { server, owner, project };
}

test("export into a pipe that is read slowly: the whole file arrives before the command exits 0", async (t) => {
  const { server, owner, project } = await setUp(t);
  const home = emptyHome(t);
  // About 300 KB of dotenv: several times what a pipe holds.
  const entries = Array.from({ length: 150 }, (_, i) => ({
    key: `CERT_${String(i).padStart(3, "0")}`,
    value: `${i}-${"c".repeat(2000)}`,
    overwrite: false,
  }));
  const imported = await owner.json("POST", `/api/projects/${project.id}/environments/production/import`, { entries });
  assert.equal(imported.status, 200, JSON.stringify(imported.body));
  const account = await createServiceAccount(owner, project.id, { name: "export-bot", role: "viewer", environments: ["production"] });
  const { token } = await createServiceToken(owner, project.id, account.id);
  const env = { ...home.env, SECRETS_SERVER_TOKEN: token, SECRETS_SERVER_URL: server.url };
  for (const format of ["dotenv", "json"]) {
    const exported = await runMain(["export", "--format", format], env, { cwd: home.work, timeoutMs: 60_000, stdoutReadAfterMs: 3000 });
    assert.equal(exported.code, 0, exported.stderr);
    const values = format === "json" ? JSON.parse(exported.stdout) : dotenv.parse(exported.stdout);
    assert.equal(Object.keys(values).length, 151, `${format}: ${exported.stdout.length} characters arrived`);
    assert.equal(values.CERT_149, `149-${"c".repeat(2000)}`);
  }
});

test("a 500 from the server (a value it cannot decrypt) exits 1 with its sentence, not 5 as an outage would", async (t) => {
  const { server, owner, project } = await setUp(t);
  const home = emptyHome(t);
  const other = await createSecret(owner, project.id, "production", "OTHER_KEY", "other-value");
  const database = (await owner.json("GET", `/api/projects/${project.id}/environments/production/secrets`)).body.secrets.find(
    (s: { key: string }) => s.key === "DATABASE_URL",
  );
  // A sealed value moved to another secret's row fails its authentication: the export answers 500.
  setStoredCiphertext(server, other.id, 1, storedCiphertext(server, database.id, 1));
  const account = await createServiceAccount(owner, project.id, { name: "export-bot", role: "viewer", environments: ["production"] });
  const { token } = await createServiceToken(owner, project.id, account.id);
  const exported = await cli(home, ["export"], { SECRETS_SERVER_TOKEN: token, SECRETS_SERVER_URL: server.url });
  assert.equal(exported.code, 1, exported.stderr);
  assert.equal(exported.stdout, "");
  assert.match(exported.stderr, /failed: .*could not be decrypted/);
});

test("SECRETS_SERVER_TOKEN: list, get, set, export, run and projects with the token's project and environment; HOME stays empty", async (t) => {
  const { server, owner, project } = await setUp(t);
  const home = emptyHome(t);
  const account = await createServiceAccount(owner, project.id, { name: "deploy-bot", role: "member", environments: ["production"] });
  const { token } = await createServiceToken(owner, project.id, account.id);
  const env = { SECRETS_SERVER_TOKEN: token, SECRETS_SERVER_URL: server.url };
  const outputs: string[] = [];
  const run = async (args: string[], input?: string) => {
    const result = await cli(home, args, env, { input });
    outputs.push(result.stdout, result.stderr);
    return result;
  };

  // No --project, no --env: the account's one project and environment.
  const set = await run(["secrets", "set", "API_KEY", "--from-stdin", "--yes"], "from-the-bot-3141\n");
  assert.equal(set.code, 0, set.stderr);
  assert.equal(set.stdout, "Created API_KEY in production (version 1).\n");
  const list = await run(["secrets", "list", "--json"]);
  assert.equal(list.code, 0, list.stderr);
  assert.deepEqual(
    JSON.parse(list.stdout).map((s: any) => s.key),
    ["API_KEY", "DATABASE_URL"],
  );
  const get = await run(["secrets", "get", "DATABASE_URL"]);
  assert.equal(get.code, 0, get.stderr);
  assert.equal(get.stdout, "postgres://prod-db/app-4711\n");

  const exported = await run(["export"]);
  assert.equal(exported.code, 0, exported.stderr);
  assert.deepEqual(dotenv.parse(exported.stdout), { API_KEY: "from-the-bot-3141", DATABASE_URL: "postgres://prod-db/app-4711" });

  const script = "process.stdout.write(JSON.stringify([process.env.DATABASE_URL, process.env.SECRETS_SERVER_TOKEN ?? null]))";
  const ran = await run(["run", "--", process.execPath, "-e", script]);
  assert.equal(ran.code, 0, ran.stderr);
  // The command gets the secrets, not the credential that reads them.
  assert.deepEqual(JSON.parse(ran.stdout), ["postgres://prod-db/app-4711", null]);

  // The project by name or id, and the environment by alias, as with login.
  const named = await run(["secrets", "get", "DATABASE_URL", "--project", "API", "--env", "prod"]);
  assert.equal(named.stdout, "postgres://prod-db/app-4711\n", named.stderr);
  // Compared as the server compares names: a fullwidth letter or an invisible character is no other project.
  const lookalike = await run(["secrets", "get", "DATABASE_URL", "--project", "Ａp\u200bi", "--env", "prod"]);
  assert.equal(lookalike.stdout, "postgres://prod-db/app-4711\n", lookalike.stderr);
  const byId = await run(["secrets", "get", "DATABASE_URL", "--project", project.id]);
  assert.equal(byId.stdout, "postgres://prod-db/app-4711\n", byId.stderr);
  // Another environment than the account's: a clear refusal before the server is asked.
  const other = await run(["secrets", "list", "--env", "development"]);
  assert.equal(other.code, 4);
  assert.equal(other.stderr, "secrets-server: The service account deploy-bot may use production, not development (from --env).\n");
  const otherProject = await run(["secrets", "list", "--project", "web"]);
  assert.equal(otherProject.code, 4);
  assert.match(
    otherProject.stderr,
    /^secrets-server: The service account deploy-bot belongs to project api \([0-9a-f-]{36}\), not "web" \(from --project\)\.\n$/,
  );

  // A URL where the server is not (the web UI answers every other path with its page).
  const wrongUrl = await cli(home, ["secrets", "list"], { ...env, SECRETS_SERVER_URL: `${server.url}/secrets` });
  assert.equal(wrongUrl.code, 1, wrongUrl.stderr);
  assert.equal(
    wrongUrl.stderr,
    `secrets-server: ${server.url}/secrets answered /api/service-accounts/me with text/html, not the API's JSON: is ${server.url}/secrets the secrets server's address?\n`,
  );

  const projects = await run(["projects"]);
  assert.equal(projects.code, 0, projects.stderr);
  assert.match(projects.stdout, /^NAME\s+ID\s+ROLE\s+ENVIRONMENTS\napi\s+[0-9a-f-]{36}\s+member\s+/);

  assertUntouched(home);
  assertNoSecretIn(token, ...outputs);
});

test("a token for several environments needs --env, naming the choices; a link file may give it, but never the server", async (t) => {
  const { server, owner, project } = await setUp(t);
  const home = emptyHome(t);
  const account = await createServiceAccount(owner, project.id, {
    name: "reader",
    role: "viewer",
    environments: ["development", "production"],
  });
  const { token } = await createServiceToken(owner, project.id, account.id);
  const env = { SECRETS_SERVER_TOKEN: token, SECRETS_SERVER_URL: server.url };

  const ambiguous = await cli(home, ["secrets", "list"], env);
  assert.equal(ambiguous.code, 2);
  assert.equal(
    ambiguous.stderr,
    "secrets-server: The service account reader may use development, production: name one with --env (or SECRETS_SERVER_ENV).\n",
  );
  const chosen = await cli(home, ["secrets", "get", "DATABASE_URL", "--env", "dev"], env);
  assert.equal(chosen.stdout, "postgres://dev-db/app-0815\n", chosen.stderr);
  const fromEnv = await cli(home, ["secrets", "get", "DATABASE_URL"], { ...env, SECRETS_SERVER_ENV: "production" });
  assert.equal(fromEnv.stdout, "postgres://prod-db/app-4711\n", fromEnv.stderr);
  // A viewer token cannot write: the server's own refusal, exit 4.
  const write = await cli(home, ["secrets", "set", "NEW_KEY", "value-9", "--env", "development"], env);
  assert.equal(write.code, 4);
  assert.equal(write.stderr, "secrets-server: You do not have permission to do this in this project.\n");

  // A link file for this server gives project and environment; --env still wins.
  const linked = path.join(home.work, "linked");
  fs.mkdirSync(linked);
  fs.writeFileSync(
    path.join(linked, ".secrets-server.json"),
    JSON.stringify({ server: server.url, projectId: project.id, environment: "production" }),
  );
  const viaLink = await cli(home, ["secrets", "get", "DATABASE_URL"], env, { cwd: linked });
  assert.equal(viaLink.stdout, "postgres://prod-db/app-4711\n", viaLink.stderr);
  const flagWins = await cli(home, ["secrets", "get", "DATABASE_URL", "--env", "development"], env, { cwd: linked });
  assert.equal(flagWins.stdout, "postgres://dev-db/app-0815\n", flagWins.stderr);

  // A cloned repository's link file naming another server: never where the token goes.
  const cloned = path.join(home.work, "cloned");
  fs.mkdirSync(cloned);
  fs.writeFileSync(
    path.join(cloned, ".secrets-server.json"),
    JSON.stringify({ server: "http://127.0.0.2:9", projectId: project.id, environment: "production" }),
  );
  const noServer = await cli(home, ["secrets", "list"], { SECRETS_SERVER_TOKEN: token }, { cwd: cloned });
  assert.equal(noServer.code, 2);
  assert.equal(
    noServer.stderr,
    "secrets-server: With SECRETS_SERVER_TOKEN, name the server with --server URL or SECRETS_SERVER_URL: a token is only sent to a server named there, never to a link file's or the last login's.\n",
  );
  // With the server named, that link file is another server's: its project and environment do not apply.
  const ignored = await cli(home, ["secrets", "list"], env, { cwd: cloned });
  assert.equal(ignored.code, 2, ignored.stderr);
  assert.match(ignored.stderr, /name one with --env/);

  assertUntouched(home);
  assertNoSecretIn(token, ambiguous.stderr, chosen.stdout, noServer.stderr, ignored.stderr);
});

test("--token-file reads a trimmed token; two tokens are refused; a revoked token fails with exit 3 and what to check", async (t) => {
  const { server, owner, project } = await setUp(t);
  const home = emptyHome(t);
  const account = await createServiceAccount(owner, project.id, { name: "deploy-bot", role: "viewer", environments: ["production"] });
  const { token, tokenInfo } = await createServiceToken(owner, project.id, account.id);
  const file = path.join(home.dir, "token");
  fs.writeFileSync(file, `${token}\n`, { mode: 0o400 });

  const fromFile = await cli(home, ["secrets", "get", "DATABASE_URL", "--token-file", file, "--server", server.url], {});
  assert.equal(fromFile.code, 0, fromFile.stderr);
  assert.equal(fromFile.stdout, "postgres://prod-db/app-4711\n");
  assert.equal(fromFile.stderr, "");

  // A file everyone can read works, with a warning.
  const open = path.join(home.dir, "open-token");
  fs.writeFileSync(open, token);
  fs.chmodSync(open, 0o644);
  const warned = await cli(home, ["secrets", "get", "DATABASE_URL", "--token-file", open, "--server", server.url], {});
  assert.equal(warned.code, 0, warned.stderr);
  assert.match(warned.stderr, /^Warning: .*open-token is readable by every user \(mode 0644\)\. A service token file should be chmod 600/);

  const both = await cli(home, ["secrets", "list", "--token-file", file], { SECRETS_SERVER_TOKEN: token, SECRETS_SERVER_URL: server.url });
  assert.equal(both.code, 2);
  assert.equal(
    both.stderr,
    "secrets-server: Both --token-file and SECRETS_SERVER_TOKEN are set. Use one: unset SECRETS_SERVER_TOKEN or drop --token-file.\n",
  );
  const notAToken = await cli(home, ["secrets", "list"], { SECRETS_SERVER_TOKEN: "hunter2-not-a-token", SECRETS_SERVER_URL: server.url });
  assert.equal(notAToken.code, 2);
  assert.doesNotMatch(notAToken.stderr, /hunter2/);
  const missing = await cli(home, ["secrets", "list", "--token-file", path.join(home.dir, "nope")], { SECRETS_SERVER_URL: server.url });
  assert.equal(missing.code, 2);
  assert.match(missing.stderr, /Cannot read --token-file .*nope: ENOENT/);

  assert.equal(
    (await owner.json("DELETE", `/api/projects/${project.id}/service-accounts/${account.id}/tokens/${tokenInfo.id}`)).status,
    200,
  );
  const expected =
    `secrets-server: ${server.url} refused the service token from SECRETS_SERVER_TOKEN: it is invalid, expired or revoked, or used from a network ` +
    "the token does not allow. Check that the token is complete and meant for this server, or create a new one for the service account.\n";
  for (const args of [["secrets", "list"], ["whoami"], ["run", "--", process.execPath, "-e", "process.stdout.write('ran')"], ["export"]]) {
    const revoked = await cli(home, args, { SECRETS_SERVER_TOKEN: token, SECRETS_SERVER_URL: server.url });
    assert.equal(revoked.code, 3, `${args[0]}: ${revoked.stderr}`);
    assert.equal(revoked.stderr, expected);
    assert.equal(revoked.stdout, "");
  }
  const revokedFile = await cli(home, ["projects", "--token-file", file, "--server", server.url], {});
  assert.equal(revokedFile.code, 3);
  assert.match(revokedFile.stderr, /refused the service token from --token-file .*token: it is invalid, expired or revoked/);
  assert.doesNotMatch(revokedFile.stderr, /login/);

  assertUntouched(home);
  assertNoSecretIn(token, fromFile.stdout, fromFile.stderr, warned.stderr, both.stderr, revokedFile.stderr);
});

test("whoami with a token shows the service account", async (t) => {
  const { server, owner, project } = await setUp(t);
  const home = emptyHome(t);
  const account = await createServiceAccount(owner, project.id, {
    name: "deploy-bot",
    role: "member",
    environments: ["production", "development"],
  });
  const { token } = await createServiceToken(owner, project.id, account.id, { name: "ci", expiresInDays: 30 });
  const env = { SECRETS_SERVER_TOKEN: token, SECRETS_SERVER_URL: server.url };

  const who = await cli(home, ["whoami"], env);
  assert.equal(who.code, 0, who.stderr);
  const lines = who.stdout.split("\n");
  assert.equal(lines[0], `service account deploy-bot (${account.id}) on ${server.url}`);
  assert.equal(lines[1], `  project api (${project.id}), role member, environments development, production`);
  assert.match(lines[2]!, /^ {2}token expires \d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
  const json = JSON.parse((await cli(home, ["whoami", "--json"], env)).stdout);
  assert.deepEqual(
    { ...json, expiresAt: typeof json.expiresAt },
    {
      server: server.url,
      via: "service_token",
      serviceAccount: {
        id: account.id,
        name: "deploy-bot",
        projectId: project.id,
        projectName: "api",
        role: "member",
        environments: ["development", "production"],
      },
      expiresAt: "string",
    },
  );
  assertUntouched(home);
  assertNoSecretIn(token, who.stdout, who.stderr);
});

test("run --fallback with a token: a copy keyed by the token, used when the server is down", async (t) => {
  const { server, owner, project } = await setUp(t);
  const home = emptyHome(t);
  const account = await createServiceAccount(owner, project.id, { name: "deploy-bot", role: "viewer", environments: ["production"] });
  const { token } = await createServiceToken(owner, project.id, account.id);
  const other = await createServiceToken(owner, project.id, account.id, { name: "other host" });
  const env = { SECRETS_SERVER_TOKEN: token, SECRETS_SERVER_URL: server.url };
  const print = ["--", process.execPath, "-e", "process.stdout.write(process.env.DATABASE_URL ?? 'unset')"];

  const online = await cli(home, ["run", "--fallback", ...print], env);
  assert.equal(online.code, 0, online.stderr);
  assert.equal(online.stdout, "postgres://prod-db/app-4711");
  // The one write: an encrypted copy, 0600, and no credentials.json, lock or index.
  const folder = path.join(home.config, "secrets-server", "fallback");
  const files = fs.readdirSync(folder);
  assert.equal(files.length, 1);
  assert.match(files[0]!, /^[0-9a-f]{32}\.bin$/);
  assert.deepEqual(filesUnder(home.config), ["secrets-server", "secrets-server/fallback", `secrets-server/fallback/${files[0]}`]);
  assert.deepEqual(filesUnder(home.home), []);
  const sealed = fs.readFileSync(path.join(folder, files[0]!));
  assert.equal(fs.statSync(path.join(folder, files[0]!)).mode & 0o777, 0o600);
  assert.ok(!sealed.toString("latin1").includes("prod-db"));

  await server.stop();
  const offline = await cli(home, ["run", "--fallback", ...print], env);
  assert.equal(offline.code, 0, offline.stderr);
  assert.equal(offline.stdout, "postgres://prod-db/app-4711");
  assert.match(offline.stderr, /^Warning: Could not reach .*\nUsing the fallback copy of api \/ production saved \d+s ago\.\n$/);
  // Another token of the same account finds no copy: only the holder of the token can.
  const otherToken = await cli(home, ["run", "--fallback", ...print], { ...env, SECRETS_SERVER_TOKEN: other.token });
  assert.equal(otherToken.code, 5);
  // Both reasons: why the server was not asked, and why no copy stands in for it.
  assert.match(otherToken.stderr, /^secrets-server: Could not reach .* \(ECONNREFUSED\)\. Check the URL and your network\.\n/);
  assert.ok(
    otherToken.stderr.endsWith(`\nNo fallback copy of the service account's project / its environment from ${server.url} exists yet.\n`),
    otherToken.stderr,
  );
  const without = await cli(home, ["run", ...print], env);
  assert.equal(without.code, 5);
  assert.equal(without.stdout, "");
  assertNoSecretIn(token, online.stderr, offline.stderr, otherToken.stderr);
});

async function trustedAccount(t: TestContext, owner: Client, projectId: string, audience = AUDIENCE) {
  const issuer = await startIssuer(t);
  const key = await signingKey("ec-1", "ES256");
  issuer.publish(key);
  const account = await createServiceAccount(owner, projectId, { name: "github-deploy", role: "viewer", environments: ["production"] });
  const trust = await owner.json("POST", `/api/projects/${projectId}/service-accounts/${account.id}/trusts`, {
    issuer: issuer.url,
    audience,
    subject: "repo:acme/api:*",
    claims: { repository: "acme/api" },
  });
  assert.equal(trust.status, 201, JSON.stringify(trust.body));
  return { issuer, account, sign: (claims: Record<string, unknown> = {}) => issuer.sign(key, claims) };
}

test("SECRETS_SERVER_IDENTITY_TOKEN with SECRETS_SERVER_SERVICE_ACCOUNT is exchanged first; a refused one fails clearly", async (t) => {
  const { server, owner, project } = await setUp(t);
  const home = emptyHome(t);
  const { sign, account } = await trustedAccount(t, owner, project.id);
  const jwt = await sign();
  const env = { SECRETS_SERVER_IDENTITY_TOKEN: jwt, SECRETS_SERVER_SERVICE_ACCOUNT: account.id, SECRETS_SERVER_URL: server.url };

  const get = await cli(home, ["secrets", "get", "DATABASE_URL"], env);
  assert.equal(get.code, 0, get.stderr);
  assert.equal(get.stdout, "postgres://prod-db/app-4711\n");
  const ran = await cli(
    home,
    [
      "run",
      "--",
      process.execPath,
      "-e",
      "process.stdout.write(JSON.stringify([process.env.DATABASE_URL, process.env.SECRETS_SERVER_IDENTITY_TOKEN ?? null]))",
    ],
    env,
  );
  assert.deepEqual(JSON.parse(ran.stdout), ["postgres://prod-db/app-4711", null], ran.stderr);
  const who = await cli(home, ["whoami"], env);
  assert.equal(who.code, 0, who.stderr);
  assert.match(
    who.stdout,
    /^service account github-deploy .*\n {2}project api .*role viewer, environments production\n {2}access token expires \d{4}-/,
  );
  // A fallback copy keyed by an identity token could never be opened again.
  const fallback = await cli(home, ["run", "--fallback", "--", process.execPath, "-e", ""], env);
  assert.equal(fallback.code, 2);
  assert.match(fallback.stderr, /^secrets-server: --fallback needs a service token/);

  const wrongSubject = await cli(home, ["secrets", "list"], {
    ...env,
    SECRETS_SERVER_IDENTITY_TOKEN: await sign({ repository: "evil/api" }),
  });
  assert.equal(wrongSubject.code, 3);
  assert.equal(
    wrongSubject.stderr,
    `secrets-server: ${server.url} did not accept the identity token for service account ${account.id}. Check that the account id is right and that one of ` +
      "its trusts matches the token: issuer, audience, subject and claims. The server's log says which check failed.\n",
  );
  const noAccount = await cli(home, ["secrets", "list"], { SECRETS_SERVER_IDENTITY_TOKEN: jwt, SECRETS_SERVER_URL: server.url });
  assert.equal(noAccount.code, 2);
  assert.match(noAccount.stderr, /SECRETS_SERVER_IDENTITY_TOKEN needs SECRETS_SERVER_SERVICE_ACCOUNT/);
  const byName = await cli(home, ["secrets", "list"], { ...env, SECRETS_SERVER_SERVICE_ACCOUNT: "github-deploy" });
  assert.equal(byName.code, 2);
  assert.match(byName.stderr, /must be the service account's id/);
  const twoCredentials = await cli(home, ["secrets", "list"], { ...env, SECRETS_SERVER_TOKEN: `svc_st_${"a".repeat(43)}` });
  assert.equal(twoCredentials.code, 2);
  assert.match(twoCredentials.stderr, /Both a service token \(SECRETS_SERVER_TOKEN\) and SECRETS_SERVER_IDENTITY_TOKEN are set/);

  assertUntouched(home);
  for (const output of [get.stdout, get.stderr, ran.stdout, who.stdout, wrongSubject.stderr, noAccount.stderr]) {
    assert.ok(!output.includes(jwt.split(".")[2]!), "the identity token was printed");
    assert.doesNotMatch(output, /svc_wt_/);
  }
});

test("an export whose key is not a key (a line break from whatever answered) is used nowhere: exit 1, nothing written or run", async (t) => {
  const { server, owner, project } = await setUp(t);
  const home = emptyHome(t);
  const account = await createServiceAccount(owner, project.id, { name: "deploy-bot", role: "viewer", environments: ["production"] });
  const { token } = await createServiceToken(owner, project.id, account.id);
  const forged = "X\ntouch /tmp/secrets-cli-forged\n#";
  let answer: unknown = { secrets: [{ key: forged, value: "v" }] };
  const proxy = await startProxy(t, server.url, (req, res) => {
    if (!req.url?.endsWith("/export")) return false;
    res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(answer));
    return true;
  });
  const env = { SECRETS_SERVER_TOKEN: token, SECRETS_SERVER_URL: proxy };
  const file = path.join(home.work, "app.sh");
  const refusal = `secrets-server: ${proxy} sent a secret whose key is not a key ("X\ufffdtouch /tmp/secrets-cli-forged\ufffd#"): nothing was used.\n`;
  for (const args of [
    ["export", "--format", "shell", "--output", file],
    ["export", "--format", "dotenv"],
    ["run", "--", "true"],
  ]) {
    const result = await cli(home, args, env);
    assert.deepEqual([result.code, result.stdout, result.stderr], [1, "", refusal], args.join(" "));
  }
  // JSON, but no list at all.
  answer = {};
  const noList = await cli(home, ["run", "--", "true"], env);
  assert.deepEqual(
    [noList.code, noList.stdout, noList.stderr],
    [1, "", `secrets-server: ${proxy} sent an export without its list of secrets: nothing was used.\n`],
  );
  assert.equal(fs.existsSync(file), false);
});

test("an identity exchange answered 500 fails with the server's sentence (exit 1); 503 is an outage (exit 5)", async (t) => {
  const { server, owner, project } = await setUp(t);
  const home = emptyHome(t);
  const { sign, account } = await trustedAccount(t, owner, project.id);
  let answer: { status: number; body: string } = { status: 500, body: JSON.stringify({ error: "Something broke at the exchange." }) };
  const proxy = await startProxy(t, server.url, (req, res) => {
    if (req.url !== "/api/auth/workload/token") return false;
    res.writeHead(answer.status, { "content-type": "application/json" }).end(answer.body);
    return true;
  });
  const env = { SECRETS_SERVER_IDENTITY_TOKEN: await sign(), SECRETS_SERVER_SERVICE_ACCOUNT: account.id, SECRETS_SERVER_URL: proxy };
  const failed = await cli(home, ["secrets", "list"], env);
  assert.deepEqual(
    [failed.code, failed.stdout, failed.stderr],
    [1, "", `secrets-server: The identity exchange at ${proxy} failed: Something broke at the exchange.\n`],
  );
  answer = { status: 503, body: JSON.stringify({ error: "The server is shutting down." }) };
  const outage = await cli(home, ["secrets", "list"], env);
  assert.equal(outage.code, 5, outage.stderr);
  assert.equal(outage.stdout, "");
  assertUntouched(home);
});

test("run --watch with an identity token exchanges it again when the 15-minute access token has expired, and keeps watching", async (t) => {
  const { server, owner, project } = await setUp(t);
  const home = emptyHome(t);
  const { sign, account } = await trustedAccount(t, owner, project.id);
  const env = {
    ...home.env,
    SECRETS_SERVER_IDENTITY_TOKEN: await sign(),
    SECRETS_SERVER_SERVICE_ACCOUNT: account.id,
    SECRETS_SERVER_URL: server.url,
  };
  // Ends by itself when the CLI is gone: an orphan would hold the test's pipes open.
  const child =
    "process.stdout.write('value='+process.env.DATABASE_URL+'\\n');const p=process.ppid;setInterval(()=>{if(process.ppid!==p)process.exit()},500)";
  const watching = startCli(["run", "--watch", "--", process.execPath, "-e", child], env, { cwd: home.work });
  t.after(() => watching.child.kill("SIGKILL"));
  await watching.waitFor(/value=postgres:\/\/prod-db\/app-4711/);

  // The access token of the first exchange is past its 15 minutes when the next poll asks.
  server.clock.advance(16 * 60 * 1000);
  const list = await owner.json("GET", `/api/projects/${project.id}/environments/production/secrets`);
  const id = list.body.secrets.find((s: { key: string }) => s.key === "DATABASE_URL").id;
  assert.equal(
    (await owner.json("PATCH", `/api/projects/${project.id}/environments/production/secrets/${id}`, { value: "postgres://new-db/app" }))
      .status,
    200,
  );
  // The next poll (within 10 s) either restarts the command or says what went wrong.
  const [next] = await watching.waitFor(/value=postgres:\/\/new-db\/app|could not check for changes.*/);
  assert.equal(next, "value=postgres://new-db/app", watching.stderr());
  watching.child.kill("SIGTERM");
  await watching.done;
});

test("run --watch waits as long as a 429 asks before it polls again, and reads an answer that is not the API's as such", async (t) => {
  const { server, owner, project } = await setUp(t);
  const home = emptyHome(t);
  const account = await createServiceAccount(owner, project.id, { name: "watch-bot", role: "viewer", environments: ["production"] });
  const { token } = await createServiceToken(owner, project.id, account.id);
  // The export's limit is the account's: the first poll is refused for 13 s, as when other
  // watchers of the account have used the minute up; then a page that is not the API's.
  const polls: number[] = [];
  const proxy = await startProxy(t, server.url, (req, res) => {
    if (!req.url?.endsWith("/export") || !req.headers["if-none-match"]) return false;
    polls.push(Date.now());
    if (polls.length === 1) {
      res.writeHead(429, { "content-type": "application/json", "retry-after": "13" }).end(JSON.stringify({ error: "Too many requests." }));
    } else {
      res.writeHead(200, { "content-type": "text/html" }).end("<!doctype html><title>Sign in</title>");
    }
    return true;
  });
  const env = { ...home.env, SECRETS_SERVER_TOKEN: token, SECRETS_SERVER_URL: proxy };
  const child = "console.log('started');const p=process.ppid;setInterval(()=>{if(process.ppid!==p)process.exit()},500)";
  const watching = startCli(["run", "--watch", "--", process.execPath, "-e", child], env, { cwd: home.work });
  t.after(() => watching.child.kill("SIGKILL"));
  await watching.waitFor(/started/);
  await watching.waitFor(/could not check for changes: Too many requests/);
  const [second] = await watching.waitFor(/could not check for changes: .*not the API's JSON.*/);
  assert.match(second, new RegExp(`${proxy} answered /api/projects/[^ ]+/export with text/html, not the API's JSON`));
  assert.ok(polls[1]! - polls[0]! >= 12_500, `polled again ${polls[1]! - polls[0]!} ms after a 429 that asked for 13 s`);
  watching.child.kill("SIGTERM");
  await watching.done;
});

test("run --watch refused at its start by a 429 waits as asked (an HTTP date too), then starts the command", async (t) => {
  const { server, owner, project } = await setUp(t);
  const home = emptyHome(t);
  const account = await createServiceAccount(owner, project.id, { name: "late-bot", role: "viewer", environments: ["production"] });
  const { token } = await createServiceToken(owner, project.id, account.id);
  const firsts: number[] = [];
  let passedAt: number | undefined;
  const proxy = await startProxy(t, server.url, (req, res) => {
    if (!req.url?.endsWith("/export") || req.headers["if-none-match"]) return false;
    if (firsts.length >= 2) {
      passedAt ??= Date.now();
      return false;
    }
    firsts.push(Date.now());
    // Seconds the first time, an HTTP date (a whole second, 2 to 3 s ahead) the second.
    const retryAfter = firsts.length === 1 ? "1" : new Date(Math.ceil(Date.now() / 1000) * 1000 + 2000).toUTCString();
    res
      .writeHead(429, { "content-type": "application/json", "retry-after": retryAfter })
      .end(JSON.stringify({ error: "Too many requests." }));
    return true;
  });
  const env = { ...home.env, SECRETS_SERVER_TOKEN: token, SECRETS_SERVER_URL: proxy };
  const child = "console.log('started with', process.env.DATABASE_URL);setInterval(()=>{},1000)";
  const watching = startCli(["run", "--watch", "--", process.execPath, "-e", child], env, { cwd: home.work });
  t.after(() => watching.child.kill("SIGKILL"));
  await watching.waitFor(/started with postgres:\/\/prod-db\/app-4711/);
  assert.equal(firsts.length, 2);
  // Each wait as long as asked (the date is read a moment after it was written: 1 to 3 s).
  assert.ok(firsts[1]! - firsts[0]! >= 950, `asked again ${firsts[1]! - firsts[0]!} ms after "1"`);
  assert.ok(passedAt! - firsts[1]! >= 950, `asked again ${passedAt! - firsts[1]!} ms after a date 2 to 3 s ahead`);
  assert.match(
    watching.stderr(),
    /the export is rate limited; trying again in 1 s\.\n.*the export is rate limited; trying again in [123] s\./s,
  );
  watching.child.kill("SIGTERM");
  await watching.done;
});

test("GitHub Actions: the CLI asks the job's token endpoint for an identity token for the server's URL, then exchanges it", async (t) => {
  const { server, owner, project } = await setUp(t);
  const home = emptyHome(t);
  // The default audience is the server's URL.
  const { sign, account } = await trustedAccount(t, owner, project.id, server.url);
  const requestToken = "gha-request-token-5501";
  const seen: { authorization?: string; url: string }[] = [];
  const github = http.createServer(async (req, res) => {
    seen.push({ authorization: req.headers.authorization, url: req.url! });
    const url = new URL(req.url!, "http://x");
    res.setHeader("content-type", "application/json");
    if (
      req.headers.authorization !== `Bearer ${requestToken}` ||
      url.searchParams.get("api-version") !== "2.0" ||
      !url.searchParams.get("audience")
    ) {
      res.statusCode = 403;
      return res.end("{}");
    }
    res.end(JSON.stringify({ value: await sign({ aud: url.searchParams.get("audience") }) }));
  });
  await new Promise<void>((resolve) => github.listen(0, "127.0.0.1", resolve));
  t.after(() => new Promise<void>((resolve) => github.close(() => resolve())));
  const requestUrl = `http://127.0.0.1:${(github.address() as AddressInfo).port}/token?api-version=2.0`;
  const env = {
    ACTIONS_ID_TOKEN_REQUEST_URL: requestUrl,
    ACTIONS_ID_TOKEN_REQUEST_TOKEN: requestToken,
    SECRETS_SERVER_SERVICE_ACCOUNT: account.id,
    SECRETS_SERVER_URL: server.url,
  };

  const exported = await cli(home, ["export", "--format", "json"], env);
  assert.equal(exported.code, 0, exported.stderr);
  assert.deepEqual(JSON.parse(exported.stdout), { DATABASE_URL: "postgres://prod-db/app-4711" });
  assert.deepEqual(seen, [
    { authorization: `Bearer ${requestToken}`, url: `/token?api-version=2.0&audience=${encodeURIComponent(server.url)}` },
  ]);

  // SECRETS_SERVER_AUDIENCE overrides; this trust does not accept that audience.
  const otherAudience = await cli(home, ["secrets", "list"], { ...env, SECRETS_SERVER_AUDIENCE: AUDIENCE });
  assert.equal(otherAudience.code, 3);
  assert.match(otherAudience.stderr, new RegExp(`audience \\(requested: ${AUDIENCE.replace(/\./g, "\\.")}\\), subject and claims`));
  assert.equal(seen.at(-1)!.url, `/token?api-version=2.0&audience=${encodeURIComponent(AUDIENCE)}`);

  // A job without `permissions: id-token: write` gets a 403 from GitHub.
  const denied = await cli(home, ["secrets", "list"], { ...env, ACTIONS_ID_TOKEN_REQUEST_TOKEN: "wrong-request-token" });
  assert.equal(denied.code, 3);
  assert.match(
    denied.stderr,
    /GitHub Actions did not give the job an identity token \(HTTP 403\)\. Does the job have `permissions: id-token: write`\?/,
  );
  // Without the request variables there is nothing to exchange.
  const none = await cli(home, ["secrets", "list"], { SECRETS_SERVER_SERVICE_ACCOUNT: account.id, SECRETS_SERVER_URL: server.url });
  assert.equal(none.code, 2);
  assert.match(none.stderr, /no identity token to exchange/);

  assertUntouched(home);
  for (const output of [exported.stdout, exported.stderr, otherAudience.stderr, denied.stderr]) {
    assert.ok(!output.includes(requestToken));
    assert.doesNotMatch(output, /svc_wt_/);
  }
});
