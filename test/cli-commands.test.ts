// The CLI commands as real processes against a real server: set with several
// KEY=VALUE, import, delete, diff, the production confirmation and --silent, interactive
// link on a pseudo-terminal, shell completion through bash, and run --watch.
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { type TestContext, test } from "node:test";
import { sourceShellCommand } from "../src/dev/source-command.ts";
import { type CliHome, cli, cliHome, login, type Running, start, startCli, startProxy } from "./cli-helpers.ts";
import { type Client, makeTempDir, ROOT, runMain, startServer, waitForAnswer } from "./helpers.ts";
import { createServiceAccount, createServiceToken } from "./service-account-helpers.ts";

/** The CLI on a pseudo-terminal (util-linux `script`): stdin, stdout and stderr are a TTY. */
function inTerminal(home: CliHome, args: string[], cwd: string): Running {
  return start("script", ["-q", "-e", "-c", sourceShellCommand(...args), "/dev/null"], { ...home.env, TERM: "dumb" }, { cwd });
}

test("secrets delete on a terminal hands the deletion to the browser and waits until it is confirmed there", async (t) => {
  const server = await startServer(t);
  const home = cliHome(t);
  const alice = await server.signIn("alice@example.test");
  const project = await alice.createProject({ name: "api", environments: ["development"] });
  const base = `/api/projects/${project.id}/environments/development`;
  const ids: Record<string, string> = {};
  for (const key of ["OLD_ONE", "OLD_TWO", "KEPT"])
    ids[key] = (await alice.json("POST", `${base}/secrets`, { key, value: `${key.toLowerCase()}-value` })).body.secret.id;
  await login(server, home, alice);

  const running = inTerminal(home, ["secrets", "delete", "OLD_ONE", "OLD_TWO", "--project", "api", "--env", "dev"], ROOT);
  const [url] = await running.waitFor(/http:\S+\?delete=\S+/);
  assert.equal(url, `${server.url}/projects/${project.id}/development?delete=${encodeURIComponent("OLD_ONE,OLD_TWO")}`);
  assert.match(running.output(), /Waiting for it/);
  // Nothing is deleted until the person confirms in the browser (here: the browser session's API calls).
  assert.deepEqual(Object.keys(await exported(alice, project.id, "development")).sort(), ["KEPT", "OLD_ONE", "OLD_TWO"]);
  assert.equal((await alice.json("DELETE", `${base}/secrets/${ids.OLD_ONE}`)).status, 200);
  assert.equal((await alice.json("DELETE", `${base}/secrets/${ids.OLD_TWO}`)).status, 200);
  const result = await running.done;
  assert.equal(result.code, 0, result.output);
  assert.match(result.output, /Deleted OLD_ONE from development \(confirmed in the browser\)\./);
  assert.match(result.output, /Deleted OLD_TWO from development \(confirmed in the browser\)\./);
  assert.deepEqual(Object.keys(await exported(alice, project.id, "development")), ["KEPT"]);
});

async function exported(owner: Client, projectId: string, env: string): Promise<Record<string, string>> {
  const res = await owner.json("GET", `/api/projects/${projectId}/environments/${env}/export`);
  assert.equal(res.status, 200);
  return Object.fromEntries(res.body.secrets.map((s: any) => [s.key, s.value]));
}

async function exportEvents(owner: Client, projectId: string): Promise<number> {
  return (await owner.json("GET", `/api/projects/${projectId}/audit?action=secrets.exported&limit=100`)).body.events.length;
}

