import assert from "node:assert/strict";
import crypto from "node:crypto";
import { test } from "node:test";
import { PERMISSIONS } from "../src/core/access.ts";
import { auditEvents, type Client, cliLogin, startServer, type TestServer } from "./helpers.ts";
import { invite, joinProject } from "./secrets-helpers.ts";
import { auditRows, failWritesTo, grantRows, rowCount, setUserEmail, storedRows } from "./storage.ts";

const ISO_MS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const DAY_MS = 24 * 60 * 60 * 1000;
const ALL_ENVS = ["development", "staging", "production"];
const FORBIDDEN = { error: "You do not have permission to do this in this project." };
const NOT_FOUND = { error: "Project not found." };
const GONE = { error: "This invitation is invalid, expired, or already used." };

/** The environments a member or viewer is granted, as the access matrix shows them to `reader`. */
async function grantsOf(reader: Client, projectId: string, userId: string): Promise<string[]> {
  const res = await reader.json("GET", `/api/projects/${projectId}/environment-access`);
  assert.equal(res.status, 200, JSON.stringify(res.body));
  const entry = (res.body.members as { userId: string; access: Record<string, string> }[]).find((m) => m.userId === userId);
  assert.ok(entry, `${userId} is not in the access matrix`);
  return Object.keys(entry.access)
    .filter((env) => entry.access[env] === "granted")
    .sort();
}

async function accept(client: Client, token: string) {
  return client.json("POST", "/api/invitations/accept", { token });
}

interface Team {
  server: TestServer;
  projectId: string;
  owner: Client;
  admins: Client[];
  members: Client[];
  viewers: Client[];
  outsider: Client;
}

/**
 * One project with two users of every role but owner, every one of them brought in through
 * the invitation round trip. Mia (member) holds development, Vic (viewer) production.
 */
async function startTeamOfTwoPerRole(t: Parameters<typeof startServer>[0], environments = ALL_ENVS): Promise<Team> {
  const server = await startServer(t);
  const owner = await server.signIn("olivia@example.test", "Olivia Owner");
  const project = await owner.createProject({ name: "api", environments });
  const join = (email: string, role: string, grants?: string[]) => {
    // Distinct join times keep the members list order deterministic.
    server.clock.advance(1000);
    return joinProject(server, owner, project.id, email, role, grants);
  };
  return {
    server,
    projectId: project.id,
    owner,
    admins: [await join("adam@example.test", "admin"), await join("ada@example.test", "admin")],
    members: [await join("mia@example.test", "member", ["development"]), await join("max@example.test", "member")],
    viewers: [
      await join("vic@example.test", "viewer", environments.includes("production") ? ["production"] : undefined),
      await join("val@example.test", "viewer"),
    ],
    outsider: await server.signIn("otto@example.test"),
  };
}

// ---------------------------------------------------------------------------------------
// Members

test("every role lists every member with role, isYou and createdAt; name and email only when known", async (t) => {
  const team = await startTeamOfTwoPerRole(t);
  const { server, projectId, owner, admins, members, viewers } = team;
  const everyone = [owner, ...admins, ...members, ...viewers];
  const roles = ["owner", "admin", "admin", "member", "member", "viewer", "viewer"];

  // A user whose e-mail is unknown (an identity provider that sends none) has none listed.
  setUserEmail(server, viewers[1]!.user!.id, null);

  for (const caller of everyone) {
    const res = await caller.json("GET", `/api/projects/${projectId}/members`);
    assert.equal(res.status, 200);
    const list = res.body.members as Record<string, unknown>[];
    assert.deepEqual(
      list.map((m) => m.userId),
      everyone.map((c) => c.user!.id),
      "owner, admins, members, viewers; oldest first within a role",
    );
    list.forEach((m, i) => {
      const who = everyone[i]!;
      const expected: Record<string, unknown> = {
        userId: who.user!.id,
        role: roles[i],
        isYou: who === caller,
        createdAt: m.createdAt,
      };
      if (who !== viewers[1]) expected.email = who.user!.email;
      if (who === owner) expected.name = "Olivia Owner";
      assert.deepEqual(m, expected);
      assert.match(m.createdAt as string, ISO_MS);
    });
  }
});

test("a non-member gets 404 on every members, invitations and access endpoint", async (t) => {
  const { projectId, outsider, members } = await startTeamOfTwoPerRole(t);
  const target = members[0]!.user!.id;
  const calls: [string, string, unknown?][] = [
    ["GET", `/api/projects/${projectId}/members`],
    ["PATCH", `/api/projects/${projectId}/members/${target}`, { role: "viewer" }],
    ["DELETE", `/api/projects/${projectId}/members/${target}`],
    ["GET", `/api/projects/${projectId}/invitations`],
    ["POST", `/api/projects/${projectId}/invitations`, { email: "x@example.test", role: "viewer" }],
    ["DELETE", `/api/projects/${projectId}/invitations/${crypto.randomUUID()}`],
    ["POST", `/api/projects/${projectId}/invitations/${crypto.randomUUID()}/renew`],
    ["GET", `/api/projects/${projectId}/environment-access`],
    ["PUT", `/api/projects/${projectId}/environments/staging/access/${target}`],
    ["DELETE", `/api/projects/${projectId}/environments/staging/access/${target}`],
    // An unknown project looks the same, and an invalid body is not even parsed.
    ["PATCH", `/api/projects/${crypto.randomUUID()}/members/${target}`, { role: "nonsense" }],
    ["POST", `/api/projects/${projectId}/invitations`, { bad: true }],
  ];
  for (const [method, path, body] of calls) {
    const res = await outsider.json(method, path, body);
    assert.equal(res.status, 404, `${method} ${path}`);
    assert.deepEqual(res.body, NOT_FOUND, `${method} ${path}`);
  }
});

