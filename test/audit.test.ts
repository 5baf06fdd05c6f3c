import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { test } from "node:test";
import { AUDIT_ACTIONS } from "../src/audit/audit.actions.ts";
import type { AuditEventView } from "../src/audit/audit.service.ts";
import { createAuditWriter } from "../src/audit/audit.writer.ts";
import { BROWSER_ONLY } from "../src/core/auth.ts";
import {
  assertNoLeaks,
  auditEvents,
  type Client,
  cliLogin,
  makeTempDir,
  runMain,
  startServer,
  storeEnv,
  type TestServer,
} from "./helpers.ts";
import { addMember } from "./secrets-helpers.ts";
import { auditRows, copyDatabase, insertAuditRow, removeAuditRow, tamperAuditRow } from "./storage.ts";

const ISO_MS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const DAY_MS = 24 * 60 * 60 * 1000;
const INVALID_LIMIT = { error: "limit must be a whole number from 1 to 100." };
const FORBIDDEN = { error: "You do not have permission to do this in this project." };

type AuditEvent = AuditEventView;

interface AuditPage {
  events: AuditEvent[];
  nextCursor: string | null;
}

async function readAudit(client: Client, projectId: string, query = ""): Promise<AuditPage> {
  const res = await client.json<AuditPage>("GET", `/api/projects/${projectId}/audit${query}`);
  assert.equal(res.status, 200, JSON.stringify(res.body));
  return res.body;
}

/** Every event of the project through the API, following nextCursor. */
async function readAll(client: Client, projectId: string, query = ""): Promise<AuditEvent[]> {
  const events: AuditEvent[] = [];
  let cursor: string | null = null;
  do {
    const separator = query ? "&" : "?";
    const page: AuditPage = await readAudit(client, projectId, cursor ? `${query}${separator}cursor=${cursor}` : query);
    events.push(...page.events);
    cursor = page.nextCursor;
  } while (cursor);
  return events;
}

/** Moves the clock to the next UTC noon, so the day-based filters below never straddle midnight. */
function advanceToNoon(server: TestServer): void {
  const now = server.clock.now().getTime();
  const noon = Math.floor(now / DAY_MS) * DAY_MS + DAY_MS / 2;
  server.clock.advance((noon > now ? noon : noon + DAY_MS) - now);
}

function day(iso: string): string {
  return iso.slice(0, 10);
}

test("project operations are audited with category, actor, target and metadata", async (t) => {
  const server = await startServer(t);
  const alice = await server.signIn("alice@example.test");
  const project = await alice.createProject({ name: "api", environments: ["development", "production"] });
  const updated = await alice.json("PATCH", `/api/projects/${project.id}`, { name: "api-2", description: "The API" });
  assert.equal(updated.status, 200);

  const page = await readAudit(alice, project.id);
  assert.equal(page.nextCursor, null);
  assert.deepEqual(
    page.events.map((e) => e.action),
    ["project.updated", "project.created"],
  );
  for (const event of page.events) {
    assert.match(event.id, UUID);
    assert.match(event.at, ISO_MS);
    assert.equal(event.category, "project");
    assert.equal(event.targetType, "project");
    assert.equal(event.targetId, project.id);
    assert.deepEqual(event.actor, { userId: alice.user!.id, email: "alice@example.test", isYou: true, isMember: true });
  }
  assert.deepEqual(page.events[0]!.metadata, { name: "api-2", previousName: "api", descriptionChanged: true });
  assert.deepEqual(page.events[1]!.metadata, { name: "api", environments: ["development", "production"] });
  assert.deepEqual(Object.keys(page.events[0]!).sort(), [
    "action",
    "actor",
    "at",
    "category",
    "id",
    "metadata",
    "serviceAccount",
    "targetId",
    "targetType",
  ]);
  // A person's event names no service account.
  assert.equal(page.events[0]!.serviceAccount, null);

  // Only a real change is an event.
  await alice.json("PATCH", `/api/projects/${project.id}`, { name: "api-2" });
  assert.equal((await readAudit(alice, project.id)).events.length, 2);
});

