// `run` and `export` against a real server: which secret names may reach a command's
// environment, or a shell that sources an exported file, without the consent of whoever
// runs the command (the rule is isAppSettingName; README, The CLI, "run").
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { test } from "node:test";
import dotenv from "dotenv";
import { isAppSettingName } from "../src/core/env-names.ts";
import { cli, cliHome, login } from "./cli-helpers.ts";
import { type Client, startServer } from "./helpers.ts";

/** Names that choose which code runs, or where a tool's configuration, trust or traffic goes. */
const DANGEROUS = [
  // found by a later review: compound words of the kinds the rule refuses
  "PYTEST_ADDOPTS",
  "BORG_PASSCOMMAND",
  "BORG_NEW_PASSCOMMAND",
  "HADOOP_CLASSPATH",
  "SPARK_CLASSPATH",
  "SPARK_CONF_DIR",
  "HADOOP_CONF_DIR",
  "CHROMEDRIVER_CDNURL",
  "CHROMEDRIVER_CDNBINARIESURL",
  "CHROMEDRIVER_FILEPATH",
  "JUPYTER_CONFIG_DIR",
  "SASS_BINARY_CDNURL",
  "BAZELISK_BASE_URL",
  "USE_BAZEL_VERSION",
  "SDL_DYNAMIC_API",
  // found by the review after the rule was written: they load a module, a driver or a binary by name
  "CONFIG_SITE",
  "CROSS_COMPILE",
  "PRISMA_QUERY_ENGINE_LIBRARY",
  "PRISMA_QUERY_ENGINE_BINARY",
  "GIO_MODULE_DIR",
  "GDK_PIXBUF_MODULE_FILE",
  "GTK_IM_MODULE_FILE",
  "OCL_ICD_FILENAMES",
  "VK_ICD_FILENAMES",
  "GST_PLUGIN_SCANNER",
  "CHROME_BIN",
  "FLASK_APP",
  "CATALINA_BASE",
  "COR_PROFILER",
  "COR_ENABLE_PROFILING",
  "SASS_BINARY_SITE",
  "LIBVA_DRIVER_NAME",
  "FONTCONFIG_FILE",
  "SPRING_CONFIG_LOCATION",
  "RES_OPTIONS",
  "HOSTALIASES",
  // named in the issue
  "GIT_CONFIG_COUNT",
  "GIT_CONFIG_KEY_0",
  "GIT_CONFIG_VALUE_0",
  "GIT_ASKPASS",
  "SSH_ASKPASS",
  "DOTNET_STARTUP_HOOKS",
  "CLASSPATH",
  "NODE_REPL_EXTERNAL_MODULE",
  "PAGER",
  "EDITOR",
  "VISUAL",
  "LESSOPEN",
  "HOME",
  "ZDOTDIR",
  "XDG_CONFIG_HOME",
  "XDG_DATA_DIRS",
  "XDG_RUNTIME_DIR",
  // the old block-list
  "LD_PRELOAD",
  "LD_LIBRARY_PATH",
  "LD_AUDIT",
  "DYLD_INSERT_LIBRARIES",
  "DYLD_LIBRARY_PATH",
  "NODE_OPTIONS",
  "NODE_PATH",
  "PATH",
  "BASH_ENV",
  "ENV",
  "SHELLOPTS",
  "BASHOPTS",
  "PS1",
  "PS4",
  "PROMPT_COMMAND",
  "IFS",
  "PYTHONPATH",
  "PYTHONSTARTUP",
  "PYTHONHOME",
  "PERL5LIB",
  "PERL5OPT",
  "PERLLIB",
  "RUBYOPT",
  "RUBYLIB",
  "JAVA_TOOL_OPTIONS",
  "_JAVA_OPTIONS",
  "JDK_JAVA_OPTIONS",
  "GCONV_PATH",
  "GIT_SSH_COMMAND",
  "GIT_EXEC_PATH",
  // version control and credentials helpers
  "GIT_SSH",
  "GIT_EDITOR",
  "GIT_PAGER",
  "GIT_CONFIG_GLOBAL",
  "GIT_CONFIG_PARAMETERS",
  "GIT_TEMPLATE_DIR",
  "GIT_PROXY_COMMAND",
  "GIT_EXTERNAL_DIFF",
  "SUDO_ASKPASS",
  "GH_HOST",
  "RSYNC_RSH",
  "CVS_RSH",
  // runtimes and package managers
  "NODE_EXTRA_CA_CERTS",
  "NPM_CONFIG_PREFIX",
  "npm_config_script_shell",
  "YARN_RC_FILENAME",
  "COREPACK_NPM_REGISTRY",
  "BUN_INSTALL",
  "DENO_DIR",
  "TS_NODE_COMPILER",
  "ELECTRON_RUN_AS_NODE",
  "PIP_INDEX_URL",
  "UV_INDEX_URL",
  "VIRTUAL_ENV",
  "PYTHONWARNINGS",
  "DJANGO_SETTINGS_MODULE",
  "GEM_HOME",
  "GEM_PATH",
  "BUNDLE_GEMFILE",
  "PHPRC",
  "PHP_INI_SCAN_DIR",
  "LUA_INIT",
  "R_PROFILE_USER",
  "ERL_AFLAGS",
  "JAVA_HOME",
  "MAVEN_OPTS",
  "GRADLE_OPTS",
  "GRADLE_USER_HOME",
  "DOTNET_ROOT",
  "CORECLR_PROFILER_PATH",
  "COMPLUS_DBGJITDEBUGLAUNCHSETTING",
  "ASPNETCORE_HOSTINGSTARTUPASSEMBLIES",
  // compilers and build tools
  "CARGO_HOME",
  "RUSTC_WRAPPER",
  "RUSTFLAGS",
  "GOFLAGS",
  "GOTOOLCHAIN",
  "GOPROXY",
  "CGO_LDFLAGS",
  "CC",
  "CFLAGS",
  "LDFLAGS",
  "MAKEFLAGS",
  "PKG_CONFIG_PATH",
  "CONFIG_SHELL",
  // shells, terminals, the C library
  "SHELL",
  "TMPDIR",
  "BROWSER",
  "TERM",
  "MANPAGER",
  "LESS",
  "LESSCLOSE",
  "INPUTRC",
  "HISTFILE",
  "LC_ALL",
  "LANG",
  "GLIBC_TUNABLES",
  "MALLOC_CHECK_",
  "OPENSSL_CONF",
  "SSL_CERT_FILE",
  // deployment tools, cloud CLIs, proxies
  "KUBECONFIG",
  "KUBE_EDITOR",
  "DOCKER_HOST",
  "DOCKER_CONFIG",
  "AWS_CONFIG_FILE",
  "AWS_SHARED_CREDENTIALS_FILE",
  "GOOGLE_APPLICATION_CREDENTIALS",
  "CLOUDSDK_PYTHON",
  "TF_CLI_ARGS",
  "ANSIBLE_CONFIG",
  "APT_CONFIG",
  "HTTP_PROXY",
  "HTTPS_PROXY",
  "http_proxy",
  "NO_PROXY",
  // this CLI's own settings, for a nested `secrets-server run`
  "SECRETS_SERVER_ALLOW_ENV",
  "SECRETS_SERVER_URL",
  "SECRETS_SERVER_ALLOW_HTTP",
  // shapes: not upper-case words
  "Database_Url",
  "lower_case_key",
  "FOO__BAR",
  "TRAILING_",
];

