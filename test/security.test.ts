import assert from "node:assert/strict";
import { type TestContext, test } from "node:test";
import { startFakeVercel } from "./fake-vercel.ts";
import { auditEvents, type Client, randomMasterKey, runMain, startServer, type TestServer } from "./helpers.ts";
import { addMember, createSecret } from "./secrets-helpers.ts";
import { writeIntegrationRow } from "./storage.ts";

const DAY_MS = 24 * 60 * 60 * 1000;
const DEV_SIGN_IN_NOTE =
  "The development sign-in is on: anyone who can reach this server can sign in as any e-mail address. Set AUTH_PROVIDER to oidc or local and NODE_ENV=production before storing real secrets.";
const KEY_FILE_NOTE =
  "The master key is a generated file inside the data folder, so a copy of that folder holds both the key and the secrets. Put the key in MASTER_KEY and keep it out of backups of the data folder.";

/**
 * A restart on a new port: a restart on the same port can meet the client's kept-alive
 * socket to the old server ("other side closed"). Stopped when the test ends.
 */
async function restart(t: TestContext, server: TestServer, env: Record<string, string | undefined>): Promise<TestServer> {
  const next = await server.restart({ ...env, PORT: "0", APP_URL: undefined });
  t.after(() => next.stop());
  return next;
}

async function overview(client: Client, projectId: string) {
  const res = await client.json("GET", `/api/projects/${projectId}/security`);
  assert.equal(res.status, 200, JSON.stringify(res.body));
  return res.body;
}

/** Severity, code and place of each finding; every note is a finding with the same sentence. */
function findingsOf(body: { notes: string[]; findings: { severity: string; code: string; message: string; where: unknown }[] }) {
  assert.deepEqual(
    body.notes.filter((n) => !body.findings.some((f) => f.message === n)),
    [],
    "a note without its finding",
  );
  return body.findings.map((f) => [f.severity, f.code, f.where]);
}