test("secrets set KEY=VALUE..., import, delete and diff; production needs --yes without a terminal; --silent", async (t) => {
  const server = await startServer(t);
  const home = cliHome(t);
  const alice = await server.signIn("alice@example.test");
  const project = await alice.createProject({ name: "api", environments: ["development", "production"] });
  await login(server, home, alice);
  const dev = ["--project", "api", "--env", "dev"];
  const prod = ["--project", "api", "--env", "prod"];

  const set = await cli(home, [
    "secrets",
    "set",
    "SHARED_URL=https://same.example/x1",
    "DIFF_TOKEN=dev-token-4711",
    "DEV_ONLY=dev-only-1",
    ...dev,
  ]);
  assert.equal(set.code, 0, set.stderr);
  assert.equal(
    set.stdout,
    "Created SHARED_URL in development (version 1).\nCreated DIFF_TOKEN in development (version 1).\nCreated DEV_ONLY in development (version 1).\n",
  );
  const again = await cli(home, ["secrets", "set", "SHARED_URL=https://same.example/x1", "DEV_ONLY=dev-only-2", ...dev]);
  assert.equal(
    again.stdout,
    "SHARED_URL in development already has this value (version 1): nothing changed.\nUpdated DEV_ONLY in development (version 2).\n",
  );
  const asJson = await cli(home, ["secrets", "set", "DEV_ONLY=dev-only-2", "JSON_KEY=json-value-1", ...dev, "--json"]);
  assert.deepEqual(JSON.parse(asJson.stdout), {
    environment: "development",
    results: [
      { key: "DEV_ONLY", status: "unchanged", version: 2 },
      { key: "JSON_KEY", status: "created", version: 1 },
    ],
  });
  // The server refuses a token-shaped key too: checked before A_KEY is written.
  const tokenShaped = ["A_KEY=1", "OLD_svc_at_AAAAAAAAAAAAAAAAAAAAAAAA=2"];
  // A value typed where a key goes, or with its key left out, is never repeated on stderr (a CI log).
  const valueAsKey = ["A_KEY=1", "s3cret value here"];
  const keyLeftOut = ["A_KEY=1", "=s3cret-value-here"];
  for (const bad of [
    ["A_KEY=1", "A_KEY=2"],
    ["A_KEY=1", "B_KEY"],
    ["9_KEY=1"],
    ["A_KEY=1", "--from-stdin"],
    tokenShaped,
    valueAsKey,
    keyLeftOut,
  ]) {
    const refused = await cli(home, ["secrets", "set", ...bad, ...dev]);
    assert.equal(refused.code, 2, bad.join(" "));
    assert.doesNotMatch(refused.stderr, /s3cret|svc_at_/, bad.join(" "));
    if (bad === tokenShaped) assert.match(refused.stderr, /A key looks like a secrets-server token/);
    if (bad === valueAsKey || bad === keyLeftOut) assert.match(refused.stderr, /^secrets-server: Argument 2 is not KEY=VALUE\./);
  }
  assert.match((await cli(home, ["secrets", "set", "A_KEY=1", "B_KEY", ...dev])).stderr, /"B_KEY" is not KEY=VALUE/);
  // A value that starts with - reads as an unknown option; Node's message would quote it.
  for (const value of ["--s3cret-value-here", "-s3cret", "--s3cret=more"]) {
    const refused = await cli(home, ["secrets", "set", "A_KEY", value, ...dev]);
    assert.equal(refused.code, 2, value);
    assert.match(
      refused.stderr,
      /^secrets-server: An argument starts with - but is no option of this command; it is not repeated here/,
      value,
    );
    assert.doesNotMatch(refused.stderr, /s3cret/, value);
  }
  // A typo of an option is named, with the option meant.
  const typo = await cli(home, ["secrets", "list", "--projcet", "web", ...dev]);
  assert.equal(typo.code, 2);
  assert.match(typo.stderr, /^secrets-server: Unknown option --projcet: did you mean --project\?/);
  assert.deepEqual(Object.keys(await exported(alice, project.id, "development")).sort(), [
    "DEV_ONLY",
    "DIFF_TOKEN",
    "JSON_KEY",
    "SHARED_URL",
  ]);

  // Production: no terminal to ask on, so --yes or nothing.
  const unconfirmed = await cli(home, ["secrets", "set", "SHARED_URL=https://same.example/x1", ...prod]);
  assert.equal(unconfirmed.code, 2);
  assert.match(unconfirmed.stderr, /production and stdin is not a terminal to confirm on\. Add --yes to confirm: nothing was written\./);
  const fromStdin = await cli(home, ["secrets", "set", "PROD_ONLY", "--from-stdin", ...prod], { input: "prod-only-1\n" });
  assert.equal(fromStdin.code, 2);
  assert.deepEqual(await exported(alice, project.id, "production"), {});
  const confirmed = await cli(home, [
    "secrets",
    "set",
    "SHARED_URL=https://same.example/x1",
    "DIFF_TOKEN=prod-token-0815",
    ...prod,
    "--yes",
  ]);
  assert.equal(confirmed.code, 0, confirmed.stderr);
  const silent = await cli(home, ["secrets", "set", "PROD_ONLY", "--from-stdin", ...prod, "-y", "--silent"], { input: "prod-only-1\n" });
  assert.deepEqual([silent.code, silent.stdout, silent.stderr], [0, "", ""]);
  // Bytes that are not UTF-8 (a Latin-1 é, a binary file) are refused, not stored with U+FFFD.
  const latin1 = await cli(home, ["secrets", "set", "PROD_ONLY", "--from-stdin", ...prod, "-y"], {
    input: Buffer.from("caf\xe9", "latin1"),
  });
  assert.equal(latin1.code, 2, latin1.stderr);
  assert.match(latin1.stderr, /not UTF-8 text/);
  const latin1File = path.join(makeTempDir(), "latin1.env");
  fs.writeFileSync(latin1File, Buffer.from("NEW_KEY=caf\xe9\n", "latin1"));
  const latin1Import = await cli(home, ["secrets", "import", latin1File, ...prod, "-y"]);
  assert.equal(latin1Import.code, 1, latin1Import.stderr);
  assert.match(latin1Import.stderr, /latin1\.env is not UTF-8 text; nothing was written/);
  // Read no further than they can be: a device that never ends is refused, not read into memory.
  const endless = await cli(home, ["secrets", "import", "/dev/zero", ...prod, "-y"]);
  assert.deepEqual(
    [endless.code, endless.stderr],
    [1, "secrets-server: /dev/zero is larger than 2 MB, the most one import takes; nothing was written. Split it.\n"],
  );
  const tooLong = await cli(home, ["secrets", "set", "PROD_ONLY", "--from-stdin", ...prod, "-y"], { input: "x".repeat(50_000) });
  assert.deepEqual(
    [tooLong.code, tooLong.stderr],
    [2, "secrets-server: The value on standard input is longer than a secret can be (10,000 characters).\n"],
  );
  assert.deepEqual(await exported(alice, project.id, "production"), {
    DIFF_TOKEN: "prod-token-0815",
    PROD_ONLY: "prod-only-1",
    SHARED_URL: "https://same.example/x1",
  });

  // import: dotenv's reading (export prefix, quotes, multi-line, comments), checked whole first.
  const file = path.join(home.dir, "import.env");
  fs.writeFileSync(
    file,
    [
      "# a comment",
      "export IMPORTED_KEY=plain-imported-1 # trailing comment",
      'MULTI_LINE="first line\nsecond line"',
      "SINGLE_QUOTED='keeps $HOME and \\n as text'",
      "DEV_ONLY=from-the-file-3",
      "",
    ].join("\n"),
  );
  const imported = await cli(home, ["secrets", "import", file, ...dev]);
  assert.equal(imported.code, 0, imported.stderr);
  assert.equal(
    imported.stdout,
    "created    IMPORTED_KEY (version 1)\ncreated    MULTI_LINE (version 1)\ncreated    SINGLE_QUOTED (version 1)\n" +
      "skipped    DEV_ONLY (exists; --overwrite replaces it)\n" +
      `Imported ${file} into development: 3 created, 0 updated, 0 unchanged, 1 skipped.\n`,
  );
  const devValues = await exported(alice, project.id, "development");
  assert.equal(devValues.IMPORTED_KEY, "plain-imported-1");
  assert.equal(devValues.MULTI_LINE, "first line\nsecond line");
  assert.equal(devValues.SINGLE_QUOTED, "keeps $HOME and \\n as text");
  assert.equal(devValues.DEV_ONLY, "dev-only-2");
  const overwritten = await cli(home, ["secrets", "import", file, ...dev, "--overwrite", "--json"]);
  assert.equal(overwritten.code, 0, overwritten.stderr);
  assert.deepEqual(
    JSON.parse(overwritten.stdout).results.map((r: any) => `${r.key} ${r.status}`),
    ["IMPORTED_KEY unchanged", "MULTI_LINE unchanged", "SINGLE_QUOTED unchanged", "DEV_ONLY updated"],
  );
  assert.equal((await exported(alice, project.id, "development")).DEV_ONLY, "from-the-file-3");
  fs.writeFileSync(file, "GOOD_KEY=fine-value-1\nthis is not a pair\nEMPTY_VALUE=\n");
  const badFile = await cli(home, ["secrets", "import", file, ...dev]);
  assert.equal(badFile.code, 1);
  assert.match(badFile.stderr, /has lines that are not KEY=VALUE \(line 2\); nothing was written\./);
  // Such a line is often the rest of a value: never printed.
  fs.writeFileSync(file, "PEM_KEY=-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END PRIVATE KEY-----\n");
  const unquoted = await cli(home, ["secrets", "import", file, ...dev]);
  assert.equal(unquoted.code, 1);
  assert.match(unquoted.stderr, /\(lines 2, 3\); nothing was written\. A value over several lines needs quotes\./);
  assert.doesNotMatch(unquoted.stderr, /MIIEv|END PRIVATE/);
  fs.writeFileSync(file, "GOOD_KEY=fine-value-1\nEMPTY_VALUE=\ndotted.key=x\n");
  const badEntries = await cli(home, ["secrets", "import", file, ...dev]);
  assert.equal(badEntries.code, 1);
  assert.match(badEntries.stderr, /The value of EMPTY_VALUE is empty: a value has 1 to 10,000 characters/);
  assert.match(badEntries.stderr, /"dotted\.key" is not a valid key: use letters, digits and _/);
  assert.equal((await exported(alice, project.id, "development")).GOOD_KEY, undefined, "nothing of a bad file is written");
  // A valid file: the refusal is the production confirmation's, not a file's problem.
  fs.writeFileSync(file, "PROD_IMPORTED=would-be-written\n");
  const productionBefore = await exported(alice, project.id, "production");
  const noProdImport = await cli(home, ["secrets", "import", file, ...prod]);
  assert.equal(noProdImport.code, 2);
  assert.match(noProdImport.stderr, /writes to production and stdin is not a terminal/);
  assert.deepEqual(await exported(alice, project.id, "production"), productionBefore, "nothing written to production");

  // delete: the API takes a browser session only; without a terminal nobody can confirm
  // there, so the CLI names the page that would (exit 4).
  const deleted = await cli(home, ["secrets", "delete", "DEV_ONLY", ...dev]);
  assert.equal(deleted.code, 4);
  assert.match(deleted.stderr, /only a browser session delete a secret/);
  assert.ok(deleted.stderr.includes(`${server.url}/projects/${project.id}/development?delete=DEV_ONLY`), deleted.stderr);
  assert.ok("DEV_ONLY" in (await exported(alice, project.id, "development")));
  const missing = await cli(home, ["secrets", "delete", "NO_SUCH_KEY", ...dev]);
  assert.equal(missing.code, 4);
  assert.match(missing.stderr, /No secret NO_SUCH_KEY in development: nothing was deleted\./);
  const prodDelete = await cli(home, ["secrets", "delete", "PROD_ONLY", ...prod]);
  assert.equal(prodDelete.code, 2);

  // diff: keys only, exit 1 when different; values only when asked; each side is an audited export.
  await cli(home, [
    "secrets",
    "set",
    "IMPORTED_KEY=plain-imported-1",
    "MULTI_LINE=first line\nsecond line",
    "SINGLE_QUOTED=keeps $HOME and \\n as text",
    ...prod,
    "--yes",
  ]);
  await cli(home, ["secrets", "set", "DEV_ONLY=from-the-file-3", ...dev]);
  const eventsBefore = await exportEvents(alice, project.id);
  const diff = await cli(home, ["secrets", "diff", "dev", "prod", "--project", "api"]);
  assert.equal(diff.code, 1, diff.stderr);
  assert.equal(
    diff.stdout,
    "only in development  DEV_ONLY\nonly in development  JSON_KEY\nonly in production   PROD_ONLY\ndifferent            DIFF_TOKEN\n(4 the same)\n",
  );
  assert.ok(!/dev-token|prod-token|prod-only|from-the-file/.test(diff.stdout + diff.stderr), "diff printed a value");
  assert.equal(await exportEvents(alice, project.id), eventsBefore + 2);
  const shown = await cli(home, ["secrets", "diff", "development", "production", "--project", "api", "--show-values"]);
  assert.equal(shown.code, 1);
  assert.match(shown.stdout, /^different\s+DIFF_TOKEN {2}development="dev-token-4711" {2}production="prod-token-0815"$/m);
  assert.match(shown.stdout, /^only in production\s+PROD_ONLY="prod-only-1"$/m);
  const json = await cli(home, ["secrets", "diff", "dev", "prod", "--project", "api", "--json"]);
  assert.deepEqual(JSON.parse(json.stdout), {
    environments: ["development", "production"],
    onlyIn: { development: ["DEV_ONLY", "JSON_KEY"], production: ["PROD_ONLY"] },
    different: ["DIFF_TOKEN"],
    same: 4,
  });
  const quiet = await cli(home, ["secrets", "diff", "dev", "prod", "--project", "api", "--silent"]);
  assert.deepEqual([quiet.code, quiet.stdout, quiet.stderr], [1, "", ""]);
  const same = await cli(home, ["secrets", "diff", "prod", "prod", "--project", "api"]);
  assert.deepEqual([same.code, same.stdout], [0, "production and production hold the same 6 secrets.\n"]);
  const badEnv = await cli(home, ["secrets", "diff", "dev", "qa", "--project", "api"]);
  assert.equal(badEnv.code, 2);
  const noProject = await cli(home, ["secrets", "diff", "dev", "prod", "--project", "nope"]);
  assert.equal(noProject.code, 4);
});

