import assert from "node:assert/strict";
import crypto from "node:crypto";
import { type TestContext, test } from "node:test";
import { type FakeVercel, startFakeVercel } from "./fake-vercel.ts";
import { automaticRunElsewhere, type Client, runMain, startServer, type TestServer, waitFor } from "./helpers.ts";
import { addMember, createInvitation } from "./secrets-helpers.ts";
import { legacy as olderServer, storedRows } from "./storage.ts";

// A person who loses a right must not keep acting through what they
// created with it. Pending invitations die with their inviter's right to invite (and are
// refused at acceptance even when they predate that rule); a Vercel connection pauses when
// the person whose token it uses loses integrations:manage.

const GONE = { error: "This invitation is invalid, expired, or already used." };
const PAUSED = {
  error:
    "Vercel syncing is paused: the person who connected it no longer manages this project's integrations. An admin or the owner must reconnect Vercel with their own access token.",
};
const ALL_ENVS = ["development", "staging", "production"];

interface Team {
  server: TestServer;
  projectId: string;
  owner: Client;
  alice: Client;
}

/** An owner and Alice, an admin who joined through an invitation. */
async function ownerAndAdmin(t: TestContext, env: Record<string, string> = {}): Promise<Team> {
  const server = await startServer(t, { env });
  const owner = await server.signIn("owner@example.test");
  const project = await owner.createProject({ name: "api", environments: ALL_ENVS });
  const alice = await server.signIn("alice@example.test");
  await addMember(owner, alice, project.id, "admin");
  return { server, projectId: project.id, owner, alice };
}

interface Pending {
  id: string;
  email: string;
  token: string;
}

/** Alice invites one admin and one member holding production, the owner one viewer. */
async function inviteAround(team: Team): Promise<{ byAlice: Pending[]; byOwner: Pending }> {
  const make = async (by: Client, email: string, role: string, environments?: string[]): Promise<Pending> => {
    const { invitation, token } = await createInvitation(by, team.projectId, email, role, environments);
    return { id: invitation.id as string, email, token };
  };
  return {
    byAlice: [
      await make(team.alice, "new-admin@example.test", "admin"),
      await make(team.alice, "new-member@example.test", "member", ["production"]),
    ],
    byOwner: await make(team.owner, "new-viewer@example.test", "viewer"),
  };
}

async function listedInvitations(team: Team): Promise<string[]> {
  const res = await team.owner.json("GET", `/api/projects/${team.projectId}/invitations`);
  assert.equal(res.status, 200, JSON.stringify(res.body));
  return (res.body.invitations as { email: string }[]).map((i) => i.email).sort();
}

async function memberEmails(team: Team): Promise<string[]> {
  const res = await team.owner.json("GET", `/api/projects/${team.projectId}/members`);
  assert.equal(res.status, 200);
  return (res.body.members as { email: string }[]).map((m) => m.email).sort();
}

async function auditOf(team: Team, action: string): Promise<any[]> {
  const res = await team.owner.json("GET", `/api/projects/${team.projectId}/audit?action=${action}`);
  assert.equal(res.status, 200, JSON.stringify(res.body));
  return (res.body.events as any[]).reverse();
}

/** Each invitee signs in with the invited address and tries the token: 410, and no membership. */
async function assertRefused(team: Team, invitations: Pending[]): Promise<void> {
  const before = await memberEmails(team);
  for (const invitation of invitations) {
    const invitee = await team.server.signIn(invitation.email);
    const res = await invitee.json("POST", "/api/invitations/accept", { token: invitation.token });
    assert.equal(res.status, 410, `${invitation.email}: ${JSON.stringify(res.body)}`);
    assert.deepEqual(res.body, GONE);
    const project = await invitee.json("GET", `/api/projects/${team.projectId}`);
    assert.equal(project.status, 404, `${invitation.email} must not have become a member`);
  }
  assert.deepEqual(await memberEmails(team), before);
}

