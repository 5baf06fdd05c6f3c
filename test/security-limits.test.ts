// Bounded work, over HTTP against a real server: limits are checked before a body is read.
import assert from "node:assert/strict";
import http from "node:http";
import { test } from "node:test";
import { startServer, type Client, type TestServer } from "./helpers.ts";
import { envPath } from "./secrets-helpers.ts";

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
