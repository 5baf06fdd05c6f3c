import assert from "node:assert/strict";
import { test } from "node:test";
import { PERMISSIONS } from "../src/core/access.ts";
import { auditEvents, type Client, cliClient, startServer } from "./helpers.ts";
import { addMember, createSecret } from "./secrets-helpers.ts";
import { createServiceAccount, createServiceToken } from "./service-account-helpers.ts";
import { auditRows, rowCount, writeIntegrationRow } from "./storage.ts";

const ISO_MS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

test("create answers 201 with the full project shape; the caller is owner", async (t) => {
  const server = await startServer(t);
  const alice = await server.signIn("alice@example.test");
  const res = await alice.json("POST", "/api/projects", {
    name: "  billing-api  ",
    description: "Payments",
    environments: ["production", "development"],
  });
  assert.equal(res.status, 201);
  const project = res.body.project;
  assert.match(project.id, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  assert.deepEqual(Object.keys(project).sort(), [
    "createdAt",
    "description",
    "environments",
    "id",
    "name",
    "permissions",
    "role",
    "secretCounts",
    "updatedAt",
  ]);
  assert.equal(project.name, "billing-api", "trimmed");
  assert.equal(project.description, "Payments");
  assert.equal(project.role, "owner");
  assert.deepEqual(project.permissions, [...PERMISSIONS]);
  // The sixteen of people's roles and service_accounts:manage.
  assert.equal(project.permissions.length, 17);
  assert.deepEqual(project.environments, ["development", "production"]);
  assert.deepEqual(project.secretCounts, { development: 0, production: 0 });
  assert.match(project.createdAt, ISO_MS);
  assert.match(project.updatedAt, ISO_MS);

  const get = await alice.json("GET", `/api/projects/${project.id}`);
  assert.equal(get.status, 200);
  assert.deepEqual(get.body, { project });
});

test("an empty description is omitted", async (t) => {
  const server = await startServer(t);
  const alice = await server.signIn("alice@example.test");
  const project = await alice.createProject({ name: "api", description: "", environments: ["staging"] });
  assert.equal("description" in project, false);
});

test("invalid create bodies answer 400 invalid fields and write nothing", async (t) => {
  const server = await startServer(t);
  const alice = await server.signIn("alice@example.test");
  const bodies: unknown[] = [
    {},
    { name: "api" },
    { environments: ["production"] },
    { name: "", environments: ["production"] },
    { name: "   ", environments: ["production"] },
    { name: "x".repeat(61), environments: ["production"] },
    { name: 12, environments: ["production"] },
    { name: "api", environments: [] },
    { name: "api", environments: ["prod"] },
    { name: "api", environments: ["production", "production"] },
    { name: "api", environments: "production" },
    { name: "api", description: "d".repeat(281), environments: ["production"] },
    { name: "api", description: 5, environments: ["production"] },
    { name: "api", environments: ["production"], extra: { nested: [1, 2] } },
    // The audit writer refuses token-shaped text: a 400 here, never a 500 later.
    { name: `svc_at_${"A".repeat(24)}`, environments: ["production"] },
    // Names reach terminals and audit sentences: no escape sequences, line breaks or bidi overrides.
    { name: "api\u001b[2K\rprod", environments: ["production"] },
    { name: "api\nprod", environments: ["production"] },
    { name: "api\u202etset", environments: ["production"] },
    { name: "api\u2028b", environments: ["production"] },
    { name: "api", description: "line\u001b]0;title\u0007", environments: ["production"] },
    { name: "api", description: "\u2067reversed", environments: ["production"] },
    // Stored as U+FFFD: it would pass the uniqueness check as one name and be kept as another.
    { name: "Dup\ud800", environments: ["production"] },
    { name: "api", description: "half \udc00 a pair", environments: ["production"] },
    ["api"],
    "api",
    null,
  ];
  for (const body of bodies) {
    const res = await alice.json("POST", "/api/projects", body === null ? "null" : body);
    assert.equal(res.status, 400, JSON.stringify(body));
    assert.deepEqual(res.body, { error: "invalid fields" }, JSON.stringify(body));
  }
  assert.deepEqual((await alice.json("GET", "/api/projects")).body, { projects: [] });
  assert.equal(rowCount(server, "projects"), 0);
  assert.equal(rowCount(server, "memberships"), 0);
  assert.equal(rowCount(server, "audit_events"), 0);
});

test("names are 1 to 60 characters after trimming, descriptions up to 280", async (t) => {
  const server = await startServer(t);
  const alice = await server.signIn("alice@example.test");
  const long = await alice.createProject({ name: "n".repeat(60), description: "d".repeat(280), environments: ["production"] });
  assert.equal(long.name.length, 60);
  assert.equal(long.description.length, 280);
  const padded = await alice.createProject({ name: `  ${"m".repeat(60)}  `, environments: ["production"] });
  assert.equal(padded.name, "m".repeat(60));
  const astral = await alice.createProject({ name: "🔑".repeat(30), description: "🔑".repeat(140), environments: ["production"] });
  assert.equal(astral.name.length, 60);
  const tooLong = await alice.json("POST", "/api/projects", { name: `${"🔑".repeat(30)}x`, environments: ["production"] });
  assert.deepEqual([tooLong.status, tooLong.body], [400, { error: "invalid fields" }]);
});

test("names are unique among the caller's projects, ignoring case, how accents were typed and invisible characters", async (t) => {
  const server = await startServer(t);
  const alice = await server.signIn("alice@example.test");
  const bob = await server.signIn("bob@example.test");
  await alice.createProject({ name: "Billing", environments: ["production"] });
  const clash = await alice.json("POST", "/api/projects", { name: "billing", environments: ["staging"] });
  assert.equal(clash.status, 409);
  assert.deepEqual(clash.body, { error: "A project with this name already exists." });
  assert.deepEqual(
    (await alice.json("GET", "/api/projects")).body.projects.map((p: { name: string }) => p.name),
    ["Billing"],
  );
  // Another user's projects do not count.
  await bob.createProject({ name: "BILLING", environments: ["production"] });

  const other = await alice.createProject({ name: "Other", environments: ["production"] });
  const rename = await alice.json("PATCH", `/api/projects/${other.id}`, { name: "BILLING " });
  assert.equal(rename.status, 409);
  assert.deepEqual(rename.body, { error: "A project with this name already exists." });
  // Renaming to its own name in another case is fine.
  const recase = await alice.json("PATCH", `/api/projects/${other.id}`, { name: "OTHER" });
  assert.equal(recase.status, 200);
  assert.equal(recase.body.project.name, "OTHER");

  // Case beyond ASCII counts too.
  await alice.createProject({ name: "Ärger Über", environments: ["production"] });
  const unicode = await alice.json("POST", "/api/projects", { name: "ärger über", environments: ["production"] });
  assert.equal(unicode.status, 409);
  assert.deepEqual(unicode.body, { error: "A project with this name already exists." });
  const unicodeRename = await alice.json("PATCH", `/api/projects/${other.id}`, { name: "ÄRGER ÜBER" });
  assert.equal(unicodeRename.status, 409);

  // An accent typed decomposed, a fullwidth letter, or characters that show nothing make no
  // other name: two projects must not look the same in a list.
  for (const name of ["A\u0308rger U\u0308ber", "A\u200b\u0308rger Über", "Ｂilling", "Bill\u200bing", "Bil\u00adling", "Billing\ufe0f"]) {
    const same = await alice.json("POST", "/api/projects", { name, environments: ["production"] });
    assert.deepEqual([same.status, same.body], [409, { error: "A project with this name already exists." }], JSON.stringify(name));
  }
  // ß folds as SS.
  await alice.createProject({ name: "Straße", environments: ["production"] });
  assert.equal((await alice.json("POST", "/api/projects", { name: "STRASSE", environments: ["production"] })).status, 409);
  // Stored composed, whichever way it was typed.
  assert.equal((await alice.createProject({ name: "Cafe\u0301", environments: ["production"] })).name, "Caf\u00e9");
  // A name that shows nothing is no name.
  for (const name of ["\u200b", "\u00ad \u2060", "\u3164"]) {
    const blank = await alice.json("POST", "/api/projects", { name, environments: ["production"] });
    assert.deepEqual([blank.status, blank.body], [400, { error: "invalid fields" }], JSON.stringify(name));
  }
});

test("the list holds only the caller's projects, most recently updated first", async (t) => {
  const server = await startServer(t);
  const alice = await server.signIn("alice@example.test");
  const bob = await server.signIn("bob@example.test");
  const a = await alice.createProject({ name: "a", environments: ["production"] });
  server.clock.advance(1000);
  const b = await alice.createProject({ name: "b", environments: ["production"] });
  server.clock.advance(1000);
  await bob.createProject({ name: "bobs", environments: ["production"] });
  server.clock.advance(1000);
  let list = await alice.json("GET", "/api/projects");
  assert.equal(list.status, 200);
  assert.deepEqual(
    list.body.projects.map((p: { name: string }) => p.name),
    ["b", "a"],
  );
  await alice.json("PATCH", `/api/projects/${a.id}`, { description: "touched" });
  list = await alice.json("GET", "/api/projects");
  assert.deepEqual(
    list.body.projects.map((p: { id: string }) => p.id),
    [a.id, b.id],
  );
  assert.ok(list.body.projects[0].updatedAt > list.body.projects[0].createdAt);
});

test("PATCH: at least one field, name rules, description cleared by empty string or null", async (t) => {
  const server = await startServer(t);
  const alice = await server.signIn("alice@example.test");
  const project = await alice.createProject({ name: "api", description: "first", environments: ["production"] });
  const path = `/api/projects/${project.id}`;

  for (const body of [{}, { unknown: 1 }]) {
    const res = await alice.json("PATCH", path, body);
    assert.equal(res.status, 400, JSON.stringify(body));
  }
  assert.deepEqual((await alice.json("PATCH", path, {})).body, { error: "Nothing to update." });
  // No body at all says the same, as on PATCH secret.
  const bare = await alice.request("PATCH", path);
  assert.equal(bare.status, 400);
  assert.deepEqual(await bare.json(), { error: "Nothing to update." });
  // Limits count UTF-16 units, as the UI's checks do: 30 emoji are a 60-unit name, 31 are not.
  for (const body of [
    { name: "🔑".repeat(31) },
    { description: `${"🔑".repeat(140)}d` },
    { name: "" },
    { name: "x".repeat(61) },
    { name: 5 },
    { name: "a\u0000b" },
    { description: "d".repeat(281) },
    { description: 7 },
    { description: "\u001b[31mred" },
    { name: "X\ud800" },
  ]) {
    const res = await alice.json("PATCH", path, body);
    assert.equal(res.status, 400, JSON.stringify(body));
    assert.deepEqual(res.body, { error: "invalid fields" });
  }
  assert.equal((await alice.json("GET", path)).body.project.description, "first");

  const renamed = await alice.json("PATCH", path, { name: " api-v2 ", description: "second" });
  assert.equal(renamed.status, 200);
  assert.equal(renamed.body.project.name, "api-v2");
  assert.equal(renamed.body.project.description, "second");
  // Emoji sequences (joined by zero-width joiners) and multi-line descriptions are fine.
  const friendly = await alice.json("PATCH", path, { name: "api-v2 👩\u200d💻", description: "line one\n\tline two" });
  assert.equal(friendly.status, 200, JSON.stringify(friendly.body));
  assert.equal(friendly.body.project.name, "api-v2 👩\u200d💻");
  assert.equal(friendly.body.project.description, "line one\n\tline two");
  assert.equal((await alice.json("PATCH", path, { name: "api-v2", description: "second" })).status, 200);

  const cleared = await alice.json("PATCH", path, { description: "" });
  assert.equal(cleared.status, 200);
  assert.equal("description" in cleared.body.project, false);
  await alice.json("PATCH", path, { description: "again" });
  const nulled = await alice.json("PATCH", path, { description: null });
  assert.equal("description" in nulled.body.project, false);
});

test("permissions per role follow the operations table exactly", async (t) => {
  const server = await startServer(t);
  const owner = await server.signIn("owner@example.test");
  const project = await owner.createProject({ name: "api", environments: ["development", "production"] });
  const expected: Record<string, string[]> = {
    admin: PERMISSIONS.filter((p) => p !== "project:delete"),
    member: ["project:read", "members:read", "secrets:read", "secrets:create", "secrets:update", "secrets:delete"],
    viewer: ["project:read", "members:read", "secrets:read"],
  };
  for (const role of ["admin", "member", "viewer"]) {
    const client = await server.signIn(`${role}@example.test`);
    await addMember(owner, client, project.id, role, role === "admin" ? undefined : ["production"]);
    const { status, body } = await client.json("GET", `/api/projects/${project.id}`);
    assert.equal(status, 200);
    assert.equal(body.project.role, role);
    assert.deepEqual(body.project.permissions, expected[role]);
    // Members and viewers see only granted environments, and counts only for those.
    const environments = role === "admin" ? ["development", "production"] : ["production"];
    assert.deepEqual(body.project.environments, environments);
    assert.deepEqual(Object.keys(body.project.secretCounts), environments);
  }
});

test("the permissions array follows a role change on the very next request", async (t) => {
  const server = await startServer(t);
  const owner = await server.signIn("owner@example.test");
  const project = await owner.createProject({ name: "api", environments: ["production"] });
  const carol = await server.signIn("carol@example.test");
  await addMember(owner, carol, project.id, "viewer");
  assert.equal((await carol.json("GET", `/api/projects/${project.id}`)).body.project.permissions.length, 3);
  const promoted = await owner.json("PATCH", `/api/projects/${project.id}/members/${carol.user!.id}`, { role: "admin" });
  assert.equal(promoted.status, 200, JSON.stringify(promoted.body));
  const after = await carol.json("GET", `/api/projects/${project.id}`);
  assert.equal(after.body.project.role, "admin");
  assert.equal(after.body.project.permissions.length, 16);
});

test("a non-member gets 404 Project not found. on every project route, whatever the body", async (t) => {
  const server = await startServer(t);
  const alice = await server.signIn("alice@example.test");
  const mallory = await server.signIn("mallory@example.test");
  const project = await alice.createProject({ name: "api", environments: ["production"] });
  const missing = "00000000-0000-4000-8000-000000000000";
  for (const id of [project.id, missing, "not-a-uuid"]) {
    for (const [method, body] of [
      ["GET", undefined],
      ["PATCH", { name: "stolen" }],
      ["PATCH", {}],
      ["PATCH", { name: 5 }],
      ["DELETE", undefined],
    ] as const) {
      const res = await mallory.json(method, `/api/projects/${id}`, body);
      assert.equal(res.status, 404, `${method} ${id} ${JSON.stringify(body)}`);
      assert.deepEqual(res.body, { error: "Project not found." });
    }
  }
  assert.equal((await alice.json("GET", `/api/projects/${project.id}`)).body.project.name, "api");
});

test("only admin and owner may update; only the owner may delete", async (t) => {
  const server = await startServer(t);
  const owner = await server.signIn("owner@example.test");
  const project = await owner.createProject({ name: "api", environments: ["production"] });
  const path = `/api/projects/${project.id}`;
  const clients: Record<string, Client> = {};
  for (const role of ["admin", "member", "viewer"]) {
    clients[role] = await server.signIn(`${role}@example.test`);
    await addMember(owner, clients[role]!, project.id, role);
  }
  for (const role of ["member", "viewer"]) {
    const res = await clients[role]!.json("PATCH", path, { name: "nope" });
    assert.equal(res.status, 403, role);
    assert.equal(typeof res.body.error, "string");
  }
  assert.equal((await clients.admin!.json("PATCH", path, { description: "by admin" })).status, 200);
  for (const role of ["admin", "member", "viewer"]) {
    const res = await clients[role]!.json("DELETE", path);
    assert.equal(res.status, 403, role);
  }
  assert.equal((await owner.json("GET", path)).status, 200);
});

test("delete removes everything of the project in one go; audit entries stay", async (t) => {
  const server = await startServer(t);
  const owner = await server.signIn("owner@example.test");
  const viewer = await server.signIn("viewer@example.test");
  const project = await owner.createProject({ name: "api", environments: ["development", "production"] });
  const keep = await owner.createProject({ name: "keep", environments: ["production"] });
  await addMember(owner, viewer, project.id, "viewer", ["production"]);
  // Something in every table that hangs off a project: secrets with versions, an invitation,
  // a service account with a token, an integration.
  const secretIds: string[] = [];
  for (const key of ["A_KEY", "B_KEY"]) {
    const created = await createSecret(owner, project.id, "production", key, `${key}-1`);
    await owner.json("PATCH", `/api/projects/${project.id}/environments/production/secrets/${created.id}`, { value: `${key}-2` });
    secretIds.push(created.id);
  }
  await owner.json("POST", `/api/projects/${project.id}/invitations`, {
    email: "later@example.test",
    role: "viewer",
    environments: ["production"],
  });
  const account = await createServiceAccount(owner, project.id, { name: "bot", role: "viewer", environments: ["production"] });
  await createServiceToken(owner, project.id, account.id);
  writeIntegrationRow(server, project.id, { status: "connected", lastSyncStatus: "ok", lastSyncAt: new Date().toISOString() });
  const tables = [
    "project_environments",
    "memberships",
    "environment_grants",
    "project_keys",
    "secrets",
    "invitations",
    "integrations",
    "service_accounts",
  ];
  for (const table of tables) assert.ok(rowCount(server, table, { project_id: project.id }) > 0, `${table} holds rows before`);
  const versions = () => secretIds.reduce((n, id) => n + rowCount(server, "secret_versions", { secret_id: id }), 0);
  const tokens = () => rowCount(server, "service_tokens", { service_account_id: account.id });
  assert.deepEqual([versions(), tokens()], [4, 1]);
  const auditBefore = rowCount(server, "audit_events");
  const projectActions = (await auditEvents(owner, project.id)).map((event) => event.action);

  const res = await owner.json("DELETE", `/api/projects/${project.id}`);
  assert.equal(res.status, 200);
  assert.deepEqual(res.body, { ok: true });
  assert.equal((await owner.json("GET", `/api/projects/${project.id}`)).status, 404);
  assert.equal((await viewer.json("GET", `/api/projects/${project.id}`)).status, 404);

  // The API answers 404 for every part of a deleted project: only the storage shows nothing is left.
  for (const table of tables) assert.equal(rowCount(server, table, { project_id: project.id }), 0, table);
  assert.deepEqual([versions(), tokens()], [0, 0]);
  assert.equal(rowCount(server, "projects", { id: project.id }), 0);
  assert.equal((await owner.json("GET", `/api/projects/${keep.id}`)).status, 200);
  assert.equal(rowCount(server, "audit_events"), auditBefore + 1);
  assert.equal(projectActions[0], "project.created");
  assert.deepEqual(
    auditRows(server, { project_id: project.id }).map((row) => row.action),
    [...projectActions, "project.deleted"],
  );
});

test("project changes are audited with category project and no more than names", async (t) => {
  const server = await startServer(t);
  const owner = await server.signIn("owner@example.test");
  const project = await owner.createProject({ name: "api", description: "secret plans", environments: ["production"] });
  await owner.json("PATCH", `/api/projects/${project.id}`, { name: "api2" });
  const rows = await auditEvents(owner, project.id);
  assert.deepEqual(
    rows.map((r) => [r.action, r.category, r.actor, r.targetType, r.targetId]),
    [
      ["project.created", "project", owner.user!.id, "project", project.id],
      ["project.updated", "project", owner.user!.id, "project", project.id],
    ],
  );
  assert.deepEqual(rows[1]!.metadata, { name: "api2", previousName: "api", descriptionChanged: false });
});

test("a CLI-only credential cannot create, update or delete projects", async (t) => {
  const server = await startServer(t);
  const owner = await server.signIn("owner@example.test");
  const project = await owner.createProject({ name: "api", environments: ["production"] });
  const cli = await cliClient(server, owner);
  const browserOnly = { error: "This action needs a browser session; CLI tokens cannot be used here." };
  for (const [method, path, body] of [
    ["POST", "/api/projects", { name: "from-cli", environments: ["production"] }],
    ["PATCH", `/api/projects/${project.id}`, { name: "renamed-from-cli" }],
    ["DELETE", `/api/projects/${project.id}`, undefined],
  ] as const) {
    const res = await cli.json(method, path, body);
    assert.deepEqual([res.status, res.body], [403, browserOnly], `${method} ${path}`);
  }
  assert.deepEqual(
    (await owner.json("GET", "/api/projects")).body.projects.map((p: { name: string }) => p.name),
    ["api"],
  );
  // A made-up CLI token, and no credential at all: 401.
  const madeUp = await server
    .client()
    .withBearer(`svc_at_${"x".repeat(43)}`)
    .json("POST", "/api/projects", { name: "x", environments: ["production"] });
  assert.equal(madeUp.status, 401);
  const anonymous = await server.client().json("POST", "/api/projects", { name: "x", environments: ["production"] });
  assert.deepEqual([anonymous.status, anonymous.body], [401, { error: "not signed in" }]);
  assert.equal(rowCount(server, "projects"), 1);
});