test("the audit log and the overview: owners and admins, browser sessions only, non-members 404", async (t) => {
  const server = await startServer(t);
  const alice = await server.signIn("alice@example.test");
  const bob = await server.signIn("bob@example.test");
  const carol = await server.signIn("carol@example.test");
  const dave = await server.signIn("dave@example.test");
  const erin = await server.signIn("erin@example.test");
  const project = await alice.createProject({ name: "api", environments: ["development"] });
  await addMember(alice, bob, project.id, "admin");
  await addMember(alice, carol, project.id, "member", ["development"]);
  await addMember(alice, dave, project.id, "viewer", ["development"]);

  for (const suffix of ["audit", "security"]) {
    const url = `/api/projects/${project.id}/${suffix}`;
    assert.equal((await alice.json("GET", url)).status, 200);
    assert.equal((await bob.json("GET", url)).status, 200);
    for (const client of [carol, dave]) {
      const res = await client.json("GET", url);
      assert.equal(res.status, 403);
      assert.deepEqual(res.body, FORBIDDEN);
    }
    const outsider = await erin.json("GET", url);
    assert.equal(outsider.status, 404);
    assert.deepEqual(outsider.body, { error: "Project not found." });
    const unknown = await alice.json("GET", `/api/projects/00000000-0000-4000-8000-000000000000/${suffix}`);
    assert.equal(unknown.status, 404);
    assert.deepEqual(unknown.body, { error: "Project not found." });
    const signedOut = await server.client().json("GET", url);
    assert.equal(signedOut.status, 401);
    assert.deepEqual(signedOut.body, { error: "not signed in" });
  }

  const cli = alice.withBearer((await cliLogin(server, alice)).accessToken);
  for (const suffix of ["audit", "security"]) {
    const res = await cli.json("GET", `/api/projects/${project.id}/${suffix}`);
    assert.equal(res.status, 403);
    assert.deepEqual(res.body, { error: BROWSER_ONLY });
  }
});

test("team operations are audited in the access category with actor and metadata", async (t) => {
  const server = await startServer(t);
  const alice = await server.signIn("alice@example.test");
  const bob = await server.signIn("bob@example.test");
  const carol = await server.signIn("carol@example.test");
  const project = await alice.createProject({ name: "api", environments: ["development", "production"] });
  const bobInvitation = await addMember(alice, bob, project.id, "member", ["development"]);
  const granted = await alice.json("PUT", `/api/projects/${project.id}/environments/production/access/${bob.user!.id}`);
  assert.equal(granted.status, 200);
  const revoked = await alice.json("DELETE", `/api/projects/${project.id}/environments/development/access/${bob.user!.id}`);
  assert.equal(revoked.status, 200);
  assert.equal((await alice.json("PATCH", `/api/projects/${project.id}/members/${bob.user!.id}`, { role: "viewer" })).status, 200);
  const pending = await alice.json("POST", `/api/projects/${project.id}/invitations`, { email: "zed@example.test", role: "viewer" });
  assert.equal(pending.status, 201);
  assert.equal((await alice.json("DELETE", `/api/projects/${project.id}/invitations/${pending.body.invitation.id}`)).status, 200);
  await addMember(alice, carol, project.id, "member");
  assert.equal((await carol.json("DELETE", `/api/projects/${project.id}/members/${carol.user!.id}`)).status, 200);
  assert.equal((await alice.json("DELETE", `/api/projects/${project.id}/members/${bob.user!.id}`)).status, 200);

  const events = (await readAll(alice, project.id, "?category=access")).reverse();
  const summary = events.map((e) => [
    e.action,
    e.actor?.userId === bob.user!.id ? "bob" : e.actor?.userId === carol.user!.id ? "carol" : "alice",
  ]);
  assert.deepEqual(summary, [
    ["invitation.created", "alice"],
    ["invitation.accepted", "bob"],
    ["environment_access.granted", "alice"],
    ["environment_access.revoked", "alice"],
    ["member.role_changed", "alice"],
    ["invitation.created", "alice"],
    ["invitation.revoked", "alice"],
    ["invitation.created", "alice"],
    ["invitation.accepted", "carol"],
    ["member.left", "carol"],
    ["member.removed", "alice"],
  ]);
  for (const event of events) assert.equal(event.category, "access");
  const byAction = (action: string) => events.find((e) => e.action === action)!;
  assert.deepEqual(byAction("invitation.created").metadata, { email: "bob@example.test", role: "member", environments: ["development"] });
  assert.equal(byAction("invitation.created").targetId, bobInvitation.id);
  assert.deepEqual(byAction("invitation.accepted").metadata.email, "bob@example.test");
  assert.deepEqual(byAction("environment_access.granted").metadata, { email: "bob@example.test", environment: "production" });
  assert.deepEqual(byAction("environment_access.revoked").metadata, { email: "bob@example.test", environment: "development" });
  assert.deepEqual(byAction("member.role_changed").metadata, { email: "bob@example.test", from: "member", to: "viewer" });
  assert.deepEqual(byAction("member.left").metadata, { email: "carol@example.test", role: "member" });
  assert.deepEqual(byAction("member.removed").metadata, { email: "bob@example.test", role: "viewer" });

  // isMember is computed at read time: both have left the project since.
  assert.deepEqual(byAction("invitation.accepted").actor, {
    userId: bob.user!.id,
    email: "bob@example.test",
    isYou: false,
    isMember: false,
  });
  assert.deepEqual(byAction("member.left").actor, { userId: carol.user!.id, email: "carol@example.test", isYou: false, isMember: false });
});

