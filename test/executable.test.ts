// The single executable, built for real and run as an operator would: from another
// working directory, with no node on PATH, on its default ./data folder.
import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { Client, freePort, makeTempDir, ROOT } from "./helpers.ts";

const canBuild = process.platform === "linux" && process.arch === "x64";

interface Run {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/** Runs a command to its end; it is killed if it takes longer than timeoutMs. */
function run(file: string, args: string[], options: { cwd: string; env: NodeJS.ProcessEnv; timeoutMs: number }): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(file, args, { cwd: options.cwd, env: options.env, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => (stdout += d));
    child.stderr.on("data", (d) => (stderr += d));
    const timer = setTimeout(() => child.kill("SIGKILL"), options.timeoutMs);
    child.on("error", reject);
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr });
    });
  });
}

test("the built executable starts from another working directory with no node on PATH, answers /healthz and keeps its data across a restart", {
  skip: canBuild ? false : `the executable is built for Linux x64 only; this is ${process.platform}-${process.arch}`,
}, async (t) => {
  const buildDir = makeTempDir("secrets-build-");
  const workDir = makeTempDir("secrets-exe-");
  // A PATH holding only an empty folder: nothing named node can be found through it.
  const emptyBin = path.join(workDir, "bin");
  fs.mkdirSync(emptyBin);
  const children = new Set<ChildProcess>();
  t.after(() => {
    for (const child of children) child.kill("SIGKILL");
    fs.rmSync(buildDir, { recursive: true, force: true });
    fs.rmSync(workDir, { recursive: true, force: true });
  });

  // Built into a temporary folder, so the shared dist/ is neither needed nor raced.
  const build = await run(process.execPath, [path.join(ROOT, "build.mjs"), "--out", buildDir], {
    cwd: ROOT,
    env: process.env,
    timeoutMs: 180_000,
  });
  assert.equal(build.code, 0, `the build failed:\n${build.stdout}\n${build.stderr}`);
  const executable = path.join(buildDir, "secrets-server");
  assert.ok(fs.statSync(executable).mode & 0o100, "the executable has its execute bit");

  const env = { PATH: emptyBin, HOME: workDir, LOG_LEVEL: "info" };
  const options = { cwd: workDir, env, timeoutMs: 30_000 };

  const version = await run(executable, ["version"], options);
  const packageJson = JSON.parse(fs.readFileSync(path.join(ROOT, "package.json"), "utf8")) as { version: string };
  assert.deepEqual([version.code, version.stdout, version.stderr], [0, `${packageJson.version}\n`, ""]);

  const help = await run(executable, ["help"], options);
  assert.equal(help.code, 0);
  assert.equal(help.stderr, "", "no experimental-feature warning or other noise");
  for (const command of ["serve", "migrate", "version", "help"]) {
    assert.match(help.stdout, new RegExp(`^  ${command} `, "m"), `help lists ${command}`);
  }

  // Installed for the CLI, the bare executable must not become a server writing ./data here.
  const bare = await run(executable, [], options);
  assert.equal(bare.code, 2);
  assert.match(bare.stderr, /^ {2}serve +Start the server$/m);
  assert.deepEqual(fs.readdirSync(workDir), ["bin"], "nothing written by the bare executable");

  const unknown = await run(executable, ["no-such-command"], options);
  assert.equal(unknown.code, 2);
  assert.match(unknown.stderr, /Unknown command "no-such-command"/);

  // The configuration is checked by the schema the build compiled (src/dev/env-schema-precompiled.ts).
  for (const [variables, message] of [
    [{ PORT: "70000" }, "PORT must be <= 65535."],
    [{ LOG_LEVEL: "loud" }, "LOG_LEVEL must be one of: fatal, error, warn, info, debug, trace, silent."],
    [{ SMTP_FROM: "ab" }, "SMTP_FROM must NOT have fewer than 3 characters."],
  ] as const) {
    const refused = await run(executable, ["migrate"], { ...options, env: { ...env, ...variables } });
    assert.deepEqual([refused.code, refused.stderr], [1, `secrets-server: configuration error: ${message}\n`]);
  }
  assert.deepEqual(fs.readdirSync(workDir), ["bin"], "nothing written with a bad configuration");

  // `migrate` creates ./data (the default DATA_DIR) below the working directory.
  const migrate = await run(executable, ["migrate"], options);
  assert.equal(migrate.code, 0, migrate.stderr);
  assert.ok(fs.existsSync(path.join(workDir, "data", "secrets.db")));

  const port = await freePort();
  const appUrl = `http://localhost:${port}`;
  const url = `http://127.0.0.1:${port}`;

  /** Starts `secrets-server serve` and waits for /healthz. */
  async function start(): Promise<{ child: ChildProcess; output: () => string; stop(): Promise<number | null> }> {
    // No MASTER_KEY: in development the server generates ./data/master.key once and reuses it.
    const child = spawn(executable, ["serve"], { cwd: workDir, env: { ...env, PORT: String(port) }, stdio: ["ignore", "pipe", "pipe"] });
    children.add(child);
    let output = "";
    child.stdout!.on("data", (d) => (output += d));
    child.stderr!.on("data", (d) => (output += d));
    const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
    const deadline = Date.now() + 30_000;
    for (;;) {
      if (child.exitCode !== null) assert.fail(`the executable exited with ${child.exitCode}:\n${output}`);
      try {
        const res = await fetch(`${url}/healthz`);
        assert.equal(res.status, 200);
        assert.deepEqual(await res.json(), { ok: true });
        break;
      } catch (error) {
        if (error instanceof assert.AssertionError) throw error;
        if (Date.now() > deadline) assert.fail(`no answer on /healthz within 30 s:\n${output}`);
        await sleep(50);
      }
    }
    return {
      child,
      output: () => output,
      async stop() {
        child.kill("SIGTERM");
        const code = await exited;
        children.delete(child);
        return code;
      },
    };
  }

  const first = await start();
  const alice = new Client(url, appUrl);
  const signIn = await alice.json("POST", "/api/auth/dev/sign-in", { email: "alice@example.test", name: "Alice" });
  assert.equal(signIn.status, 200);
  const project = await alice.createProject({ name: "api", description: "kept across restarts", environments: ["production"] });
  const page = await alice.get("/");
  assert.equal(page.status, 200);
  assert.match(page.headers.get("content-type") ?? "", /^text\/html/);
  const html = await page.text();
  assert.match(html, /<html/i, "the web UI is served from inside the executable");
  // The gzip build.mjs made of each file is what a browser that accepts gzip gets.
  const script = html.match(/src="(\/assets\/app-[A-Z0-9]+\.js)"/)?.[1];
  assert.ok(script, html);
  for (const name of ["/", script]) {
    const plain = await fetch(url + name, { headers: { "accept-encoding": "identity" } });
    assert.equal(plain.headers.get("content-encoding"), null);
    const gzipped = await fetch(url + name, { headers: { "accept-encoding": "gzip" } });
    assert.equal(gzipped.headers.get("content-encoding"), "gzip", name);
    assert.ok(Number(gzipped.headers.get("content-length")) < Number(plain.headers.get("content-length")), name);
    assert.equal(await gzipped.text(), await plain.text(), `${name}: the gzip holds the file`);
  }
  const openapi = await alice.get("/api/openapi.json");
  assert.equal(openapi.status, 200);
  assert.equal(((await openapi.json()) as { openapi: string }).openapi, "3.1.0", "the OpenAPI document is built inside the executable");
  const docs = await alice.get("/api/docs");
  assert.equal(docs.status, 200);
  assert.match(await docs.text(), /<code>\/api\/projects<\/code>/, "and so is the API reference page");
  assert.equal(await first.stop(), 0, `a clean exit on SIGTERM:\n${first.output()}`);
  // V8 took the code cache build.mjs made after its training start: were it rejected (a
  // build step with other V8 flags, say), every start would compile the bundle again.
  const ready = first
    .output()
    .split("\n")
    .find((line) => line.includes("secrets-server is ready"));
  assert.ok(ready, first.output());
  assert.equal((JSON.parse(ready) as { codeCache?: string }).codeCache, "accepted", ready);

  // The addon was written once under DATA_DIR/.cache; the master key was generated once.
  const cache = fs.readdirSync(path.join(workDir, "data", ".cache"));
  assert.equal(cache.filter((name) => /^better_sqlite3-[0-9a-f]{16}\.node$/.test(name)).length, 1, cache.join(", "));
  assert.equal(fs.statSync(path.join(workDir, "data", "master.key")).mode & 0o777, 0o600);

  const second = await start();
  // SIGUSR1 (a log-reopening habit) must not open Node's inspector, which any local user
  // could connect to: the server keeps serving, with no "Debugger listening".
  second.child.kill("SIGUSR1");
  await sleep(500);
  assert.equal(second.child.exitCode, null, second.output());
  assert.doesNotMatch(second.output(), /Debugger listening/);
  // The same session cookie still works: sessions, users and projects were all kept.
  const me = await alice.json("GET", "/api/auth/me");
  assert.equal(me.status, 200);
  assert.equal(me.body.user.email, "alice@example.test");
  const list = await alice.json("GET", "/api/projects");
  assert.equal(list.status, 200);
  assert.deepEqual(
    list.body.projects.map((p: { id: string; name: string; description?: string }) => [p.id, p.name, p.description]),
    [[project.id, "api", "kept across restarts"]],
  );
  assert.equal(await second.stop(), 0, `a clean exit on SIGTERM:\n${second.output()}`);
  assert.doesNotMatch(first.output() + second.output(), /ExperimentalWarning|Single executable/i);
});
