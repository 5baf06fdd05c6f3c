// The Vercel page's parts the main UI test does not reach: a paused connection (its notice,
// reconnecting instead of the settings, no sync), and removing a saved deploy hook.
import assert from "node:assert/strict";
import { test } from "node:test";
import { assertEventually, assertFocus, check, openTab, useBrowser } from "./browser.ts";
import { isEnvList, startFakeVercel } from "./fake-vercel.ts";
import { startServer } from "./helpers.ts";
import { addMember } from "./secrets-helpers.ts";

useBrowser();

test("a paused connection offers reconnecting, not its settings; a saved deploy hook can be removed", async (t) => {
  const fake = await startFakeVercel();
  t.after(() => fake.stop());
  fake.addToken("vcp_bob_token_123456", ["team_acme1234"]);
  fake.addToken("vcp_alice_token_123456", ["team_acme1234"]);
  fake.addTeam("team_acme1234", "Acme");
  fake.addProject("prj_web", "web", "team_acme1234");
  const hook = fake.addHook("prj_web");
  const server = await startServer(t, { env: { VERCEL_API_URL: fake.url, SYNC_DEBOUNCE_MS: "40", VERCEL_RETRY_BASE_MS: "5" } });
  const alice = await server.signIn("alice@example.test");
  const bob = await server.signIn("bob@example.test");
  const project = await alice.createProject({ name: "site", environments: ["production"] });
  await addMember(alice, bob, project.id, "admin");
  const base = `/api/projects/${project.id}/integrations/hosting`;
  assert.equal((await bob.json("POST", base, { token: "vcp_bob_token_123456", teamId: "team_acme1234" })).status, 201);
  const linked = await bob.json("PUT", base, {
    hostProjectId: "prj_web",
    mappings: { production: "production" },
    conflictPolicy: "skip",
    autoRedeploy: true,
    deployHookUrl: hook,
  });
  assert.equal(linked.status, 200, JSON.stringify(linked.body));
  // Bob is no longer an admin: his token is not used any more.
  const members = await alice.json("GET", `/api/projects/${project.id}/members`);
  const bobId = members.body.members.find((m: { email: string }) => m.email === "bob@example.test").userId;
  assert.equal((await alice.json("PATCH", `/api/projects/${project.id}/members/${bobId}`, { role: "member" })).status, 200);

  const tab = await openTab(server, { client: alice });
  const { page } = tab;
  await page.goto(`/projects/${project.id}/vercel`);
  const status = page.getByRole("region", { name: "Status" });
  await status.getByRole("alert").filter({ hasText: "Syncing is paused. bob@example.test had their role changed" }).waitFor();
  await status.getByText("paused", { exact: true }).waitFor();
  assert.equal(await page.getByRole("button", { name: "Sync now" }).isDisabled(), true);
  assert.equal(await page.getByRole("heading", { name: "Link and settings" }).count(), 0, "a paused connection's settings are not offered");
  await check(tab, "vercel-paused");

  // Alice reconnects with her own token: the settings come back, the link kept. The team is
  // filled in: without it the linked project would be looked for in her personal account.
  await page.getByRole("heading", { name: "Reconnect Vercel", exact: true }).waitFor();
  assert.equal(await page.getByLabel("Team ID (optional)").inputValue(), "team_acme1234");
  await page.getByLabel("Vercel access token").fill("vcp_alice_token_123456");
  await page.getByRole("button", { name: "Reconnect" }).click();
  await page.getByRole("heading", { name: "Link and settings" }).waitFor();
  assert.equal(await status.getByRole("alert").count(), 0);
  const reconnected = await alice.json("GET", base);
  assert.equal(reconnected.body.paused, false);
  assert.equal(reconnected.body.connectedBy.email, "alice@example.test");
  assert.deepEqual([reconnected.body.teamId, reconnected.body.hostProjectId], ["team_acme1234", "prj_web"]);

  // Removing the saved hook: the address field is off meanwhile, and redeploys need a hook.
  await page.getByLabel("Vercel project").selectOption({ label: "web" });
  await page.getByLabel("Remove the saved deploy hook").check();
  await assertEventually(() => page.getByLabel(/Deploy hook URL/).isDisabled(), true);
  const redeploy = page.getByLabel(/Redeploy automatically/);
  assert.equal(await redeploy.isDisabled(), true);
  assert.equal(await redeploy.isChecked(), false);
  await page.getByRole("button", { name: "Save" }).click();
  await page.getByText("Saved.").waitFor();
  const saved = await alice.json("GET", base);
  assert.equal(saved.body.hookConfigured, false);
  assert.equal(saved.body.autoRedeploy, false);
  assert.equal(saved.body.conflictPolicy, "skip");
  await page.getByText("Redeploy automatically after each sync (needs a deploy hook)").waitFor();
  assert.equal(await page.getByLabel("Remove the saved deploy hook").count(), 0);
});