test("actor isYou and isMember are computed when read, not when written", async (t) => {
  const server = await startServer(t);
  const alice = await server.signIn("alice@example.test");
  const bob = await server.signIn("bob@example.test");
  const project = await alice.createProject({ name: "api", environments: ["development"] });
  await addMember(alice, bob, project.id, "admin");
  assert.equal((await bob.json("PATCH", `/api/projects/${project.id}`, { description: "by bob" })).status, 200);

  const asAlice = await readAudit(alice, project.id, "?action=project.updated");
  assert.deepEqual(asAlice.events[0]!.actor, { userId: bob.user!.id, email: "bob@example.test", isYou: false, isMember: true });
  const asBob = await readAudit(bob, project.id, "?action=project.updated");
  assert.deepEqual(asBob.events[0]!.actor, { userId: bob.user!.id, email: "bob@example.test", isYou: true, isMember: true });

  assert.equal((await alice.json("DELETE", `/api/projects/${project.id}/members/${bob.user!.id}`)).status, 200);
  const later = await readAudit(alice, project.id, "?action=project.updated");
  assert.deepEqual(later.events[0]!.actor, { userId: bob.user!.id, email: "bob@example.test", isYou: false, isMember: false });
});

test("every filter: category, action over category, actor, from and to (dates and timestamps), limit", async (t) => {
  const server = await startServer(t);
  const alice = await server.signIn("alice@example.test");
  const bob = await server.signIn("bob@example.test");
  advanceToNoon(server);
  // Day 1: created, invitation created and accepted.
  const project = await alice.createProject({ name: "api", environments: ["development", "production"] });
  await addMember(alice, bob, project.id, "member");
  server.clock.advance(DAY_MS);
  // Day 2: a grant and an update.
  await alice.json("PUT", `/api/projects/${project.id}/environments/development/access/${bob.user!.id}`);
  await alice.json("PATCH", `/api/projects/${project.id}`, { name: "api-2" });
  server.clock.advance(DAY_MS);
  // Day 3: a role change and another update by bob's new admin role.
  await alice.json("PATCH", `/api/projects/${project.id}/members/${bob.user!.id}`, { role: "admin" });
  await bob.json("PATCH", `/api/projects/${project.id}`, { description: "day three" });

  const all = await readAll(alice, project.id);
  const actions = (events: AuditEvent[]) => events.map((e) => e.action);
  // Bob's promotion to admin drops his development grant: a revoke of its own.
  assert.deepEqual(actions(all), [
    "project.updated",
    "environment_access.revoked",
    "member.role_changed",
    "project.updated",
    "environment_access.granted",
    "invitation.accepted",
    "invitation.created",
    "project.created",
  ]);
  const [day1, day2, day3] = [day(all[7]!.at), day(all[4]!.at), day(all[0]!.at)];
  assert.notEqual(day1, day2);
  assert.notEqual(day2, day3);

  assert.deepEqual(actions((await readAudit(alice, project.id, "?category=project")).events), [
    "project.updated",
    "project.updated",
    "project.created",
  ]);
  assert.deepEqual(actions((await readAudit(alice, project.id, "?category=access")).events), [
    "environment_access.revoked",
    "member.role_changed",
    "environment_access.granted",
    "invitation.accepted",
    "invitation.created",
  ]);
  assert.deepEqual((await readAudit(alice, project.id, "?category=secrets")).events, []);
  assert.deepEqual((await readAudit(alice, project.id, "?category=integrations")).events, []);
  assert.deepEqual(actions((await readAudit(alice, project.id, "?action=project.updated")).events), ["project.updated", "project.updated"]);
  // action takes precedence over category.
  assert.deepEqual(actions((await readAudit(alice, project.id, "?action=project.created&category=access")).events), ["project.created"]);
  assert.deepEqual((await readAudit(alice, project.id, "?action=secret.revealed")).events, []);

  const byBob = (await readAudit(alice, project.id, `?actor=${bob.user!.id}`)).events;
  assert.deepEqual(actions(byBob), ["project.updated", "invitation.accepted"]);
  assert.deepEqual(actions((await readAudit(alice, project.id, `?actor=${bob.user!.id}&category=project`)).events), ["project.updated"]);
  assert.deepEqual((await readAudit(alice, project.id, "?actor=00000000-0000-4000-8000-000000000000")).events, []);

  // Dates: whole UTC days; a date-only `to` includes its whole day (events are at noon or later).
  assert.deepEqual(actions((await readAudit(alice, project.id, `?to=${day1}`)).events), [
    "invitation.accepted",
    "invitation.created",
    "project.created",
  ]);
  assert.deepEqual(actions((await readAudit(alice, project.id, `?from=${day2}&to=${day2}`)).events), [
    "project.updated",
    "environment_access.granted",
  ]);
  assert.deepEqual(actions((await readAudit(alice, project.id, `?from=${day3}`)).events), [
    "project.updated",
    "environment_access.revoked",
    "member.role_changed",
  ]);
  assert.deepEqual(actions((await readAudit(alice, project.id, `?from=${day2}&category=project`)).events), [
    "project.updated",
    "project.updated",
  ]);
  // Timestamps are inclusive at both ends.
  const granted = all[4]!;
  const renamed = all[3]!;
  assert.deepEqual(actions((await readAudit(alice, project.id, `?from=${granted.at}&to=${renamed.at}`)).events), [
    "project.updated",
    "environment_access.granted",
  ]);
  // Other spellings of a timestamp: seconds only, an offset, no zone (UTC).
  const dayAfter3 = new Date(Date.parse(`${day3}T00:00:00Z`) + DAY_MS).toISOString().slice(0, 10);
  assert.equal((await readAudit(alice, project.id, `?from=${dayAfter3}T00:00:00Z`)).events.length, 0);
  assert.equal((await readAudit(alice, project.id, `?to=${day1}T23:59:59%2B00:00`)).events.length, 3);
  assert.equal((await readAudit(alice, project.id, `?to=${day1}T23:59`)).events.length, 3);
  assert.equal((await readAudit(alice, project.id, `?to=${day1}T12:00:00-12:00`)).events.length, 3);
  // The last representable day and offsets past year 9999 still compare as times.
  assert.equal((await readAudit(alice, project.id, "?to=9999-12-31")).events.length, 8);
  assert.equal((await readAudit(alice, project.id, "?to=9999-12-31T23:00:00-12:00")).events.length, 8);
  assert.equal((await readAudit(alice, project.id, "?from=9999-12-31T23:00:00-12:00")).events.length, 0);

  // limit
  const one = await readAudit(alice, project.id, "?limit=1");
  assert.deepEqual(actions(one.events), ["project.updated"]);
  assert.equal(typeof one.nextCursor, "string");
  assert.equal((await readAudit(alice, project.id, "?limit=100")).events.length, 8);
  assert.equal((await readAudit(alice, project.id, "?limit=8")).nextCursor, null);
  assert.notEqual((await readAudit(alice, project.id, "?limit=7")).nextCursor, null);
});

