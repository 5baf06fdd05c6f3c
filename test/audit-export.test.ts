// The audit log's environment and key filters, and its download as CSV or JSON.
import assert from "node:assert/strict";
import { test } from "node:test";
import { createAuditWriter } from "../src/audit/audit.writer.ts";
import { BROWSER_ONLY } from "../src/core/auth.ts";
import { writeTransaction } from "../src/core/store.ts";
import { cliLogin, startServer } from "./helpers.ts";
import { addMember } from "./secrets-helpers.ts";

const FORBIDDEN = { error: "You do not have permission to do this in this project." };

/** A project with secrets in two environments, one renamed, and one grant. */
async function seed(t: Parameters<typeof startServer>[0]) {
  const server = await startServer(t);
  const alice = await server.signIn("alice@example.test");
  const bob = await server.signIn("bob@example.test");
  const project = await alice.createProject({ name: "api", environments: ["development", "production"] });
  const at = (env: string) => `/api/projects/${project.id}/environments/${env}/secrets`;
  assert.equal((await alice.json("POST", at("development"), { key: "API_KEY", value: "d1" })).status, 201);
  const prod = await alice.json("POST", at("production"), { key: "API_KEY", value: "p1" });
  assert.equal((await alice.json("POST", at("production"), { key: "DB_URL", value: "p2" })).status, 201);
  assert.equal((await alice.json("GET", `${at("production")}/${prod.body.secret.id}`)).status, 200);
  await addMember(alice, bob, project.id, "member", ["production"]);
  assert.equal((await alice.json("PUT", `/api/projects/${project.id}/environments/development/access/${bob.user!.id}`)).status, 200);
  return { server, alice, bob, project };
}

test("the list filters by environment and key (metadata), together and with the other filters; bad ones answer 400", async (t) => {
  const { alice, project } = await seed(t);
  const list = async (query: string) => {
    const res = await alice.json("GET", `/api/projects/${project.id}/audit${query}`);
    assert.equal(res.status, 200, JSON.stringify(res.body));
    return (res.body.events as { action: string; metadata: Record<string, unknown> }[]).map((e) =>
      `${e.action} ${e.metadata.key ?? ""} ${e.metadata.environment ?? ""}`.trim(),
    );
  };
  assert.deepEqual(await list("?environment=production"), [
    "secret.revealed API_KEY production",
    "secret.created DB_URL production",
    "secret.created API_KEY production",
  ]);
  assert.deepEqual(await list("?key=API_KEY"), [
    "secret.revealed API_KEY production",
    "secret.created API_KEY production",
    "secret.created API_KEY development",
  ]);
  assert.deepEqual(await list("?key=API_KEY&environment=development"), ["secret.created API_KEY development"]);
  assert.deepEqual(await list("?key=API_KEY&action=secret.revealed"), ["secret.revealed API_KEY production"]);
  assert.deepEqual(await list("?environment=development&category=access"), ["environment_access.granted  development"]);
  assert.deepEqual(await list("?environment=staging"), []);
  assert.deepEqual(await list("?key=NOPE"), []);

  const environmentError = { error: "Invalid environment filter: use development, staging or production." };
  const keyError = {
    error: "Invalid key filter: a secret key is letters, digits and _, not starting with a digit, at most 128 characters.",
  };
  for (const [query, body] of [
    ["environment=prod", environmentError],
    ["environment=", environmentError],
    ["environment=production&environment=staging", environmentError],
    ["key=1ABC", keyError],
    ["key=", keyError],
    ["key=A-B", keyError],
    [`key=${"K".repeat(129)}`, keyError],
    ["key=A&key=B", keyError],
    // The existing messages stay as they are.
    ["category=nope&environment=production", { error: "Invalid category filter." }],
  ] as [string, { error: string }][]) {
    const res = await alice.json("GET", `/api/projects/${project.id}/audit?${query}`);
    assert.equal(res.status, 400, query);
    assert.deepEqual(res.body, body, query);
  }
});