test("signed out answers 401 and a CLI token answers 403 on every endpoint of this area", async (t) => {
  const { server, projectId, owner, members } = await startTeamOfTwoPerRole(t);
  const target = members[0]!.user!.id;
  const token = await invite(owner, projectId, "cli@example.test", "viewer");
  const cli = owner.withBearer((await cliLogin(server, owner)).accessToken);
  // The token works where the CLI is allowed, so the 403s below are about the endpoints.
  assert.equal((await cli.json("GET", `/api/projects/${projectId}`)).status, 200);

  const calls: [string, string, unknown?][] = [
    ["GET", `/api/projects/${projectId}/members`],
    ["PATCH", `/api/projects/${projectId}/members/${target}`, { role: "viewer" }],
    ["DELETE", `/api/projects/${projectId}/members/${target}`],
    ["DELETE", `/api/projects/${projectId}/members/${owner.user!.id}`],
    ["GET", `/api/projects/${projectId}/invitations`],
    ["POST", `/api/projects/${projectId}/invitations`, { email: "x@example.test", role: "viewer" }],
    ["DELETE", `/api/projects/${projectId}/invitations/${crypto.randomUUID()}`],
    ["POST", `/api/projects/${projectId}/invitations/${crypto.randomUUID()}/renew`],
    ["POST", "/api/invitations/accept", { token }],
    ["GET", `/api/projects/${projectId}/environment-access`],
    ["PUT", `/api/projects/${projectId}/environments/staging/access/${target}`],
    ["DELETE", `/api/projects/${projectId}/environments/development/access/${target}`],
  ];
  const signedOut = server.client();
  for (const [method, path, body] of calls) {
    const res = await cli.json(method, path, body);
    assert.equal(res.status, 403, `${method} ${path}`);
    assert.deepEqual(res.body, { error: "This action needs a browser session; CLI tokens cannot be used here." });
    const anonymous = await signedOut.json(method, path, body);
    assert.equal(anonymous.status, 401, `${method} ${path}`);
    assert.deepEqual(anonymous.body, { error: "not signed in" });
  }
  // Nothing changed: the member still has their grant and role, the invitation is still open.
  assert.deepEqual(await grantsOf(owner, projectId, target), ["development"]);
  const list = await owner.json("GET", `/api/projects/${projectId}/invitations`);
  assert.deepEqual(
    list.body.invitations.map((i: { email: string }) => i.email),
    ["cli@example.test"],
  );
  assert.equal((await auditEvents(owner, projectId, "member.")).length, 0);
});

test("owner and admins change roles; the response, the audit log and the caller's permissions follow at once", async (t) => {
  const { projectId, owner, admins, members, viewers } = await startTeamOfTwoPerRole(t);
  const mia = members[0]!;
  const projectOf = async (c: Client) => (await c.json("GET", `/api/projects/${projectId}`)).body.project;

  assert.deepEqual((await projectOf(mia)).permissions, [
    "project:read",
    "members:read",
    "secrets:read",
    "secrets:create",
    "secrets:update",
    "secrets:delete",
  ]);

  const res = await owner.json("PATCH", `/api/projects/${projectId}/members/${mia.user!.id}`, { role: "viewer" });
  assert.equal(res.status, 200);
  assert.deepEqual(res.body, { member: { userId: mia.user!.id, email: "mia@example.test", role: "viewer" } });
  let project = await projectOf(mia);
  assert.equal(project.role, "viewer");
  assert.deepEqual(project.permissions, ["project:read", "members:read", "secrets:read"]);
  assert.deepEqual(project.environments, ["development"], "member to viewer keeps the grants");

  // An admin promotes: every permission but project:delete, and every environment, implicitly.
  const promote = await admins[0]!.json("PATCH", `/api/projects/${projectId}/members/${mia.user!.id}`, { role: "admin" });
  assert.equal(promote.status, 200);
  assert.equal(promote.body.member.role, "admin");
  project = await projectOf(mia);
  assert.equal(project.role, "admin");
  assert.deepEqual(
    project.permissions,
    PERMISSIONS.filter((p) => p !== "project:delete"),
  );
  assert.deepEqual(project.environments, ALL_ENVS);
  // The promoted admin can do admin things on the very next request.
  assert.equal((await mia.json("GET", `/api/projects/${projectId}/invitations`)).status, 200);

  // Demoted again: no environment until granted, and no admin endpoint on the next request.
  const demote = await admins[1]!.json("PATCH", `/api/projects/${projectId}/members/${mia.user!.id}`, { role: "member" });
  assert.equal(demote.status, 200);
  project = await projectOf(mia);
  assert.equal(project.role, "member");
  assert.deepEqual(project.environments, [], "the development grant she had before the promotion is gone");
  assert.deepEqual(project.secretCounts, {});
  assert.deepEqual(await grantsOf(owner, projectId, mia.user!.id), []);
  assert.equal((await mia.json("GET", `/api/projects/${projectId}/invitations`)).status, 403);

  // Demoting an admin who never had grants: also nothing.
  const adam = admins[0]!;
  assert.equal((await owner.json("PATCH", `/api/projects/${projectId}/members/${adam.user!.id}`, { role: "viewer" })).status, 200);
  project = await projectOf(adam);
  assert.deepEqual(project.environments, []);
  assert.deepEqual(project.permissions, ["project:read", "members:read", "secrets:read"]);
  // And an admin demoted mid-session loses members:update_role on the next request.
  const next = await adam.json("PATCH", `/api/projects/${projectId}/members/${viewers[0]!.user!.id}`, { role: "member" });
  assert.equal(next.status, 403);
  assert.deepEqual(next.body, FORBIDDEN);

  // Setting the same role again changes nothing and is not audited.
  const same = await owner.json("PATCH", `/api/projects/${projectId}/members/${adam.user!.id}`, { role: "viewer" });
  assert.equal(same.status, 200);
  assert.equal(same.body.member.role, "viewer");

  assert.deepEqual(
    (await auditEvents(owner, projectId, "member.")).map((e) => [e.action, e.category, e.actor, e.targetType, e.targetId, e.metadata]),
    [
      [
        "member.role_changed",
        "access",
        owner.user!.id,
        "member",
        mia.user!.id,
        { email: "mia@example.test", from: "member", to: "viewer" },
      ],
      [
        "member.role_changed",
        "access",
        admins[0]!.user!.id,
        "member",
        mia.user!.id,
        { email: "mia@example.test", from: "viewer", to: "admin" },
      ],
      [
        "member.role_changed",
        "access",
        admins[1]!.user!.id,
        "member",
        mia.user!.id,
        { email: "mia@example.test", from: "admin", to: "member" },
      ],
      [
        "member.role_changed",
        "access",
        owner.user!.id,
        "member",
        adam.user!.id,
        { email: "adam@example.test", from: "admin", to: "viewer" },
      ],
    ],
  );
  // The grant the promotion dropped is audited as a revoke, by whoever promoted her.
  assert.deepEqual(
    (await auditEvents(owner, projectId, "environment_access.revoked"))
      .filter((e) => e.targetId === mia.user!.id)
      .map((e) => [e.actor, e.metadata]),
    [[admins[0]!.user!.id, { email: "mia@example.test", environment: "development" }]],
  );
});