test("the default page size is 50 and every bad filter answers its own 400", async (t) => {
  const server = await startServer(t);
  const alice = await server.signIn("alice@example.test");
  const project = await alice.createProject({ name: "api", environments: ["development"] });
  for (let i = 0; i < 55; i++) await alice.json("PATCH", `/api/projects/${project.id}`, { description: `d${i}` });
  const first = await readAudit(alice, project.id);
  assert.equal(first.events.length, 50);
  assert.notEqual(first.nextCursor, null);
  const second = await readAudit(alice, project.id, `?cursor=${first.nextCursor}`);
  assert.equal(second.events.length, 6);
  assert.equal(second.nextCursor, null);

  const cases: [string, string][] = [
    ["limit=0", INVALID_LIMIT.error],
    ["limit=101", INVALID_LIMIT.error],
    ["limit=-1", INVALID_LIMIT.error],
    ["limit=1.5", INVALID_LIMIT.error],
    ["limit=ten", INVALID_LIMIT.error],
    ["limit=", INVALID_LIMIT.error],
    ["limit=1&limit=2", INVALID_LIMIT.error],
    ["category=secret", "Invalid category filter."],
    ["category=PROJECT", "Invalid category filter."],
    ["category=project&category=access", "Invalid category filter."],
    ["action=secret.nope", "Invalid action filter."],
    ["action=", "Invalid action filter."],
    ["action=project.created&category=nope", "Invalid category filter."],
    ["actor=alice", "Invalid actor filter."],
    ["actor=", "Invalid actor filter."],
    ["actor=00000000-0000-4000-8000-00000000000", "Invalid actor filter."],
    ["from=yesterday", "Invalid date filter."],
    ["from=2026-13-01", "Invalid date filter."],
    ["from=2026-02-30", "Invalid date filter."],
    ["to=2026-1-5", "Invalid date filter."],
    ["to=2026-01-05T25:00:00Z", "Invalid date filter."],
    ["to=2026-01-05T10:00:00+1", "Invalid date filter."],
    ["from=", "Invalid date filter."],
    ["from=2026-01-06&to=2026-01-05", "Invalid date filter."],
    ["from=2026-01-05T10:00:00.001Z&to=2026-01-05T10:00:00Z", "Invalid date filter."],
    ["cursor=", "Invalid cursor."],
    ["cursor=not%20a%20cursor", "Invalid cursor."],
    ["cursor=abc", "Invalid cursor."],
    [`cursor=${Buffer.from('{"at":1}').toString("base64url")}`, "Invalid cursor."],
    [`cursor=${Buffer.from('["2026-01-05","x"]').toString("base64url")}`, "Invalid cursor."],
    [`cursor=${Buffer.from(`["2026-01-05T10:00:00.000Z","${project.id}",1]`).toString("base64url")}`, "Invalid cursor."],
  ];
  for (const [query, error] of cases) {
    const res = await alice.json("GET", `/api/projects/${project.id}/audit?${query}`);
    assert.equal(res.status, 400, query);
    assert.deepEqual(res.body, { error }, query);
  }
  // Years 0 to 99 are years too (Date.UTC would read them as 1900 to 1999).
  for (const query of ["from=0050-01-01", "to=0099-12-31T10:00Z", "from=0000-02-29"]) {
    assert.equal((await alice.json("GET", `/api/projects/${project.id}/audit?${query}`)).status, 200, query);
  }
  assert.equal((await alice.json("GET", `/api/projects/${project.id}/audit?from=0001-02-29`)).status, 400, "0001 is no leap year");
  // A valid same-day range and a range of one instant are fine.
  assert.equal((await alice.json("GET", `/api/projects/${project.id}/audit?from=2026-01-05&to=2026-01-05`)).status, 200);
  assert.equal(
    (await alice.json("GET", `/api/projects/${project.id}/audit?from=2026-01-05T10:00:00Z&to=2026-01-05T10:00:00.000Z`)).status,
    200,
  );
});

