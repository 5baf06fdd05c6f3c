// The CLI's messages and output as a person meets them: usages, validation before any
// request, "did you mean", logout and what follows it, `secrets list` on a terminal and in a
// pipe. The CLI runs as a real process against a real server, as in cli.test.ts.
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { type TestContext, test } from "node:test";
import { sourceShellCommand } from "../src/dev/source-command.ts";
import { cli, cliHome, login } from "./cli-helpers.ts";
import { startServer } from "./helpers.ts";
import { createSecret } from "./secrets-helpers.ts";

/** A signed-in home and a folder linked to project "web", environment staging. */
async function linkedFolder(t: TestContext) {
  const server = await startServer(t);
  const home = cliHome(t);
  const alice = await server.signIn("alice@example.test");
  const project = await alice.createProject({ name: "web", environments: ["staging"] });
  await login(server, home, alice);
  const folder = path.join(home.dir, "app");
  fs.mkdirSync(folder);
  const linked = await cli(home, ["link", "--project", "web", "--env", "staging"], { cwd: folder });
  assert.equal(linked.code, 0, linked.stderr);
  return { server, home, alice, project, folder };
}

test("usage errors print our own usage with its line breaks, never U+FFFD", async (t) => {
  const { home, folder } = await linkedFolder(t);
  // `secrets delete K` and `export --format yaml` of the issue are commands now; an unknown
  // action and an unknown format take their place.
  const cases = [
    ["link"],
    ["link", "--project", "x"],
    ["secrets"],
    ["secrets", "get"],
    ["secrets", "frobnicate", "K"],
    ["run", "env"],
    ["export", "--format", "toml"],
    ["projects", "--bogus"],
  ];
  for (const args of cases) {
    const result = await cli(home, args, { cwd: folder });
    const name = args.join(" ");
    assert.equal(result.code, 2, `${name}: ${result.stderr}`);
    assert.equal(result.stdout, "", name);
    assert.ok(!result.stderr.includes("\ufffd"), `${name}: ${JSON.stringify(result.stderr)}`);
    assert.match(result.stderr, /^secrets-server: /, name);
    assert.match(result.stderr, /^(secrets-server: )?Usage:/m, name);
    assert.ok(result.stderr.trim().split("\n").length > 1, `${name} spans lines: ${JSON.stringify(result.stderr)}`);
  }
});

test("a usage error is said before the link file, the sign-in or the server; no command name is a property of an object", async (t) => {
  // Not signed in, and the server named cannot be reached: only the usage can answer.
  const home = cliHome(t);
  const target = ["--project", "web", "--env", "staging", "--server", "http://127.0.0.1:9"];
  for (const args of [
    ["secrets", "get", ...target],
    ["secrets", "get", "", ...target],
    ["secrets", "list", "", ...target],
    ["secrets", "frobnicate", "K", ...target],
    ["secrets", "list", "EXTRA", ...target],
    ["secrets", "get", "K", "V", ...target],
  ]) {
    const result = await cli(home, args);
    assert.equal(result.code, 2, `${args.join(" ")}: ${result.stderr}`);
    assert.match(result.stderr, /Usage:\s+secrets-server secrets/, args.join(" "));
  }
  for (const name of ["__proto__", "constructor", "toString", "hasOwnProperty"]) {
    const result = await cli(home, [name]);
    assert.deepEqual([result.code, result.stderr], [2, `Unknown command "${name}". Run "secrets-server help" for the list.\n`], name);
  }
  for (const args of [
    ["completion", "toString"],
    ["completion", "__proto__"],
    ["secrets", "list", "--env", "__proto__", "--project", "web"],
    ["secrets", "list", "--env", "constructor", "--project", "web"],
  ]) {
    const result = await cli(home, args);
    assert.equal(result.code, 2, `${args.join(" ")}: ${result.stderr}`);
    assert.doesNotMatch(result.stderr, /unexpected error|at .*\.ts:\d+/, args.join(" "));
  }
});