test("link and setup on a terminal offer the projects and environments; a production write asks there", async (t) => {
  const server = await startServer(t);
  const home = cliHome(t);
  const alice = await server.signIn("alice@example.test");
  const project = await alice.createProject({ name: "api", environments: ["development", "production"] });
  await alice.createProject({ name: "web", environments: ["staging"] });
  await login(server, home, alice);
  const folder = path.join(home.dir, "app");
  fs.mkdirSync(folder);

  // Without a terminal both flags are needed.
  const piped = await cli(home, ["link"], { cwd: folder });
  assert.equal(piped.code, 2);
  assert.match(piped.stderr, /Name the project and the environment with --project and --env/);

  const linking = inTerminal(home, ["link"], folder);
  const [, apiNumber] = await linking.waitFor(/(\d+)\) api {2}\(owner\)[\s\S]*Number \[1-2\]: /);
  assert.match(linking.output(), /\d\) web {2}\(owner\)/);
  linking.child.stdin!.write("9\r");
  await linking.waitFor(/Type a number from 1 to 2\./);
  linking.child.stdin!.write(`${apiNumber}\r`);
  const [, prodNumber] = await linking.waitFor(/Which environment of api\?[\s\S]*(\d+)\) production[\s\S]*Number \[1-2\]: /);
  linking.child.stdin!.write(`${prodNumber}\r`);
  const linked = await linking.done;
  assert.equal(linked.code, 0, linked.output);
  assert.match(linked.output, /Linked .* to api \/ production on /);
  assert.deepEqual(JSON.parse(fs.readFileSync(path.join(folder, ".secrets-server.json"), "utf8")), {
    server: server.url,
    projectId: project.id,
    projectName: "api",
    environment: "production",
  });

  // setup is the same command; --project given, so only the environment is asked.
  const setup = inTerminal(home, ["setup", "--project", "web"], folder);
  await setup.waitFor(/Which environment of web\?\s+1\) staging\s+Number \[1-1\]: /);
  setup.child.stdin!.write("1\r");
  assert.equal((await setup.done).code, 0);
  assert.equal(JSON.parse(fs.readFileSync(path.join(folder, ".secrets-server.json"), "utf8")).environment, "staging");
  assert.equal((await cli(home, ["link", "--project", "api", "--env", "production"], { cwd: folder })).code, 0);

  // A write to production asks; anything but y is no.
  const declined = inTerminal(home, ["secrets", "set", "ASKED_KEY=asked-value-1"], folder);
  await declined.waitFor(/Set ASKED_KEY in production\? \[y\/N\] /);
  declined.child.stdin!.write("n\r");
  const no = await declined.done;
  assert.equal(no.code, 1);
  assert.match(no.output, /Cancelled: nothing was written\./);
  assert.deepEqual(await exported(alice, project.id, "production"), {});
  const accepted = inTerminal(home, ["secrets", "set", "ASKED_KEY=asked-value-1"], folder);
  await accepted.waitFor(/Set ASKED_KEY in production\? \[y\/N\] /);
  accepted.child.stdin!.write("y\r");
  const yes = await accepted.done;
  assert.equal(yes.code, 0, yes.output);
  assert.match(yes.output, /Created ASKED_KEY in production \(version 1\)\./);
  assert.deepEqual(await exported(alice, project.id, "production"), { ASKED_KEY: "asked-value-1" });

  // --from-stdin at a terminal asks for the value and does not show it as it is typed.
  const hidden = inTerminal(home, ["secrets", "set", "TYPED_KEY", "--from-stdin", "--yes"], folder);
  await hidden.waitFor(/Value of TYPED_KEY \(not shown\): /);
  // A typo taken back with Backspace, then Enter.
  hidden.child.stdin!.write("typed-secret-9\u007f1\r");
  const typed = await hidden.done;
  assert.equal(typed.code, 0, typed.output);
  assert.ok(!typed.output.includes("typed-secret"), `the value was shown: ${JSON.stringify(typed.output)}`);
  assert.equal((await exported(alice, project.id, "production")).TYPED_KEY, "typed-secret-1");
});