test("pages follow each other with nothing skipped or repeated while events are written between reads", async (t) => {
  const server = await startServer(t);
  const alice = await server.signIn("alice@example.test");
  const project = await alice.createProject({ name: "api", environments: ["development"] });
  // Several events share a millisecond (the clock does not move), some are apart.
  for (let i = 0; i < 9; i++) {
    await alice.json("PATCH", `/api/projects/${project.id}`, { description: `before ${i}` });
    if (i % 3 === 0) server.clock.advance(1000);
  }
  const before = (await auditEvents(alice, project.id)).map((e) => e.id).reverse();
  assert.equal(before.length, 10);

  const seen: AuditEvent[] = [];
  let cursor: string | null = null;
  let written = 0;
  for (let pageNumber = 0; pageNumber < 10; pageNumber++) {
    const page: AuditPage = await readAudit(alice, project.id, `?limit=3${cursor ? `&cursor=${cursor}` : ""}`);
    seen.push(...page.events);
    cursor = page.nextCursor;
    if (!cursor) break;
    // Newer events, some in the same millisecond as the newest already read.
    await alice.json("PATCH", `/api/projects/${project.id}`, { description: `between ${written++}` });
    await alice.json("PATCH", `/api/projects/${project.id}`, { description: `between ${written++}` });
  }
  assert.equal(cursor, null);
  // Exactly the events that existed at the first read, newest first in write order.
  assert.deepEqual(
    seen.map((e) => e.id),
    before,
  );
  for (let i = 1; i < seen.length; i++) {
    const [newer, older] = [seen[i - 1]!, seen[i]!];
    assert.ok(newer.at > older.at || (newer.at === older.at && newer.id > older.id));
  }

  // The same with a filter: the new events (project.updated) don't disturb a filtered walk either.
  const updatedAtStart = (await auditEvents(alice, project.id, "project.updated")).map((e) => e.id).reverse();
  const filtered: string[] = [];
  cursor = null;
  do {
    const page: AuditPage = await readAudit(alice, project.id, `?limit=4&action=project.updated${cursor ? `&cursor=${cursor}` : ""}`);
    filtered.push(...page.events.map((e) => e.id));
    cursor = page.nextCursor;
    if (cursor) await alice.json("PATCH", `/api/projects/${project.id}`, { description: `filtered ${written++}` });
  } while (cursor);
  assert.deepEqual(filtered, updatedAtStart);
});

test("events survive project deletion and the chain still verifies", async (t) => {
  const server = await startServer(t);
  const alice = await server.signIn("alice@example.test");
  const project = await alice.createProject({ name: "doomed", environments: ["development"] });
  await alice.json("PATCH", `/api/projects/${project.id}`, { description: "soon gone" });
  assert.equal((await alice.json("DELETE", `/api/projects/${project.id}`)).status, 200);

  const res = await alice.json("GET", `/api/projects/${project.id}/audit`);
  assert.equal(res.status, 404);
  assert.deepEqual(res.body, { error: "Project not found." });

  // The API answers 404 for a deleted project's log: only the storage shows the events stayed.
  await server.stop();
  const rows = auditRows(server.dataDir, { project_id: project.id });
  assert.deepEqual(
    rows.map((r) => [r.action, r.category, r.actor_user_id, r.target_id]),
    [
      ["project.created", "project", alice.user!.id, project.id],
      ["project.updated", "project", alice.user!.id, project.id],
      ["project.deleted", "project", alice.user!.id, project.id],
    ],
  );
  assert.deepEqual(JSON.parse(rows[2]!.metadata), { name: "doomed" });

  const verified = await runMain(["audit", "verify"], server.env);
  assert.equal(verified.code, 0, verified.stderr);
  assert.match(verified.stdout, /Audit log intact: 3 events verified\./);
  assert.match(verified.stdout, /Head hash: [0-9a-f]{64}/);
});