// ---------------------------------------------------------------------------------------
// Invitations

const LOSSES: { name: string; cause: string; act(team: Team): Promise<{ status: number; body: unknown }>; actor: "owner" | "alice" }[] = [
  {
    name: "demoted to member",
    cause: "role_changed",
    actor: "owner",
    act: (team) => team.owner.json("PATCH", `/api/projects/${team.projectId}/members/${team.alice.user!.id}`, { role: "member" }),
  },
  {
    name: "demoted to viewer",
    cause: "role_changed",
    actor: "owner",
    act: (team) => team.owner.json("PATCH", `/api/projects/${team.projectId}/members/${team.alice.user!.id}`, { role: "viewer" }),
  },
  {
    name: "removed",
    cause: "removed",
    actor: "owner",
    act: (team) => team.owner.json("DELETE", `/api/projects/${team.projectId}/members/${team.alice.user!.id}`),
  },
  {
    name: "leaving",
    cause: "left",
    actor: "alice",
    act: (team) => team.alice.json("DELETE", `/api/projects/${team.projectId}/members/${team.alice.user!.id}`),
  },
];

for (const loss of LOSSES) {
  test(`an admin ${loss.name}: their pending invitations are voided and audited, and their tokens answer 410`, async (t) => {
    const team = await ownerAndAdmin(t);
    const { byAlice, byOwner } = await inviteAround(team);
    assert.deepEqual(await listedInvitations(team), [...byAlice.map((i) => i.email), byOwner.email].sort());

    const res = await loss.act(team);
    assert.equal(res.status, 200, JSON.stringify(res.body));

    assert.deepEqual(await listedInvitations(team), [byOwner.email], "only the owner's invitation is left");
    const revoked = await auditOf(team, "invitation.revoked");
    assert.deepEqual(
      revoked
        .map((e) => ({ targetId: e.targetId, category: e.category, actor: e.actor.userId, metadata: e.metadata }))
        .sort((a, b) => a.targetId.localeCompare(b.targetId)),
      byAlice
        .map((i, n) => ({
          targetId: i.id,
          category: "access",
          actor: (loss.actor === "owner" ? team.owner : team.alice).user!.id,
          metadata: {
            email: i.email,
            role: n === 0 ? "admin" : "member",
            reason: "inviter_lost_access",
            inviter: team.alice.user!.id,
            cause: loss.cause,
          },
        }))
        .sort((a, b) => a.targetId.localeCompare(b.targetId)),
    );
    await assertRefused(team, byAlice);

    // The owner's invitation is untouched and still works.
    const viewer = await team.server.signIn(byOwner.email);
    const accepted = await viewer.json("POST", "/api/invitations/accept", { token: byOwner.token });
    assert.equal(accepted.status, 200, JSON.stringify(accepted.body));
    assert.deepEqual(accepted.body, { projectId: team.projectId, role: "viewer" });
  });
}

test("a role change that leaves the right to invite voids nothing: promoting a member, then the admin who invited stays admin", async (t) => {
  const team = await ownerAndAdmin(t);
  const bob = await team.server.signIn("bob@example.test");
  await addMember(team.owner, bob, team.projectId, "member");
  const { byAlice } = await inviteAround(team);
  const promoted = await team.owner.json("PATCH", `/api/projects/${team.projectId}/members/${bob.user!.id}`, { role: "admin" });
  assert.equal(promoted.status, 200);
  // Demoting Bob (who invited no one) touches nobody else's invitations.
  const demoted = await team.owner.json("PATCH", `/api/projects/${team.projectId}/members/${bob.user!.id}`, { role: "viewer" });
  assert.equal(demoted.status, 200);
  assert.equal((await listedInvitations(team)).length, 3);
  assert.deepEqual(await auditOf(team, "invitation.revoked"), []);
  const invitee = await team.server.signIn(byAlice[1]!.email);
  const accepted = await invitee.json("POST", "/api/invitations/accept", { token: byAlice[1]!.token });
  assert.deepEqual([accepted.status, accepted.body], [200, { projectId: team.projectId, role: "member" }]);
});