test("export: CSV and JSON with the list's filters, attachment and no-store, audited as audit.exported; owners and admins in a browser only", async (t) => {
  const { server, alice, bob, project } = await seed(t);
  const url = `/api/projects/${project.id}/audit/export`;

  const csv = await alice.get(`${url}?format=csv&environment=production&key=API_KEY`);
  assert.equal(csv.status, 200);
  assert.equal(csv.headers.get("content-type"), "text/csv; charset=utf-8");
  assert.match(csv.headers.get("content-disposition") ?? "", /^attachment; filename="audit-log-\d{4}-\d{2}-\d{2}\.csv"$/);
  assert.equal(csv.headers.get("cache-control"), "no-store");
  assert.equal(csv.headers.get("x-audit-truncated"), "false");
  const lines = (await csv.text()).split("\r\n");
  assert.equal(lines[0], "at,action,category,actor,actorUserId,serviceAccount,environment,key,targetType,targetId,metadata");
  assert.equal(lines.length, 4, "header, two events and the final line break");
  assert.equal(lines[3], "");
  assert.match(
    lines[1]!,
    /^\d{4}-\d{2}-\d{2}T[\d:.]+Z,secret\.revealed,secrets,alice@example\.test,[0-9a-f-]{36},,production,API_KEY,secret,[^,]+,"\{""key"":""API_KEY"",""environment"":""production"",""version"":1\}"$/,
  );
  assert.match(lines[2]!, /,secret\.created,secrets,alice@example\.test,/);

  const json = await alice.json("GET", `${url}?format=json&category=access`);
  assert.equal(json.status, 200);
  assert.match(json.headers.get("content-disposition") ?? "", /^attachment; filename="audit-log-\d{4}-\d{2}-\d{2}\.json"$/);
  assert.equal(json.headers.get("cache-control"), "no-store");
  assert.equal(json.body.truncated, false);
  assert.equal(json.body.maxEvents, 10000);
  assert.deepEqual(
    json.body.events.map((e: { action: string }) => e.action),
    ["environment_access.granted", "invitation.accepted", "invitation.created"],
  );
  // Without format it is JSON.
  assert.equal((await alice.json("GET", url)).body.truncated, false);

  // Each export is an event of its own, with the filters it was given; none holds a value.
  const exported = await alice.json("GET", `/api/projects/${project.id}/audit?action=audit.exported`);
  assert.equal(exported.body.events.length, 3);
  const [third, second, first] = exported.body.events as {
    category: string;
    metadata: Record<string, unknown>;
    actor: { email: string };
  }[];
  assert.deepEqual(first!.metadata, { format: "csv", count: 2, truncated: false, filters: { environment: "production", key: "API_KEY" } });
  assert.deepEqual(second!.metadata, { format: "json", count: 3, truncated: false, filters: { category: "access" } });
  assert.deepEqual(third!.metadata.filters, {});
  assert.equal(third!.category, "project");
  assert.equal(first!.actor.email, "alice@example.test");
  // Dates as given: a date-only `to` covers its day, and is recorded as that day.
  assert.equal((await alice.get(`${url}?format=json&from=2000-01-01T00:00:00Z&to=2999-12-31`)).status, 200);
  const dated = await alice.json("GET", `/api/projects/${project.id}/audit?action=audit.exported&limit=1`);
  assert.deepEqual(dated.body.events[0].metadata.filters, { from: "2000-01-01T00:00:00Z", to: "2999-12-31" });

  // Bad format and bad filters answer 400 and are not audited.
  for (const [query, error] of [
    ["format=xml", "Invalid format: use csv or json."],
    ["format=csv&format=json", "Invalid format: use csv or json."],
    ["format=csv&environment=prod", "Invalid environment filter: use development, staging or production."],
    ["format=csv&action=nope", "Invalid action filter."],
    ["format=csv&from=yesterday", "Invalid date filter."],
  ] as const) {
    const res = await alice.json("GET", `${url}?${query}`);
    assert.equal(res.status, 400, query);
    assert.deepEqual(res.body, { error }, query);
  }
  assert.equal((await alice.json("GET", `/api/projects/${project.id}/audit?action=audit.exported`)).body.events.length, 4);

  // Who may: owners and admins with a browser session; a member 403, an outsider 404, no session 401, a CLI token 403.
  const carol = await server.signIn("carol@example.test");
  const erin = await server.signIn("erin@example.test");
  await addMember(alice, carol, project.id, "admin");
  assert.equal((await carol.get(`${url}?format=csv`)).status, 200);
  const member = await bob.json("GET", `${url}?format=csv`);
  assert.equal(member.status, 403);
  assert.deepEqual(member.body, FORBIDDEN);
  const outsider = await erin.json("GET", `${url}?format=csv`);
  assert.equal(outsider.status, 404);
  assert.deepEqual(outsider.body, { error: "Project not found." });
  const signedOut = await server.client().json("GET", `${url}?format=csv`);
  assert.equal(signedOut.status, 401);
  const cli = alice.withBearer((await cliLogin(server, alice)).accessToken);
  const byCli = await cli.json("GET", `${url}?format=csv`);
  assert.equal(byCli.status, 403);
  assert.deepEqual(byCli.body, { error: BROWSER_ONLY });
});