/** Ordinary application settings: the secrets people keep. */
const APP_SETTINGS = [
  "DATABASE_URL",
  "STRIPE_SECRET_KEY",
  "AWS_ACCESS_KEY_ID",
  "AWS_SECRET_ACCESS_KEY",
  "AWS_SESSION_TOKEN",
  "AWS_REGION",
  "AWS_DEFAULT_REGION",
  "REDIS_URL",
  "PORT",
  "DEBUG",
  "NODE_ENV",
  "GITHUB_TOKEN",
  "GOOGLE_CLIENT_ID",
  "GOOGLE_CLIENT_SECRET",
  "AZURE_CLIENT_SECRET",
  "SENTRY_DSN",
  "JWT_SECRET",
  "SESSION_SECRET",
  "API_KEY",
  "OPENAI_API_KEY",
  "SMTP_HOST",
  "SMTP_PASSWORD",
  "LOG_LEVEL",
  "S3_BUCKET",
  "NEXT_PUBLIC_API_URL",
  "VITE_API_URL",
  "RAILS_ENV",
  "RUST_LOG",
  "SLACK_WEBHOOK_URL",
  "TWILIO_AUTH_TOKEN",
  "MONGODB_URI",
  "POSTGRES_PASSWORD",
  "POSTGRES_PASSWORD_FILE",
  "FEATURE_FLAGS",
  "APP_MODE",
  "OAUTH2_CLIENT_ID",
];