test("--help prints the usage, unless it comes after a key or value, where it is refused as a value starting with -", async (t) => {
  const { home, folder } = await linkedFolder(t);
  for (const args of [
    ["secrets", "set", "--help"],
    ["run", "--project", "web", "-h"],
    ["export", "--help"],
    ["secrets", "--help"],
    ["run", "-h"],
    ["completion", "--help"],
    ["secrets", "--env", "dev", "-h", "list"],
  ]) {
    const result = await cli(home, args, { cwd: folder });
    assert.equal(result.code, 0, `${args.join(" ")}: ${result.stderr}`);
    assert.match(result.stdout, /^Usage:\s+secrets-server /, args.join(" "));
  }
  // `secrets set FLAG "$VALUE"` with VALUE=-h in a script: not a write, and not a success either.
  // Whether a word is a flag's value is the flag's to say: --from-stdin takes none, so FLAG is the key.
  for (const args of [
    ["secrets", "set", "FLAG", "-h"],
    ["secrets", "set", "--from-stdin", "FLAG", "-h"],
    ["secrets", "set", "--project", "-h"],
  ]) {
    const value = await cli(home, args, { cwd: folder, input: "" });
    assert.equal(value.code, 2, `${args.join(" ")}: ${value.stderr}`);
    assert.equal(value.stdout, "", args.join(" "));
  }
});

test("secrets set checks key and value before any request; get offers the key meant", async (t) => {
  const home = cliHome(t);
  // Not signed in anywhere: a request would end in exit 3, so exit 2 shows nothing was sent.
  const empty = await cli(home, ["secrets", "set", "EMPTY", "", "--project", "web", "--env", "dev"]);
  assert.equal(empty.code, 2, empty.stderr);
  assert.equal(empty.stderr, "secrets-server: The value of EMPTY is empty: a value has 1 to 10,000 characters.\n");
  const badKey = await cli(home, ["secrets", "set", "bad-key", "x", "--project", "web", "--env", "dev"]);
  assert.equal(badKey.code, 2, badKey.stderr);
  assert.equal(
    badKey.stderr,
    `secrets-server: "bad-key" is not a valid key: use letters, digits and _, not starting with a digit ([A-Za-z_][A-Za-z0-9_]*), at most 128 characters.\n`,
  );

  const { server, home: signedIn, alice, project, folder } = await linkedFolder(t);
  const tooLong = await cli(signedIn, ["secrets", "set", "BIG_VALUE", "--from-stdin"], { cwd: folder, input: `${"x".repeat(10_001)}\n` });
  assert.equal(tooLong.code, 2, tooLong.stderr);
  assert.equal(tooLong.stderr, "secrets-server: The value of BIG_VALUE has 10,001 characters: a value has 1 to 10,000.\n");
  const emptyStdin = await cli(signedIn, ["secrets", "set", "EMPTY", "--from-stdin"], { cwd: folder, input: "\n" });
  assert.equal(emptyStdin.code, 2, emptyStdin.stderr);
  assert.match(emptyStdin.stderr, /a value has 1 to 10,000 characters/);
  assert.deepEqual((await alice.json("GET", `/api/projects/${project.id}/environments/staging/secrets`)).body.secrets, []);

  await createSecret(alice, project.id, "staging", "DATABASE_URL", "postgres://db/web");
  await createSecret(alice, project.id, "staging", "REDIS_URL", "redis://cache");
  const caseOnly = await cli(signedIn, ["secrets", "get", "database_url"], { cwd: folder });
  assert.equal(caseOnly.code, 4);
  assert.equal(caseOnly.stderr, "secrets-server: No secret database_url in staging. Did you mean DATABASE_URL?\n");
  const typo = await cli(signedIn, ["secrets", "get", "DATABSE_URL"], { cwd: folder });
  assert.equal(typo.code, 4);
  assert.match(typo.stderr, /Did you mean DATABASE_URL\?\n$/);
  const nothingLike = await cli(signedIn, ["secrets", "get", "STRIPE_KEY"], { cwd: folder });
  assert.equal(nothingLike.stderr, "secrets-server: No secret STRIPE_KEY in staging.\n");

  // host:port and bare hosts: loopback gets http, anything else https.
  const hostPort = new URL(server.url).host;
  const byHost = await cli(signedIn, ["projects", "--server", hostPort]);
  assert.equal(byHost.code, 0, byHost.stderr);
  assert.match(byHost.stdout, /web/);
  const remote = await cli(home, ["whoami", "--server", "secrets.example.test:8443"]);
  assert.equal(remote.code, 3);
  assert.equal(
    remote.stderr,
    "secrets-server: Not signed in to https://secrets.example.test:8443. Run: secrets-server login --server https://secrets.example.test:8443\n",
  );
  const bare = await cli(home, ["whoami", "--server", "secrets.example.test"]);
  assert.match(bare.stderr, /Not signed in to https:\/\/secrets\.example\.test\. /);
});