test("role changes: the rules and their messages", async (t) => {
  const { server, projectId, owner, admins, members, viewers } = await startTeamOfTwoPerRole(t);
  const path = (userId: string) => `/api/projects/${projectId}/members/${userId}`;
  const mia = members[0]!.user!.id;

  for (const caller of [...members, ...viewers]) {
    const res = await caller.json("PATCH", path(mia), { role: "viewer" });
    assert.equal(res.status, 403);
    assert.deepEqual(res.body, FORBIDDEN);
  }
  for (const body of [{ role: "owner" }, { role: "superuser" }, { role: "ADMIN" }, {}, { role: "viewer", extra: 1 }, [], "viewer", null]) {
    const res = await owner.json("PATCH", path(mia), body);
    assert.equal(res.status, 400, JSON.stringify(body));
    assert.deepEqual(res.body, { error: "Role must be admin, member, or viewer." });
  }
  for (const caller of [owner, admins[0]!]) {
    const res = await caller.json("PATCH", path(caller.user!.id), { role: "viewer" });
    assert.equal(res.status, 400);
    assert.deepEqual(res.body, { error: "You cannot change your own role." });
  }
  for (const caller of admins) {
    const res = await caller.json("PATCH", path(owner.user!.id), { role: "admin" });
    assert.equal(res.status, 403);
    assert.deepEqual(res.body, { error: "The owner's role cannot be changed." });
  }
  const unknown = await owner.json("PATCH", path(crypto.randomUUID()), { role: "viewer" });
  assert.equal(unknown.status, 404);
  assert.deepEqual(unknown.body, { error: "Member not found." });
  // A user of the server who is not in this project is not a member either.
  const stranger = await server.signIn("stranger@example.test");
  const notMember = await owner.json("PATCH", path(stranger.user!.id), { role: "viewer" });
  assert.equal(notMember.status, 404);
  assert.deepEqual(notMember.body, { error: "Member not found." });

  const roles = (await owner.json("GET", `/api/projects/${projectId}/members`)).body.members.map((m: { role: string }) => m.role);
  assert.deepEqual(roles, ["owner", "admin", "admin", "member", "member", "viewer", "viewer"]);
  assert.equal((await auditEvents(owner, projectId, "member.")).length, 0);
});

test("removing a member: members:remove, not the owner, grants deleted with it, effective on the next request", async (t) => {
  const { server, projectId, owner, admins, members, viewers } = await startTeamOfTwoPerRole(t);
  const [mia, max] = members as [Client, Client];
  const path = (userId: string) => `/api/projects/${projectId}/members/${userId}`;
  assert.equal((await owner.json("PUT", `/api/projects/${projectId}/environments/staging/access/${mia.user!.id}`)).status, 200);
  assert.deepEqual(await grantsOf(owner, projectId, mia.user!.id), ["development", "staging"]);

  for (const caller of [max, ...viewers]) {
    const res = await caller.json("DELETE", path(mia.user!.id));
    assert.equal(res.status, 403);
    assert.deepEqual(res.body, FORBIDDEN);
  }
  for (const caller of admins) {
    const res = await caller.json("DELETE", path(owner.user!.id));
    assert.equal(res.status, 403);
    assert.deepEqual(res.body, { error: "The owner cannot be removed." });
  }
  const unknown = await admins[0]!.json("DELETE", path(crypto.randomUUID()));
  assert.equal(unknown.status, 404);
  assert.deepEqual(unknown.body, { error: "Member not found." });

  assert.equal((await mia.json("GET", `/api/projects/${projectId}`)).status, 200);
  const removed = await admins[0]!.json("DELETE", path(mia.user!.id));
  assert.equal(removed.status, 200);
  assert.deepEqual(removed.body, { ok: true });
  // The very next request of the removed member: the project does not exist for her.
  const after = await mia.json("GET", `/api/projects/${projectId}`);
  assert.equal(after.status, 404);
  assert.deepEqual(after.body, NOT_FOUND);
  assert.equal((await mia.json("GET", `/api/projects/${projectId}/members`)).status, 404);
  const projects = await mia.json("GET", "/api/projects");
  assert.deepEqual(projects.body.projects, []);
  // Her grants went with the membership (the foreign key's cascade, in the same transaction).
  assert.deepEqual(grantRows(server, projectId, mia.user!.id), []);
  assert.equal(rowCount(server, "memberships", { project_id: projectId, user_id: mia.user!.id }), 0);
  // Removing again: she is no longer a member.
  assert.equal((await admins[0]!.json("DELETE", path(mia.user!.id))).status, 404);

  // Invited back without environments, she starts from nothing: no old grant comes back.
  const token = await invite(owner, projectId, "mia@example.test", "member");
  assert.equal((await accept(mia, token)).status, 200);
  assert.deepEqual((await mia.json("GET", `/api/projects/${projectId}`)).body.project.environments, []);

  // An admin can remove another admin.
  assert.equal((await admins[0]!.json("DELETE", path(admins[1]!.user!.id))).status, 200);
  assert.equal((await admins[1]!.json("GET", `/api/projects/${projectId}`)).status, 404);

  assert.deepEqual(
    (await auditEvents(owner, projectId, "member.")).map((e) => [e.action, e.category, e.actor, e.targetId, e.metadata]),
    [
      ["member.removed", "access", admins[0]!.user!.id, mia.user!.id, { email: "mia@example.test", role: "member" }],
      ["member.removed", "access", admins[0]!.user!.id, admins[1]!.user!.id, { email: "ada@example.test", role: "admin" }],
    ],
  );
});

test("the removal of a member and of their grants is one transaction", async (t) => {
  const { server, projectId, owner, members } = await startTeamOfTwoPerRole(t);
  const mia = members[0]!;
  // Make the audit write (the last statement of the transaction) fail: nothing may be left half done.
  const undo = failWritesTo(server, "audit_events", { action: "member.removed", message: "audit refused" });
  const res = await owner.json("DELETE", `/api/projects/${projectId}/members/${mia.user!.id}`);
  assert.equal(res.status, 500);
  assert.deepEqual(await grantsOf(owner, projectId, mia.user!.id), ["development"], "grants rolled back with the membership");
  assert.equal((await mia.json("GET", `/api/projects/${projectId}`)).status, 200);
  undo();
  assert.equal((await owner.json("DELETE", `/api/projects/${projectId}/members/${mia.user!.id}`)).status, 200);
  assert.deepEqual(grantRows(server, projectId, mia.user!.id), []);
});

test("a failed write is logged with its database's reason and without the values of its row", async (t) => {
  const server = await startServer(t);
  const owner = await server.signIn("owner@example.test");
  const project = await owner.createProject({ name: "api", environments: ["development"] });
  const undo = failWritesTo(server, "invitations", { message: "refused by a trigger" });
  const res = await owner.json("POST", `/api/projects/${project.id}/invitations`, { email: "leaky@example.test", role: "viewer" });
  undo();
  assert.equal(res.status, 500);
  const failed = server.logs.filter((line) => line.includes("request failed"));
  assert.equal(failed.length, 1);
  assert.match(failed[0]!, /refused by a trigger/);
  // drizzle on PostgreSQL puts the statement's values in its error: the invited address,
  // the token's hash. None of it is written.
  assert.ok(!server.logs.some((line) => line.includes("leaky@example.test") || line.includes("params")), failed[0]);
});

