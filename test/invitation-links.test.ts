// What an invitation link shows before sign-in (POST
// /api/invitations/preview) and a new link for a pending invitation (POST
// /api/projects/<id>/invitations/<invitation_id>/renew).
import assert from "node:assert/strict";
import { test } from "node:test";
import { auditEvents, type Client, cliClient, startServer, type TestServer } from "./helpers.ts";
import { createInvitation } from "./secrets-helpers.ts";

const GONE = { error: "This invitation is invalid, expired, or already used." };
const NOT_FOUND_INVITATION = { error: "Invitation not found." };
const DAY_MS = 24 * 60 * 60 * 1000;

function preview(server: TestServer, token: unknown, client: Client = server.client()) {
  return client.json("POST", "/api/invitations/preview", { token });
}

/** The project's events of exactly `action`, oldest first, as `reader` (an owner or admin) reads the log. */
async function auditActions(reader: Client, projectId: string, action: string) {
  return (await auditEvents(reader, projectId, action))
    .filter((e) => e.action === action)
    .map(({ category, actor, targetId, metadata }) => ({ category, actor, targetId, metadata }));
}

async function setup(t: Parameters<typeof startServer>[0]) {
  const server = await startServer(t);
  const alice = await server.signIn("alice@example.test", "Alice");
  const project = await alice.createProject({ name: "checkout-api", environments: ["development", "staging", "production"] });
  return { server, alice, project };
}

test("a valid invitation link previews who invited whom to what, signed out, and changes nothing", async (t) => {
  const { server, alice, project } = await setup(t);
  const { invitation, token } = await createInvitation(alice, project.id, "bob@example.test", "member", ["staging", "development"]);

  const res = await preview(server, token);
  assert.equal(res.status, 200);
  assert.deepEqual(res.body, {
    projectName: "checkout-api",
    invitedBy: { name: "Alice", email: "alice@example.test" },
    role: "member",
    environments: ["development", "staging"],
    expiresAt: invitation.expiresAt,
  });
  // Signed in as someone else: the same answer (the token is the credential), no state change.
  const carol = await server.signIn("carol@example.test");
  assert.deepEqual((await preview(server, token, carol)).body, res.body);

  const events = await auditEvents(alice, project.id);
  assert.equal((await preview(server, token)).status, 200);
  assert.deepEqual(await auditEvents(alice, project.id), events);
  assert.deepEqual((await alice.json("GET", `/api/projects/${project.id}/invitations`)).body, { invitations: [invitation] });

  // Still acceptable after previews.
  const bob = await server.signIn("bob@example.test");
  assert.equal((await bob.json("POST", "/api/invitations/accept", { token })).status, 200);

  // An inviter without a name is shown by e-mail only; an admin invitation lists no environments.
  const dan = await server.signIn("dan@example.test");
  const danProject = await dan.createProject({ name: "billing", environments: ["production"] });
  const adminToken = (await createInvitation(dan, danProject.id, "erin@example.test", "admin")).token;
  const admin = await preview(server, adminToken);
  assert.equal(admin.status, 200);
  assert.deepEqual(admin.body.invitedBy, { email: "dan@example.test" });
  assert.deepEqual(admin.body.environments, []);
  assert.equal(admin.body.role, "admin");
});

test("preview answers acceptance's 410 for used, expired, revoked and unknown tokens", async (t) => {
  const { server, alice, project } = await setup(t);
  const used = await createInvitation(alice, project.id, "bob@example.test", "viewer");
  const bob = await server.signIn("bob@example.test");
  assert.equal((await bob.json("POST", "/api/invitations/accept", { token: used.token })).status, 200);

  const revoked = await createInvitation(alice, project.id, "rev@example.test", "viewer");
  assert.equal((await alice.json("DELETE", `/api/projects/${project.id}/invitations/${revoked.invitation.id}`)).status, 200);

  const expired = await createInvitation(alice, project.id, "exp@example.test", "member");
  server.clock.advance(7 * DAY_MS);
  // A week later the browser session has lapsed: Alice signs in again.
  const aliceAgain = await server.signIn("alice@example.test", "Alice");
  const fresh = await createInvitation(aliceAgain, project.id, "fresh@example.test", "member");

  const cases: [string, unknown][] = [
    ["used", used.token],
    ["revoked", revoked.token],
    ["expired", expired.token],
    ["garbage", "not-a-token"],
    ["long garbage", "x".repeat(512)],
  ];
  for (const [name, token] of cases) {
    const res = await preview(server, token);
    assert.equal(res.status, 410, name);
    assert.deepEqual(res.body, GONE, name);
  }
  assert.equal((await preview(server, fresh.token)).status, 200);
  for (const body of [{}, { token: "" }, { token: 5 }, { token: "x".repeat(513) }, { token: "a", extra: 1 }]) {
    const res = await server.client().json("POST", "/api/invitations/preview", body);
    assert.equal(res.status, 400, JSON.stringify(body));
    assert.deepEqual(res.body, { error: "Send the invitation token as { token }." });
  }
});

test("preview is rate limited per address", async (t) => {
  const { server } = await setup(t);
  // Signed in or not, one address shares the count.
  const bob = await server.signIn("bob@example.test");
  for (let i = 0; i < 20; i++) assert.equal((await preview(server, `guess-${i}`, i % 2 ? bob : server.client())).status, 410);
  assert.equal((await preview(server, "guess-20")).status, 429);
  assert.equal((await preview(server, "guess-21", bob)).status, 429);
});

