// Bounded work, over HTTP against a real server: limits are checked before a body is read,
// and export decrypts in a read snapshot instead of holding the write lock.
import assert from "node:assert/strict";
import http from "node:http";
import { createRequire } from "node:module";
import path from "node:path";
import { test } from "node:test";
import { Worker } from "node:worker_threads";
import { DATABASE_FILE } from "../src/core/db.ts";
import { startServer, type Client, type TestServer } from "./helpers.ts";
import { auditEvents, createSecret, envPath, openFile } from "./secrets-helpers.ts";

const TOO_LARGE = { error: "The import is too large." };
// Long enough for a server that answers before reading, far too short to wait for a body that never comes.
const ANSWER_WITHIN_MS = 3_000;

async function startProject(t: Parameters<typeof startServer>[0]): Promise<{ server: TestServer; owner: Client; projectId: string }> {
  const server = await startServer(t);
  const owner = await server.signIn("olivia@example.test");
  const project = await owner.createProject({ name: "api", environments: ["development", "staging"] });
  return { server, owner, projectId: project.id };
}

/**
 * Sends a POST's headers with a Content-Length and never its body. The answer must come
 * without the body: a server that waited for it would never answer.
 */
function postHeadersOnly(client: Client, urlPath: string, contentLength: number): Promise<{ status: number; body: unknown; headers: http.IncomingHttpHeaders }> {
  return new Promise((resolve, reject) => {
    const req = http.request(client.baseUrl + urlPath, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        "content-length": String(contentLength),
        origin: client.origin,
        cookie: [...client.cookies].map(([k, v]) => `${k}=${v}`).join("; "),
      },
    });
    const timer = setTimeout(() => {
      req.destroy();
      reject(new Error(`no answer within ${ANSWER_WITHIN_MS} ms: the server is waiting for the body`));
    }, ANSWER_WITHIN_MS);
    req.on("error", (error) => {
      clearTimeout(timer);
      reject(error);
    });
    req.on("response", (res) => {
      let text = "";
      res.setEncoding("utf8");
      res.on("data", (chunk: string) => (text += chunk));
      res.on("end", () => {
        clearTimeout(timer);
        req.removeAllListeners("error");
        req.on("error", () => {});
        req.destroy();
        resolve({ status: res.statusCode!, body: JSON.parse(text) as unknown, headers: res.headers });
      });
    });
    req.flushHeaders();
  });
}

test("the 11th import within a minute is refused with 429 before its body is read", async (t) => {
  const { server, owner, projectId } = await startProject(t);
  const url = `${envPath(projectId, "development")}/import`;
  for (let i = 0; i < 10; i++) assert.equal((await owner.json("POST", url, { entries: [] })).status, 200, `import ${i + 1}`);

  const limited = await postHeadersOnly(owner, url, 1_999_999);
  assert.equal(limited.status, 429);
  assert.match((limited.body as { error: string }).error, /^Too many requests\. Try again in \d+ seconds\.$/);
  assert.ok(Number(limited.headers["retry-after"]) > 0);

  // Per user: someone else's 11th request of the minute is their 1st.
  const admin = await server.signIn("adam@example.test");
  assert.equal((await admin.json("POST", url, { entries: [] })).status, 404, "a non-member still gets 404");
});

test("an import whose Content-Length is over 2,000,000 bytes is refused with 413 before its body is read", async (t) => {
  const { server, owner, projectId } = await startProject(t);
  const url = `${envPath(projectId, "development")}/import`;
  const over = await postHeadersOnly(owner, url, 2_000_001);
  assert.deepEqual([over.status, over.body], [413, TOO_LARGE]);
  // Access is still checked first: a non-member learns nothing from the size.
  const outsider = await server.signIn("otto@example.test");
  const probe = await postHeadersOnly(outsider, url, 50_000_000);
  assert.deepEqual([probe.status, probe.body], [404, { error: "Project not found." }]);
  assert.deepEqual((await owner.json("GET", `${envPath(projectId, "development")}/secrets`)).body, { secrets: [] });
});

test("export reads in a snapshot: it does not wait for another connection's write transaction", async (t) => {
  const { server, owner, projectId } = await startProject(t);
  const base = envPath(projectId, "development");
  await createSecret(owner, projectId, "development", "ORIGINAL", "original-value");
  await createSecret(owner, projectId, "development", "OTHER", "other-value-01");

  // Another process on the same file (a CLI command, say) takes the write lock, renames a
  // secret and holds the lock for 1.5 s (less than the 5 s busy timeout) before committing.
  // A worker thread, because the server blocks its own thread while it waits for the lock.
  const worker = new Worker(
    `const { workerData, parentPort } = require("node:worker_threads");
     const Database = require(workerData.module);
     const db = new Database(workerData.file);
     db.pragma("busy_timeout = 5000");
     db.exec("BEGIN IMMEDIATE");
     db.prepare("UPDATE secrets SET key = 'RENAMED_MEANWHILE' WHERE key = 'ORIGINAL'").run();
     parentPort.postMessage("locked");
     Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 1500);
     db.exec("COMMIT");
     db.close();
     parentPort.postMessage("committed");`,
    { eval: true, workerData: { module: createRequire(import.meta.url).resolve("better-sqlite3"), file: path.join(server.dataDir, DATABASE_FILE) } },
  );
  t.after(() => worker.terminate());
  const messages: string[] = [];
  const committed = new Promise<void>((resolve, reject) => {
    worker.on("message", (m: string) => {
      messages.push(m);
      if (m === "committed") resolve();
    });
    worker.on("error", reject);
  });
  await new Promise<void>((resolve) => worker.once("message", () => resolve()));

  // The export read the last committed state at once; only its audit event waited for the lock.
  const exported = await owner.json("GET", `${base}/export`);
  assert.equal(exported.status, 200);
  assert.deepEqual(exported.body.secrets, [
    { key: "ORIGINAL", value: "original-value" },
    { key: "OTHER", value: "other-value-01" },
  ]);
  await committed;
  assert.deepEqual(messages, ["locked", "committed"]);
  assert.deepEqual(
    auditEvents(server, projectId, "secrets.exported").map((e) => e.metadata),
    [{ environment: "development", count: 2, format: "json" }],
  );
  const keys = ((await owner.json("GET", `${base}/secrets`)).body.secrets as { key: string }[]).map((s) => s.key).sort();
  assert.deepEqual(keys, ["OTHER", "RENAMED_MEANWHILE"]);
});

test("export fails closed: no value leaves when its audit event cannot be written", async (t) => {
  const { server, owner, projectId } = await startProject(t);
  const base = envPath(projectId, "development");
  await createSecret(owner, projectId, "development", "GUARDED", "guarded-value-01");
  const file = openFile(server);
  t.after(() => file.close());
  file.exec(`CREATE TRIGGER refuse_export BEFORE INSERT ON audit_events WHEN NEW.action = 'secrets.exported'
             BEGIN SELECT RAISE(ABORT, 'audit refused'); END`);

  for (const format of ["json", "dotenv"]) {
    const res = await owner.get(`${base}/export?format=${format}`);
    const text = await res.text();
    assert.equal(res.status, 500, format);
    assert.ok(!text.includes("guarded-value-01"), format);
    assert.deepEqual(JSON.parse(text), { error: "Something went wrong on the server. Try again; if it keeps happening, check the server log." });
  }
  file.exec("DROP TRIGGER refuse_export");
  assert.deepEqual((await owner.json("GET", `${base}/export`)).body.secrets, [{ key: "GUARDED", value: "guarded-value-01" }]);
});