test("leaving: any member but the owner, membership only, audited as member.left", async (t) => {
  const { server, projectId, owner, admins, members, viewers } = await startTeamOfTwoPerRole(t);
  const path = (c: Client) => `/api/projects/${projectId}/members/${c.user!.id}`;

  const ownerLeaves = await owner.json("DELETE", path(owner));
  assert.equal(ownerLeaves.status, 403);
  assert.deepEqual(ownerLeaves.body, { error: "The owner cannot leave the project." });

  for (const leaver of [viewers[1]!, members[1]!, admins[1]!]) {
    const res = await leaver.json("DELETE", path(leaver));
    assert.equal(res.status, 200);
    assert.deepEqual(res.body, { ok: true });
    assert.equal((await leaver.json("GET", `/api/projects/${projectId}`)).status, 404);
  }
  // A viewer with a grant leaves; the grant goes too.
  const vic = viewers[0]!;
  assert.deepEqual(await grantsOf(owner, projectId, vic.user!.id), ["production"]);
  assert.equal((await vic.json("DELETE", path(vic))).status, 200);
  assert.deepEqual(grantRows(server, projectId, vic.user!.id), []);

  const left = (await owner.json("GET", `/api/projects/${projectId}/members`)).body.members.map((m: { email: string }) => m.email);
  assert.deepEqual(left, ["olivia@example.test", "adam@example.test", "mia@example.test"]);
  assert.deepEqual(
    (await auditEvents(owner, projectId, "member.")).map((e) => [e.action, e.actor, e.targetId, e.metadata]),
    [
      ["member.left", viewers[1]!.user!.id, viewers[1]!.user!.id, { email: "val@example.test", role: "viewer" }],
      ["member.left", members[1]!.user!.id, members[1]!.user!.id, { email: "max@example.test", role: "member" }],
      ["member.left", admins[1]!.user!.id, admins[1]!.user!.id, { email: "ada@example.test", role: "admin" }],
      ["member.left", vic.user!.id, vic.user!.id, { email: "vic@example.test", role: "viewer" }],
    ],
  );
  assert.ok((await auditEvents(owner, projectId, "member.")).every((e) => e.category === "access"));
});

// ---------------------------------------------------------------------------------------
// Invitations

test("invitation round trip through devAcceptUrl: token stored only as a hash, membership with role and grants", async (t) => {
  const server = await startServer(t);
  const owner = await server.signIn("olivia@example.test");
  const project = await owner.createProject({ name: "api", environments: ["development", "production"] });

  const created = await owner.json("POST", `/api/projects/${project.id}/invitations`, {
    email: "  Carol@Example.TEST ",
    role: "member",
    environments: ["production", "development"],
  });
  assert.equal(created.status, 201);
  assert.deepEqual(Object.keys(created.body).sort(), ["devAcceptUrl", "invitation"]);
  const invitation = created.body.invitation;
  assert.deepEqual(invitation, {
    id: invitation.id,
    email: "carol@example.test",
    role: "member",
    environments: ["development", "production"],
    createdAt: invitation.createdAt,
    expiresAt: invitation.expiresAt,
    expired: false,
  });
  assert.match(invitation.createdAt, ISO_MS);
  assert.equal(Date.parse(invitation.expiresAt) - Date.parse(invitation.createdAt), 7 * DAY_MS);

  const devAcceptUrl: string = created.body.devAcceptUrl;
  const prefix = `${server.env.APP_URL}/invite#`;
  assert.ok(devAcceptUrl.startsWith(prefix), devAcceptUrl);
  const token = devAcceptUrl.slice(prefix.length);
  assert.match(token, /^[A-Za-z0-9_-]{43,}$/, "at least 32 random bytes, URL-safe");

  // Only the SHA-256 of the token is stored; the token itself appears nowhere in the database or logs.
  const [row] = storedRows(server, "invitations", { id: invitation.id });
  assert.ok(row);
  assert.equal(row.token_hash, crypto.createHash("sha256").update(token).digest("hex"));
  for (const value of Object.values(row)) assert.ok(!String(value).includes(token));
  const audit = auditRows(server).map((event) => event.metadata as string);
  assert.ok(audit.every((m) => !m.includes(token) && !m.includes(row.token_hash as string)));

  const listed = await owner.json("GET", `/api/projects/${project.id}/invitations`);
  assert.deepEqual(listed.body, { invitations: [invitation] });

  const carol = await server.signIn("carol@example.test");
  assert.equal((await carol.json("GET", `/api/projects/${project.id}`)).status, 404);
  const accepted = await accept(carol, token);
  assert.equal(accepted.status, 200);
  assert.deepEqual(accepted.body, { projectId: project.id, role: "member" });

  const seen = await carol.json("GET", `/api/projects/${project.id}`);
  assert.equal(seen.status, 200);
  assert.equal(seen.body.project.role, "member");
  assert.deepEqual(seen.body.project.environments, ["development", "production"]);
  assert.deepEqual(seen.body.project.permissions, [
    "project:read",
    "members:read",
    "secrets:read",
    "secrets:create",
    "secrets:update",
    "secrets:delete",
  ]);

  // Used: no longer pending, and the audit trail names the e-mail and role but never the token.
  assert.deepEqual((await owner.json("GET", `/api/projects/${project.id}/invitations`)).body, { invitations: [] });
  assert.deepEqual(
    (await auditEvents(owner, project.id, "invitation.")).map((e) => [e.action, e.category, e.actor, e.targetType, e.targetId, e.metadata]),
    [
      [
        "invitation.created",
        "access",
        owner.user!.id,
        "invitation",
        invitation.id,
        { email: "carol@example.test", role: "member", environments: ["development", "production"] },
      ],
      [
        "invitation.accepted",
        "access",
        carol.user!.id,
        "member",
        carol.user!.id,
        { email: "carol@example.test", role: "member", environments: ["development", "production"], invitationId: invitation.id },
      ],
    ],
  );
  const everything = JSON.stringify(auditRows(server));
  assert.ok(!everything.includes(token));
  assert.ok(
    server.logs.every((line) => !line.includes(token)),
    "the token never reaches a log line",
  );
});