test("audit verify finds the first edited, removed or inserted event", async (t) => {
  const server = await startServer(t);
  const alice = await server.signIn("alice@example.test");
  const project = await alice.createProject({ name: "api", environments: ["development"] });
  for (let i = 0; i < 4; i++) await alice.json("PATCH", `/api/projects/${project.id}`, { description: `v${i}` });
  await server.stop();
  const env = server.env;

  const intact = await runMain(["audit", "verify"], env);
  assert.equal(intact.code, 0, intact.stderr);
  assert.match(intact.stdout, /Audit log intact: 5 events verified\./);

  // Edit the metadata of the third event, as someone with write access to the file could.
  const copy = makeTempDir();
  t.after(() => fs.rmSync(copy, { recursive: true, force: true }));
  copyDatabase(server.dataDir, copy);
  const forged = makeTempDir();
  t.after(() => fs.rmSync(forged, { recursive: true, force: true }));
  copyDatabase(server.dataDir, forged);
  const third = auditRows(server.dataDir)[2]!;
  tamperAuditRow(server.dataDir, third.seq, { metadata: JSON.stringify({ descriptionChanged: false }) });
  const edited = await runMain(["audit", "verify"], env);
  assert.equal(edited.code, 1);
  assert.equal(edited.stdout, "");
  assert.match(
    edited.stderr,
    new RegExp(`BROKEN at event #${third.seq} \\(id ${third.id}, at [^)]+\\): its content does not match its hash`),
  );
  assert.match(edited.stderr, /2 events before it verified\./);

  // Re-hashing the edited row (even with the key) is not enough: the next event names the old hash.
  const { eventHash } = await import("../src/audit/audit.writer.ts");
  const row = auditRows(server.dataDir, { seq: third.seq })[0]!;
  const rehashed = eventHash(
    row.prev_hash,
    {
      id: row.id,
      projectId: row.project_id!,
      at: row.at,
      action: row.action,
      category: row.category,
      actorUserId: row.actor_user_id!,
      targetType: row.target_type,
      targetId: row.target_id,
      metadata: row.metadata,
    },
    server.app.keyring.auditMacKey(1),
  );
  tamperAuditRow(server.dataDir, third.seq, { hash: rehashed });
  const rehashedRun = await runMain(["audit", "verify"], env);
  assert.equal(rehashedRun.code, 1);
  assert.match(rehashedRun.stderr, new RegExp(`BROKEN at event #${third.seq + 1} .*does not follow the event before it`));

  // A removed event (on an untouched copy).
  removeAuditRow(copy, third.seq);
  const removed = await runMain(["audit", "verify"], storeEnv({ ...env, DATA_DIR: copy }));
  assert.equal(removed.code, 1);
  assert.match(removed.stderr, new RegExp(`BROKEN at event #${third.seq + 1} .*does not follow the event before it`));

  // An inserted event (on another untouched copy): appended after the head and linked to it,
  // hashed the only way one can without the master key, by plain SHA-256.
  const head = auditRows(forged).at(-1)!;
  const content = {
    id: "00000000-0000-4000-8000-00000000f0e1",
    projectId: head.project_id!,
    at: new Date(Date.parse(head.at) + 1000).toISOString(),
    action: "project.updated",
    category: "project",
    actorUserId: head.actor_user_id!,
    targetType: "project",
    targetId: head.project_id!,
    metadata: JSON.stringify({ descriptionChanged: true }),
  };
  insertAuditRow(forged, {
    id: content.id,
    project_id: content.projectId,
    at: content.at,
    action: content.action,
    category: content.category,
    actor_user_id: content.actorUserId,
    target_type: content.targetType,
    target_id: content.targetId,
    metadata: content.metadata,
    prev_hash: head.hash,
    hash: eventHash(head.hash, content, null),
  });
  const inserted = await runMain(["audit", "verify"], storeEnv({ ...env, DATA_DIR: forged }));
  assert.equal(inserted.code, 1, inserted.stdout);
  assert.match(inserted.stderr, new RegExp(`BROKEN at event #${head.seq + 1} `));

  const usage = await runMain(["audit"], env);
  assert.equal(usage.code, 2);
  assert.match(usage.stderr, /Usage: secrets-server audit verify/);
});

test("the writer refuses metadata keys outside the action's allow-list and cleans token-shaped text", async (t) => {
  const server = await startServer(t);
  const alice = await server.signIn("alice@example.test");
  const project = await alice.createProject({ name: "api", environments: ["development"] });
  const writer = createAuditWriter(server.app.db, server.clock, server.app.keyring);
  const count = async () => (await auditEvents(alice, project.id)).length;
  const before = await count();
  const entry = { projectId: project.id, action: "secret.created", targetType: "secret", targetId: "s1" } as const;
  await assert.rejects(writer.record(null, { ...entry, metadata: { key: "A", value: "hunter22" } }), /"value" is not allowed/);
  await assert.rejects(writer.record(null, { ...entry, metadata: { token: "abc" } }), /"token" is not allowed/);
  assert.equal(await count(), before);
  // Token-shaped or overlong text from user input is cleaned, never a failed write.
  await writer.record(null, { ...entry, metadata: { key: `A_svc_at_${"x".repeat(40)}`, environment: "e".repeat(600) } });
  const stored = (await readAudit(alice, project.id)).events[0]!.metadata;
  assert.equal(stored.key, "A_[redacted]");
  assert.equal(stored.environment, `${"e".repeat(500)}…`);

  // Outside a transaction it takes its own, and the event chains on.
  await writer.record(null, { ...entry, metadata: { key: "A", environment: "development", version: 1 } });
  assert.equal(await count(), before + 2);
  const page = await readAudit(alice, project.id, "?category=secrets");
  assert.equal(page.events[0]!.actor, null);
  assert.deepEqual(page.events[0]!.metadata, { key: "A", environment: "development", version: 1 });
});

