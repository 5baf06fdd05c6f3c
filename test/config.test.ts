import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import { createRequire } from "node:module";
import net from "node:net";
import path from "node:path";
import { test } from "node:test";
import vm from "node:vm";
import Database from "better-sqlite3";
import { envSchema } from "env-schema";
import { ConfigError, ENV_SCHEMA, loadConfig } from "../src/core/config.ts";
import { backupDatabase, openDatabase } from "../src/core/db.ts";
import { chooseLogFormat } from "../src/core/logging.ts";
import { precompiledEnvSchema } from "../src/dev/env-schema-precompiled.ts";
import { sourceCommand } from "../src/dev/source-command.ts";
import { Client, makeTempDir, randomMasterKey, runMain, startServer, startServerProcess } from "./helpers.ts";
import { connectionSettings, migrateFromTheFuture, storedRows } from "./storage.ts";

function configError(env: Record<string, string>): string {
  try {
    loadConfig(env);
  } catch (error) {
    assert.ok(error instanceof ConfigError, `expected a ConfigError, got ${String(error)}`);
    return error.message;
  }
  assert.fail(`expected ${JSON.stringify(env)} to be refused`);
}

test("defaults come up in development on ./data with the dev sign-in", () => {
  const config = loadConfig({});
  assert.equal(config.isProduction, false);
  assert.equal(config.host, "127.0.0.1");
  assert.equal(config.port, 8080);
  assert.equal(config.appUrl, "http://localhost:8080");
  assert.equal(config.dataDir, path.resolve("data"));
  assert.equal(config.authProvider, "dev");
  assert.equal(config.vercelApiUrl, "https://api.vercel.com");
  assert.equal(config.sqliteSynchronous, "full");
  assert.equal(config.trustProxy, false);
  assert.equal(config.rateLimitIpv6Prefix, 64);
  assert.equal(loadConfig({ RATE_LIMIT_IPV6_PREFIX: "128" }).rateLimitIpv6Prefix, 128);
});

test("each invalid variable is refused with its name in the message", () => {
  const cases: [Record<string, string>, string][] = [
    [{ NODE_ENV: "staging" }, "NODE_ENV"],
    [{ PORT: "http" }, "PORT"],
    [{ PORT: "70000" }, "PORT"],
    [{ APP_URL: "not a url" }, "APP_URL"],
    [{ APP_URL: "ftp://example.com" }, "APP_URL"],
    [{ AUTH_PROVIDER: "saml" }, "AUTH_PROVIDER"],
    [{ AUTH_PROVIDER: "oidc" }, "OIDC_ISSUER"],
    [{ AUTH_PROVIDER: "oidc", OIDC_ISSUER: "https://id.example.com" }, "OIDC_CLIENT_ID"],
    [{ LOG_LEVEL: "loud" }, "LOG_LEVEL"],
    [{ SQLITE_SYNCHRONOUS: "off" }, "SQLITE_SYNCHRONOUS"],
    [{ VERCEL_API_URL: "api.vercel.com" }, "VERCEL_API_URL"],
    [{ MASTER_KEY_VERSION: "0" }, "MASTER_KEY_VERSION"],
    [{ SMTP_URL: "mail.example.com" }, "SMTP_URL"],
    [{ TRUST_PROXY: " , " }, "TRUST_PROXY"],
    [{ TRUST_PROXY: "proxy.internal" }, "TRUST_PROXY"],
    [{ TRUST_PROXY: "10.0.0.1, 10.0.0.0/99" }, "TRUST_PROXY"],
    [{ TRUST_PROXY: "0.0.0.0/0" }, "TRUST_PROXY"],
    [{ TRUST_PROXY: "0" }, "TRUST_PROXY"],
    [{ RATE_LIMIT_IPV6_PREFIX: "16" }, "RATE_LIMIT_IPV6_PREFIX"],
    [{ RATE_LIMIT_IPV6_PREFIX: "129" }, "RATE_LIMIT_IPV6_PREFIX"],
  ];
  for (const [env, name] of cases) {
    const message = configError(env);
    assert.match(message, new RegExp(name), `${JSON.stringify(env)} → ${message}`);
    assert.doesNotMatch(message, /\n/);
  }
});

