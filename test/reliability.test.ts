// Faults of the machine and of clients: a full disk, a graceful stop under keep-alive
// load, a stalled body, a compressed body.
import assert from "node:assert/strict";
import { execFileSync, spawn } from "node:child_process";
import fs from "node:fs";
import http from "node:http";
import net from "node:net";
import path from "node:path";
import { type TestContext, test } from "node:test";
import { sourceCommand } from "../src/dev/source-command.ts";
import {
  type Client,
  makeTempDir,
  onPostgres,
  ROOT,
  runMain,
  startServer,
  startServerProcess,
  type TestServer,
  waitFor,
} from "./helpers.ts";
import { truncateWal } from "./storage.ts";

const DISK_FULL =
  "The server's disk is full: nothing was saved, and nothing that must be audited can be read. Try again after the operator frees space.";

/** A small tmpfs, or the reason there cannot be one (not root, no mount). */
function mountTmpfs(t: TestContext, size: string): string | { skip: string } {
  if (process.getuid?.() !== 0) return { skip: "mounting a tmpfs needs root" };
  const dir = makeTempDir("secrets-full-");
  try {
    execFileSync("mount", ["-t", "tmpfs", "-o", `size=${size},mode=0700`, "tmpfs", dir], { stdio: "pipe" });
  } catch (error) {
    fs.rmSync(dir, { recursive: true, force: true });
    return { skip: `cannot mount a tmpfs here: ${String((error as { stderr?: Buffer }).stderr ?? error).trim()}` };
  }
  t.after(() => {
    execFileSync("umount", ["-l", dir]);
    fs.rmSync(dir, { recursive: true, force: true });
  });
  return dir;
}

/** Writes a file until the file system says no space is left. */
function fillDisk(dir: string): string {
  const filler = path.join(dir, "filler");
  const fd = fs.openSync(filler, "w");
  const chunk = Buffer.alloc(64 * 1024, 1);
  try {
    for (;;) fs.writeSync(fd, chunk);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "ENOSPC") throw error;
  }
  // The last bytes that fit, so not even a page is left.
  try {
    for (;;) fs.writeSync(fd, chunk, 0, 512);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "ENOSPC") throw error;
  } finally {
    fs.closeSync(fd);
  }
  return filler;
}