test("names and subjects holding a NUL or a lone surrogate are stored well-formed, and older such events do not break the filters", async (t) => {
  const server = await startServer(t);
  const alice = await server.signIn("alice@example.test");
  const project = await alice.createProject({ name: "api", environments: ["development"] });
  const writer = createAuditWriter(server.app.db, server.clock, server.app.keyring);
  const entry = { projectId: project.id, action: "secret.created", targetType: "secret", targetId: "s1" } as const;
  // Cut at 500 units, the emoji's pair would be split in two as well.
  await writer.record(null, { ...entry, metadata: { key: "A\u0000B\ud800", environment: `${"e".repeat(499)}🔑` } });
  const stored = (await readAudit(alice, project.id)).events[0]!;
  assert.equal(stored.metadata.key, "A\ufffdB\ufffd");
  assert.equal(stored.metadata.environment, `${"e".repeat(499)}\ufffd…`);

  // An event written before this (its hash chains the text, so it stays): PostgreSQL's ->>
  // refuses to decode \u0000 and a lone \ud800 anywhere in the row.
  await writer.record(null, { ...entry, metadata: { key: "OLD", environment: "development" } });
  const old = (await readAudit(alice, project.id)).events[0]!;
  const [row] = auditRows(server, { id: old.id });
  tamperAuditRow(server, row!.seq, { metadata: String.raw`{"key":"OLD","environment":"development","note":"a\u0000b\ud800c\\u0000d"}` });
  for (const [filter, expected] of [
    ["environment=development", ["OLD"]],
    ["key=OLD", ["OLD"]],
    ["key=A", []],
  ] as const) {
    const page = await alice.json("GET", `/api/projects/${project.id}/audit?action=secret.created&${filter}`);
    assert.equal(page.status, 200, `${filter}: ${JSON.stringify(page.body)}`);
    assert.deepEqual(
      page.body.events.map((e: AuditEventView) => e.metadata.key),
      expected,
      filter,
    );
  }
});

test("the leak scan of the test helpers catches a secret in a log line or an audit event", async () => {
  const server = await startServer(undefined);
  try {
    const alice = await server.signIn("alice@example.test");
    const project = await alice.createProject({ name: "api", environments: ["development"] });
    // Any request body field named value is remembered as a secret, whatever the answer.
    await alice.json("POST", `/api/projects/${project.id}/environments/development/secrets`, { key: "K", value: "leaky-value-123" });
    assertNoLeaks(server.dataDir);

    server.app.log.info({ note: "oops leaky-value-123" }, "a careless line");
    assert.throws(() => assertNoLeaks(server.dataDir), /field "value" \("leaky-value-123"\) appears in log line/);
  } finally {
    await server.stop();
  }
  const server2 = await startServer(undefined);
  try {
    const alice = await server2.signIn("alice@example.test");
    await alice.json("POST", "/api/invitations/accept", { token: "invitation-token-xyz" });
    insertAuditRow(server2, {
      id: "x",
      project_id: null,
      at: "2026-01-01T00:00:00.000Z",
      action: "project.updated",
      category: "project",
      actor_user_id: null,
      target_type: "project",
      target_id: "p",
      metadata: JSON.stringify({ name: "invitation-token-xyz" }),
      prev_hash: "",
      hash: "",
    });
    assert.throws(
      () => assertNoLeaks(server2.dataDir),
      /field "token" \("invitation-token-xyz"\) appears in audit event #\d+ \(project.updated\)/,
    );
  } finally {
    await server2.stop();
    fs.rmSync(server.dataDir, { recursive: true, force: true });
    fs.rmSync(server2.dataDir, { recursive: true, force: true });
  }
});