test("an admin invitation grants every environment implicitly; a viewer invitation only what it names", async (t) => {
  const server = await startServer(t);
  const owner = await server.signIn("olivia@example.test");
  const project = await owner.createProject({ name: "api", environments: ALL_ENVS });
  const adam = await server.signIn("adam@example.test");
  const vic = await server.signIn("vic@example.test");
  assert.deepEqual(await accept(adam, await invite(owner, project.id, "adam@example.test", "admin")).then((r) => r.body), {
    projectId: project.id,
    role: "admin",
  });
  assert.equal((await accept(vic, await invite(owner, project.id, "vic@example.test", "viewer", ["staging"]))).status, 200);
  assert.deepEqual((await adam.json("GET", `/api/projects/${project.id}`)).body.project.environments, ALL_ENVS);
  assert.deepEqual(grantRows(server, project.id, adam.user!.id), []);
  const vicProject = (await vic.json("GET", `/api/projects/${project.id}`)).body.project;
  assert.equal(vicProject.role, "viewer");
  assert.deepEqual(vicProject.environments, ["staging"]);
  // An admin invites too, with environments.
  const nia = await server.signIn("nia@example.test");
  assert.equal((await accept(nia, await invite(adam, project.id, "nia@example.test", "member", ["production"]))).status, 200);
  assert.deepEqual((await nia.json("GET", `/api/projects/${project.id}`)).body.project.environments, ["production"]);
});

test("creating invitations: permissions, validation and conflicts with their messages", async (t) => {
  const { projectId, owner, admins, members, viewers } = await startTeamOfTwoPerRole(t, ["development", "production"]);
  const path = `/api/projects/${projectId}/invitations`;

  for (const caller of [...members, ...viewers]) {
    const res = await caller.json("POST", path, { email: "new@example.test", role: "viewer" });
    assert.equal(res.status, 403);
    assert.deepEqual(res.body, FORBIDDEN);
  }

  const bad: [unknown, string][] = [
    [{ email: "not-an-email", role: "viewer" }, "Enter a valid email address of up to 254 characters."],
    [{ email: `${"a".repeat(242)}@example.test`, role: "viewer" }, "Enter a valid email address of up to 254 characters."],
    [{ role: "viewer" }, "Enter a valid email address of up to 254 characters."],
    [{ email: 42, role: "viewer" }, "Enter a valid email address of up to 254 characters."],
    [{ email: "new@example.test", role: "owner" }, "Role must be admin, member, or viewer."],
    [{ email: "new@example.test" }, "Role must be admin, member, or viewer."],
    [
      { email: "new@example.test", role: "viewer", environments: ["qa"] },
      "environments must be a list of distinct environments: development, staging, production.",
    ],
    [
      { email: "new@example.test", role: "viewer", environments: "production" },
      "environments must be a list of distinct environments: development, staging, production.",
    ],
    [
      { email: "new@example.test", role: "viewer", environments: ["production", "production"] },
      "environments must be a list of distinct environments: development, staging, production.",
    ],
    [{ email: "new@example.test", role: "viewer", team: "x" }, "Send an invitation as { email, role, environments? }."],
    [["new@example.test"], "Send an invitation as { email, role, environments? }."],
    [
      { email: "new@example.test", role: "admin", environments: ["production"] },
      "Admins already have access to every environment. Invite them without environments.",
    ],
    [
      { email: "new@example.test", role: "admin", environments: [] },
      "Admins already have access to every environment. Invite them without environments.",
    ],
  ];
  for (const [body, message] of bad) {
    const res = await owner.json("POST", path, body);
    assert.equal(res.status, 400, JSON.stringify(body));
    assert.deepEqual(res.body, { error: message }, JSON.stringify(body));
  }
  // 254 characters is the limit, inclusive.
  const longest = `${"a".repeat(241)}@example.test`;
  assert.equal(longest.length, 254);
  assert.equal((await owner.json("POST", path, { email: longest, role: "viewer" })).status, 201);

  // An environment the project does not have.
  const staging = await owner.json("POST", path, { email: "new@example.test", role: "member", environments: ["staging"] });
  assert.equal(staging.status, 404);
  assert.deepEqual(staging.body, { error: "Environment not found." });

  // Members are recognised by e-mail, ignoring case.
  for (const email of ["mia@example.test", "MIA@Example.Test", "olivia@example.test"]) {
    const res = await admins[0]!.json("POST", path, { email, role: "viewer" });
    assert.equal(res.status, 409);
    assert.deepEqual(res.body, { error: "This person is already a member." });
  }
  assert.equal((await owner.json("POST", path, { email: "new@example.test", role: "viewer", environments: [] })).status, 201);
  for (const email of ["new@example.test", "NEW@example.test"]) {
    const res = await admins[1]!.json("POST", path, { email, role: "member" });
    assert.equal(res.status, 409);
    assert.deepEqual(res.body, { error: "An invitation for this email is already pending." });
  }

  const list = await admins[0]!.json("GET", path);
  assert.deepEqual(
    list.body.invitations.map((i: { email: string }) => i.email),
    ["new@example.test", longest],
  );
  assert.equal((await auditEvents(owner, projectId, "invitation.created")).length, 2 + 6, "six for the team, two here");
});

test("listing invitations: admins and owner only, pending only, expired computed from the clock", async (t) => {
  const { server, projectId, owner, admins, members, viewers } = await startTeamOfTwoPerRole(t);
  const path = `/api/projects/${projectId}/invitations`;
  for (const caller of [...members, ...viewers]) {
    const res = await caller.json("GET", path);
    assert.equal(res.status, 403);
    assert.deepEqual(res.body, FORBIDDEN);
  }
  assert.deepEqual((await owner.json("GET", path)).body, { invitations: [] }, "accepted ones are not pending");

  await invite(owner, projectId, "first@example.test", "viewer");
  server.clock.advance(3 * DAY_MS);
  await invite(admins[0]!, projectId, "second@example.test", "member", ["staging"]);
  let list = (await admins[1]!.json("GET", path)).body.invitations;
  assert.deepEqual(
    list.map((i: { email: string; expired: boolean }) => [i.email, i.expired]),
    [
      ["second@example.test", false],
      ["first@example.test", false],
    ],
    "newest first",
  );

  server.clock.advance(4 * DAY_MS);
  // Browser sessions end after 7 idle days: the owner signs in again.
  const owner2 = await server.signIn("olivia@example.test");
  list = (await owner2.json("GET", path)).body.invitations;
  assert.deepEqual(
    list.map((i: { email: string; expired: boolean }) => [i.email, i.expired]),
    [
      ["second@example.test", false],
      ["first@example.test", true],
    ],
    "exactly 7 days after creation the first one is expired",
  );

  // An expired invitation no longer blocks a new one; the new one replaces it in the list.
  const again = await owner2.json("POST", path, { email: "first@example.test", role: "admin" });
  assert.equal(again.status, 201);
  list = (await owner2.json("GET", path)).body.invitations;
  assert.deepEqual(
    list.map((i: { email: string; role: string; expired: boolean }) => [i.email, i.role, i.expired]),
    [
      ["first@example.test", "admin", false],
      ["second@example.test", "member", false],
    ],
  );
  // The replaced one's end is audited, as a revocation is.
  const revoked = await auditEvents(owner2, projectId, "invitation.revoked");
  assert.deepEqual(
    revoked.map((e) => [e.actor, e.metadata]),
    [[owner2.user!.id, { email: "first@example.test", role: "viewer", reason: "replaced" }]],
  );
});