test("completion: bash completes commands, flags, project names, environments and keys from the server", async (t) => {
  const server = await startServer(t);
  const home = cliHome(t);
  const alice = await server.signIn("alice@example.test");
  const api = await alice.createProject({ name: "api", environments: ["development", "production"] });
  await alice.createProject({ name: "billing", environments: ["staging"] });
  await alice.json("POST", `/api/projects/${api.id}/environments/production/secrets`, {
    key: "DATABASE_URL",
    value: "postgres://complete-db/1",
  });
  await login(server, home, alice);

  const bin = path.join(home.dir, "bin");
  fs.mkdirSync(bin);
  fs.writeFileSync(path.join(bin, "secrets-server"), `#!/bin/sh\nexec ${sourceShellCommand()} "$@"\n`, {
    mode: 0o755,
  });
  const script = (await cli(home, ["completion", "bash"])).stdout;
  fs.writeFileSync(path.join(home.dir, "completion.bash"), script);
  const cases: [string[], string[]][] = [
    [["se"], ["secrets", "setup"]],
    [
      ["secrets", ""],
      ["list", "get", "set", "import", "delete", "diff"],
    ],
    [["secrets", "--ov"], ["--overwrite"]],
    [
      ["run", "--wa"],
      ["--watch", "--watch-interval"],
    ],
    [
      ["link", "--project", ""],
      ["api", "billing"],
    ],
    [["secrets", "list", "--project", "b"], ["billing"]],
    [
      ["run", "--project", "api", "--env", ""],
      ["development", "production"],
    ],
    [["secrets", "diff", "--project", "billing", ""], ["staging"]],
    [["secrets", "get", "--project", "api", "--env", "prod", ""], ["DATABASE_URL"]],
    [
      ["completion", ""],
      ["bash", "zsh", "fish"],
    ],
    [
      ["export", "--format", ""],
      ["dotenv", "shell", "docker", "json", "yaml"],
    ],
  ];
  const lines = [`source ${path.join(home.dir, "completion.bash")}`];
  for (const [words] of cases) {
    const all = ["secrets-server", ...words].map((w) => `'${w}'`).join(" ");
    lines.push(`COMP_WORDS=(${all}); COMP_CWORD=${words.length}; _secrets_server; echo "[\${COMPREPLY[*]}]"`);
  }
  const bash = start("bash", ["--norc", "-c", lines.join("\n")], { ...home.env, PATH: `${bin}:${process.env.PATH}` });
  const result = await bash.done;
  assert.equal(result.code, 0, result.output);
  assert.deepEqual(
    result.output.trim().split("\n"),
    cases.map(([, expected]) => `[${expected.join(" ")}]`),
  );

  // 1.5 s for the whole completion: a slow server (each answer 0.9 s late; keys take two
  // requests) gives no suggestions rather than keeping the shell waiting longer.
  const account = await createServiceAccount(alice, api.id, { name: "complete-bot", role: "viewer", environments: ["production"] });
  const { token } = await createServiceToken(alice, api.id, account.id);
  let lateMs = 0;
  const slow = await startProxy(t, server.url, async () => {
    await new Promise((resolve) => setTimeout(resolve, lateMs));
    return false;
  });
  const keys = () =>
    runMain(["__complete", "bash", "secrets", "get", "--project", "api", "--env", "prod", ""], {
      ...home.env,
      SECRETS_SERVER_TOKEN: token,
      SECRETS_SERVER_URL: slow,
    });
  assert.deepEqual([(await keys()).stdout], ["DATABASE_URL\n"], "through the proxy, on time");
  lateMs = 900;
  const late = await keys();
  assert.deepEqual([late.code, late.stdout, late.stderr], [0, "", ""]);

  // Not signed in (or the server down): no suggestions and no message, never an error on the line.
  const empty = await runMain(["__complete", "bash", "link", "--project", ""], { XDG_CONFIG_HOME: path.join(home.dir, "nowhere") });
  assert.deepEqual([empty.code, empty.stdout, empty.stderr], [0, "", ""]);
  for (const shell of ["zsh", "fish"]) {
    const printed = await cli(home, ["completion", shell]);
    assert.equal(printed.code, 0);
    assert.match(printed.stdout, /__complete/);
  }
  assert.equal((await cli(home, ["completion", "tcsh"])).code, 2);
});