test("every overview field from live data: keys, records, roles, invitations, grants, audit count, notes", async (t) => {
  const masterKey = randomMasterKey();
  let server = await startServer(t, { env: { MASTER_KEY: masterKey } });
  let alice = await server.signIn("alice@example.test");
  const project = await alice.createProject({ name: "api", environments: ["development", "staging", "production"] });
  // An invitation that will have expired, and sessions renewed after the week passes.
  const stale = await alice.json("POST", `/api/projects/${project.id}/invitations`, { email: "stale@example.test", role: "viewer" });
  assert.equal(stale.status, 201);
  server.clock.advance(8 * DAY_MS);
  alice = await server.signIn("alice@example.test");
  const bob = await server.signIn("bob@example.test");
  const carol = await server.signIn("carol@example.test");
  const dave = await server.signIn("dave@example.test");
  const erin = await server.signIn("erin@example.test");
  await addMember(alice, bob, project.id, "admin");
  await addMember(alice, carol, project.id, "member", ["development", "staging"]);
  await addMember(alice, dave, project.id, "viewer", ["development"]);
  await addMember(alice, erin, project.id, "member");
  const pending = await alice.json("POST", `/api/projects/${project.id}/invitations`, { email: "frank@example.test", role: "member" });
  assert.equal(pending.status, 201);

  const first = await overview(alice, project.id);
  assert.deepEqual(first, {
    encryption: {
      algorithm: "AES-256-GCM",
      secretsEncryptedAtRest: true,
      keyConfigured: true,
      currentKeyVersion: 1,
      // The project's data key, made with the project.
      records: { total: 1, onCurrentKeyVersion: 1, other: 0 },
      keyRotation: true,
      externalKms: false,
    },
    authentication: { provider: "dev", cliAccessTokenMinutes: 60, cliRefreshTokenDays: 30 },
    access: {
      members: { owner: 1, admin: 1, member: 2, viewer: 1 },
      pendingInvitations: 1,
      serviceAccounts: { accounts: 0, tokens: 0, tokensWithoutExpiry: 0, tokensUnusedFor90Days: 0, trusts: 0 },
    },
    integrations: { hosting: null },
    auditLog: { events: (await auditEvents(alice, project.id)).length },
    notes: [
      DEV_SIGN_IN_NOTE,
      "1 member or viewer has no environment access and cannot read any secret. Grant environments under Environment access, or remove them from the project.",
      "1 invitation has expired without being accepted. Revoke it, and invite again if still needed.",
    ],
    findings: [
      { severity: "critical", code: "dev_sign_in", message: DEV_SIGN_IN_NOTE, where: { readme: "Signing in" } },
      {
        severity: "info",
        code: "members_without_access",
        message:
          "1 member or viewer has no environment access and cannot read any secret. Grant environments under Environment access, or remove them from the project.",
        where: { page: "access" },
      },
      {
        severity: "info",
        code: "expired_invitations",
        message: "1 invitation has expired without being accepted. Revoke it, and invite again if still needed.",
        where: { page: "members" },
      },
    ],
    environments: [
      { environment: "development", members: 1, viewers: 1 },
      { environment: "staging", members: 1, viewers: 0 },
      { environment: "production", members: 0, viewers: 0 },
    ],
  });
  // 1 created + 2 invitations that stayed pending + 4 invitations created and accepted.
  assert.equal(first.auditLog.events, 11);

  // Values and their versions: 3 secrets, one updated twice = 5 encrypted records, and the data key.
  const apiKey = (await createSecret(alice, project.id, "development", "API_KEY", "first-api-key-value")).id;
  await createSecret(alice, project.id, "staging", "DB_URL", "postgres://staging-db-value");
  await createSecret(carol, project.id, "development", "TOKEN", "carol-token-value");
  for (const value of ["second-api-key-value", "third-api-key-value"]) {
    const res = await alice.json("PATCH", `/api/projects/${project.id}/environments/development/secrets/${apiKey}`, { value });
    assert.equal(res.status, 200, JSON.stringify(res.body));
  }
  // The grant summary and counts follow changes at once.
  await alice.json("PUT", `/api/projects/${project.id}/environments/production/access/${erin.user!.id}`);
  await alice.json("DELETE", `/api/projects/${project.id}/invitations/${stale.body.invitation.id}`);
  const second = await overview(bob, project.id);
  assert.deepEqual(second.encryption.records, { total: 6, onCurrentKeyVersion: 6, other: 0 });
  assert.deepEqual(second.environments, [
    { environment: "development", members: 1, viewers: 1 },
    { environment: "staging", members: 1, viewers: 0 },
    { environment: "production", members: 1, viewers: 0 },
  ]);
  assert.deepEqual(second.notes, [DEV_SIGN_IN_NOTE]);
  assert.equal(second.auditLog.events, (await auditEvents(alice, project.id)).length);

  // A new master key version: the existing records are now a version behind; the new value
  // is sealed with a new data key on version 2.
  const newKey = randomMasterKey();
  const rotatedEnv = { MASTER_KEY: newKey, MASTER_KEY_VERSION: "2", MASTER_KEYS_PREVIOUS: `1:${masterKey}` };
  server = await restart(t, server, rotatedEnv);
  alice = await server.signIn("alice@example.test");
  await createSecret(alice, project.id, "production", "NEW_ONE", "value-on-key-two");
  const third = await overview(alice, project.id);
  assert.equal(third.encryption.currentKeyVersion, 2);
  assert.deepEqual(third.encryption.records, { total: 8, onCurrentKeyVersion: 2, other: 6 });
  assert.deepEqual(third.notes, [
    DEV_SIGN_IN_NOTE,
    '6 encrypted records use an older master key version. Run "secrets-server rotate-key" to re-encrypt them with version 2.',
  ]);
  assert.deepEqual(findingsOf(third), [
    ["critical", "dev_sign_in", { readme: "Signing in" }],
    ["warning", "old_key_version", { readme: "Encryption at rest and key rotation" }],
  ]);
  await server.stop();

  const rotated = await runMain(["rotate-key"], { ...server.env, ...rotatedEnv });
  assert.equal(rotated.code, 0, rotated.stderr + rotated.stdout);
  server = await restart(t, server, rotatedEnv);
  alice = await server.signIn("alice@example.test");
  const fourth = await overview(alice, project.id);
  // The version 1 data key is gone with rotate-key.
  assert.deepEqual(fourth.encryption.records, { total: 7, onCurrentKeyVersion: 7, other: 0 });
  assert.deepEqual(fourth.notes, [DEV_SIGN_IN_NOTE]);

  // Never key material, values or tokens.
  const text = JSON.stringify(fourth);
  for (const secret of [masterKey, newKey, "third-api-key-value", "value-on-key-two", "ciphertext", "token_hash"]) {
    assert.ok(!text.includes(secret), secret);
  }
});