test("revoking an invitation: invitations:revoke, 404 for unknown, used or other projects' invitations; the token then answers 410", async (t) => {
  const { server, projectId, owner, admins, members, viewers } = await startTeamOfTwoPerRole(t);
  const token = await invite(owner, projectId, "rita@example.test", "member", ["staging"]);
  const id = (await owner.json("GET", `/api/projects/${projectId}/invitations`)).body.invitations[0].id;
  const path = (invitationId: string) => `/api/projects/${projectId}/invitations/${invitationId}`;

  for (const caller of [...members, ...viewers]) {
    const res = await caller.json("DELETE", path(id));
    assert.equal(res.status, 403);
    assert.deepEqual(res.body, FORBIDDEN);
  }
  const unknown = await owner.json("DELETE", path(crypto.randomUUID()));
  assert.equal(unknown.status, 404);
  assert.deepEqual(unknown.body, { error: "Invitation not found." });

  // The invitation of another project cannot be revoked through this one.
  const other = await admins[0]!.createProject({ name: "other", environments: ["development"] });
  await invite(admins[0]!, other.id, "someone@example.test", "viewer");
  const otherId = (await admins[0]!.json("GET", `/api/projects/${other.id}/invitations`)).body.invitations[0].id;
  assert.equal((await admins[0]!.json("DELETE", path(otherId))).status, 404);
  assert.equal((await admins[0]!.json("GET", `/api/projects/${other.id}/invitations`)).body.invitations.length, 1);

  // An accepted invitation is no longer pending: there is nothing to revoke.
  const usedId = (await auditEvents(owner, projectId, "invitation.accepted"))[0]!.metadata.invitationId as string;
  assert.equal((await owner.json("DELETE", path(usedId))).status, 404);

  const revoked = await admins[1]!.json("DELETE", path(id));
  assert.equal(revoked.status, 200);
  assert.deepEqual(revoked.body, { ok: true });
  assert.deepEqual((await owner.json("GET", `/api/projects/${projectId}/invitations`)).body, { invitations: [] });
  assert.equal((await admins[1]!.json("DELETE", path(id))).status, 404, "twice");

  const rita = await server.signIn("rita@example.test");
  const res = await accept(rita, token);
  assert.equal(res.status, 410);
  assert.deepEqual(res.body, GONE);
  assert.equal((await rita.json("GET", `/api/projects/${projectId}`)).status, 404);

  assert.deepEqual(
    (await auditEvents(owner, projectId, "invitation.revoked")).map((e) => [e.category, e.actor, e.targetType, e.targetId, e.metadata]),
    [["access", admins[1]!.user!.id, "invitation", id, { email: "rita@example.test", role: "member" }]],
  );
});

test("accepting: wrong e-mail 403, unverified 403, replay 410, expired 410, unknown token 410", async (t) => {
  const server = await startServer(t);
  const owner = await server.signIn("olivia@example.test");
  const project = await owner.createProject({ name: "api", environments: ["development"] });
  const token = await invite(owner, project.id, "carol@example.test", "viewer", ["development"]);

  // Someone else holding the link cannot use it, and their attempt does not use it up.
  const mallory = await server.signIn("mallory@example.test");
  const wrong = await accept(mallory, token);
  assert.equal(wrong.status, 403);
  assert.deepEqual(wrong.body, { error: "This invitation was sent to a different email address." });
  assert.equal((await mallory.json("GET", `/api/projects/${project.id}`)).status, 404);

  // The right address, but not verified by the identity provider: refused the same way.
  const carol = await server.signIn("Carol@Example.test");
  setUserEmail(server, carol.user!.id, carol.user!.email, false);
  const unverified = await accept(carol, token);
  assert.equal(unverified.status, 403);
  assert.deepEqual(unverified.body, { error: "This invitation was sent to a different email address." });
  setUserEmail(server, carol.user!.id, "Carol@Example.TEST");

  // Verified, and equal ignoring case.
  const ok = await accept(carol, token);
  assert.equal(ok.status, 200);
  assert.deepEqual(ok.body, { projectId: project.id, role: "viewer" });

  // Single use: the same token again, by the invitee or anyone else.
  for (const who of [carol, mallory]) {
    const replay = await accept(who, token);
    assert.equal(replay.status, who === carol ? 410 : 403);
  }
  assert.deepEqual((await accept(carol, token)).body, GONE);

  // Expired: exactly 7 days after creation (a fresh sign-in: sessions also end after 7 idle days).
  const late = await invite(owner, project.id, "dave@example.test", "member");
  server.clock.advance(7 * DAY_MS);
  const dave = await server.signIn("dave@example.test");
  const expired = await accept(dave, late);
  assert.equal(expired.status, 410);
  assert.deepEqual(expired.body, GONE);
  assert.equal((await dave.json("GET", `/api/projects/${project.id}`)).status, 404);

  for (const body of [{ token: "nonsense" }, { token: crypto.randomBytes(32).toString("base64url") }]) {
    const res = await accept(dave, body.token);
    assert.equal(res.status, 410);
    assert.deepEqual(res.body, GONE);
  }
  for (const body of [{}, { token: "" }, { token: 5 }, { token: "x", extra: 1 }]) {
    const res = await dave.json("POST", "/api/invitations/accept", body);
    assert.equal(res.status, 400, JSON.stringify(body));
    assert.deepEqual(res.body, { error: "Send the invitation token as { token }." });
  }

  // Seven days on, the owner signs in again too.
  const olivia = await server.signIn("olivia@example.test");
  const members = (await olivia.json("GET", `/api/projects/${project.id}/members`)).body.members.map((m: { email: string }) => m.email);
  assert.deepEqual(members, ["olivia@example.test", "Carol@Example.TEST"]);
  assert.equal((await auditEvents(olivia, project.id, "invitation.accepted")).length, 1);
});

test("an invitation is still valid a second before its 7 days are up", async (t) => {
  const server = await startServer(t);
  const owner = await server.signIn("olivia@example.test");
  const project = await owner.createProject({ name: "api", environments: ["development"] });
  const token = await invite(owner, project.id, "dave@example.test", "member");
  const dave = await server.signIn("dave@example.test");
  server.clock.advance(7 * DAY_MS - 1000);
  const res = await accept(dave, token);
  assert.equal(res.status, 200);
});

