import assert from "node:assert/strict";
import { Writable } from "node:stream";
import { type TestContext, test } from "node:test";
import { Validator } from "@seriousme/openapi-schema-validator";
import Fastify from "fastify";
import { serializerCompiler, validatorCompiler, type ZodTypeProvider } from "fastify-type-provider-zod";
import { z } from "zod";
import { parseRoutes } from "../drills/fuzz.drill.ts";
import { registerErrorHandling } from "../src/core/errors.ts";
import { VALIDATION_MESSAGES } from "../src/validation-messages.ts";
import { freePort, startServer, type TestServer } from "./helpers.ts";
import { startProvider } from "./oidc-fixture.ts";

type Operation = { summary?: string; security?: unknown[]; responses?: Record<string, unknown> };
type OpenApi = {
  openapi: string;
  paths: Record<string, Record<string, Operation>>;
  components: { securitySchemes: Record<string, { type: string; in?: string; scheme?: string }>; schemas: Record<string, unknown> };
};

async function documentOf(server: TestServer): Promise<OpenApi> {
  const res = await fetch(`${server.url}/api/openapi.json`);
  assert.equal(res.status, 200);
  assert.match(res.headers.get("content-type") ?? "", /^application\/json/);
  return (await res.json()) as OpenApi;
}

/** Every route the server registered, except the web UI's catch-all (pages, not API). */
function registeredRoutes(server: TestServer): { method: string; path: string }[] {
  return parseRoutes(server.app.app.printRoutes({ commonPrefix: false }))
    .map((route) => {
      const [method, path] = route.split(" ") as [string, string];
      return { method: method.toLowerCase(), path };
    })
    .filter((route) => route.path !== "*");
}

/** The document is valid OpenAPI 3.1 and has every registered route, each with a summary, its credentials and the error shape. */
async function assertDocumentCoversServer(server: TestServer): Promise<OpenApi> {
  const document = await documentOf(server);
  const validator = new Validator();
  const result = await validator.validate(structuredClone(document) as never);
  assert.equal(result.valid, true, JSON.stringify(result.errors, null, 2));
  assert.equal(validator.version, "3.1");

  const routes = registeredRoutes(server);
  assert.ok(routes.length > 20, "the routes were read from the server");
  const missing = routes.filter(({ method, path }) => !document.paths[path.replace(/:(\w+)/g, "{$1}")]?.[method]);
  assert.deepEqual(missing, [], "every registered route is in the document");
  for (const { method, path } of routes) {
    const operation = document.paths[path.replace(/:(\w+)/g, "{$1}")]![method]!;
    const where = `${method.toUpperCase()} ${path}`;
    assert.ok(operation.summary, `${where} has a summary`);
    assert.ok(Array.isArray(operation.security), `${where} names its credentials`);
    assert.deepEqual(
      operation.responses?.default,
      {
        description: "An error: a status and a sentence that says what went wrong and what to do",
        content: { "application/json": { schema: { $ref: "#/components/schemas/Error" } } },
      },
      `${where} answers errors as { error }`,
    );
  }
  // And nothing in the document that the server does not serve.
  const served = new Set(routes.map(({ method, path }) => `${method} ${path.replace(/:(\w+)/g, "{$1}")}`));
  for (const [path, operations] of Object.entries(document.paths)) {
    for (const method of Object.keys(operations)) assert.ok(served.has(`${method} ${path}`), `${method} ${path} is served`);
  }
  return document;
}

test("the OpenAPI document is valid OpenAPI 3.1 and lists every route of a development server", async (t) => {
  const server = await startServer(t);
  const document = await assertDocumentCoversServer(server);

  assert.equal(document.openapi, "3.1.0");
  assert.deepEqual(
    { session: document.components.securitySchemes.session?.type, bearer: document.components.securitySchemes.bearer?.scheme },
    { session: "apiKey", bearer: "bearer" },
  );
  assert.equal(document.components.securitySchemes.session?.in, "cookie");
  assert.deepEqual(document.components.schemas.Error, {
    type: "object",
    properties: { error: { type: "string" } },
    required: ["error"],
    additionalProperties: false,
  });
  // Credentials per operation: browser only, browser or token, none.
  assert.deepEqual(document.paths["/api/projects"]!.post!.security, [{ session: [] }]);
  assert.deepEqual(document.paths["/api/projects/{projectId}/environments/{env}/secrets/{secretId}"]!.get!.security, [
    { session: [] },
    { bearer: [] },
  ]);
  assert.deepEqual(document.paths["/api/cli/auth/device"]!.post!.security, []);
  // Sign-out needs no session (without one it answers the same): an empty requirement says so.
  assert.deepEqual(document.paths["/api/auth/sign-out"]!.post!.security, [{}, { session: [] }]);
  assert.equal((await server.client().json("POST", "/api/auth/sign-out")).status, 200);
  // What a request that does not fit is told, in the route's own words.
  const patchSecret = document.paths["/api/projects/{projectId}/environments/{env}/secrets/{secretId}"]!.patch!.responses!;
  assert.equal(
    (patchSecret["400"] as { description: string }).description,
    'When the request does not fit: "Nothing to update.", "expectedVersion must be a positive integer.", "invalid key or value"',
  );
  const importResponses = document.paths["/api/projects/{projectId}/environments/{env}/import"]!.post!.responses!;
  assert.match((importResponses["413"] as { description: string }).description, /"The import is too large\."/);
  // The token poll documents its three answers.
  assert.deepEqual(Object.keys(document.paths["/api/cli/auth/token"]!.post!.responses!).sort(), ["200", "202", "400", "default"]);
});