test("production requires MASTER_KEY, a real sign-in provider and https", () => {
  const key = randomMasterKey();
  assert.match(configError({ NODE_ENV: "production", AUTH_PROVIDER: "local" }), /MASTER_KEY is required/);
  assert.match(configError({ NODE_ENV: "production", MASTER_KEY: key }), /AUTH_PROVIDER/);
  assert.match(configError({ NODE_ENV: "production", MASTER_KEY: key, AUTH_PROVIDER: "dev" }), /AUTH_PROVIDER=dev/);
  assert.match(
    configError({ NODE_ENV: "production", MASTER_KEY: key, AUTH_PROVIDER: "local", APP_URL: "http://secrets.example.com" }),
    /APP_URL must use https/,
  );
  // Loopback is what never leaves the machine, nothing that merely looks like it.
  for (const appUrl of ["http://127.0.0.1.example.com", "http://localhost.example.com", "http://[::2]:8080"]) {
    assert.match(
      configError({ NODE_ENV: "production", MASTER_KEY: key, AUTH_PROVIDER: "local", APP_URL: appUrl }),
      /APP_URL must use https/,
      appUrl,
    );
  }
  for (const appUrl of [
    "http://localhost:8080",
    "http://127.0.0.1:8080",
    "http://127.0.1.1:8080",
    "http://[::1]:8080",
    "https://secrets.example.com/",
  ]) {
    const config = loadConfig({ NODE_ENV: "production", MASTER_KEY: key, AUTH_PROVIDER: "local", APP_URL: appUrl });
    assert.equal(config.isProduction, true);
    assert.equal(config.appUrl, appUrl.replace(/\/$/, ""));
  }
});

test("TRUST_PROXY takes a hop count or a list of addresses", () => {
  assert.equal(loadConfig({ TRUST_PROXY: "2" }).trustProxy, 2);
  assert.equal(loadConfig({ TRUST_PROXY: " 2 " }).trustProxy, 2, "spaces around a hop count, as around a list's entries");
  assert.deepEqual(loadConfig({ TRUST_PROXY: "10.0.0.1, 10.0.0.2" }).trustProxy, ["10.0.0.1", "10.0.0.2"]);
  assert.deepEqual(loadConfig({ TRUST_PROXY: "loopback,10.0.0.0/8,fd00::/8" }).trustProxy, ["loopback", "10.0.0.0/8", "fd00::/8"]);
  assert.equal(loadConfig({ TRUST_PROXY: "false" }).trustProxy, false);
});

test("DATABASE_URL chooses PostgreSQL, with its pool, timeout and CA settings; a bad one stops the start with one line", async () => {
  const url = "postgres://app:hunter2pw@db.internal:5432/secrets?sslmode=verify-full";
  const key = randomMasterKey();
  assert.deepEqual(loadConfig({ DATABASE_URL: url, MASTER_KEY: key }).database, {
    url,
    poolSize: 10,
    statementTimeoutMs: 30_000,
    caFile: undefined,
  });
  const tuned = loadConfig({
    MASTER_KEY: key,
    DATABASE_URL: "postgresql://db.internal/secrets",
    DATABASE_POOL_SIZE: "4",
    DATABASE_STATEMENT_TIMEOUT_SECONDS: "5",
    DATABASE_CA_FILE: "/etc/ssl/db-ca.pem",
  }).database;
  assert.deepEqual(tuned, { url: "postgresql://db.internal/secrets", poolSize: 4, statementTimeoutMs: 5000, caFile: "/etc/ssl/db-ca.pem" });
  assert.equal(loadConfig({}).database, undefined, "SQLite in DATA_DIR when it is unset");
  assert.throws(
    () => loadConfig({ DATABASE_URL: "mysql://app:hunter2pw@db.internal/secrets" }),
    (error: unknown) => error instanceof ConfigError && error.message === "DATABASE_URL must start with postgres:// or postgresql://.",
  );
  assert.throws(
    () => loadConfig({ DATABASE_URL: "postgres://app:hunter2pw@db.internal/secrets", MASTER_KEY: key, DATABASE_POOL_SIZE: "0" }),
    (error: unknown) => error instanceof ConfigError && /DATABASE_POOL_SIZE/.test(error.message),
  );
  // A database that cannot be reached stops the start with one line that names it and not its password.
  const dataDir = path.join(makeTempDir(), "data");
  const nowhere = path.join(makeTempDir(), "no-server-here");
  assert.throws(
    () => loadConfig({ DATABASE_URL: url }),
    (error: unknown) =>
      error instanceof ConfigError &&
      error.message === "MASTER_KEY is required with DATABASE_URL: give every server the same key (openssl rand -base64 32 makes one).",
  );
  const result = await runMain(["serve"], {
    DATA_DIR: dataDir,
    MASTER_KEY: randomMasterKey(),
    DATABASE_URL: `postgres://app:hunter2pw@/secrets?host=${encodeURIComponent(nowhere)}`,
  });
  assert.equal(result.code, 1);
  assert.match(result.stderr.trim(), /^secrets-server: configuration error: The database at DATABASE_URL cannot be reached: .*ENOENT/);
  assert.equal(result.stderr.trim().split("\n").length, 1);
  assert.doesNotMatch(result.stderr + result.stdout, /hunter2pw/);
});