test("hosting integration status and last sync, with notes when it needs attention", async (t) => {
  const server = await startServer(t);
  const alice = await server.signIn("alice@example.test");
  const project = await alice.createProject({ name: "api", environments: ["production"] });
  assert.deepEqual((await overview(alice, project.id)).integrations, { hosting: null });

  // The connection row as the integration writes it (its endpoints need a Vercel fake; the
  // overview only reads status and last sync). The token and hook are counted as records, beside the data key.
  const now = server.clock.now().toISOString();
  writeIntegrationRow(server, project.id, { status: "active", lastSyncStatus: "ok", lastSyncAt: now });
  const active = await overview(alice, project.id);
  assert.deepEqual(active.integrations, {
    // Written without connected_by, as connections made before it was recorded: nobody to check, never paused.
    hosting: {
      provider: "vercel",
      status: "active",
      lastSyncAt: now,
      lastSyncStatus: "ok",
      connectedBy: null,
      paused: false,
      pausedAt: null,
      pausedReason: null,
    },
  });
  assert.deepEqual(active.encryption.records, { total: 3, onCurrentKeyVersion: 3, other: 0 });
  assert.deepEqual(active.notes, [DEV_SIGN_IN_NOTE]);

  writeIntegrationRow(server, project.id, { status: "active", lastSyncStatus: "failed", lastSyncAt: now });
  assert.deepEqual((await overview(alice, project.id)).notes, [
    DEV_SIGN_IN_NOTE,
    "The last Vercel sync failed. Open the integration to see the error, then sync again.",
  ]);
  writeIntegrationRow(server, project.id, { status: "active", lastSyncStatus: "partial", lastSyncAt: now });
  assert.deepEqual((await overview(alice, project.id)).notes, [
    DEV_SIGN_IN_NOTE,
    "The last Vercel sync left some variables out. Open the integration to see which, then sync again.",
  ]);
  writeIntegrationRow(server, project.id, { status: "attention", lastSyncStatus: "partial", lastSyncAt: now });
  const attention = await overview(alice, project.id);
  assert.equal(attention.integrations.hosting.status, "attention");
  assert.deepEqual(attention.notes, [
    DEV_SIGN_IN_NOTE,
    "The Vercel integration needs attention: reconnect it with a new access token so syncing can resume.",
  ]);
  assert.deepEqual(findingsOf(attention), [
    ["critical", "dev_sign_in", { readme: "Signing in" }],
    ["warning", "vercel_attention", { page: "vercel" }],
  ]);
});

test("authentication names the provider (the issuer's host for OIDC); a generated key file is not a configured key", async (t) => {
  const server = await startServer(t, { env: { MASTER_KEY: undefined } });
  const alice = await server.signIn("alice@example.test");
  const project = await alice.createProject({ name: "api", environments: ["development"] });
  const local = await overview(alice, project.id);
  assert.equal(local.encryption.keyConfigured, false);
  assert.deepEqual(local.notes, [DEV_SIGN_IN_NOTE, KEY_FILE_NOTE]);

  // The same data under OIDC; the browser session stays valid across the restart.
  const oidc = await restart(t, server, {
    AUTH_PROVIDER: "oidc",
    OIDC_ISSUER: "https://login.example.test/realms/team",
    OIDC_CLIENT_ID: "secrets-server",
    OIDC_CLIENT_SECRET: "oidc-client-secret-value",
  });
  const client = oidc.client();
  client.cookies = new Map(alice.cookies);
  const body = await overview(client, project.id);
  assert.deepEqual(body.authentication, { provider: "login.example.test", cliAccessTokenMinutes: 60, cliRefreshTokenDays: 30 });
  assert.deepEqual(body.notes, [
    "The server runs in development mode. Set NODE_ENV=production for Secure cookies and no invitation links in responses.",
    KEY_FILE_NOTE,
  ]);
  assert.deepEqual(findingsOf(body), [
    ["warning", "development_mode", { readme: "Configuration" }],
    ["warning", "master_key_file", { readme: "Configuration" }],
  ]);
});

