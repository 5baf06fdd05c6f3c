// Bounded work, over HTTP against a real server: limits are checked before a
// body is read, an environment and a secret's history have a size, and export decrypts in a
// read snapshot instead of holding the write lock.
import assert from "node:assert/strict";
import http from "node:http";
import { test } from "node:test";
import { auditEvents, type Client, onPostgres, startServer, type TestServer } from "./helpers.ts";
import { createSecret, envPath } from "./secrets-helpers.ts";
import { failWritesTo, renameKeyHoldingWriteLock } from "./storage.ts";

const TOO_LARGE = { error: "The import is too large." };
const ENVIRONMENT_FULL = {
  error:
    "This environment already holds 1,000 secrets, the most it can hold. Delete secrets it no longer needs, or keep new ones in another environment or project.",
};
const VERSION_NOT_FOUND = { error: "Version not found." };
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
function postHeadersOnly(
  client: Client,
  urlPath: string,
  contentLength: number,
): Promise<{ status: number; body: unknown; headers: http.IncomingHttpHeaders }> {
  return new Promise((resolve, reject) => {
    const req = http.request(client.baseUrl + urlPath, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        "content-length": String(contentLength),
        origin: client.origin,
        cookie: client.cookieHeader(),
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

test("an environment holds at most 1,000 secrets: create and import past it are 409 and write nothing", async (t) => {
  const { owner, projectId } = await startProject(t);
  const base = envPath(projectId, "development");
  const entries = (from: number, to: number) =>
    Array.from({ length: to - from }, (_, i) => ({ key: `KEY_${from + i}`, value: `bulk-value-${from + i}`, overwrite: false }));
  const keys = async () => ((await owner.json("GET", `${base}/secrets`)).body.secrets as { key: string }[]).map((s) => s.key).sort();

  assert.equal((await owner.json("POST", `${base}/import`, { entries: entries(0, 500) })).status, 200);
  assert.equal((await owner.json("POST", `${base}/import`, { entries: entries(500, 999) })).status, 200);
  const at999 = await keys();
  assert.equal(at999.length, 999);
  const auditBefore = (await auditEvents(owner, projectId, "secret")).length;

  // Two new keys do not fit in one place; the overwrite in the same request is not applied either.
  const twoNew = await owner.json("POST", `${base}/import`, {
    entries: [
      { key: "KEY_0", value: "overwritten-value", overwrite: true },
      { key: "NEW_A", value: "new-a-value", overwrite: false },
      { key: "NEW_B", value: "new-b-value", overwrite: false },
    ],
  });
  assert.deepEqual(
    [twoNew.status, twoNew.body],
    [
      409,
      {
        error:
          "This import would add 2 new secrets to the 999 this environment holds, more than the 1,000 it can hold. Nothing was imported: import fewer new keys, or delete secrets it no longer needs first.",
      },
    ],
  );
  assert.deepEqual(await keys(), at999);
  assert.equal((await auditEvents(owner, projectId, "secret")).length, auditBefore);

  // The 1,000th fits; the 1,001st does not, by create or by import.
  const last = await owner.json("POST", `${base}/secrets`, { key: "THE_LAST", value: "the-last-value" });
  assert.equal(last.status, 201);
  const create = await owner.json("POST", `${base}/secrets`, { key: "ONE_MORE", value: "one-more-value" });
  assert.deepEqual([create.status, create.body], [409, ENVIRONMENT_FULL]);
  const importOne = await owner.json("POST", `${base}/import`, {
    entries: [{ key: "ONE_MORE", value: "one-more-value", overwrite: true }],
  });
  assert.equal(importOne.status, 409);
  assert.match(importOne.body.error, /^This import would add 1 new secret to the 1,000 this environment holds/);
  const full = await keys();
  assert.equal(full.length, 1_000);
  assert.ok(!full.includes("ONE_MORE"));
  assert.equal((await owner.json("GET", `${base}/export`)).body.secrets.length, 1_000);

  // Changing what is there still works at the limit, and the limit is per environment.
  const overwrite = await owner.json("POST", `${base}/import`, {
    entries: [{ key: "KEY_0", value: "overwritten-value", overwrite: true }],
  });
  assert.deepEqual([overwrite.status, overwrite.body.summary.updated], [200, 1]);
  await createSecret(owner, projectId, "staging", "ONE_MORE", "one-more-value");
  // Deleting one makes a place.
  assert.equal((await owner.json("DELETE", `${base}/secrets/${last.body.secret.id}`)).status, 200);
  assert.equal((await owner.json("POST", `${base}/secrets`, { key: "ONE_MORE", value: "one-more-value" })).status, 201);
});

test("a secret keeps its newest 100 versions: a new value drops the oldest", async (t) => {
  const { owner, projectId } = await startProject(t);
  const base = envPath(projectId, "development");
  const value = (n: number) => `pruned-value-${String(n).padStart(3, "0")}`;
  const secret = await createSecret(owner, projectId, "development", "ROTATED", value(1));
  const url = `${base}/secrets/${secret.id}`;
  for (let n = 2; n <= 101; n++) assert.equal((await owner.json("PATCH", url, { value: value(n) })).status, 200, `version ${n}`);

  const numbers = async () => {
    const history = (await owner.json("GET", `${url}/versions`)).body;
    return {
      current: history.currentVersion as number,
      numbers: (history.versions as { versionNumber: number }[]).map((v) => v.versionNumber),
    };
  };
  const range = (newest: number) => Array.from({ length: 100 }, (_, i) => newest - i);
  assert.deepEqual(await numbers(), { current: 101, numbers: range(101) });
  const dropped = await owner.json("GET", `${url}/versions/1`);
  assert.deepEqual([dropped.status, dropped.body], [404, VERSION_NOT_FOUND]);
  assert.deepEqual((await owner.json("GET", `${url}/versions/2`)).body, { version: { versionNumber: 2, value: value(2) } });
  const restoreDropped = await owner.json("POST", `${url}/versions/1/restore`, {});
  assert.deepEqual([restoreDropped.status, restoreDropped.body], [404, VERSION_NOT_FOUND]);

  // A restore and an import overwrite make new versions too, and prune the same way.
  const restored = await owner.json("POST", `${url}/versions/2/restore`, {});
  assert.deepEqual([restored.status, restored.body.secret.version], [200, 102]);
  assert.deepEqual(await numbers(), { current: 102, numbers: range(102) });
  const imported = await owner.json("POST", `${base}/import`, { entries: [{ key: "ROTATED", value: value(103), overwrite: true }] });
  assert.equal(imported.body.summary.updated, 1);
  assert.deepEqual(await numbers(), { current: 103, numbers: range(103) });
  assert.equal((await owner.json("GET", url)).body.secret.value, value(103));
});

test("a listing reads in a snapshot without waiting for another connection's write transaction; an export waits for it at its rate-limit count, then reads the committed state", {
  skip: onPostgres(
    "another connection holding SQLite's write lock (on PostgreSQL, test/postgres-store.test.ts proves reads never wait for the write lock)",
  ),
}, async (t) => {
  const { server, owner, projectId } = await startProject(t);
  const base = envPath(projectId, "development");
  await createSecret(owner, projectId, "development", "ORIGINAL", "original-value");
  await createSecret(owner, projectId, "development", "OTHER", "other-value-01");

  // Another process on the same file (a CLI command, say) takes the write lock, renames a
  // secret and holds the lock for 1.5 s (less than the 5 s busy timeout) before committing.
  // A worker thread, because the server blocks its own thread while it waits for the lock.
  const { messages, committed, worker } = await renameKeyHoldingWriteLock(server, "ORIGINAL", "RENAMED_MEANWHILE", 1500);
  t.after(() => worker.terminate());

  // A listing (no write before it answers) reads the last committed state at once.
  const listed = await owner.json("GET", `${base}/secrets`);
  assert.deepEqual((listed.body.secrets as { key: string }[]).map((s) => s.key).sort(), ["ORIGINAL", "OTHER"]);
  assert.deepEqual(messages, ["locked"], "the listing did not wait for the lock");
  // An export's limit is counted exactly in the database (several server processes share
  // it), a write that waits for the lock: the export then reads the committed state whole.
  const exported = await owner.json("GET", `${base}/export`);
  assert.equal(exported.status, 200);
  await committed;
  assert.deepEqual(exported.body.secrets, [
    { key: "OTHER", value: "other-value-01" },
    { key: "RENAMED_MEANWHILE", value: "original-value" },
  ]);
  assert.deepEqual(messages, ["locked", "committed"]);
  assert.deepEqual(
    (await auditEvents(owner, projectId, "secrets.exported")).map((e) => e.metadata),
    [{ environment: "development", count: 2, format: "json" }],
  );
  const keys = ((await owner.json("GET", `${base}/secrets`)).body.secrets as { key: string }[]).map((s) => s.key).sort();
  assert.deepEqual(keys, ["OTHER", "RENAMED_MEANWHILE"]);
});

test("export fails closed: no value leaves when its audit event cannot be written", async (t) => {
  const { server, owner, projectId } = await startProject(t);
  const base = envPath(projectId, "development");
  await createSecret(owner, projectId, "development", "GUARDED", "guarded-value-01");
  const undo = failWritesTo(server, "audit_events", { action: "secrets.exported", message: "audit refused" });

  for (const format of ["json", "dotenv"]) {
    const res = await owner.get(`${base}/export?format=${format}`);
    const text = await res.text();
    assert.equal(res.status, 500, format);
    assert.ok(!text.includes("guarded-value-01"), format);
    assert.deepEqual(JSON.parse(text), {
      error: "Something went wrong on the server. Try again; if it keeps happening, check the server log.",
    });
  }
  undo();
  assert.deepEqual((await owner.json("GET", `${base}/export`)).body.secrets, [{ key: "GUARDED", value: "guarded-value-01" }]);
});
