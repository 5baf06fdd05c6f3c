// Security review, item 3: the cross-site guard and `no-store` key on the route the router
// matched, never on the raw URL. The router decodes a path before matching it, so an
// encoded spelling of /api/ reached the export handler while `req.url.startsWith("/api/")`
// said no. Requests go out through node:http so the path is sent exactly as written
// (fetch would normalise dot segments).
import assert from "node:assert/strict";
import http from "node:http";
import { test } from "node:test";
import { auditEvents, startServer } from "./helpers.ts";
import { createSecret } from "./secrets-helpers.ts";

interface RawAnswer {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
}

function rawGet(baseUrl: string, rawPath: string, headers: Record<string, string>): Promise<RawAnswer> {
  const url = new URL(baseUrl);
  return new Promise((resolve, reject) => {
    const req = http.request({ host: url.hostname, port: url.port, method: "GET", path: rawPath, headers, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (chunk: Buffer) => chunks.push(chunk));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString("utf8") }));
    });
    req.on("error", reject);
    req.end();
  });
}

/** Spellings of one API path that a router or a proxy may take for it. */
function spellings(apiPath: string): string[] {
  const rest = apiPath.slice("/api/".length);
  return [
    apiPath,
    `/%61pi/${rest}`,
    `/%61%70%69/${rest}`,
    `/%41PI/${rest}`,
    `/%2561pi/${rest}`,
    `/API/${rest}`,
    `/Api/${rest}`,
    `/api/./${rest}`,
    `/x/../api/${rest}`,
    `/api/${rest.replace("export", "%65xport").replace("secrets/", "%73ecrets/")}`,
    `//api/${rest}`,
    `/api//${rest}`,
    `${apiPath}/`,
    `/api/${rest}`.replace(/\//g, "%2F").replace(/^%2F/, "/"),
  ];
}

test("no spelling of an API path gets past the cross-site guard: encoded, double-encoded, dot segments, case", async (t) => {
  const server = await startServer(t);
  const alice = await server.signIn("alice@example.test");
  const project = await alice.createProject({ name: "shop", environments: ["production"] });
  const base = `/api/projects/${project.id}/environments/production`;
  const secret = await createSecret(alice, project.id, "production", "API_KEY", "route-guard-value-1");
  const audited = async () =>
    (await auditEvents(alice, project.id)).filter((e) => e.action === "secret.revealed" || e.action === "secrets.exported").length;

  const cookie = alice.cookieHeader();
  for (const apiPath of [`${base}/export?format=dotenv`, `${base}/export`, `${base}/secrets/${secret.id}`]) {
    const [pathOnly, query] = apiPath.split("?");
    for (const spelled of spellings(pathOnly!)) {
      const rawPath = query ? `${spelled}?${query}` : spelled;
      for (const site of ["cross-site", "same-site"]) {
        const res = await rawGet(server.url, rawPath, { cookie, "sec-fetch-site": site, "sec-fetch-mode": "navigate" });
        // Refused, unknown, or the web page (a spelling no router decodes to /api/): never the handler.
        const isPage = res.status === 200 && String(res.headers["content-type"]).startsWith("text/html");
        assert.ok(res.status === 403 || res.status === 404 || isPage, `${site} ${rawPath}: ${res.status} ${res.body.slice(0, 200)}`);
        assert.doesNotMatch(res.body, /route-guard-value-1/, rawPath);
        if (res.status === 403) assert.deepEqual(JSON.parse(res.body), { error: "Cross-origin request refused." });
      }
    }
  }
  assert.equal(await audited(), 0, "nothing was revealed or exported by a cross-site request");
});

test("every answer of an API route is no-store, however its path was spelled", async (t) => {
  const server = await startServer(t);
  const alice = await server.signIn("alice@example.test");
  const project = await alice.createProject({ name: "shop", environments: ["production"] });
  const base = `/api/projects/${project.id}/environments/production`;
  const secret = await createSecret(alice, project.id, "production", "API_KEY", "route-guard-value-2");
  const cookie = alice.cookieHeader();

  let reachedHandler = 0;
  for (const apiPath of [`${base}/export`, `${base}/secrets/${secret.id}`, `/api/projects/${project.id}`]) {
    for (const spelled of spellings(apiPath)) {
      const res = await rawGet(server.url, spelled, { cookie, "sec-fetch-site": "same-origin" });
      if (res.body.includes("route-guard-value-2") || (res.status === 200 && res.headers["content-type"]?.includes("application/json"))) {
        reachedHandler++;
        assert.equal(res.headers["cache-control"], "no-store", `${spelled} reached the API and must not be cached`);
      }
      if (res.status === 404 && res.headers["content-type"]?.includes("application/json")) {
        assert.deepEqual(Object.keys(JSON.parse(res.body)), ["error"], spelled);
      }
    }
  }
  // The plain spellings and the decoded ones do reach the handlers: the check above ran.
  assert.ok(reachedHandler >= 6, `only ${reachedHandler} spellings reached a handler`);

  // A path the API does not claim, in any spelling, is a JSON 404 rather than the web page.
  for (const unknown of ["/api/nope", "/%61pi/nope", "/API/nope", "/Api/nope/deeper"]) {
    const res = await rawGet(server.url, unknown, { cookie });
    assert.equal(res.status, 404, unknown);
    assert.deepEqual(JSON.parse(res.body), { error: "Not found." }, unknown);
  }
  // The web UI itself is unaffected.
  const page = await rawGet(server.url, `/projects/${project.id}/production`, {});
  assert.equal(page.status, 200);
  assert.match(page.body, /<html/i);
});