function valueFor(key: string): string {
  return `planted-value-of-${key}`;
}

test("the rule refuses every name that chooses code, configuration, trust or traffic, and passes application settings", () => {
  assert.ok(DANGEROUS.length >= 60, `${DANGEROUS.length} dangerous names`);
  assert.equal(new Set(DANGEROUS).size, DANGEROUS.length, "no name twice");
  const passed = DANGEROUS.filter((key) => isAppSettingName(key));
  assert.deepEqual(passed, [], "dangerous names that pass");
  const refused = APP_SETTINGS.filter((key) => !isAppSettingName(key));
  assert.deepEqual(refused, [], "application settings that are refused");
});

async function importSecrets(owner: Client, projectId: string, keys: string[]): Promise<void> {
  const entries = keys.map((key) => ({ key, value: valueFor(key), overwrite: false }));
  const res = await owner.json("POST", `/api/projects/${projectId}/environments/production/import`, { entries });
  assert.equal(res.status, 200, JSON.stringify(res.body));
  assert.equal(res.body.summary.created, keys.length);
}

/** The command's environment as `env -0` prints it. */
function environmentOf(stdout: string): Map<string, string> {
  const env = new Map<string, string>();
  for (const entry of stdout.split("\0").filter(Boolean)) {
    const at = entry.indexOf("=");
    env.set(entry.slice(0, at), entry.slice(at + 1));
  }
  return env;
}

test("run: a secret named like GIT_ASKPASS or PAGER never reaches the command unless the person running it allows it", async (t) => {
  const server = await startServer(t);
  const home = cliHome(t);
  const alice = await server.signIn("alice@example.test");
  const project = await alice.createProject({ name: "deploy", environments: ["production"] });
  await importSecrets(alice, project.id, [...DANGEROUS, ...APP_SETTINGS]);
  await login(server, home, alice);
  const target = ["--project", "deploy", "--env", "production"];
  // An absolute path: PATH may be one of the secrets. `env` prints what the command got.
  const printEnv = ["--", "/usr/bin/env", "-0"];

  const guarded = await cli(home, ["run", ...target, ...printEnv]);
  assert.equal(guarded.code, 0, guarded.stderr);
  const seen = environmentOf(guarded.stdout);
  for (const key of DANGEROUS) assert.notEqual(seen.get(key), valueFor(key), `${key} reached the command`);
  for (const key of APP_SETTINGS) assert.equal(seen.get(key), valueFor(key), `${key} was left out`);
  // One warning that names every key left out and how to let one through; no value.
  const warnings = guarded.stderr.split("\n").filter((line) => line.startsWith("secrets-server: left out "));
  assert.equal(warnings.length, 1, guarded.stderr);
  for (const key of DANGEROUS) {
    assert.ok(warnings[0]!.includes(` ${key},`) || warnings[0]!.includes(` ${key}:`), `${key} is not named in the warning`);
    assert.ok(warnings[0]!.includes(`--allow-env ${key} `) || warnings[0]!.includes(`--allow-env ${key} (`), `no remedy for ${key}`);
  }
  for (const key of APP_SETTINGS) assert.ok(!warnings[0]!.includes(` ${key},`) && !warnings[0]!.includes(` ${key}:`), `${key} named`);
  assert.ok(!guarded.stderr.includes("planted-value"), "values are never printed");

  // --allow-env, from the person who owns the machine, lets each one through.
  const allowed = await cli(home, ["run", ...target, ...DANGEROUS.flatMap((key) => ["--allow-env", key]), ...printEnv]);
  assert.equal(allowed.code, 0, allowed.stderr);
  const all = environmentOf(allowed.stdout);
  for (const key of [...DANGEROUS, ...APP_SETTINGS]) assert.equal(all.get(key), valueFor(key), `${key} with --allow-env`);
  assert.ok(!allowed.stderr.includes("left out"), allowed.stderr);

  // So does SECRETS_SERVER_ALLOW_ENV in the runner's own environment (CI).
  const fromEnv = await cli(home, ["run", ...target, ...printEnv], { env: { SECRETS_SERVER_ALLOW_ENV: "PAGER, GIT_ASKPASS" } });
  assert.equal(fromEnv.code, 0, fromEnv.stderr);
  const some = environmentOf(fromEnv.stdout);
  assert.equal(some.get("PAGER"), valueFor("PAGER"));
  assert.equal(some.get("GIT_ASKPASS"), valueFor("GIT_ASKPASS"));
  assert.notEqual(some.get("EDITOR"), valueFor("EDITOR"));
  assert.match(fromEnv.stderr, /left out .*EDITOR/);
  assert.doesNotMatch(fromEnv.stderr, /left out [^\n]*\bPAGER\b/);

  // Leaving secrets out does not change the exit code: it is still the command's.
  const failing = await cli(home, ["run", ...target, "--", process.execPath, "-e", "process.exit(3)"]);
  assert.equal(failing.code, 3, failing.stderr);
});