test("acceptance re-checks the inviter: an invitation from before voiding existed, or whose inviter is gone, answers 410 and changes nothing", async (t) => {
  const team = await ownerAndAdmin(t);
  const { byAlice, byOwner } = await inviteAround(team);
  // The state an older server left behind: Alice demoted without her invitations being voided.
  // No API path reaches it any more, so it is written directly.
  olderServer.setRoleWithoutVoiding(team.server, team.projectId, team.alice.user!.id, "member");
  assert.equal((await listedInvitations(team)).length, 3, "still pending, as an older server left them");

  await assertRefused(team, byAlice);
  assert.equal((await listedInvitations(team)).length, 3, "a refused acceptance changes nothing");
  assert.deepEqual(
    (await auditOf(team, "invitation.accepted")).map((e) => e.metadata.email),
    ["alice@example.test"],
    "no acceptance but Alice's own, from before",
  );

  // An invitation whose inviter no longer exists (invited_by emptied) is refused too.
  olderServer.clearInviter(team.server, byOwner.id);
  await assertRefused(team, [byOwner]);
});

// ---------------------------------------------------------------------------------------
// Vercel

function newToken(): string {
  return `vcp_${crypto.randomBytes(18).toString("hex")}`;
}

interface VercelTeam extends Team {
  fake: FakeVercel;
  base: string;
}

/** Alice (admin) connects Vercel with her token and links prj_web: production → production. */
async function connectedByAlice(t: TestContext, env: Record<string, string> = {}): Promise<VercelTeam> {
  const fake = await startFakeVercel();
  t.after(() => fake.stop());
  const token = newToken();
  fake.addToken(token);
  fake.addProject("prj_web", "web");
  const team = await ownerAndAdmin(t, { VERCEL_API_URL: fake.url, SYNC_DEBOUNCE_MS: "40", VERCEL_RETRY_BASE_MS: "5", ...env });
  const base = `/api/projects/${team.projectId}/integrations/hosting`;
  const connected = await team.alice.json("POST", base, { token });
  assert.equal(connected.status, 201, JSON.stringify(connected.body));
  assert.deepEqual(
    [connected.body.connectedBy, connected.body.paused, connected.body.pausedReason],
    [{ userId: team.alice.user!.id, email: "alice@example.test" }, false, null],
  );
  const linked = await team.alice.json("PUT", base, { hostProjectId: "prj_web", mappings: { production: "production" } });
  assert.equal(linked.status, 200, JSON.stringify(linked.body));
  return { ...team, fake, base };
}

async function addSecret(team: Team, key: string, value: string): Promise<void> {
  const res = await team.owner.json("POST", `/api/projects/${team.projectId}/environments/production/secrets`, { key, value });
  assert.equal(res.status, 201, JSON.stringify(res.body));
}