test("the process stops with one clear line naming a bad variable", async () => {
  const dataDir = makeTempDir();
  try {
    const result = await runMain(["serve"], { DATA_DIR: dataDir, PORT: "99999" });
    assert.equal(result.code, 1);
    assert.equal(result.stderr.trim().split("\n").length, 1, result.stderr);
    assert.match(result.stderr, /^secrets-server: configuration error: PORT /);

    const proxy = await runMain(["serve"], { DATA_DIR: dataDir, TRUST_PROXY: "proxy.internal" });
    assert.equal(proxy.code, 1);
    assert.equal(proxy.stderr.trim().split("\n").length, 1, proxy.stderr);
    assert.match(proxy.stderr, /^secrets-server: configuration error: TRUST_PROXY /);

    const production = await runMain(["serve"], { DATA_DIR: dataDir, NODE_ENV: "production", AUTH_PROVIDER: "local" });
    assert.equal(production.code, 1);
    assert.match(production.stderr, /MASTER_KEY is required in production/);
  } finally {
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
});

test("a PORT already in use or a HOST that does not resolve stops the start with one line", async () => {
  const dataDir = makeTempDir();
  const blocker = net.createServer();
  await new Promise<void>((resolve) => blocker.listen(0, "127.0.0.1", resolve));
  try {
    const port = String((blocker.address() as net.AddressInfo).port);
    const inUse = await runMain(["serve"], { DATA_DIR: dataDir, PORT: port });
    assert.equal(inUse.code, 1);
    assert.equal(inUse.stderr.trim().split("\n").length, 1, inUse.stderr);
    assert.match(inUse.stderr, new RegExp(`^secrets-server: configuration error: PORT ${port} is already in use`));

    const host = await runMain(["serve"], { DATA_DIR: dataDir, PORT: "0", HOST: "no-such-host.invalid" });
    assert.equal(host.code, 1);
    assert.equal(host.stderr.trim().split("\n").length, 1, host.stderr);
    assert.match(host.stderr, /^secrets-server: configuration error: HOST no-such-host\.invalid /);
  } finally {
    blocker.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
});

test("MASTER_KEY must decode to 32 bytes", async () => {
  const dataDir = makeTempDir();
  try {
    const short = Buffer.alloc(16, 1).toString("base64");
    const result = await runMain(["serve"], { DATA_DIR: dataDir, MASTER_KEY: short });
    assert.equal(result.code, 1);
    assert.match(result.stderr, /MASTER_KEY must decode to 32 bytes/);
    assert.ok(!result.stderr.includes(short), "the key itself is never printed");
  } finally {
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
});

test("a database a newer version migrated refuses to start, and is left as it was", async (t) => {
  const server = await startServer(t);
  const alice = await server.signIn("alice@example.test");
  await alice.createProject({ name: "api", environments: ["production"] });
  await server.stop();
  // What a newer version leaves behind: a migration this code does not have.
  const restoreBackup = migrateFromTheFuture(server.dataDir);

  const result = await runMain(["serve"], server.env);
  assert.equal(result.code, 1);
  assert.match(result.stderr, /configuration error: The database in DATA_DIR was upgraded by a newer version of secrets-server/);
  const migrate = await runMain(["migrate"], server.env);
  assert.equal(migrate.code, 1);

  // Back to what this version knows (as restoring the pre-upgrade backup would): it starts.
  restoreBackup();
  const again = await server.restart();
  t.after(() => again.stop());
  const client = await again.signIn("alice@example.test");
  assert.deepEqual(
    (await client.json("GET", "/api/projects")).body.projects.map((p: { name: string }) => p.name),
    ["api"],
  );
});

test("a different MASTER_KEY against an existing database refuses to start and changes nothing", async (t) => {
  const server = await startServer(t);
  const alice = await server.signIn("alice@example.test");
  await alice.createProject({ name: "api", environments: ["production"] });
  await server.stop();

  const wrongKey = randomMasterKey();
  await assert.rejects(server.restart({ MASTER_KEY: wrongKey }), (error: unknown) => {
    assert.ok(error instanceof ConfigError);
    assert.match(error.message, /MASTER_KEY does not match the key version 1/);
    assert.ok(!error.message.includes(wrongKey));
    return true;
  });
  const result = await runMain(["serve"], { ...server.env, MASTER_KEY: wrongKey });
  assert.equal(result.code, 1);
  assert.match(result.stderr, /configuration error: MASTER_KEY does not match/);

  // The right key still works and the data is intact.
  const again = await server.restart();
  t.after(() => again.stop());
  const client = await again.signIn("alice@example.test");
  const { body } = await client.json("GET", "/api/projects");
  assert.deepEqual(
    body.projects.map((p: { name: string }) => p.name),
    ["api"],
  );
});

test("in development without MASTER_KEY a key file is generated once with mode 0600", async (t) => {
  const server = await startServer(t, { env: { MASTER_KEY: undefined } });
  const file = path.join(server.dataDir, "master.key");
  const stat = fs.statSync(file);
  assert.equal(stat.mode & 0o777, 0o600);
  const first = fs.readFileSync(file, "utf8");
  assert.equal(Buffer.from(first.trim(), "base64").length, 32);
  assert.ok(
    server.logs.some((l) => l.includes("MASTER_KEY is not set")),
    "a warning is logged",
  );
  assert.ok(!server.logs.some((l) => l.includes(first.trim())), "the key is never logged");
  const again = await server.restart();
  t.after(() => again.stop());
  assert.equal(fs.readFileSync(file, "utf8"), first);
});

test("the database runs in WAL mode with a 2 MiB page cache; FULL durability by group commit in the server, SQLite's FULL in the commands", async (t) => {
  const server = await startServer(t);
  // The server's connection commits at NORMAL and syncs the WAL itself (group commit,
  // test/group-commit.test.ts). The cache in KiB, negative: better-sqlite3's 16 MB default
  // stayed filled after a load.
  assert.deepEqual(connectionSettings(server), { journalMode: "wal", synchronous: 1, foreignKeys: 1, cacheSize: -2048 });
  const relaxed = await server.restart({ SQLITE_SYNCHRONOUS: "normal" });
  t.after(() => relaxed.stop());
  assert.equal(connectionSettings(relaxed).synchronous, 1);
  // A command's connection (users, rotate-key, audit verify) fsyncs in each commit.
  const dataDir = makeTempDir();
  const command = openDatabase({ dataDir, sqliteSynchronous: "full" });
  try {
    assert.equal(command.$client.pragma("synchronous", { simple: true }), 2);
  } finally {
    command.$client.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
});

test("migrate applies the migrations and exits", async () => {
  const dataDir = makeTempDir();
  try {
    const result = await runMain(["migrate"], { DATA_DIR: dataDir, MASTER_KEY: randomMasterKey() });
    assert.equal(result.code, 0, result.stderr);
    assert.ok(fs.existsSync(path.join(dataDir, "secrets.db")));
    const version = await runMain(["version"], {});
    assert.match(version.stdout, /^\d+\.\d+\.\d+/);
    const unknown = await runMain(["frobnicate"], {});
    assert.equal(unknown.code, 2);
    assert.match(unknown.stderr, /Unknown command "frobnicate"/);
  } finally {
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
});

test("an empty variable counts as unset, and only the given environment is read", () => {
  const config = loadConfig({ MASTER_KEY: "", APP_URL: "", TRUST_PROXY: "" });
  assert.equal(config.masterKey, undefined);
  assert.equal(config.appUrl, "http://localhost:8080");
  assert.equal(config.trustProxy, false);
  const saved = process.env.PORT;
  process.env.PORT = "1234";
  try {
    assert.equal(loadConfig({}).port, 8080, "process.env does not leak into an explicit environment");
  } finally {
    if (saved === undefined) delete process.env.PORT;
    else process.env.PORT = saved;
  }
});

test("backup writes a consistent copy that a server can start from", async (t) => {
  const server = await startServer(t);
  const alice = await server.signIn("alice@example.test");
  await alice.createProject({ name: "kept", environments: ["production"] });
  const target = path.join(makeTempDir(), "copy.db");
  t.after(() => fs.rmSync(path.dirname(target), { recursive: true, force: true }));

  const result = await runMain(["backup", target], server.env);
  assert.equal(result.code, 0, result.stderr);
  assert.equal(fs.statSync(target).mode & 0o777, 0o600);
  const again = await runMain(["backup", target], server.env);
  assert.equal(again.code, 1, "never overwrites");
  assert.match(again.stderr, /already exists/);

  const restoredDir = makeTempDir();
  fs.copyFileSync(target, path.join(restoredDir, "secrets.db"));
  const restored = await startServer(t, { dataDir: restoredDir, env: { MASTER_KEY: server.env.MASTER_KEY } });
  t.after(() => fs.rmSync(restoredDir, { recursive: true, force: true }));
  const client = await restored.signIn("alice@example.test");
  const { body } = await client.json("GET", "/api/projects");
  assert.deepEqual(
    body.projects.map((p: { name: string }) => p.name),
    ["kept"],
  );
});

test("backup refuses a file name that begins or ends with white space, and creates nothing under it or the trimmed name", async (t) => {
  const server = await startServer(t);
  const dir = makeTempDir();
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  // A name from a script with Windows line ends: better-sqlite3 would write to the trimmed name.
  const carriageReturn = await runMain(["backup", path.join(dir, "copy.db\r")], server.env);
  assert.equal(carriageReturn.code, 1);
  assert.equal(
    carriageReturn.stderr,
    `secrets-server: configuration error: The file name ${JSON.stringify(path.join(dir, "copy.db\r"))} begins or ends with white space, which the backup would drop and write another file: give FILE without it.\n`,
  );
  for (const name of ["copy.db ", "copy.db\n", "copy.db\u00a0", "copy.db\u2028"]) {
    const result = await runMain(["backup", path.join(dir, name)], server.env);
    assert.equal(result.code, 1, JSON.stringify(name));
    assert.match(result.stderr, /^secrets-server: configuration error: The file name ".*" begins or ends with white space/);
    assert.equal(result.stderr.split("\n").length, 2, "one line");
  }
  assert.deepEqual(fs.readdirSync(dir), []);
});

test("backup finishes while another connection commits between its steps", async () => {
  // Removed when the test's process ends (makeTempDir), after the servers' leak scan.
  const dataDir = makeTempDir();
  const db = openDatabase({ dataDir, sqliteSynchronous: "normal" });
  // Some 2 MB, hundreds of pages: more than one of SQLite's default backup steps.
  db.$client.exec("CREATE TABLE filler (n INTEGER PRIMARY KEY, text TEXT)");
  const insert = db.$client.prepare("INSERT INTO filler (text) VALUES (?)");
  db.$client.transaction(() => {
    for (let i = 0; i < 2000; i++) insert.run("f".repeat(1000));
  })();
  // A server's commits, one on every turn of the event loop: each would restart a copy made in steps.
  let writing = true;
  const write = () => {
    if (!writing) return;
    insert.run("during the backup");
    setImmediate(write);
  };
  setImmediate(write);
  const target = path.join(dataDir, "copy.db");
  try {
    await Promise.race([
      backupDatabase({ dataDir }, target),
      new Promise((_, reject) => setTimeout(() => reject(new Error("the backup did not finish within 10 s")), 10_000).unref()),
    ]);
  } finally {
    writing = false;
  }
  db.$client.close();
  const copy = new Database(target, { readonly: true });
  try {
    assert.equal(copy.pragma("integrity_check", { simple: true }), "ok");
    assert.ok((copy.prepare("SELECT count(*) AS n FROM filler").get() as { n: number }).n >= 2000);
  } finally {
    copy.close();
  }
});

test("OIDC_ALLOWED_DOMAINS folds ASCII capitals only: a domain written with the Kelvin sign stays another domain", () => {
  const oidc = { AUTH_PROVIDER: "oidc", OIDC_ISSUER: "https://id.example.com", OIDC_CLIENT_ID: "c", OIDC_CLIENT_SECRET: "s" };
  // toLowerCase would make the first kexample.com, and let x@kexample.com in.
  assert.deepEqual(loadConfig({ ...oidc, OIDC_ALLOWED_DOMAINS: "\u212Aexample.com, KExample.COM ,," }).oidc?.allowedDomains, [
    "\u212Aexample.com",
    "kexample.com",
  ]);
});

test("a variable with a fixed set of values names them", () => {
  assert.equal(configError({ LOG_LEVEL: "loud" }), "LOG_LEVEL must be one of: fatal, error, warn, info, debug, trace, silent.");
  assert.equal(configError({ NODE_ENV: "prod" }), "NODE_ENV must be one of: development, production, test.");
});

test("the executable's env-schema, compiled by the build, answers every input as env-schema does", () => {
  // Loaded as build.mjs bundles it: a CommonJS module whose requires resolve from env-schema's folder.
  const built: { exports: { envSchema?: typeof envSchema } } = { exports: {} };
  const envSchemaFile = createRequire(import.meta.url).resolve("env-schema");
  vm.compileFunction(precompiledEnvSchema(ENV_SCHEMA), ["module", "exports", "require"])(
    built,
    built.exports,
    createRequire(envSchemaFile),
  );
  const builtEnvSchema = built.exports.envSchema;
  assert.ok(builtEnvSchema);

  const outcome = (check: typeof envSchema, data: Record<string, string>) => {
    try {
      return { value: check({ schema: ENV_SCHEMA, data: { ...data }, env: false, dotenv: false }) };
    } catch (error) {
      return { message: (error as Error).message, errors: (error as { errors?: unknown }).errors };
    }
  };
  const inputs: Record<string, string>[] = [
    {},
    { PORT: "8081", HOST: "0.0.0.0", NODE_ENV: "production", AUTH_PROVIDER: "local", MASTER_KEY: "k" },
    // Not ours: removed, as env-schema removes them.
    { PATH: "/usr/bin", HOME: "/root", secrets_server_token: "x" },
    ...["65536", "-1", "80.5", " 80", "0x50", "1e3", "true", "", "8e-1", "080"].map((PORT) => ({ PORT })),
    { LOG_LEVEL: "loud", PORT: "port", NODE_ENV: "staging" },
    { HOST: "" },
    // minLength counts code points (Ajv's ucs2length), not UTF-16 units.
    { SMTP_FROM: "ab" },
    { SMTP_FROM: "\u{1F600}\u{1F600}" },
    { SMTP_FROM: "\u{1F600}\u{1F600}\u{1F600}" },
    { MASTER_KEY_VERSION: "0", AUDIT_RETENTION_DAYS: "36501", RATE_LIMIT_IPV6_PREFIX: "31", SYNC_LEASE_SECONDS: "1" },
    { DATABASE_POOL_SIZE: "1000", SHUTDOWN_DRAIN_SECONDS: "0", SYNC_RETRY_MS: "3600000", TRUST_PROXY: "2" },
    ...Object.keys(ENV_SCHEMA.properties).map((name) => ({ [name]: "x" })),
  ];
  for (const data of inputs) {
    assert.deepEqual(outcome(builtEnvSchema, data), outcome(envSchema, data), JSON.stringify(data));
  }
  // Compiled for one schema: given another, it refuses rather than check the wrong thing.
  const other = { ...ENV_SCHEMA, properties: { ...ENV_SCHEMA.properties, EXTRA: { type: "string" } } };
  assert.throws(() => builtEnvSchema({ schema: other, data: {}, env: false, dotenv: false }), /compiled by the build for another schema/);
});

test("MASTER_KEYS_PREVIOUS naming the current version says what to do, and leaves no generated key file", async () => {
  const dataDir = makeTempDir();
  try {
    const result = await runMain(["serve"], { DATA_DIR: dataDir, MASTER_KEYS_PREVIOUS: `1:${randomMasterKey()}` });
    assert.equal(result.code, 1);
    assert.equal(
      result.stderr,
      "secrets-server: configuration error: MASTER_KEYS_PREVIOUS holds key version 1, the version of MASTER_KEY: give the new MASTER_KEY a higher MASTER_KEY_VERSION.\n",
    );
    assert.ok(!fs.existsSync(path.join(dataDir, "master.key")));
  } finally {
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
});

test("a DATA_DIR that cannot be used and a backup into a missing folder stop with one line", async (t) => {
  const dir = makeTempDir();
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, "a-file");
  fs.writeFileSync(file, "");
  const result = await runMain(["migrate"], { DATA_DIR: file, MASTER_KEY: randomMasterKey() });
  assert.equal(result.code, 1);
  assert.match(result.stderr, /^secrets-server: configuration error: DATA_DIR .* cannot be used: EEXIST\.\n$/);
  // With no MASTER_KEY, as a first start in development: the key file's folder is the one in the way.
  const serve = await runMain(["serve"], { DATA_DIR: file, MASTER_KEY: undefined, PORT: "0" });
  assert.equal(serve.code, 1, serve.stderr);
  assert.match(serve.stderr, /^secrets-server: configuration error: DATA_DIR .* cannot be used: EEXIST\.\n$/);

  // A password with an unencoded "/": pg parses the URL only as it connects.
  const badUrl = await runMain(["migrate"], {
    DATABASE_URL: "postgres://app:ab/cd@127.0.0.1/x",
    MASTER_KEY: randomMasterKey(),
    DATA_DIR: dir,
  });
  assert.equal(badUrl.code, 1, badUrl.stderr);
  assert.equal(
    badUrl.stderr,
    "secrets-server: configuration error: DATABASE_URL is not a valid URL: percent-encode the user name and password (/ as %2F, ? as %3F, # as %23, @ as %40, : as %3A) and check the port.\n",
  );

  const server = await startServer(t);
  const backup = await runMain(["backup", path.join(dir, "missing", "copy.db")], server.env);
  assert.equal(backup.code, 1);
  assert.match(backup.stderr, /^secrets-server: configuration error: The folder of .* does not exist; create it first\.\n$/);

  // A database that cannot be opened leaves no empty file behind that would pass for a backup.
  const unopenable = path.join(dir, "unopenable");
  fs.mkdirSync(path.join(unopenable, "secrets.db"), { recursive: true });
  const copy = path.join(dir, "copy.db");
  const failed = await runMain(["backup", copy], { ...server.env, DATA_DIR: unopenable });
  assert.equal(failed.code, 1, failed.stdout + failed.stderr);
  assert.match(failed.stderr, /^secrets-server: configuration error: .*secrets\.db cannot be opened: .*\.\n$/);
  assert.equal(fs.existsSync(copy), false, "no empty copy left");
});

test("an unexpected failure of a server command (a damaged database file) is one line and exit 1, not a stack trace", async () => {
  // Removed when the test's process ends (makeTempDir), after the servers' leak scan.
  const dataDir = makeTempDir();
  fs.writeFileSync(path.join(dataDir, "secrets.db"), Buffer.alloc(8192, "damaged "), { mode: 0o600 });
  const copy = path.join(dataDir, "copy.db");
  for (const args of [["migrate"], ["rotate-key"], ["audit", "verify"], ["backup", copy]]) {
    const result = await runMain(args, { DATA_DIR: dataDir, MASTER_KEY: randomMasterKey() });
    assert.equal(result.code, 1, `${args.join(" ")}: ${result.stdout}${result.stderr}`);
    assert.equal(result.stderr, "secrets-server: file is not a database\n", args.join(" "));
  }
  assert.equal(fs.existsSync(copy), false, "no partial copy left");
});

test("commands on an existing database refuse a DATA_DIR that holds none, and create nothing there", async (t) => {
  const dir = makeTempDir();
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const mistyped = path.join(dir, "secret-server");
  for (const args of [["audit", "verify"], ["users", "list"], ["rotate-key"], ["backup", path.join(dir, "copy.db")]]) {
    // No MASTER_KEY: in development a key file would be generated into the folder.
    const result = await runMain(args, { DATA_DIR: mistyped });
    assert.equal(result.code, 1, `${args.join(" ")}: ${result.stdout}${result.stderr}`);
    assert.equal(
      result.stderr,
      `secrets-server: configuration error: There is no database at ${path.join(mistyped, "secrets.db")}: check DATA_DIR.\n`,
    );
    assert.equal(result.stdout, "");
    assert.equal(fs.existsSync(mistyped), false, `${args.join(" ")} created the folder`);
  }
  assert.deepEqual(fs.readdirSync(dir), []);
});

test("--help on a server command prints its usage and does nothing else", async (t) => {
  const cwd = makeTempDir();
  t.after(() => fs.rmSync(cwd, { recursive: true, force: true }));
  const env = { DATA_DIR: path.join(cwd, "data"), AUTH_PROVIDER: "local", MASTER_KEY: randomMasterKey() };
  for (const command of ["serve", "migrate", "backup", "setup-link", "version"]) {
    const result = await runMain([command, "--help"], env, { cwd });
    assert.equal(result.code, 0, `${command}: ${result.stderr}`);
    assert.match(result.stdout, new RegExp(`^Usage: secrets-server ${command}`));
  }
  // Commands that read their own arguments: a help flag first, or after a subcommand, is their usage, on stdout.
  for (const [args, usage] of [
    [["audit", "verify", "--help"], /^Usage: secrets-server audit verify/],
    [["audit", "-h"], /^Usage: secrets-server audit verify/],
    [["rotate-key", "--help"], /^Usage: secrets-server rotate-key/],
    [["users", "-h"], /^ {2}add EMAIL \[--name N\]/m],
    [["users", "add", "--help"], /^ {2}add EMAIL \[--name N\]/m],
    [["copy-database", "--help"], /^Usage: secrets-server copy-database/],
  ] as const) {
    const result = await runMain([...args], env, { cwd });
    assert.deepEqual([result.code, result.stderr], [0, ""], args.join(" "));
    assert.match(result.stdout, usage, args.join(" "));
  }
  // Later, a help flag may be a value ("$N", "$NAME"): refused as such, never the usage and exit 0.
  for (const args of [
    ["rotate-key", "--batch-size", "-h"],
    ["users", "add", "new@example.com", "--name", "-h"],
    ["users", "reset-password", "--", "--help"],
    ["copy-database", "--to", "postgres://db.example.test/secrets", "--help"],
  ]) {
    const result = await runMain(args, env, { cwd });
    assert.equal(result.code, 2, `${args.join(" ")}: ${result.stderr}`);
    assert.equal(result.stdout, "", args.join(" "));
  }
  assert.deepEqual(fs.readdirSync(cwd), [], "no backup file named --help, no database");

  const extra = await runMain(["serve", "now"], env, { cwd });
  assert.equal(extra.code, 2);
  assert.match(extra.stderr, /^Usage: secrets-server serve/);
  const verifyExtra = await runMain(["audit", "verify", "now"], env, { cwd });
  assert.deepEqual([verifyExtra.code, verifyExtra.stdout], [2, ""]);
  assert.match(verifyExtra.stderr, /^Usage: secrets-server audit verify/);
  assert.deepEqual(fs.readdirSync(cwd), [], "nothing opened or created for a usage error");
});

test("processes migrating one new DATA_DIR together apply each migration once, and all succeed", async (t) => {
  const cwd = makeTempDir();
  t.after(() => fs.rmSync(cwd, { recursive: true, force: true }));
  const env = { DATA_DIR: path.join(cwd, "data"), MASTER_KEY: randomMasterKey() };
  fs.mkdirSync(env.DATA_DIR, { mode: 0o700 });
  // Four at once: those that read "nothing applied" before the first committed used to apply it all again.
  const results = await Promise.all(Array.from({ length: 4 }, () => runMain(["migrate"], env, { cwd })));
  assert.deepEqual(
    results.map((r) => [r.code, r.stderr]),
    Array(4).fill([0, ""]),
  );
  const applied = storedRows(env.DATA_DIR, "__drizzle_migrations").map((row) => row.hash as string);
  const journal = JSON.parse(fs.readFileSync(path.join(import.meta.dirname, "..", "migrations", "meta", "_journal.json"), "utf8"));
  assert.equal(applied.length, journal.entries.length);
  assert.equal(new Set(applied).size, applied.length);
});

test("with no migration pending, a command does not wait for another process's write lock", async (t) => {
  const cwd = makeTempDir();
  t.after(() => fs.rmSync(cwd, { recursive: true, force: true }));
  const env = { DATA_DIR: path.join(cwd, "data"), MASTER_KEY: randomMasterKey() };
  assert.equal((await runMain(["migrate"], env, { cwd })).code, 0);
  // A server's write under way, as long as the command runs.
  const writer = new Database(path.join(env.DATA_DIR, "secrets.db"));
  t.after(() => writer.close());
  writer.exec("BEGIN IMMEDIATE");
  try {
    const verified = await runMain(["audit", "verify"], env, { cwd });
    assert.equal(verified.code, 0, verified.stderr);
  } finally {
    writer.exec("ROLLBACK");
  }
});

test("audit verify on a log with no events says so: a used server's whole log may have been removed", async (t) => {
  const cwd = makeTempDir();
  t.after(() => fs.rmSync(cwd, { recursive: true, force: true }));
  const env = { DATA_DIR: path.join(cwd, "data"), MASTER_KEY: randomMasterKey() };
  assert.equal((await runMain(["migrate"], env, { cwd })).code, 0);
  const verified = await runMain(["audit", "verify"], env, { cwd });
  assert.equal(verified.code, 0, verified.stderr);
  assert.match(
    verified.stdout,
    /^Audit log intact: 0 events verified\.\nThe log holds no events at all\. A server that has been used has some \(every sign-in is one\): if this one has, its whole log was removed\.\nHead hash: 0{64}\n/,
  );
});

test("with no command the executable prints its help and exits 2, and starts nothing", async (t) => {
  const cwd = makeTempDir();
  t.after(() => fs.rmSync(cwd, { recursive: true, force: true }));
  const result = await runMain([], {}, { cwd });
  assert.equal(result.code, 2);
  assert.equal(result.stdout, "");
  assert.match(result.stderr, /^secrets-server \d+\.\d+\.\d+: /);
  assert.match(result.stderr, /^ {2}serve +Start the server$/m);
  assert.deepEqual(fs.readdirSync(cwd), [], "no ./data");
});

test("logs: readable lines only in development on a terminal, JSON lines otherwise", async (t) => {
  const cases: [boolean, boolean, "pretty" | "json"][] = [
    [false, true, "pretty"],
    [false, false, "json"],
    [true, true, "json"],
    [true, false, "json"],
  ];
  for (const [isProduction, isTTY, expected] of cases) {
    assert.equal(chooseLogFormat({ isProduction }, isTTY), expected, `production ${isProduction}, terminal ${isTTY}`);
  }

  // A development server whose output is a pipe: every line is a JSON object.
  // Removed when the test's process ends (makeTempDir), after the servers' leak scan.
  const dataDir = makeTempDir();
  const server = await startServerProcess(t, { DATA_DIR: dataDir }, { dataDir });
  server.child.kill("SIGTERM");
  await server.exited;
  const lines = server.output().trim().split("\n");
  assert.ok(
    lines.some((line) => line.includes("secrets-server is ready")),
    server.output(),
  );
  for (const line of lines) assert.equal(typeof JSON.parse(line).msg, "string", line);
});

test("a database file the server's user may read but not write stops the start with one line", async () => {
  // Removed when the test's process ends (makeTempDir), after the servers' leak scan.
  const dataDir = makeTempDir();
  const env = { DATA_DIR: dataDir, MASTER_KEY: randomMasterKey() };
  const made = await runMain(["migrate"], env);
  assert.equal(made.code, 0, made.stderr);
  // Like a restored copy left owned by root: readable, not writable. Root may write any file,
  // so as root the command runs as nobody; SQLite would open the file read-only and start.
  fs.chmodSync(dataDir, 0o755);
  fs.chmodSync(path.join(dataDir, "secrets.db"), 0o444);
  const asRoot = process.getuid?.() === 0;
  const result = spawnSync(...sourceCommand("serve"), {
    cwd: dataDir,
    env: { PATH: process.env.PATH, ...env, PORT: "0" },
    encoding: "utf8",
    timeout: 20_000,
    ...(asRoot ? { uid: 65534, gid: 65534 } : {}),
  });
  assert.equal(result.status, 1, result.stderr);
  assert.match(
    result.stderr,
    /^secrets-server: configuration error: DATA_DIR .* cannot be used: this user may not write secrets\.db; give it to the user the server runs as\.\n$/,
  );
});

test("PORT=0: the OS picks the port, and an unset APP_URL names the port the server really has", async (t) => {
  const server = await startServerProcess(t);
  const ready = JSON.parse(
    server
      .output()
      .split("\n")
      .find((line) => line.includes("secrets-server is ready"))!,
  ) as { url: string };
  const port = new URL(server.url).port;
  assert.notEqual(port, "0");
  assert.equal(ready.url, `http://localhost:${port}`);
  const health = await fetch(`${server.url}/healthz`);
  assert.equal(health.status, 200);
  // Links the server makes name that port too (the Origin check and devAcceptUrl use APP_URL).
  const alice = new Client(server.url, ready.url);
  assert.equal((await alice.json("POST", "/api/auth/dev/sign-in", { email: "alice@example.test" })).status, 200);
  const project = await alice.createProject({ name: "ports", environments: ["development"] });
  const invited = await alice.json("POST", `/api/projects/${project.id}/invitations`, { email: "bob@example.test", role: "viewer" });
  assert.equal(invited.status, 201);
  assert.match((invited.body as { devAcceptUrl: string }).devAcceptUrl, new RegExp(`^http://localhost:${port}/invite#`));
});