test("run: a value holding a NUL is left out by name, never quoted; the command runs with the rest", async (t) => {
  const server = await startServer(t);
  const home = cliHome(t);
  const alice = await server.signIn("alice@example.test");
  const project = await alice.createProject({ name: "deploy", environments: ["production"] });
  const entries = [
    { key: "BINARY_BLOB", value: "nul-planted\0after-the-nul", overwrite: false },
    { key: "DATABASE_URL", value: "postgres://db/app-2718", overwrite: false },
    // A valid key that a plain object would take for its prototype.
    { key: "__proto__", value: "an-object-key-value", overwrite: false },
  ];
  const res = await alice.json("POST", `/api/projects/${project.id}/environments/production/import`, { entries });
  assert.equal(res.status, 200, JSON.stringify(res.body));
  await login(server, home, alice);
  const ran = await cli(home, [
    "run",
    "--allow-env",
    "__proto__",
    "--project",
    "deploy",
    "--env",
    "production",
    "--",
    "/usr/bin/env",
    "-0",
  ]);
  assert.equal(ran.code, 0, ran.stderr);
  const seen = environmentOf(ran.stdout);
  assert.equal(seen.get("DATABASE_URL"), "postgres://db/app-2718");
  assert.equal(seen.get("__proto__"), "an-object-key-value");
  assert.equal(seen.has("BINARY_BLOB"), false);
  assert.match(ran.stderr, /^secrets-server: left out BINARY_BLOB: its value holds a NUL character/m);
  assert.ok(!ran.stderr.includes("nul-planted") && !ran.stderr.includes("after-the-nul"), ran.stderr);
  const silent = await cli(home, ["run", "--silent", "--project", "deploy", "--env", "production", "--", "/usr/bin/env", "-0"]);
  assert.deepEqual([silent.code, silent.stderr], [0, ""]);
});