test("Vercel: the admin who connected is demoted; syncing pauses (visible, audited, nothing sent) until the owner reconnects", async (t) => {
  const team = await connectedByAlice(t);
  const demoted = await team.owner.json("PATCH", `/api/projects/${team.projectId}/members/${team.alice.user!.id}`, { role: "member" });
  assert.equal(demoted.status, 200);

  const connection = await team.owner.json("GET", team.base);
  assert.equal(connection.status, 200);
  assert.equal(connection.body.paused, true);
  assert.equal(connection.body.pausedReason, "connector_role_changed");
  assert.match(connection.body.pausedAt, /^\d{4}-\d{2}-\d{2}T/);
  assert.deepEqual(connection.body.connectedBy, { userId: team.alice.user!.id, email: "alice@example.test" });
  assert.equal(connection.body.status, "active", "status keeps its documented values; paused is its own field");
  assert.equal(JSON.stringify(connection.body).includes("vcp_"), false, "never the token");

  const paused = await auditOf(team, "integration.paused");
  assert.deepEqual(
    paused.map((e) => ({ category: e.category, actor: e.actor.userId, metadata: e.metadata })),
    [
      {
        category: "integrations",
        actor: team.owner.user!.id,
        metadata: { provider: "vercel", reason: "connector_lost_access", connectedBy: team.alice.user!.id, cause: "role_changed" },
      },
    ],
  );

  // Nothing reaches Vercel with Alice's token: no manual sync, no automatic one, no listing.
  const requestsBefore = team.fake.requests.length;
  const sync = await team.owner.json("POST", `${team.base}/sync`);
  assert.deepEqual([sync.status, sync.body], [400, PAUSED]);
  const redeploy = await team.owner.json("POST", `${team.base}/sync`, { redeploy: true });
  assert.deepEqual([redeploy.status, redeploy.body], [400, PAUSED]);
  const options = await team.owner.json("GET", `${team.base}/options`);
  assert.deepEqual([options.status, options.body], [400, PAUSED]);
  const relink = await team.owner.json("PUT", team.base, { hostProjectId: "prj_web", mappings: { production: "production" } });
  assert.deepEqual([relink.status, relink.body], [400, PAUSED]);
  await addSecret(team, "PAUSED_KEY", "value-while-paused");
  const marker = await automaticRunElsewhere(team.owner, team.fake);
  assert.deepEqual(
    team.fake.requests.slice(requestsBefore).filter((r) => r.authorization !== `Bearer ${marker.token}`),
    [],
    "no request reached Vercel while paused",
  );
  assert.equal(team.fake.envFor("prj_web", "PAUSED_KEY", "production"), undefined);
  const waiting = await team.owner.json("GET", team.base);
  assert.equal(waiting.body.pending, 1, "the change waits for the reconnect");
  assert.equal(waiting.body.syncing, false);

  // The security overview shows it, with a note saying what to do.
  const overview = await team.owner.json("GET", `/api/projects/${team.projectId}/security`);
  assert.equal(overview.status, 200);
  assert.equal(overview.body.integrations.hosting.paused, true);
  assert.equal(overview.body.integrations.hosting.pausedReason, "connector_role_changed");
  assert.deepEqual(overview.body.integrations.hosting.connectedBy, { userId: team.alice.user!.id, email: "alice@example.test" });
  assert.ok(
    (overview.body.notes as string[]).some((n) => n.startsWith("Vercel syncing is paused: alice@example.test no longer manages")),
    JSON.stringify(overview.body.notes),
  );

  // The owner reconnects with a token of their own: the pause ends and the waiting change goes out.
  const ownerToken = newToken();
  team.fake.addToken(ownerToken);
  const reconnected = await team.owner.json("POST", team.base, { token: ownerToken });
  assert.equal(reconnected.status, 201, JSON.stringify(reconnected.body));
  assert.deepEqual(
    [
      reconnected.body.paused,
      reconnected.body.pausedAt,
      reconnected.body.pausedReason,
      reconnected.body.connectedBy,
      reconnected.body.status,
    ],
    [false, null, null, { userId: team.owner.user!.id, email: "owner@example.test" }, "active"],
  );
  const connectedEvents = await auditOf(team, "integration.connected");
  assert.deepEqual(connectedEvents.at(-1).metadata, { provider: "vercel", teamId: null, resumed: true });
  await waitFor("the automatic sync after the reconnect", async () => team.fake.envFor("prj_web", "PAUSED_KEY", "production"));
  assert.equal(team.fake.envFor("prj_web", "PAUSED_KEY", "production")!.value, "value-while-paused");
  const afterSync = team.fake.requests.filter((r) => r.authorization !== undefined).slice(-1)[0]!;
  assert.equal(afterSync.authorization, `Bearer ${ownerToken}`, "the sync uses the owner's token now");
  const cleared = await team.owner.json("GET", `/api/projects/${team.projectId}/security`);
  assert.equal(cleared.body.integrations.hosting.paused, false);
  assert.equal(
    (cleared.body.notes as string[]).some((n) => n.startsWith("Vercel syncing is paused")),
    false,
  );
});