/** A signed-in CLI and a project "api" whose development environment holds WATCHED_VALUE. */
async function watchedSecret(t: TestContext) {
  const server = await startServer(t);
  const home = cliHome(t);
  const alice = await server.signIn("alice@example.test");
  const project = await alice.createProject({ name: "api", environments: ["development"] });
  const base = `/api/projects/${project.id}/environments/development`;
  const created = await alice.json("POST", `${base}/secrets`, { key: "WATCHED_VALUE", value: "first-watched" });
  await login(server, home, alice);
  return { server, home, alice, project, base, created };
}

test("run --watch restarts the command when the secrets change (SIGTERM, then SIGKILL) and exits with its code", async (t) => {
  const { server, home, alice, project, base, created } = await watchedSecret(t);

  const tooOften = await cli(home, ["run", "--watch", "--watch-interval", "5", "--project", "api", "--env", "dev", "--", "true"]);
  assert.equal(tooOften.code, 2);
  assert.match(tooOften.stderr, /--watch-interval is at least 10s/);
  // A timer past 2^31 - 1 ms would fire at once: 600h would ask the server without pause.
  for (const interval of ["25h", "600h", "99999999999999999999"]) {
    const tooRarely = await cli(home, ["run", "--watch", "--watch-interval", interval, "--project", "api", "--env", "dev", "--", "true"]);
    assert.deepEqual([tooRarely.code, tooRarely.stderr.trim()], [2, "secrets-server: --watch-interval is at most 24h."], interval);
  }

  // The first command ignores SIGTERM (so it is killed after the grace period); the second exits 3.
  const child =
    "const v=process.env.WATCHED_VALUE;console.log('value='+v);" +
    "if(v==='first-watched'){process.on('SIGTERM',()=>console.log('ignoring SIGTERM'));setInterval(()=>{},1000)}else{process.exitCode=3}";
  const watching = startCli(["run", "--watch", "--project", "api", "--env", "dev", "--", process.execPath, "-e", child], home.env);
  await watching.waitFor(/value=first-watched/);
  const startedAt = Date.now();
  assert.equal(await exportEvents(alice, project.id), 1);
  // The first poll (10 s) finds nothing new: 304, no audit event, no restart.
  await waitForAnswer(server, { method: "GET", url: `${base}/export`, status: 304 });
  assert.equal(await exportEvents(alice, project.id), 1);
  assert.doesNotMatch(watching.output(), /restarting/);

  await alice.json("PATCH", `${base}/secrets/${created.body.secret.id}`, { value: "second-watched" });
  await watching.waitFor(/the secrets of development changed: restarting/);
  assert.ok(Date.now() - startedAt >= 10_000, "polled more often than every 10 s");
  await watching.waitFor(/ignoring SIGTERM/);
  await watching.waitFor(/did not stop within 10s of SIGTERM: sending SIGKILL/);
  await watching.waitFor(/value=second-watched/);
  const result = await watching.done;
  assert.equal(result.code, 3, result.output);
  assert.equal(await exportEvents(alice, project.id), 2);
});