test("the document says what the server does with bodies and answers that are not plain JSON", async (t) => {
  const server = await startServer(t);
  const document = await documentOf(server);
  type Documented = Operation & { requestBody?: { required?: boolean }; responses: Record<string, { content?: Record<string, unknown> }> };
  const operation = (method: string, path: string) => document.paths[path]![method] as Documented;
  const owner = await server.signIn("owner@example.test");
  const project = await owner.createProject({ name: "api", environments: ["development"] });
  const created = await owner.json("POST", `/api/projects/${project.id}/environments/development/secrets`, { key: "KEY", value: "v" });
  assert.equal(created.status, 201);

  // A body that may be left out is documented as such, and the server takes a request without one.
  const restore = "/api/projects/{projectId}/environments/{env}/secrets/{secretId}/versions/{versionNumber}/restore";
  for (const path of ["/api/cli/auth/device", restore]) assert.equal(operation("post", path).requestBody?.required, false, path);
  assert.equal(operation("post", "/api/projects/{projectId}/integrations/hosting/sync").requestBody?.required, false);
  assert.equal((await server.client().request("POST", "/api/cli/auth/device")).status, 200);
  const secretPath = `/api/projects/${project.id}/environments/development/secrets/${created.body.secret.id}`;
  assert.equal((await owner.json("PATCH", secretPath, { value: "v2" })).status, 200);
  assert.equal((await owner.request("POST", `${secretPath}/versions/1/restore`)).status, 200);
  // Left out with its Content-Type still sent (curl -H 'content-type: application/json', no -d): the same.
  const json = { "content-type": "application/json" };
  assert.equal((await owner.request("POST", `${secretPath}/versions/2/restore`, "", json)).status, 200);
  assert.equal((await server.client().request("POST", "/api/cli/auth/device", "", json)).status, 200);
  // A route that needs its body says so in its own words, not as JSON that does not parse.
  const noBody = await owner.request("POST", "/api/projects", "", json);
  assert.equal(noBody.status, 400);
  assert.deepEqual(await noBody.json(), { error: "invalid fields" });
  // Bodies that must be sent stay required, the workload exchange's included.
  assert.equal(operation("post", "/api/projects").requestBody?.required, true);
  assert.equal(operation("post", "/api/auth/workload/token").requestBody?.required, true);

  // Answers that are not JSON: the type documented is the type served.
  for (const [path, type] of [
    ["/api/docs", "text/html"],
    ["/api/docs/style.css", "text/css"],
  ] as const) {
    assert.deepEqual(Object.keys(operation("get", path).responses["200"]!.content ?? {}), [type]);
    const res = await fetch(`${server.url}${path}`);
    assert.equal(res.headers.get("content-type")?.split(";")[0], type);
  }
  const exportPath = "/api/projects/{projectId}/environments/{env}/export";
  const exportTypes = Object.keys(operation("get", exportPath).responses["200"]!.content ?? {});
  assert.deepEqual(exportTypes, ["application/json", "text/plain", "text/x-shellscript", "application/yaml"]);
  for (const format of ["dotenv", "shell", "docker", "yaml"]) {
    const res = await owner.request("GET", `/api/projects/${project.id}/environments/development/export?format=${format}`);
    assert.equal(res.status, 200);
    assert.ok(exportTypes.includes(res.headers.get("content-type")!.split(";")[0]!), `${format}: ${res.headers.get("content-type")}`);
  }
});

test("the OpenAPI document lists every route of a server with local accounts, and of one with OpenID Connect", async (t) => {
  const local = await startServer(t, { env: { AUTH_PROVIDER: "local" } });
  const localDocument = await assertDocumentCoversServer(local);
  assert.ok(localDocument.paths["/api/auth/local/sign-in"]?.post);
  assert.equal(localDocument.paths["/api/auth/dev/sign-in"], undefined, "no development sign-in there");

  const port = await freePort();
  const provider = await startProvider(t, `http://127.0.0.1:${port}/api/auth/oidc/callback`, {
    alice: { email: "alice@example.test", email_verified: true },
  });
  const oidc = await startServer(t, {
    env: {
      NODE_ENV: "production",
      AUTH_PROVIDER: "oidc",
      OIDC_ISSUER: provider.issuer,
      OIDC_CLIENT_ID: provider.clientId,
      OIDC_CLIENT_SECRET: provider.clientSecret,
      PORT: String(port),
    },
  });
  const oidcDocument = await assertDocumentCoversServer(oidc);
  assert.ok(oidcDocument.paths["/api/auth/oidc/callback"]?.get);
  assert.ok(oidcDocument.components.securitySchemes.session, "the production cookie is named too");
});