test("hosting integration through the real endpoints: connected, linked with a hook, synced, then needing attention", async (t) => {
  const fake = await startFakeVercel();
  t.after(() => fake.stop());
  const vercelToken = "vcp_overview_token_0123456789";
  fake.addToken(vercelToken);
  fake.addProject("prj_web", "web");
  const server = await startServer(t, { env: { VERCEL_API_URL: fake.url, SYNC_DEBOUNCE_MS: "40", VERCEL_RETRY_BASE_MS: "5" } });
  const alice = await server.signIn("alice@example.test");
  const project = await alice.createProject({ name: "api", environments: ["production"] });
  const base = `/api/projects/${project.id}/integrations/hosting`;
  await createSecret(alice, project.id, "production", "DATABASE_URL", "postgres://overview-db-value");

  const connected = await alice.json("POST", base, { token: vercelToken });
  assert.equal(connected.status, 201, JSON.stringify(connected.body));
  let body = await overview(alice, project.id);
  const connectedBy = { userId: alice.user!.id, email: "alice@example.test" };
  assert.deepEqual(body.integrations, {
    hosting: {
      provider: "vercel",
      status: "connected",
      lastSyncAt: null,
      lastSyncStatus: null,
      connectedBy,
      paused: false,
      pausedAt: null,
      pausedReason: null,
    },
  });
  // The data key, the secret's value and the token.
  assert.deepEqual(body.encryption.records, { total: 3, onCurrentKeyVersion: 3, other: 0 });

  const linked = await alice.json("PUT", base, {
    hostProjectId: "prj_web",
    mappings: { production: "production" },
    deployHookUrl: fake.addHook("prj_web"),
  });
  assert.equal(linked.status, 200, JSON.stringify(linked.body));
  const synced = await alice.json("POST", `${base}/sync`, {});
  assert.equal(synced.status, 200, JSON.stringify(synced.body));
  const connection = (await alice.json("GET", base)).body;
  body = await overview(alice, project.id);
  assert.deepEqual(body.integrations, {
    hosting: {
      provider: "vercel",
      status: connection.status,
      lastSyncAt: connection.lastSyncAt,
      lastSyncStatus: "ok",
      connectedBy,
      paused: false,
      pausedAt: null,
      pausedReason: null,
    },
  });
  assert.equal(body.integrations.hosting.status, "active");
  assert.match(body.integrations.hosting.lastSyncAt, /^\d{4}-\d{2}-\d{2}T/);
  // The deploy hook is the fourth encrypted record.
  assert.deepEqual(body.encryption.records, { total: 4, onCurrentKeyVersion: 4, other: 0 });
  assert.deepEqual(body.notes, [DEV_SIGN_IN_NOTE]);

  // Vercel stops accepting the token: the next sync fails and the integration needs attention.
  fake.revokeToken(vercelToken);
  const failed = await alice.json("POST", `${base}/sync`, {});
  assert.notEqual(failed.status, 200);
  body = await overview(alice, project.id);
  assert.equal(body.integrations.hosting.status, "attention");
  assert.deepEqual(body.notes, [
    DEV_SIGN_IN_NOTE,
    "The Vercel integration needs attention: reconnect it with a new access token so syncing can resume.",
  ]);
  assert.ok(!JSON.stringify(body).includes(vercelToken));
});