test("a new link replaces the old one, is created anew (its 7 days start again) and is audited", async (t) => {
  const { server, alice: before, project } = await setup(t);
  const { invitation, token } = await createInvitation(before, project.id, "bob@example.test", "member", ["production"]);
  server.clock.advance(8 * DAY_MS);
  // A week later the browser session has lapsed: Alice signs in again.
  const alice = await server.signIn("alice@example.test", "Alice");
  assert.equal((await alice.json("GET", `/api/projects/${project.id}/invitations`)).body.invitations[0].expired, true);

  const res = await alice.json("POST", `/api/projects/${project.id}/invitations/${invitation.id}/renew`);
  assert.equal(res.status, 200, JSON.stringify(res.body));
  const { createdAt, expiresAt } = res.body.invitation as { createdAt: string; expiresAt: string };
  assert.ok(Math.abs(Date.parse(createdAt) - server.clock.now().getTime()) < 5000, "created now");
  assert.equal(Date.parse(expiresAt) - Date.parse(createdAt), 7 * DAY_MS, "api.md: expiry is 7 days after creation");
  assert.deepEqual(res.body.invitation, { ...invitation, createdAt, expiresAt, expired: false });
  const newToken = new URL(res.body.devAcceptUrl).hash.slice(1);
  assert.match(res.body.devAcceptUrl, new RegExp(`^${server.env.APP_URL}/invite#[A-Za-z0-9_-]{43}$`));
  assert.notEqual(newToken, token);
  assert.deepEqual((await alice.json("GET", `/api/projects/${project.id}/invitations`)).body, { invitations: [res.body.invitation] });

  const bob = await server.signIn("bob@example.test");
  assert.deepEqual((await preview(server, token)).body, GONE);
  const old = await bob.json("POST", "/api/invitations/accept", { token });
  assert.equal(old.status, 410);
  assert.deepEqual(old.body, GONE);
  assert.equal((await preview(server, newToken)).body.expiresAt, expiresAt);
  assert.deepEqual((await bob.json("POST", "/api/invitations/accept", { token: newToken })).body, {
    projectId: project.id,
    role: "member",
  });

  const events = await auditActions(alice, project.id, "invitation.link_renewed");
  assert.deepEqual(events, [
    {
      category: "access",
      actor: alice.user!.id,
      targetId: invitation.id,
      metadata: { email: "bob@example.test", role: "member", expiresAt },
    },
  ]);
  assert.ok(!JSON.stringify(events).includes(newToken), "the token is never audited");

  // Used now: no new link.
  const again = await alice.json("POST", `/api/projects/${project.id}/invitations/${invitation.id}/renew`);
  assert.equal(again.status, 404);
  assert.deepEqual(again.body, NOT_FOUND_INVITATION);
});

test("a new link needs members:invite in the project, a browser session and an invitation of this project", async (t) => {
  const { server, alice, project } = await setup(t);
  const { invitation } = await createInvitation(alice, project.id, "new@example.test", "viewer");
  const join = async (email: string, role: string) => {
    const { token } = await createInvitation(alice, project.id, email, role);
    const client = await server.signIn(email);
    assert.equal((await client.json("POST", "/api/invitations/accept", { token })).status, 200);
    return client;
  };
  const admin = await join("adam@example.test", "admin");
  const member = await join("mia@example.test", "member");
  const viewer = await join("vic@example.test", "viewer");
  const outsider = await server.signIn("otto@example.test");
  const other = await outsider.createProject({ name: "other", environments: ["development"] });
  const path = (projectId: string, id: string) => `/api/projects/${projectId}/invitations/${id}/renew`;

  const cases: [string, Client, string, number, unknown][] = [
    ["member", member, path(project.id, invitation.id), 403, { error: "You do not have permission to do this in this project." }],
    ["viewer", viewer, path(project.id, invitation.id), 403, { error: "You do not have permission to do this in this project." }],
    ["non-member", outsider, path(project.id, invitation.id), 404, { error: "Project not found." }],
    ["invitation of another project", outsider, path(other.id, invitation.id), 404, NOT_FOUND_INVITATION],
    ["unknown id", admin, path(project.id, "00000000-0000-4000-8000-000000000000"), 404, NOT_FOUND_INVITATION],
    ["signed out", server.client(), path(project.id, invitation.id), 401, undefined],
    [
      "a CLI token of the owner",
      await cliClient(server, alice),
      path(project.id, invitation.id),
      403,
      { error: "This action needs a browser session; CLI tokens cannot be used here." },
    ],
  ];
  for (const [name, client, url, status, body] of cases) {
    const res = await client.json("POST", url);
    assert.equal(res.status, status, name);
    if (body) assert.deepEqual(res.body, body, name);
  }
  assert.deepEqual(await auditActions(alice, project.id, "invitation.link_renewed"), []);
  const ok = await admin.json("POST", path(project.id, invitation.id));
  assert.equal(ok.status, 200);
  assert.equal((await auditActions(alice, project.id, "invitation.link_renewed"))[0]!.actor, admin.user!.id);
});