test("accepting when already a member answers 409 and changes nothing", async (t) => {
  const server = await startServer(t);
  const owner = await server.signIn("olivia@example.test");
  const project = await owner.createProject({ name: "api", environments: ["development"] });
  const dave = await server.signIn("dave@example.test");
  assert.equal((await accept(dave, await invite(owner, project.id, "dave@example.test", "viewer"))).status, 200);
  // Dave's address changes at his identity provider after he was invited under the new one.
  const token = await invite(owner, project.id, "dave@new.example.test", "admin");
  setUserEmail(server, dave.user!.id, "dave@new.example.test");
  const res = await accept(dave, token);
  assert.equal(res.status, 409);
  assert.deepEqual(res.body, { error: "You are already a member of this project." });
  assert.equal((await dave.json("GET", `/api/projects/${project.id}`)).body.project.role, "viewer", "never a role change");
  // The invitation stays pending for an admin to revoke.
  assert.equal((await owner.json("GET", `/api/projects/${project.id}/invitations`)).body.invitations.length, 1);

  // The owner, too, is never changed by an invitation.
  const ownerToken = await invite(owner, project.id, "olivia@other.example.test", "viewer");
  setUserEmail(server, owner.user!.id, "olivia@other.example.test");
  assert.equal((await accept(owner, ownerToken)).status, 409);
  assert.equal((await owner.json("GET", `/api/projects/${project.id}`)).body.project.role, "owner");
});

