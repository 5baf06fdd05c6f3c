import assert from "node:assert/strict";
import type { AddressInfo } from "node:net";
import { type TestContext, test } from "node:test";
import { SMTPServer } from "smtp-server";
import { auditEvents, type Client, cliClient, freePort, runMain, startServer, type TestServer } from "./helpers.ts";
import { failWritesTo, storedRows } from "./storage.ts";

const PASSWORD = "a long enough password";

/** A production server with local accounts and a signed-in first account (the admin). */
async function productionServer(t: TestContext, env: Record<string, string> = {}) {
  const server = await startServer(t, { env: { NODE_ENV: "production", AUTH_PROVIDER: "local", ...env } });
  const line = server.logs.find((l) => l.includes("No account exists yet"))!;
  const setupToken = line.match(/\/set-password#([A-Za-z0-9_-]+)/)![1]!;
  // The setup token is logged on purpose, so it bypasses the helpers' leak-scanned client.
  const res = await fetch(`${server.url}/api/auth/local/set-password`, {
    method: "POST",
    headers: { "content-type": "application/json", origin: server.origin },
    body: JSON.stringify({ token: setupToken, email: "owner@example.com", name: "Olga Owner", password: PASSWORD }),
  });
  assert.equal(res.status, 200);
  const owner = server.client();
  assert.equal((await owner.json("POST", "/api/auth/local/sign-in", { email: "owner@example.com", password: PASSWORD })).status, 200);
  return { server, owner };
}

/** `users add` + the link: a local account whose e-mail counts as verified. */
async function addUser(server: TestServer, email: string): Promise<Client> {
  const added = await runMain(["users", "add", email], server.env);
  assert.equal(added.code, 0, added.stderr);
  const token = added.stdout.match(/\/set-password#([A-Za-z0-9_-]+)/)![1]!;
  const client = server.client();
  assert.equal((await client.json("POST", "/api/auth/local/set-password", { token, password: PASSWORD })).status, 200);
  return client;
}

async function invite(owner: Client, projectId: string, email: string, role = "member", environments?: string[]) {
  const res = await owner.json("POST", `/api/projects/${projectId}/invitations`, {
    email,
    role,
    ...(environments ? { environments } : {}),
  });
  assert.equal(res.status, 201, JSON.stringify(res.body));
  return res.body;
}

test("a signed-in user sees their pending invitations and accepts one with no token, in production", async (t) => {
  const { server, owner } = await productionServer(t);
  const project = await owner.createProject({ name: "payments", environments: ["development", "production"] });
  const bob = await addUser(server, "bob@example.com");
  const carol = await addUser(server, "carol@example.com");

  const created = await invite(owner, project.id, "Bob@Example.com", "member", ["development"]);
  assert.deepEqual(Object.keys(created), ["invitation"], "no link in production");
  assert.equal(created.invitation.delivery, undefined, "no mail configured, no delivery field");

  const list = await bob.json("GET", "/api/invitations");
  assert.equal(list.status, 200);
  assert.deepEqual(list.body, {
    emailVerified: true,
    invitations: [
      {
        id: created.invitation.id,
        project: { id: project.id, name: "payments" },
        role: "member",
        environments: ["development"],
        invitedBy: { email: "owner@example.com", name: "Olga Owner" },
        createdAt: created.invitation.createdAt,
        expiresAt: created.invitation.expiresAt,
      },
    ],
  });
  assert.deepEqual((await carol.json("GET", "/api/invitations")).body, { emailVerified: true, invitations: [] });

  // Someone else's invitation, an unknown id and a malformed id all look the same.
  const notFound = { error: "Invitation not found." };
  const byCarol = await carol.json("POST", `/api/invitations/${created.invitation.id}/accept`);
  assert.deepEqual([byCarol.status, byCarol.body], [404, notFound]);
  const unknown = await bob.json("POST", "/api/invitations/00000000-0000-4000-8000-000000000000/accept");
  assert.deepEqual([unknown.status, unknown.body], [404, notFound]);
  assert.equal((await bob.json("POST", "/api/invitations/not-an-id/accept")).status, 404);
  assert.equal((await server.client().json("GET", "/api/invitations")).status, 401);

  const accepted = await bob.json("POST", `/api/invitations/${created.invitation.id}/accept`);
  assert.deepEqual([accepted.status, accepted.body], [200, { projectId: project.id, role: "member" }]);
  assert.equal((await bob.json("GET", `/api/projects/${project.id}`)).status, 200);
  const members = await owner.json("GET", `/api/projects/${project.id}/environment-access`);
  const bobAccess = members.body.members.find((m: { email: string }) => m.email === "bob@example.com");
  assert.deepEqual(bobAccess.access, { development: "granted", production: "none" });
  const audit = await auditEvents(owner, project.id, "invitation.accepted");
  const bobId = (await bob.json("GET", "/api/auth/me")).body.user.id;
  assert.deepEqual(
    audit.map((e) => e.actor),
    [bobId],
  );

  // Once only, and gone from the list.
  assert.deepEqual((await bob.json("GET", "/api/invitations")).body, { emailVerified: true, invitations: [] });
  const again = await bob.json("POST", `/api/invitations/${created.invitation.id}/accept`);
  assert.deepEqual([again.status, again.body], [410, { error: "This invitation is invalid, expired, or already used." }]);
});

test("invitations list: expired ones disappear and cannot be accepted; CLI tokens are refused", async (t) => {
  const { server, owner } = await productionServer(t);
  const project = await owner.createProject({ name: "api", environments: ["production"] });
  const dana = await addUser(server, "dana@example.com");
  const created = await invite(owner, project.id, "dana@example.com", "viewer");
  assert.equal((await dana.json("GET", "/api/invitations")).body.invitations.length, 1);

  // CLI token of Dana: browser-only endpoints answer 403.
  const cli = await cliClient(server, dana, "dana laptop");
  assert.equal((await cli.json("GET", "/api/invitations")).status, 403);
  assert.equal((await cli.json("POST", `/api/invitations/${created.invitation.id}/accept`)).status, 403);

  server.clock.advance(7 * 24 * 60 * 60 * 1000);
  // Seven idle days end the browser session too: sign in again.
  assert.equal((await dana.json("POST", "/api/auth/local/sign-in", { email: "dana@example.com", password: PASSWORD })).status, 200);
  assert.deepEqual((await dana.json("GET", "/api/invitations")).body, { emailVerified: true, invitations: [] });
  const late = await dana.json("POST", `/api/invitations/${created.invitation.id}/accept`);
  assert.deepEqual([late.status, late.body], [410, { error: "This invitation is invalid, expired, or already used." }]);
});

interface ReceivedMail {
  to: string[];
  body: string;
}

async function startSmtp(t: TestContext, options: { rejectRecipient?: boolean } = {}) {
  const received: ReceivedMail[] = [];
  const smtp = new SMTPServer({
    authOptional: true,
    disabledCommands: ["STARTTLS", "AUTH"],
    logger: false,
    onRcptTo(_address, _session, callback) {
      if (options.rejectRecipient) return callback(new Error("mailbox unavailable"));
      callback();
    },
    onData(stream, session, callback) {
      let body = "";
      stream.on("data", (chunk: Buffer) => (body += chunk.toString("utf8")));
      stream.on("end", () => {
        received.push({ to: session.envelope.rcptTo.map((r) => r.address), body });
        callback();
      });
    },
  });
  await new Promise<void>((resolve) => smtp.listen(0, "127.0.0.1", resolve));
  t.after(() => new Promise<void>((resolve) => smtp.close(() => resolve())));
  return { url: `smtp://127.0.0.1:${(smtp.server.address() as AddressInfo).port}`, received };
}

test("with SMTP_URL, an invitation is e-mailed with its accept link, and the link works", async (t) => {
  const smtp = await startSmtp(t);
  const { server, owner } = await productionServer(t, { SMTP_URL: smtp.url, SMTP_FROM: "Secrets <secrets@example.com>" });
  const project = await owner.createProject({ name: "billing", environments: ["staging"] });
  const created = await invite(owner, project.id, "erin@example.com", "admin");
  assert.equal(created.invitation.delivery, "sent");
  assert.deepEqual(Object.keys(created), ["invitation"], "still no link in the response");

  assert.equal(smtp.received.length, 1);
  const mail = smtp.received[0]!;
  assert.deepEqual(mail.to, ["erin@example.com"]);
  assert.match(mail.body, /From: Secrets <secrets@example\.com>/);
  assert.match(mail.body, /Subject: Olga Owner invited you to billing/);
  const unfolded = mail.body.replace(/=\r?\n/g, "");
  const link = unfolded.match(new RegExp(`${server.origin.replace(/[.:/]/g, "\\$&")}/invite#([A-Za-z0-9_-]+)`));
  assert.ok(link, mail.body);
  const token = link[1]!;
  assert.ok(!server.logs.some((l) => l.includes(token)), "the link is never logged");

  const listed = await owner.json("GET", `/api/projects/${project.id}/invitations`);
  assert.equal(listed.body.invitations[0].delivery, "sent");
  const [stored] = storedRows(server, "invitations");
  assert.ok(stored);
  assert.equal(stored.delivery_status, "sent");
  assert.notEqual(stored.token_hash, token);

  const erin = await addUser(server, "erin@example.com");
  const accepted = await erin.json("POST", "/api/invitations/accept", { token });
  assert.deepEqual([accepted.status, accepted.body], [200, { projectId: project.id, role: "admin" }]);
});

test("an e-mail's outcome that cannot be recorded still answers the invitation it sent, and says so in the log", async (t) => {
  const smtp = await startSmtp(t);
  const { server, owner } = await productionServer(t, { SMTP_URL: smtp.url });
  const project = await owner.createProject({ name: "ops", environments: ["staging"] });
  const undo = failWritesTo(server, "invitations", { on: "UPDATE" });
  const res = await owner.json("POST", `/api/projects/${project.id}/invitations`, { email: "gina@example.com", role: "viewer" });
  undo();
  assert.equal(res.status, 201, JSON.stringify(res.body));
  assert.equal(res.body.invitation.delivery, "sent");
  assert.equal(smtp.received.length, 1);
  assert.ok(server.logs.some((l) => l.includes("outcome could not be recorded") && l.includes(res.body.invitation.id)));
  const [stored] = storedRows(server, "invitations");
  assert.equal(stored!.delivery_status, "not_configured", "the status that could not be written");
});

test("a failed invitation e-mail is logged and shown on the invitation as not delivered", async (t) => {
  const rejecting = await startSmtp(t, { rejectRecipient: true });
  const { server, owner } = await productionServer(t, { SMTP_URL: rejecting.url });
  const project = await owner.createProject({ name: "web", environments: ["development"] });
  const created = await invite(owner, project.id, "frank@example.com", "viewer");
  assert.equal(created.invitation.delivery, "failed");
  const listed = await owner.json("GET", `/api/projects/${project.id}/invitations`);
  assert.equal(listed.body.invitations[0].delivery, "failed");
  assert.ok(server.logs.some((l) => l.includes("invitation e-mail could not be sent") && l.includes(created.invitation.id)));
  // The invitation itself stands: the invitee still finds it after signing in.
  const frank = await addUser(server, "frank@example.com");
  assert.equal((await frank.json("GET", "/api/invitations")).body.invitations.length, 1);

  // A mail server that is down fails the same way, quickly.
  const down = await server.restart({ SMTP_URL: `smtp://127.0.0.1:${await freePort()}` });
  t.after(() => down.stop());
  const owner2 = down.client();
  assert.equal((await owner2.json("POST", "/api/auth/local/sign-in", { email: "owner@example.com", password: PASSWORD })).status, 200);
  const second = await invite(owner2, project.id, "gina@example.com", "viewer");
  assert.equal(second.invitation.delivery, "failed");
});