test("connected with a team, the team picker offers the token's teams but no personal account it could not reach", async (t) => {
  const fake = await startFakeVercel();
  t.after(() => fake.stop());
  fake.addToken("vcp_alice_token_123456", ["team_acme1234", "team_other999"]);
  fake.addTeam("team_acme1234", "Acme");
  fake.addTeam("team_other999", "Other");
  fake.addProject("prj_acme", "acme-site", "team_acme1234");
  fake.addProject("prj_other", "other-site", "team_other999");
  fake.addProject("prj_mine", "my-site");
  const server = await startServer(t, { env: { VERCEL_API_URL: fake.url } });
  const alice = await server.signIn("alice@example.test");
  const project = await alice.createProject({ name: "site", environments: ["production"] });
  const base = `/api/projects/${project.id}/integrations/hosting`;
  assert.equal((await alice.json("POST", base, { token: "vcp_alice_token_123456", teamId: "team_acme1234" })).status, 201);
  assert.equal((await alice.json("PUT", base, { hostProjectId: "prj_acme", mappings: { production: "production" } })).status, 200);

  const tab = await openTab(server, { client: alice });
  const { page } = tab;
  await page.goto(`/projects/${project.id}/vercel`);
  const team = page.getByRole("combobox", { name: /^Team/ });
  await team.waitFor();
  assert.equal(await team.inputValue(), "team_acme1234");
  assert.deepEqual((await team.locator("option").allTextContents()).sort(), ["Acme", "Other"]);
  await page
    .getByText("Connected with a team: to link a project of your personal account, use another token or team (below) with no team ID.")
    .waitFor();
  await assertEventually(() => page.getByLabel("Vercel project").locator("option").allTextContents(), ["Choose a project…", "acme-site"]);
  await team.focus();
  await team.selectOption({ label: "Other" });
  await assertEventually(() => page.getByLabel("Vercel project").locator("option").allTextContents(), ["Choose a project…", "other-site"]);
  // The team select stayed while the other team's projects loaded: the focus is still on it.
  await assertFocus(
    page,
    "the team select",
    () => document.activeElement?.tagName === "SELECT" && document.activeElement.closest("label")?.textContent?.startsWith("Team") === true,
  );

  // Linked in the other team and saved: the form below offers that team, not the one connected with.
  await page.getByLabel("Vercel project").selectOption({ label: "other-site" });
  await page.getByRole("button", { name: "Save" }).click();
  await page.getByText("Saved.").waitFor();

  // As the help says: the same token again, with the team ID cleared, reaches the personal account.
  await page.locator("summary", { hasText: "Use another token or team" }).click();
  const teamField = page.getByLabel("Team ID (optional)");
  assert.equal(await teamField.inputValue(), "team_other999");
  assert.equal(await page.getByText(/Another team unlinks/).count(), 0, "no warning while the team is the saved one");
  await teamField.fill("");
  await page.getByText(/^Another team unlinks other-site: its environment mappings, the deploy hook/).waitFor();
  await page.getByLabel("Vercel access token").fill("vcp_alice_token_123456");
  await page.getByRole("button", { name: "Reconnect and unlink" }).click();
  await assertEventually(() => page.getByLabel("Vercel project").locator("option").allTextContents(), ["Choose a project…", "my-site"]);
  assert.equal((await alice.json("GET", base)).body.teamId, null);
});