/** `secrets-server login` as a process, approved through the API by a browser session. */
async function cliLogin(server: TestServer, env: Record<string, string>, approver: Client): Promise<void> {
  const child = spawn(...sourceCommand("login", "--server", server.url), {
    cwd: ROOT,
    env: { PATH: process.env.PATH, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  const code = await new Promise<string>((resolve, reject) => {
    const look = (d: Buffer) => {
      output += d;
      const match = output.match(/\b([BCDFGHJKLMNPQRSTVWXZ]{4}-[BCDFGHJKLMNPQRSTVWXZ]{4})\b/);
      if (match) resolve(match[1]!);
    };
    child.stdout.on("data", look);
    child.stderr.on("data", look);
    child.on("close", () => reject(new Error(`login ended: ${output}`)));
  });
  assert.equal((await approver.json("POST", "/api/cli/auth/approve", { userCode: code })).status, 200);
  const exit = await new Promise<number | null>((resolve) => child.on("close", resolve));
  assert.equal(exit, 0, output);
}

test("a full disk answers 503 with Retry-After and says so, health is degraded, the CLI falls back; freeing space recovers without a restart", {
  skip: onPostgres(
    "the disk that fills is DATA_DIR's, where SQLite keeps the database; the PostgreSQL outage is test/postgres-servers.test.ts",
  ),
}, async (t) => {
  const dataDir = mountTmpfs(t, "4m");
  if (typeof dataDir !== "string") return t.skip(dataDir.skip);
  const server = await startServer(t, { dataDir });
  const alice = await server.signIn("alice@example.test");
  const project = await alice.createProject({ name: "api", environments: ["production"] });
  const base = `/api/projects/${project.id}/environments/production`;
  const created = await alice.json("POST", `${base}/secrets`, { key: "DATABASE_URL", value: "postgres://kept-before-full" });
  assert.equal(created.status, 201);
  const secretId = created.body.secret.id;

  const home = makeTempDir("secrets-cli-");
  t.after(() => fs.rmSync(home, { recursive: true, force: true }));
  const cliEnv = { XDG_CONFIG_HOME: path.join(home, "config"), HOME: home };
  await cliLogin(server, cliEnv, alice);
  const print = [
    "run",
    "--fallback",
    "--project",
    project.id,
    "--env",
    "production",
    "--",
    process.execPath,
    "-e",
    "process.stdout.write(process.env.DATABASE_URL ?? 'unset')",
  ];
  const online = await runMain(print, cliEnv, { timeoutMs: 60_000 });
  assert.equal(online.code, 0, online.stderr);
  assert.equal(online.stdout, "postgres://kept-before-full");

  const auditBefore = (await alice.json("GET", `/api/projects/${project.id}/audit`)).body;
  truncateWal(dataDir);
  const filler = fillDisk(dataDir);
  const logStart = server.logs.length;

  // Writes, reveals and exports (which audit first) all answer 503, never 500.
  const attempts = [
    () => alice.json("POST", `${base}/secrets`, { key: "NEW_SETTING", value: "written-while-full" }),
    () => alice.json("PATCH", `${base}/secrets/${secretId}`, { value: "changed-while-full", expectedVersion: 1 }),
    () => alice.json("GET", `${base}/secrets/${secretId}`),
    () => alice.json("GET", `${base}/export?format=json`),
    () => alice.json("POST", "/api/projects", { name: "another", environments: ["development"] }),
  ];
  for (let round = 0; round < 10; round++) {
    for (const attempt of attempts) {
      const res = await attempt();
      assert.equal(res.status, 503, JSON.stringify(res.body));
      assert.deepEqual(res.body, { error: DISK_FULL });
      assert.equal(res.headers.get("retry-after"), "60");
    }
  }
  const health = await alice.json("GET", "/healthz");
  assert.equal(health.status, 503);
  assert.deepEqual(health.body, { ok: false, reason: DISK_FULL, error: DISK_FULL });
  assert.equal(health.headers.get("retry-after"), "60");

  // The CLI's --fallback engages on the server's own 503 and names the cause.
  const offline = await runMain(print, cliEnv, { timeoutMs: 60_000 });
  assert.equal(offline.code, 0, offline.stderr);
  assert.equal(offline.stdout, "postgres://kept-before-full");
  assert.ok(offline.stderr.includes(DISK_FULL), offline.stderr);

  // Fifty-odd failures, one log line for the condition, and no stack trace.
  const lines = server.logs.slice(logStart);
  const conditionLines = lines.filter((line) => line.includes('"storage":"full"'));
  assert.equal(conditionLines.length, 1, conditionLines.join("\n"));
  assert.match(conditionLines[0]!, /The disk holding DATA_DIR is full/);
  assert.ok(!lines.some((line) => line.includes('"stack"')), "a stack trace was logged");
  assert.ok(!lines.some((line) => line.includes('"statusCode":500')), "a 500 was answered");

  // Space freed: everything works again in the same process.
  fs.rmSync(filler);
  await waitFor("healthz to recover", async () => ((await alice.json("GET", "/healthz")).status === 200 ? true : undefined));
  assert.deepEqual((await alice.json("GET", `${base}/secrets/${secretId}`)).body.secret.value, "postgres://kept-before-full");
  assert.equal((await alice.json("POST", `${base}/secrets`, { key: "NEW_SETTING", value: "written-after-space-freed" })).status, 201);
  // Nothing partial was written while full: the failed writes left no secret, version, project or audit event.
  const listed = await alice.json("GET", `${base}/secrets`);
  assert.deepEqual(listed.body.secrets.map((s: { key: string; version: number }) => [s.key, s.version]).sort(), [
    ["DATABASE_URL", 1],
    ["NEW_SETTING", 1],
  ]);
  const projects = await alice.json("GET", "/api/projects");
  assert.deepEqual(
    projects.body.projects.map((p: { name: string }) => p.name),
    ["api"],
  );
  const auditAfter = (await alice.json("GET", `/api/projects/${project.id}/audit`)).body;
  // Since the disk filled: the reveal and the create just above, nothing of the failed attempts.
  const newActions = auditAfter.events
    .slice(0, auditAfter.events.length - auditBefore.events.length)
    .map((e: { action: string }) => e.action);
  assert.deepEqual(newActions.sort(), ["secret.created", "secret.revealed"]);
});

test("a body shorter than its Content-Length is answered 408 within REQUEST_TIMEOUT_SECONDS", async (t) => {
  const server = await startServer(t, { env: { REQUEST_TIMEOUT_SECONDS: "2" } });
  const alice = await server.signIn("alice@example.test");
  const project = await alice.createProject({ name: "api", environments: ["development"] });
  const started = Date.now();
  const answer = await new Promise<string>((resolve, reject) => {
    const socket = net.connect(Number(new URL(server.url).port), "127.0.0.1");
    let received = "";
    socket.on("data", (d) => (received += d));
    socket.on("close", () => resolve(received));
    socket.on("error", reject);
    const cookie = alice.cookieHeader();
    socket.write(
      `POST /api/projects/${project.id}/environments/development/secrets HTTP/1.1\r\nHost: x\r\nCookie: ${cookie}\r\nOrigin: ${server.origin}\r\n` +
        `Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{"key":"HALF_SENT",`,
    );
  });
  const elapsedMs = Date.now() - started;
  assert.match(answer, /^HTTP\/1\.1 408 /);
  assert.match(answer, /\r\nConnection: close\r\n/i);
  assert.ok(answer.endsWith('\r\n\r\n{"error":"The request did not arrive in time: send it again."}'), answer);
  assert.ok(elapsedMs >= 1900 && elapsedMs < 4_500, `answered after ${elapsedMs} ms`);
  assert.deepEqual((await alice.json("GET", `/api/projects/${project.id}/environments/development/secrets`)).body.secrets, []);
});

test("closing the server cuts a connection whose request is half sent instead of waiting for its timeout", async (t) => {
  // Node stops checking request timeouts once the listener closes, so a half-sent request
  // (a browser tab left open) held the close for the socket's own timeout: two minutes.
  const server = await startServer(t);
  const socket = net.connect(Number(new URL(server.url).port), "127.0.0.1");
  const closed = new Promise<void>((resolve) => socket.on("close", () => resolve()));
  socket.on("error", () => {});
  await new Promise((resolve) => socket.once("connect", resolve));
  socket.write("GET /healthz HTTP/1.1\r\nHost: x\r\n");
  await waitFor(
    "the server to hold the connection",
    async () => (await new Promise<number>((resolve) => server.app.app.server.getConnections((_e, n) => resolve(n)))) === 1,
  );
  const started = Date.now();
  await server.stop();
  const elapsedMs = Date.now() - started;
  await closed;
  assert.ok(elapsedMs < 10_000, `the close took ${elapsedMs} ms`);
});

/** Writes `raw` on a new connection and resolves with everything the server sent before it closed. */
function rawExchange(server: TestServer, raw: string): Promise<string> {
  return new Promise<string>((resolve, reject) => {
    const socket = net.connect(Number(new URL(server.url).port), "127.0.0.1");
    let received = "";
    // A server that never closes fails here, not at the runner's time limit.
    socket.setTimeout(10_000, () => socket.destroy(new Error(`no close within 10 s; received ${JSON.stringify(received)}`)));
    socket.on("data", (d) => (received += d));
    socket.on("close", () => resolve(received));
    socket.on("error", reject);
    socket.write(raw);
  });
}

test("a request Node's parser refuses gets the { error } body and Connection: close, and the client's next request works", async (t) => {
  const server = await startServer(t);
  const huge = `GET /api/auth/me HTTP/1.1\r\nHost: x\r\nX-Filler: ${"f".repeat(20_000)}\r\n\r\n`;
  const tooLarge = await rawExchange(server, huge);
  assert.match(tooLarge, /^HTTP\/1\.1 431 Request Header Fields Too Large\r\n/);
  assert.match(tooLarge, /\r\nConnection: close\r\n/);
  assert.match(tooLarge, /\r\nContent-Type: application\/json; charset=utf-8\r\n/);
  assert.ok(tooLarge.endsWith('\r\n\r\n{"error":"The request\'s headers are too large."}'), tooLarge);

  // An expectation Node would answer with a bare 417 of its own.
  const expecting = await rawExchange(server, "POST /api/projects HTTP/1.1\r\nHost: x\r\nExpect: 200-ok\r\nContent-Length: 2\r\n\r\n");
  assert.match(expecting, /^HTTP\/1\.1 417 Expectation Failed\r\n/);
  assert.match(expecting, /\r\ncontent-security-policy: /i);
  assert.ok(expecting.endsWith('\r\n\r\n{"error":"Only Expect: 100-continue is supported."}'), expecting);

  const garbled = await rawExchange(server, "GARBAGE\r\n\r\n");
  assert.match(garbled, /^HTTP\/1\.1 400 Bad Request\r\n/);
  assert.match(garbled, /\r\nConnection: close\r\n/);
  assert.ok(garbled.endsWith('\r\n\r\n{"error":"The request could not be understood."}'), garbled);

  // A keep-alive client: without Connection: close it kept the socket the server destroyed,
  // and the request sent right after the 431 failed with ECONNRESET.
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  t.after(() => agent.destroy());
  const get = (headers: Record<string, string>) =>
    new Promise<number>((resolve, reject) => {
      const req = http.get(`${server.url}/healthz`, { agent, headers }, (res) => {
        res.resume();
        res.on("end", () => resolve(res.statusCode ?? 0));
      });
      req.on("error", reject);
    });
  for (let round = 0; round < 5; round++) {
    assert.equal(await get({ "x-filler": "f".repeat(20_000) }), 431);
    assert.equal(await get({}), 200);
  }
});

test("a compressed request body answers 415 and stores nothing; identity is fine", async (t) => {
  const server = await startServer(t);
  const alice = await server.signIn("alice@example.test");
  const project = await alice.createProject({ name: "api", environments: ["development"] });
  const base = `/api/projects/${project.id}/environments/development`;
  for (const encoding of ["gzip", "br", "deflate, gzip", "x-unknown"]) {
    const res = await alice.request(
      "POST",
      `${base}/secrets`,
      { key: "ZIPPED_VALUE", value: "not-really-gzip" },
      { "content-encoding": encoding },
    );
    assert.equal(res.status, 415, encoding);
    assert.deepEqual(await res.json(), {
      error: `Request bodies with Content-Encoding ${encoding} are not accepted: send the body uncompressed (no Content-Encoding).`,
    });
  }
  const imported = await alice.request(
    "POST",
    `${base}/import`,
    { entries: [{ key: "ZIPPED_VALUE", value: "x-imported", overwrite: true }] },
    { "content-encoding": "gzip" },
  );
  assert.equal(imported.status, 415);
  assert.deepEqual((await alice.json("GET", `${base}/secrets`)).body.secrets, []);
  const plain = await alice.request(
    "POST",
    `${base}/secrets`,
    { key: "PLAIN_VALUE", value: "sent-as-identity" },
    { "content-encoding": "identity" },
  );
  assert.equal(plain.status, 201);
});

interface Answer {
  status: number;
  connection?: string;
  retryAfter?: string;
  afterSignal: boolean;
}

test("SIGTERM under keep-alive load: no reset, in-flight requests finish, Connection: close, 503 with Retry-After, exit 0 within the drain", async (t) => {
  const server = await startServerProcess(t, { SHUTDOWN_DRAIN_SECONDS: "4" });
  const agent = new http.Agent({ keepAlive: true, maxSockets: 8 });
  t.after(() => agent.destroy());
  let signalledAt = 0;
  const answers: Answer[] = [];
  const failures: string[] = [];
  const get = (requestPath: string, useAgent: http.Agent | false = agent) =>
    new Promise<Answer>((resolve, reject) => {
      const req = http.get(server.url + requestPath, { agent: useAgent }, (res) => {
        res.resume();
        res.on("end", () =>
          resolve({
            status: res.statusCode!,
            connection: res.headers.connection,
            retryAfter: res.headers["retry-after"] as string | undefined,
            afterSignal: signalledAt > 0,
          }),
        );
      });
      req.on("error", reject);
    });

  // Eight clients in a loop; a client stops at a 503 (it would come back after Retry-After).
  const clients = Array.from({ length: 8 }, async () => {
    for (;;) {
      try {
        const answer = await get("/healthz");
        answers.push(answer);
        if (answer.status !== 200) return;
      } catch (error) {
        failures.push((error as NodeJS.ErrnoException).code ?? String(error));
        return;
      }
    }
  });

  // Load first: the signal comes once the clients have had 60 answers (a loaded machine
  // gets there later, not with fewer).
  while (answers.length < 60 && failures.length === 0) await new Promise((r) => setImmediate(r));
  // A request in flight when the signal comes: headers sent, body still on its way until
  // the drain has begun.
  let endBody = () => {};
  let headersSent = () => {};
  const written = new Promise<void>((resolve) => (headersSent = resolve));
  const inFlight = new Promise<Answer>((resolve, reject) => {
    const req = http.request(
      `${server.url}/api/auth/dev/sign-in`,
      { method: "POST", agent: false, headers: { "content-type": "application/json", "content-length": "30" } },
      (res) => {
        res.resume();
        res.on("end", () => resolve({ status: res.statusCode!, connection: res.headers.connection, afterSignal: true }));
      },
    );
    req.on("error", reject);
    req.write('{"email":"late@example', () => headersSent());
    endBody = () => req.end('.test"} ');
  });

  // The server has the in-flight request's headers once it has answered a request sent after
  // them: each keep-alive client has one request out at a time, so the ninth answer from
  // now answers one of those.
  await written;
  const writtenAt = answers.length;
  while (answers.length < writtenAt + 9 && failures.length === 0) await new Promise((r) => setImmediate(r));
  const before = answers.length;
  signalledAt = Date.now();
  server.child.kill("SIGTERM");
  await waitFor("the drain to begin", async () =>
    server.output().includes("shutting down: finishing requests in flight") ? true : undefined,
  );
  // A new connection during the drain is answered, not refused; then the in-flight body ends.
  const fresh = await get("/healthz", false);
  endBody();
  await Promise.all(clients);
  const late = await inFlight;
  const exit = await server.exited;

  assert.deepEqual(failures, [], "a client saw a connection error");
  assert.ok(before > 50, `only ${before} requests before the signal`);
  for (const answer of answers) {
    assert.ok(answer.status === 200 || answer.status === 503, `status ${answer.status}`);
    if (answer.status === 503) {
      assert.equal(answer.retryAfter, "5");
      assert.equal(answer.connection, "close");
    }
  }
  assert.equal(answers.filter((a) => a.status === 503).length, 8);
  assert.equal(fresh.status, 503);
  assert.equal(fresh.connection, "close");
  assert.equal(fresh.retryAfter, "5");
  assert.equal(late.status, 200, "the request in flight finished");
  assert.equal(late.connection, "close");
  assert.equal(exit.code, 0, server.output());
  assert.ok(exit.atMs - signalledAt < 4_000 + 1_500, `exited ${exit.atMs - signalledAt} ms after the signal`);
  assert.match(server.output(), /connections drained; stopping/);
});