test("devAcceptUrl is never returned in production mode", async (t) => {
  const server = await startServer(t, { env: { NODE_ENV: "production", AUTH_PROVIDER: "local" } });
  // No dev sign-in in production: the first local account, made through the setup link the
  // first start logs. The link is sent with plain fetch: the leak scan would rightly flag a
  // token it saw in a log line, and this one is logged on purpose, for the operator.
  const link = server.logs.map((line) => line.match(/\/set-password#([A-Za-z0-9_-]+)/)?.[1]).find(Boolean);
  assert.ok(link, "the first start logs a setup link");
  const password = "correct horse battery staple";
  const created = await fetch(`${server.url}/api/auth/local/set-password`, {
    method: "POST",
    headers: { "content-type": "application/json", origin: server.origin },
    body: JSON.stringify({ token: link, email: "olivia@example.test", password }),
  });
  assert.equal(created.status, 200, await created.text());
  const owner = server.client();
  const signedIn = await owner.json("POST", "/api/auth/local/sign-in", { email: "olivia@example.test", password });
  assert.equal(signedIn.status, 200, JSON.stringify(signedIn.body));
  const project = await owner.createProject({ name: "api", environments: ["production"] });

  const res = await owner.json("POST", `/api/projects/${project.id}/invitations`, {
    email: "carol@example.test",
    role: "viewer",
    environments: ["production"],
  });
  assert.equal(res.status, 201);
  assert.deepEqual(Object.keys(res.body), ["invitation"]);
  assert.equal(res.body.invitation.email, "carol@example.test");
  // A new link follows the same rule: in production it is never returned.
  const renewed = await owner.json("POST", `/api/projects/${project.id}/invitations/${res.body.invitation.id}/renew`);
  assert.equal(renewed.status, 200);
  assert.deepEqual(Object.keys(renewed.body), ["invitation"]);
});

// ---------------------------------------------------------------------------------------
// Environment access

test("the environment access matrix: implicit for owner and admins, granted or none for the rest", async (t) => {
  const { projectId, owner, admins, members, viewers } = await startTeamOfTwoPerRole(t);
  const res = await admins[0]!.json("GET", `/api/projects/${projectId}/environment-access`);
  assert.equal(res.status, 200);
  const implicit = { development: "implicit", staging: "implicit", production: "implicit" };
  const all = ["secrets:read", "secrets:create", "secrets:update", "secrets:delete"];
  const entry = (c: Client, role: string, secretPermissions: string[], access: Record<string, string>) => ({
    userId: c.user!.id,
    email: c.user!.email,
    role,
    isYou: c === admins[0],
    secretPermissions,
    access,
  });
  assert.deepEqual(res.body, {
    environments: ALL_ENVS,
    members: [
      entry(owner, "owner", all, implicit),
      entry(admins[0]!, "admin", all, implicit),
      entry(admins[1]!, "admin", all, implicit),
      entry(members[0]!, "member", all, { development: "granted", staging: "none", production: "none" }),
      entry(members[1]!, "member", all, { development: "none", staging: "none", production: "none" }),
      entry(viewers[0]!, "viewer", ["secrets:read"], { development: "none", staging: "none", production: "granted" }),
      entry(viewers[1]!, "viewer", ["secrets:read"], { development: "none", staging: "none", production: "none" }),
    ],
  });
  assert.equal((await owner.json("GET", `/api/projects/${projectId}/environment-access`)).status, 200);
  for (const caller of [...members, ...viewers]) {
    const denied = await caller.json("GET", `/api/projects/${projectId}/environment-access`);
    assert.equal(denied.status, 403);
    assert.deepEqual(denied.body, FORBIDDEN);
  }
});

test("granting and revoking access: idempotent, member or viewer only, effective on the next request", async (t) => {
  const { server, projectId, owner, admins, members, viewers } = await startTeamOfTwoPerRole(t, ["development", "production"]);
  const [mia, max] = members as [Client, Client];
  const path = (env: string, c: Client | string) =>
    `/api/projects/${projectId}/environments/${env}/access/${typeof c === "string" ? c : c.user!.id}`;
  const envsOf = async (c: Client) => (await c.json("GET", `/api/projects/${projectId}`)).body.project.environments;

  assert.deepEqual(await envsOf(max), []);
  for (let i = 0; i < 2; i++) {
    const res = await admins[0]!.json("PUT", path("production", max));
    assert.equal(res.status, 200);
    assert.deepEqual(res.body, { ok: true, access: "granted" });
  }
  assert.deepEqual(await envsOf(max), ["production"]);
  assert.deepEqual(await grantsOf(owner, projectId, max.user!.id), ["production"]);
  assert.equal((await owner.json("PUT", path("development", viewers[1]!))).status, 200);
  assert.deepEqual(await envsOf(viewers[1]!), ["development"]);

  for (let i = 0; i < 2; i++) {
    const res = await owner.json("DELETE", path("production", max));
    assert.equal(res.status, 200);
    assert.deepEqual(res.body, { ok: true, access: "none" });
  }
  assert.deepEqual(await envsOf(max), [], "the very next request");
  // Revoking a grant someone never had is fine too.
  assert.deepEqual((await owner.json("DELETE", path("production", mia))).body, { ok: true, access: "none" });
  assert.deepEqual(await envsOf(mia), ["development"]);

  for (const target of [owner, ...admins]) {
    for (const method of ["PUT", "DELETE"]) {
      const res = await admins[1]!.json(method, path("production", target));
      assert.equal(res.status, 400, `${method} ${target.user!.email}`);
      assert.deepEqual(res.body, { error: "Owners and admins already have access to every environment." });
    }
  }
  for (const method of ["PUT", "DELETE"]) {
    const unknownMember = await owner.json(method, path("production", crypto.randomUUID()));
    assert.equal(unknownMember.status, 404);
    assert.deepEqual(unknownMember.body, { error: "Member not found." });
    const outsider = await owner.json(method, path("production", (await server.signIn("otto@example.test")).user!.id));
    assert.deepEqual([outsider.status, outsider.body], [404, { error: "Member not found." }]);
    for (const env of ["staging", "qa", "PRODUCTION"]) {
      const res = await owner.json(method, path(env, mia));
      assert.equal(res.status, 404, `${method} ${env}`);
      assert.deepEqual(res.body, { error: "Environment not found." });
    }
    for (const caller of [mia, max, ...viewers]) {
      const res = await caller.json(method, path("production", max));
      assert.equal(res.status, 403);
      assert.deepEqual(res.body, FORBIDDEN);
    }
  }

  assert.deepEqual(
    (await auditEvents(owner, projectId, "environment_access.")).map((e) => [
      e.action,
      e.category,
      e.actor,
      e.targetType,
      e.targetId,
      e.metadata,
    ]),
    [
      [
        "environment_access.granted",
        "access",
        admins[0]!.user!.id,
        "member",
        max.user!.id,
        { email: "max@example.test", environment: "production" },
      ],
      [
        "environment_access.granted",
        "access",
        owner.user!.id,
        "member",
        viewers[1]!.user!.id,
        { email: "val@example.test", environment: "development" },
      ],
      [
        "environment_access.revoked",
        "access",
        owner.user!.id,
        "member",
        max.user!.id,
        { email: "max@example.test", environment: "production" },
      ],
    ],
  );
});

test("a member losing access mid-way: the next request with an already issued CLI token sees the change", async (t) => {
  const { server, projectId, owner, members } = await startTeamOfTwoPerRole(t);
  const mia = members[0]!;
  const cli = mia.withBearer((await cliLogin(server, mia)).accessToken);
  const envs = async () => (await cli.json("GET", `/api/projects/${projectId}`)).body.project.environments;
  assert.deepEqual(await envs(), ["development"]);
  assert.equal((await owner.json("PUT", `/api/projects/${projectId}/environments/production/access/${mia.user!.id}`)).status, 200);
  assert.deepEqual(await envs(), ["development", "production"]);
  assert.equal((await owner.json("DELETE", `/api/projects/${projectId}/environments/development/access/${mia.user!.id}`)).status, 200);
  assert.deepEqual(await envs(), ["production"]);
  assert.equal((await owner.json("DELETE", `/api/projects/${projectId}/members/${mia.user!.id}`)).status, 200);
  const gone = await cli.json("GET", `/api/projects/${projectId}`);
  assert.equal(gone.status, 404);
  assert.deepEqual(gone.body, NOT_FOUND);
});

// ---------------------------------------------------------------------------------------
// Secret reads follow access changes on the very next request

const NO_DEVELOPMENT = { error: "You do not have access to the development environment of this project." };

test("revoke the grant and the very next secret read answers 403, in the browser and with an already issued CLI token", async (t) => {
  const { server, projectId, owner, admins, members } = await startTeamOfTwoPerRole(t);
  const mia = members[0]!;
  const base = `/api/projects/${projectId}/environments/development/secrets`;
  const created = await owner.json("POST", base, { key: "DATABASE_URL", value: "postgres://mia-may-read-this" });
  assert.equal(created.status, 201, JSON.stringify(created.body));
  const one = `${base}/${created.body.secret.id}`;
  const cli = mia.withBearer((await cliLogin(server, mia)).accessToken);

  for (const caller of [mia, cli]) {
    const read = await caller.json("GET", one);
    assert.equal(read.status, 200);
    assert.equal(read.body.secret.value, "postgres://mia-may-read-this");
    assert.equal((await caller.json("GET", base)).status, 200);
  }

  const revoked = await owner.json("DELETE", `/api/projects/${projectId}/environments/development/access/${mia.user!.id}`);
  assert.equal(revoked.status, 200);
  for (const caller of [mia, cli]) {
    for (const path of [one, base]) {
      const res = await caller.json("GET", path);
      assert.equal(res.status, 403, path);
      assert.deepEqual(res.body, NO_DEVELOPMENT);
    }
  }
  // Only the two reads before the revocation were revealed.
  assert.equal((await auditEvents(owner, projectId, "secret.revealed")).length, 2);

  // Granted again: readable again on the next request.
  assert.equal((await admins[0]!.json("PUT", `/api/projects/${projectId}/environments/development/access/${mia.user!.id}`)).status, 200);
  assert.equal((await cli.json("GET", one)).status, 200);

  // Demoted to viewer: still reads, can no longer write.
  assert.equal((await owner.json("PATCH", `/api/projects/${projectId}/members/${mia.user!.id}`, { role: "viewer" })).status, 200);
  assert.equal((await cli.json("GET", one)).status, 200);
  const write = await cli.json("POST", base, { key: "OTHER", value: "not-allowed-anymore" });
  assert.equal(write.status, 403);

  // Removed: the project no longer exists for her, whatever the credential.
  assert.equal((await owner.json("DELETE", `/api/projects/${projectId}/members/${mia.user!.id}`)).status, 200);
  for (const caller of [mia, cli]) {
    const res = await caller.json("GET", one);
    assert.equal(res.status, 404);
    assert.deepEqual(res.body, NOT_FOUND);
  }
});

test("a demoted admin loses every environment on the very next secret read", async (t) => {
  const { server, projectId, owner, admins } = await startTeamOfTwoPerRole(t);
  const adam = admins[0]!;
  const base = `/api/projects/${projectId}/environments/development/secrets`;
  const created = await owner.json("POST", base, { key: "API_TOKEN", value: "adam-reads-this-once" });
  assert.equal(created.status, 201);
  const one = `${base}/${created.body.secret.id}`;
  const cli = adam.withBearer((await cliLogin(server, adam)).accessToken);
  assert.equal((await cli.json("GET", one)).status, 200);
  assert.equal((await owner.json("PATCH", `/api/projects/${projectId}/members/${adam.user!.id}`, { role: "member" })).status, 200);
  for (const caller of [adam, cli]) {
    const res = await caller.json("GET", one);
    assert.equal(res.status, 403);
    assert.deepEqual(res.body, NO_DEVELOPMENT);
  }
});