test("run --watch: a SIGTERM that arrives while the command restarts stops it for good", async (t) => {
  const { home, alice, base, created } = await watchedSecret(t);
  // A command that takes a while to shut down on SIGTERM, as servers do (6 s, under the
  // 10 s after which run --watch kills it): our SIGTERM surely lands during the restart.
  const child =
    // It ends itself after 40 s, so that a test that fails leaves no process behind.
    "console.log('value='+process.env.WATCHED_VALUE);setTimeout(()=>process.exit(9),40000);" +
    "process.on('SIGTERM',()=>{console.log('stopping');setTimeout(()=>process.exit(0),6000)})";
  const watching = startCli(["run", "--watch", "--project", "api", "--env", "dev", "--", process.execPath, "-e", child], home.env);
  await watching.waitFor(/value=first-watched/);
  await alice.json("PATCH", `${base}/secrets/${created.body.secret.id}`, { value: "second-watched" });
  await watching.waitFor(/the secrets of development changed: restarting/);
  await watching.waitFor(/stopping/);
  // systemctl stop or docker stop, while the old command is still shutting down.
  watching.child.kill("SIGTERM");
  const stillRunning = new Promise<never>((_, reject) =>
    setTimeout(() => reject(new Error(`still running 15 s after SIGTERM:\n${watching.output()}`)), 15_000).unref(),
  );
  t.after(() => watching.child.kill("SIGKILL"));
  const result = await Promise.race([watching.done, stillRunning]);
  assert.equal(result.code, 0, result.output);
  assert.doesNotMatch(result.output, /value=second-watched/);
});