test("run: GIT_CONFIG_* secrets cannot make the next git command run a program (core.fsmonitor)", async (t) => {
  const hasGit = spawnSync("git", ["--version"]).status === 0;
  if (!hasGit) return t.skip("git is not installed");
  const server = await startServer(t);
  const home = cliHome(t);
  const alice = await server.signIn("alice@example.test");
  const project = await alice.createProject({ name: "repo", environments: ["production"] });
  const repo = path.join(home.dir, "work");
  const canary = path.join(home.dir, "CANARY");
  fs.mkdirSync(repo);
  assert.equal(spawnSync("git", ["init", "-q", repo]).status, 0);
  const secrets = { GIT_CONFIG_COUNT: "1", GIT_CONFIG_KEY_0: "core.fsmonitor", GIT_CONFIG_VALUE_0: `touch ${canary}; false` };
  const res = await alice.json("POST", `/api/projects/${project.id}/environments/production/import`, {
    entries: Object.entries(secrets).map(([key, value]) => ({ key, value, overwrite: false })),
  });
  assert.equal(res.status, 200, JSON.stringify(res.body));
  await login(server, home, alice);

  const status = await cli(home, ["run", "--project", "repo", "--env", "production", "--", "git", "-C", repo, "status", "--short"]);
  assert.equal(status.code, 0, status.stderr);
  assert.equal(fs.existsSync(canary), false, "git ran the program a secret chose");
  assert.match(status.stderr, /left out GIT_CONFIG_COUNT, GIT_CONFIG_KEY_0, GIT_CONFIG_VALUE_0:/);
});

test("export: a shell sourcing the .env file runs nothing and sets no name that run would leave out; dotenv reads everything", async (t) => {
  // bash comes with Debian: a missing one is a broken setup, not a reason to test less.
  assert.equal(spawnSync("bash", ["-c", "true"]).status, 0, "bash runs");
  const server = await startServer(t);
  const home = cliHome(t);
  const alice = await server.signIn("alice@example.test");
  const project = await alice.createProject({ name: "api", environments: ["production"] });
  const canary = path.join(home.dir, "CANARY");
  const secrets: Record<string, string> = {
    // A ' made the CLI quote the value in backticks, which bash runs as a command.
    NOTE_TEXT: `it''s; touch ${canary}`,
    GIT_ASKPASS: `/tmp/planted-askpass`,
    LD_PRELOAD: "/tmp/planted.so",
    PATH: "/tmp/planted-bin",
    DATABASE_URL: "postgres://u:p@db/app",
    TRY_BLOCK_ERROR: "1",
    // An application setting whose value only dotenv's quoting carries (a ' and a $).
    PRICE_NOTE: "it's $5",
  };
  const res = await alice.json("POST", `/api/projects/${project.id}/environments/production/import`, {
    entries: Object.entries(secrets).map(([key, value]) => ({ key, value, overwrite: false })),
  });
  assert.equal(res.status, 200, JSON.stringify(res.body));
  await login(server, home, alice);
  const file = path.join(home.dir, "prod.env");

  const exported = await cli(home, ["export", "--project", "api", "--env", "production", "--output", file]);
  assert.equal(exported.code, 0, exported.stderr);
  const text = fs.readFileSync(file, "utf8");
  assert.deepEqual(dotenv.parse(text), secrets);
  assert.match(exported.stderr, /a shell that sources this file does not set GIT_ASKPASS, LD_PRELOAD, PATH: /);
  assert.match(exported.stderr, /a shell that sources this file does not set TRY_BLOCK_ERROR: zsh gives this name a type of its own/);
  assert.match(exported.stderr, /a shell that sources this file does not set PRICE_NOTE: its value needs quoting that only dotenv reads/);
  // The same file as the server's own export (and the web UI's download).
  const served = await alice.get(`/api/projects/${project.id}/environments/production/export?format=dotenv`);
  assert.equal(await served.text(), text);
  const script = `set -a; . "$1"; set +a; printf '%s\\0' "\${GIT_ASKPASS-unset}" "\${LD_PRELOAD-unset}" "$PATH" "\${DATABASE_URL-unset}"`;
  const sourced = spawnSync("bash", ["--norc", "--noprofile", "-c", script, "bash", file], {
    env: { PATH: "/usr/bin:/bin", HOME: home.dir },
    encoding: "utf8",
  });
  assert.equal(fs.existsSync(canary), false, "sourcing the file ran a command");
  assert.deepEqual(sourced.stdout.split("\0").slice(0, 4), ["unset", "unset", "/usr/bin:/bin", "postgres://u:p@db/app"]);
});