test("the page lists the keys a sync skipped, follows a background sync to its end, and turns to reconnecting when Vercel rejects the token", async (t) => {
  const fake = await startFakeVercel();
  t.after(() => fake.stop());
  fake.addToken("vcp_alice_token_123456", []);
  fake.addToken("vcp_alice_second_123456", []);
  fake.addProject("prj_web", "web");
  fake.addEnv("prj_web", { key: "TAKEN_KEY", value: "someone-elses", type: "encrypted", target: ["production"] });
  // Only the syncs the test asks for run.
  const server = await startServer(t, { env: { VERCEL_API_URL: fake.url, SYNC_DEBOUNCE_MS: "600000", VERCEL_RETRY_BASE_MS: "5" } });
  const alice = await server.signIn("alice@example.test");
  const project = await alice.createProject({ name: "site", environments: ["production"] });
  const base = `/api/projects/${project.id}/integrations/hosting`;
  assert.equal((await alice.json("POST", base, { token: "vcp_alice_token_123456" })).status, 201);
  assert.equal((await alice.json("PUT", base, { hostProjectId: "prj_web", mappings: { production: "production" } })).status, 200);
  for (const key of ["TAKEN_KEY", "OWN_KEY"]) {
    const created = await alice.json("POST", `/api/projects/${project.id}/environments/production/secrets`, { key, value: `${key}-value` });
    assert.equal(created.status, 201);
  }

  const tab = await openTab(server, { client: alice });
  const { page } = tab;
  await page.goto(`/projects/${project.id}/vercel`);
  await page.getByRole("button", { name: "Sync now" }).click();
  const finished = page.getByRole("status").filter({ hasText: "Sync finished." });
  await finished.waitFor();
  await finished.getByText("TAKEN_KEY").waitFor();
  await finished.getByText(/skipped, a variable someone else made holds another value/).waitFor();
  assert.equal(await finished.getByText("OWN_KEY").count(), 0, "only the keys that were skipped or failed");

  // A sync that runs longer than one look: the page keeps looking until it has ended.
  const held = fake.hold(isEnvList);
  const background = alice.json("POST", `${base}/sync`);
  await held.reached;
  await page.getByRole("button", { name: "Refresh status" }).click();
  await page.getByText("syncing…").waitFor();
  // The page's next look fails (the network): it goes on looking all the same.
  let failedLooks = 0;
  await page.route(`**${base}`, async (route) => {
    if (route.request().method() === "GET" && failedLooks === 0) {
      failedLooks += 1;
      await route.abort("connectionreset");
    } else await route.continue();
  });
  await assertEventually(async () => failedLooks, 1);
  held.release();
  assert.equal((await background).status, 200);
  await page.getByText("syncing…").waitFor({ state: "detached", timeout: 10_000 });

  // Vercel no longer takes the token: listing projects finds out, and the page offers to reconnect.
  fake.revokeToken("vcp_alice_token_123456");
  await page.reload();
  await page.getByRole("heading", { name: "Reconnect Vercel", exact: true }).waitFor();
  assert.equal(await page.getByRole("heading", { name: "Link and settings" }).count(), 0);
  assert.equal(await page.getByRole("button", { name: "Sync now" }).isDisabled(), true);
  await page.getByLabel("Vercel access token").fill("vcp_alice_second_123456");
  await page.getByRole("button", { name: "Reconnect" }).click();
  await page.getByRole("heading", { name: "Link and settings" }).waitFor();
  await assertEventually(() => page.getByLabel("Vercel project").locator("option").allTextContents(), ["Choose a project…", "web"]);
  assert.equal(await page.getByText("Vercel rejected the saved access token").count(), 0);
});