test("Vercel: a sync under way when the connector is demoted stops before its next call, and calls no deploy hook", async (t) => {
  // Only the manual syncs below run.
  const team = await connectedByAlice(t, { SYNC_DEBOUNCE_MS: "600000" });
  const hooked = await team.alice.json("PUT", team.base, {
    hostProjectId: "prj_web",
    mappings: { production: "production" },
    deployHookUrl: team.fake.addHook("prj_web"),
  });
  assert.equal(hooked.status, 200, JSON.stringify(hooked.body));
  const secrets = `/api/projects/${team.projectId}/environments/production/secrets`;
  const ids: string[] = [];
  for (const key of ["GONE_1", "GONE_2", "GONE_3"])
    ids.push((await team.owner.json("POST", secrets, { key, value: `${key}-value` })).body.secret.id);
  assert.equal((await team.owner.json("POST", `${team.base}/sync`)).body.summary.created, 3);
  for (const id of ids) assert.equal((await team.owner.json("DELETE", `${secrets}/${id}`)).status, 200);

  // The run's first delete is at Vercel when Alice is demoted.
  const held = team.fake.hold((r) => r.method === "DELETE");
  const run = team.owner.json("POST", `${team.base}/sync`, { redeploy: true });
  await held.reached;
  const demoted = await team.owner.json("PATCH", `/api/projects/${team.projectId}/members/${team.alice.user!.id}`, { role: "member" });
  assert.equal(demoted.status, 200);
  const sent = team.fake.requests.length;
  held.release();

  const answer = await run;
  assert.deepEqual([answer.status, answer.body], [400, PAUSED]);
  assert.deepEqual(
    team.fake.requests.slice(sent).map((r) => `${r.method} ${r.path}`),
    [],
    "nothing more reached Vercel with Alice's token",
  );
  assert.deepEqual(team.fake.hookCalls, [], "no redeploy");
  assert.equal(team.fake.envs("prj_web").length, 2, "the one delete under way happened");
  const view = (await team.owner.json("GET", team.base)).body;
  assert.deepEqual([view.paused, view.syncing, view.lastRun.status, view.lastError], [true, false, "failed", PAUSED.error]);
  assert.equal(view.pending, 3, "what was not sent waits for the reconnect");
});

test("Vercel: a sync paused while it lists the vars claims and creates nothing", async (t) => {
  const team = await connectedByAlice(t, { SYNC_DEBOUNCE_MS: "600000" });
  const secrets = `/api/projects/${team.projectId}/environments/production/secrets`;
  assert.equal((await team.owner.json("POST", secrets, { key: "NEW_ONE", value: "new-value" })).status, 201);

  const held = team.fake.hold((r) => r.method === "GET" && r.path.includes("/env"));
  const run = team.owner.json("POST", `${team.base}/sync`);
  await held.reached;
  const demoted = await team.owner.json("PATCH", `/api/projects/${team.projectId}/members/${team.alice.user!.id}`, { role: "member" });
  assert.equal(demoted.status, 200);
  held.release();

  const answer = await run;
  assert.deepEqual([answer.status, answer.body], [400, PAUSED]);
  assert.deepEqual(
    team.fake.requests.filter((r) => r.method === "POST").map((r) => r.path),
    [],
    "no create reached Vercel with Alice's token",
  );
  const view = (await team.owner.json("GET", team.base)).body;
  assert.deepEqual([view.paused, view.syncing, view.pending], [true, false, 1]);
});