test("/api/docs is the reference as one server-rendered page: every operation, no script, its own stylesheet", async (t) => {
  const server = await startServer(t);
  const document = await documentOf(server);
  const res = await fetch(`${server.url}/api/docs`);
  assert.equal(res.status, 200);
  assert.equal(res.headers.get("content-type"), "text/html; charset=utf-8");
  const csp = res.headers.get("content-security-policy") ?? "";
  assert.match(csp, /script-src 'self'/);
  assert.match(csp, /style-src 'self'/);
  const html = await res.text();
  assert.doesNotMatch(html, /<script/i, "no script at all");
  assert.doesNotMatch(html, /\sstyle=/i, "no inline style: the CSP would block it");
  assert.doesNotMatch(html, /(src|href)="(https?:)?\/\//, "nothing from another host: it works air-gapped");
  for (const path of Object.keys(document.paths)) assert.ok(html.includes(`<code>${path}</code>`), `${path} is on the page`);
  assert.match(html, /Browser session or bearer token/);
  assert.match(html, /No credential needed; a browser session is used when sent/);
  assert.match(html, /<a href="\/api\/openapi.json">/);

  const css = await fetch(`${server.url}/api/docs/style.css`);
  assert.equal(css.status, 200);
  assert.equal(css.headers.get("content-type"), "text/css; charset=utf-8");
  // Public: a link from another site (a wiki) opens them, as any page of the API refuses.
  const client = server.client();
  for (const path of ["/api/docs", "/api/docs/style.css", "/api/openapi.json"]) {
    for (const site of ["cross-site", "same-site"]) {
      const res = await client.request("GET", path, undefined, { "sec-fetch-site": site, "sec-fetch-mode": "navigate" });
      assert.equal(res.status, 200, `${site} ${path}`);
    }
  }
  const refused = await client.request("GET", "/api/projects", undefined, { "sec-fetch-site": "cross-site" });
  assert.equal(refused.status, 403);
  assert.match(await css.text(), /\.operation/);
});

test("every route of the validation message table exists, so a renamed route cannot lose its messages silently", async (t) => {
  const dev = await startServer(t);
  const local = await startServer(t, { env: { AUTH_PROVIDER: "local" } });
  const served = new Set(
    [...registeredRoutes(dev), ...registeredRoutes(local)].map(({ method, path }) => `${method.toUpperCase()} ${path}`),
  );
  const stale = Object.keys(VALIDATION_MESSAGES).filter((route) => !served.has(route));
  assert.deepEqual(stale, []);
});

/** A server with this project's compilers and error handling, and routes that answer wrongly on purpose. */
async function schemaServer(
  t: TestContext,
): Promise<{ inject: (url: string) => Promise<{ status: number; body: unknown }>; logs: string[] }> {
  const logs: string[] = [];
  const app = Fastify({
    logger: {
      level: "error",
      stream: new Writable({
        write(chunk, _enc, done) {
          logs.push(String(chunk));
          done();
        },
      }),
    } as never,
  });
  app.setValidatorCompiler(validatorCompiler);
  app.setSerializerCompiler(serializerCompiler);
  registerErrorHandling(app);
  const routes = app.withTypeProvider<ZodTypeProvider>();
  const Secret = z.object({ id: z.string(), key: z.string() });
  routes.get("/extra", { schema: { response: { 200: z.object({ secret: Secret }) } } }, async () => ({
    secret: { id: "s1", key: "API_KEY", valueCiphertext: "c2VjcmV0", nested: { token: "svc_at_x" } } as never,
  }));
  routes.get(
    "/wrong",
    { schema: { response: { 200: Secret } } },
    async () => ({ id: "s1", key: 42 as unknown as string, value: "hunter2-value" }) as never,
  );
  await app.ready();
  t.after(() => app.close());
  return {
    logs,
    inject: async (url) => {
      const res = await app.inject({ method: "GET", url });
      return { status: res.statusCode, body: res.json() };
    },
  };
}

test("a response schema is an allow-list: a field it does not name never reaches the client", async (t) => {
  const server = await schemaServer(t);
  assert.deepEqual(await server.inject("/extra"), { status: 200, body: { secret: { id: "s1", key: "API_KEY" } } });
});

test("a response that does not fit its schema is a logged 500 with the generic message, and its values stay out of the log", async (t) => {
  const server = await schemaServer(t);
  assert.deepEqual(await server.inject("/wrong"), {
    status: 500,
    body: { error: "Something went wrong on the server. Try again; if it keeps happening, check the server log." },
  });
  const line = server.logs.find((l) => l.includes("a response did not match its schema"));
  assert.ok(line, "the mismatch is logged");
  assert.deepEqual(JSON.parse(line).problems, ["key: invalid_type"]);
  assert.ok(!server.logs.some((l) => l.includes("hunter2-value")), "no value in the log");
});