test("logout is quiet and idempotent; afterwards commands say plainly that nobody is signed in", async (t) => {
  const { server, home, folder } = await linkedFolder(t);
  const out = await cli(home, ["logout"], { cwd: folder });
  assert.equal(out.code, 0, out.stderr);
  assert.equal(out.stdout, `Signed out of ${server.url}.\n`);
  const again = await cli(home, ["logout"], { cwd: folder });
  assert.deepEqual([again.code, again.stdout, again.stderr], [0, `Not signed in to ${server.url}.\n`, ""]);
  for (const args of [["secrets", "list"], ["projects"], ["whoami"]]) {
    for (const cwd of args[0] === "secrets" ? [folder] : [folder, home.dir]) {
      const result = await cli(home, args, { cwd });
      assert.equal(result.code, 3, `${args.join(" ")}: ${result.stderr}`);
      // The last login's server stays the default, so plain `login` goes back to it.
      assert.equal(result.stderr, `secrets-server: Not signed in to ${server.url}. Run: secrets-server login\n`);
    }
  }

  // A link file naming a server this machine never signed in to still gets the warning;
  // logout there has nothing to do and says so.
  const cloned = path.join(home.dir, "cloned");
  fs.mkdirSync(cloned);
  fs.writeFileSync(
    path.join(cloned, ".secrets-server.json"),
    JSON.stringify({ server: "http://127.0.0.2:9", projectId: "x", environment: "staging" }),
  );
  const listed = await cli(home, ["secrets", "list"], { cwd: cloned });
  assert.equal(listed.code, 3);
  assert.match(listed.stderr, /names the server http:\/\/127\.0\.0\.2:9, where this machine is not signed in/);
  const outThere = await cli(home, ["logout"], { cwd: cloned });
  assert.deepEqual([outThere.code, outThere.stdout, outThere.stderr], [0, "Not signed in to http://127.0.0.2:9.\n", ""]);
});

const hasScript = spawnSync("script", ["--version"]).status === 0;

test("secrets list: a header and readable times on a terminal, tab-separated lines in a pipe, JSON unchanged", async (t) => {
  const { home, alice, project, folder } = await linkedFolder(t);
  await createSecret(alice, project.id, "staging", "REDIS_URL", "redis://cache");
  await createSecret(alice, project.id, "staging", "DATABASE_URL", "postgres://db/web");

  const piped = await cli(home, ["secrets", "list"], { cwd: folder });
  assert.equal(piped.code, 0, piped.stderr);
  assert.match(piped.stdout, /^DATABASE_URL\t1\t\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z\nREDIS_URL\t1\t\d{4}-\d\d-\d\dT[\d:.]+Z\n$/);
  const json = await cli(home, ["secrets", "list", "--json"], { cwd: folder });
  assert.deepEqual(
    JSON.parse(json.stdout).map((s: { key: string; version: number }) => [s.key, s.version]),
    [
      ["DATABASE_URL", 1],
      ["REDIS_URL", 1],
    ],
  );

  if (!hasScript) {
    t.diagnostic("no `script` command to give the CLI a terminal; the terminal format is not checked");
    return;
  }
  // `script` runs the CLI on a pseudo-terminal, as a person would see it.
  const command = sourceShellCommand("secrets", "list");
  // Not spawnSync: the server runs in this process and must keep answering.
  const child = spawn("script", ["-qec", command, "/dev/null"], {
    cwd: folder,
    env: { PATH: process.env.PATH, ...home.env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  child.stdout.on("data", (d) => (output += d));
  child.stderr.on("data", (d) => (output += d));
  const status = await new Promise<number | null>((resolve) => child.on("close", resolve));
  assert.equal(status, 0, output);
  const lines = output.replace(/\r/g, "").split("\n");
  assert.deepEqual(lines.slice(0, 5), [
    "web / staging",
    "",
    "KEY           VERSION  UPDATED",
    "DATABASE_URL  1        just now",
    "REDIS_URL     1        just now",
  ]);
});

test("a missing fallback copy is named by project and environment, not by id", async (t) => {
  const { server, home, folder } = await linkedFolder(t);
  await server.stop();
  const result = await cli(home, ["run", "--fallback", "--", process.execPath, "-e", ""], { cwd: folder });
  assert.equal(result.code, 5);
  assert.match(result.stderr, /^secrets-server: Could not reach /);
  assert.ok(result.stderr.endsWith(`\nNo fallback copy of web / staging from ${server.url} exists yet.\n`), result.stderr);
});

test("the CLI's messages keep their line breaks, and nothing else a terminal acts on", async () => {
  const { printableLines } = await import("../src/core/text.ts");
  assert.equal(
    printableLines("line one\n\tline two\u001b[31m red\u202e flipped\r"),
    "line one\n\tline two\ufffd[31m red\ufffd flipped\ufffd",
  );
});