test("CSV cells are quoted and cells a spreadsheet would run as formulas are kept as text; at most 10,000 events, said so", async (t) => {
  const server = await startServer(t);
  const alice = await server.signIn("alice@example.test");
  const project = await alice.createProject({ name: "api", environments: ["development"] });
  const writer = createAuditWriter(server.app.db, server.clock, server.app.keyring);
  const entry = { projectId: project.id, action: "secret.created", targetType: "secret", targetId: "s1" } as const;
  // Written directly: the API never accepts such keys, but metadata text comes from many places.
  for (const key of ["=HYPERLINK(1)", "+1", "-1", "@SUM(1)", 'A,"B"\nC', "ci;=1+1;x", "ci; =2+2", " =3+3", "a\n=4+4\r-5"]) {
    await writer.record(null, { ...entry, metadata: { key, environment: "development", version: 1 } });
  }
  const res = await alice.get(`/api/projects/${project.id}/audit/export?format=csv&category=secrets`);
  assert.equal(res.status, 200);
  const body = await res.text();
  const keyCells = body
    .split("\r\n")
    .slice(1, -1)
    .map((line) => line.split(",secret,")[0]!.split(",development,")[1]);
  // A spreadsheet that splits at ; (Excel in de-DE) would start a cell at the =: a ' there too.
  // Past leading spaces too, which a spreadsheet may drop before it reads the cell.
  // A line break starts a row there: a ' after it too.
  assert.deepEqual(keyCells, [
    "\"a\n'=4+4\r'-5\"",
    "' =3+3",
    "ci;' =2+2",
    "ci;'=1+1;x",
    '"A,""B""\nC"',
    "'@SUM(1)",
    "'-1",
    "'+1",
    "'=HYPERLINK(1)",
  ]);

  // One transaction, as the writer would in a request: 10,000 requests would take minutes.
  await writeTransaction(server.app.db, async () => {
    for (let i = 0; i < 10_000; i++)
      await writer.record(null, { ...entry, metadata: { key: `K${i}`, environment: "development", version: 1 } });
  });
  const big = await alice.get(`/api/projects/${project.id}/audit/export?format=csv&category=secrets`);
  assert.equal(big.status, 200);
  assert.equal(big.headers.get("x-audit-truncated"), "true");
  const rows = (await big.text()).split("\r\n");
  assert.equal(rows.length, 1 + 10_000 + 1);
  // The newest ones.
  assert.match(rows[1]!, /,K9999,/);
  const exported = await alice.json("GET", `/api/projects/${project.id}/audit?action=audit.exported&limit=1`);
  assert.deepEqual(exported.body.events[0].metadata, { format: "csv", count: 10_000, truncated: true, filters: { category: "secrets" } });
});