test("Vercel: removing or losing the connector pauses only their connection; one without a recorded connector keeps running", async (t) => {
  const team = await connectedByAlice(t);
  // Another admin changing roles is not Alice: nothing pauses.
  const bob = await team.server.signIn("bob@example.test");
  await addMember(team.owner, bob, team.projectId, "admin");
  assert.equal((await team.owner.json("PATCH", `/api/projects/${team.projectId}/members/${bob.user!.id}`, { role: "member" })).status, 200);
  assert.equal((await team.owner.json("GET", team.base)).body.paused, false);

  const removed = await team.owner.json("DELETE", `/api/projects/${team.projectId}/members/${team.alice.user!.id}`);
  assert.equal(removed.status, 200);
  const connection = await team.owner.json("GET", team.base);
  assert.deepEqual([connection.body.paused, connection.body.pausedReason], [true, "connector_removed"]);
  assert.deepEqual(connection.body.connectedBy, { userId: team.alice.user!.id, email: "alice@example.test" });

  // A connection made before connected_by was recorded has no one to check, and keeps syncing.
  const legacy = await connectedByAlice(t);
  olderServer.clearConnector(legacy.server, legacy.projectId);
  assert.equal((await legacy.alice.json("DELETE", `/api/projects/${legacy.projectId}/members/${legacy.alice.user!.id}`)).status, 200);
  const kept = await legacy.owner.json("GET", legacy.base);
  assert.deepEqual([kept.body.paused, kept.body.connectedBy], [false, null]);
  const synced = await legacy.owner.json("POST", `${legacy.base}/sync`);
  assert.equal(synced.status, 200, JSON.stringify(synced.body));
});

test("disabling a user (users disable) voids their invitations and pauses the Vercel connection they made, in every project", async (t) => {
  const team = await connectedByAlice(t);
  const { byAlice, byOwner } = await inviteAround(team);
  // A project of her own too, where she invited someone and connected Vercel.
  const own = await team.alice.createProject({ name: "alices-own", environments: ["production"] });
  const ownInvitation = await createInvitation(team.alice, own.id, "her-invitee@example.test", "member", ["production"]);
  const ownBase = `/api/projects/${own.id}/integrations/hosting`;
  const ownToken = newToken();
  team.fake.addToken(ownToken);
  assert.equal((await team.alice.json("POST", ownBase, { token: ownToken })).status, 201);
  assert.equal((await team.alice.json("PUT", ownBase, { hostProjectId: "prj_web", mappings: { production: "preview" } })).status, 200);

  const disabled = await runMain(["users", "disable", "alice@example.test"], team.server.env);
  assert.equal(disabled.code, 0, disabled.stderr);
  assert.deepEqual(storedRows(team.server, "invitations", { project_id: own.id }), [], "her own project's invitation is void too");
  const ownAccept = await (await team.server.signIn("her-invitee@example.test")).json("POST", "/api/invitations/accept", {
    token: ownInvitation.token,
  });
  assert.equal(ownAccept.status, 410);
  assert.notEqual(storedRows(team.server, "integrations", { project_id: own.id })[0]?.paused_at ?? null, null, "and its connection paused");

  assert.deepEqual(await listedInvitations(team), [byOwner.email]);
  const revoked = await auditOf(team, "invitation.revoked");
  assert.deepEqual(
    revoked.map((e) => [e.actor, e.metadata.reason, e.metadata.cause]),
    [
      [null, "inviter_lost_access", "disabled"],
      [null, "inviter_lost_access", "disabled"],
    ],
  );
  await assertRefused(team, byAlice);

  const connection = await team.owner.json("GET", team.base);
  assert.deepEqual([connection.body.paused, connection.body.pausedReason], [true, "connector_disabled"]);
  const requestsBefore = team.fake.requests.length;
  await addSecret(team, "AFTER_DISABLE", "value-after-disable");
  const marker = await automaticRunElsewhere(team.owner, team.fake);
  assert.deepEqual(
    team.fake.requests.slice(requestsBefore).filter((r) => r.authorization !== `Bearer ${marker.token}`),
    [],
    "the server process sees the pause another process wrote",
  );
  const sync = await team.owner.json("POST", `${team.base}/sync`);
  assert.deepEqual([sync.status, sync.body], [400, PAUSED]);
});