test("secret operations are audited in the secrets category with actor, target, metadata and via for the CLI", async (t) => {
  const server = await startServer(t);
  const alice = await server.signIn("alice@example.test");
  const project = await alice.createProject({ name: "api", environments: ["development"] });
  const cli = alice.withBearer((await cliLogin(server, alice)).accessToken);
  const base = `/api/projects/${project.id}/environments/development`;
  const ok = (res: { status: number; body: unknown }, status = 200) => assert.equal(res.status, status, JSON.stringify(res.body));

  const created = await alice.json("POST", `${base}/secrets`, { key: "API_KEY", value: "audit-value-one" });
  ok(created, 201);
  const id = created.body.secret.id;
  ok(await cli.json("GET", `${base}/secrets/${id}`));
  ok(await alice.json("PATCH", `${base}/secrets/${id}`, { value: "audit-value-two" }));
  ok(await cli.json("PATCH", `${base}/secrets/${id}`, { key: "API_TOKEN" }));
  ok(await alice.json("GET", `${base}/secrets/${id}/versions/1`));
  ok(await alice.json("POST", `${base}/secrets/${id}/versions/1/restore`, {}));
  ok(await cli.json("GET", `${base}/export`));
  assert.equal((await alice.get(`${base}/export?format=dotenv`)).status, 200);
  ok(
    await alice.json("POST", `${base}/import`, {
      entries: [
        { key: "IMPORTED", value: "audit-imported-value", overwrite: false },
        { key: "API_TOKEN", value: "audit-not-written", overwrite: false },
      ],
    }),
  );
  ok(await alice.json("DELETE", `${base}/secrets/${id}`));

  const events = (await readAll(alice, project.id, "?category=secrets")).reverse();
  const environmentTarget = `${project.id}/development`;
  assert.deepEqual(
    events.map((e) => [e.action, e.targetType, e.targetId, e.metadata]),
    [
      ["secret.created", "secret", id, { key: "API_KEY", environment: "development", version: 1 }],
      ["secret.revealed", "secret", id, { key: "API_KEY", environment: "development", version: 1, via: "cli" }],
      ["secret.updated", "secret", id, { key: "API_KEY", environment: "development", keyChanged: false, valueChanged: true, version: 2 }],
      [
        "secret.updated",
        "secret",
        id,
        {
          key: "API_TOKEN",
          environment: "development",
          previousKey: "API_KEY",
          keyChanged: true,
          valueChanged: false,
          version: 2,
          via: "cli",
        },
      ],
      ["secret.version_revealed", "secret", id, { key: "API_TOKEN", environment: "development", versionNumber: 1 }],
      ["secret.rolled_back", "secret", id, { key: "API_TOKEN", environment: "development", restoredFromVersion: 1, version: 3 }],
      ["secrets.exported", "environment", environmentTarget, { environment: "development", count: 1, format: "json", via: "cli" }],
      ["secrets.exported", "environment", environmentTarget, { environment: "development", count: 1, format: "dotenv" }],
      [
        "secrets.imported",
        "environment",
        environmentTarget,
        { environment: "development", created: 1, updated: 0, unchanged: 0, skipped: 1, failed: 0 },
      ],
      ["secret.deleted", "secret", id, { key: "API_TOKEN", environment: "development", version: 3 }],
    ],
  );
  for (const event of events) {
    assert.equal(event.category, "secrets");
    assert.deepEqual(event.actor, { userId: alice.user!.id, email: "alice@example.test", isYou: true, isMember: true });
  }
  // The filters meet the secrets actions too.
  assert.equal((await readAudit(alice, project.id, "?action=secret.revealed")).events.length, 1);
  assert.equal((await readAudit(alice, project.id, `?action=secrets.exported&actor=${alice.user!.id}`)).events.length, 2);
});

test("the README lists every audit action with its category", () => {
  const readme = fs.readFileSync(path.join(import.meta.dirname, "..", "README.md"), "utf8");
  const section = readme.slice(readme.indexOf("## Audit log"));
  // The table's rows, each category given once on the first row of its group.
  const rows = section
    .slice(section.indexOf("| Category"))
    .split("\n")
    .slice(2)
    .filter((line, i, lines) => line.startsWith("|") && lines.slice(0, i).every((l) => l.startsWith("|")));
  const listed: Record<string, string> = {};
  let category = "";
  for (const row of rows) {
    const [, first = "", second = ""] = row.split("|");
    category = /`([a-z]+)`/.exec(first)?.[1] ?? category;
    for (const [, action] of second.matchAll(/`([a-z_.]+)`/g)) listed[action!] = category;
  }
  const actual = Object.fromEntries(Object.entries(AUDIT_ACTIONS).map(([action, { category }]) => [action, category]));
  assert.deepEqual(listed, actual, "every action, under its own category, and nothing else");
});

test("a token-shaped e-mail never fails an audit write and is never stored as it is", async (t) => {
  const server = await startServer(t);
  const alice = await server.signIn("alice@example.test");
  const project = await alice.createProject({ name: "api", environments: ["development"] });
  const email = `svc_at_${"q".repeat(30)}@example.test`;
  const res = await alice.json("POST", `/api/projects/${project.id}/invitations`, { email, role: "viewer" });
  assert.equal(res.status, 201, JSON.stringify(res.body));
  const metadata = auditRows(server, { action: "invitation.created" })[0]!.metadata;
  assert.equal(JSON.parse(metadata).email, "[redacted]@example.test");
});
