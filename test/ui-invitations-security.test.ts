// Invitations in Chromium (playwright-core, Debian's Chromium) against a real
// server: the security overview's findings as banners with where to act, capabilities apart
// from status; an invitation that says who invited whom before and after sign-in, a new
// link from the pending list, roles explained where picked, and who can grant access.
// Pages are checked with axe-core in light and dark, as in test/ui.test.ts.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { assertEventually, assertFocus, check, openTab, useBrowser } from "./browser.ts";
import { freePort, startServer } from "./helpers.ts";
import { addMember } from "./secrets-helpers.ts";

useBrowser();

const linkPath = (link: string) => new URL(link).pathname + new URL(link).hash;

describe("security findings in Chromium", () => {
  test("findings come first as banners by severity, with where to act; capabilities apart from status", async (t) => {
    const server = await startServer(t);
    const alice = await server.signIn("alice@example.test", "Alice");
    const project = await alice.createProject({ name: "checkout-api", environments: ["production"] });
    // A viewer without any environment: an info finding that links to Environment access.
    await addMember(alice, await server.signIn("vic@example.test"), project.id, "viewer");

    for (const dark of [false, true]) {
      const tab = await openTab(server, { client: alice, dark });
      const { page } = tab;
      await page.goto(`/projects/${project.id}/security`);
      const findings = page.getByRole("region", { name: "Findings" }).getByRole("listitem");
      await findings.first().waitFor();
      assert.equal(await findings.count(), 2);
      // Most severe first, the severity in words, the action, and where.
      assert.match(
        await findings.nth(0).innerText(),
        /^CRITICAL\s+The development sign-in is on: .*\s+How: see “Signing in” in the README\.$/s,
      );
      assert.match(await findings.nth(1).innerText(), /^TO REVIEW\s+1 member or viewer has no environment access/);
      await findings.nth(1).getByRole("link", { name: "Open Environment access" }).waitFor();
      // Status and capabilities are apart: "Key rotation" is what the server can do.
      await page.getByRole("region", { name: "Encryption" }).getByText("Set in MASTER_KEY").waitFor();
      const capabilities = page.getByRole("region", { name: "What this server can do" });
      await capabilities.getByText("Supported: run secrets-server rotate-key after setting a new MASTER_KEY").waitFor();
      assert.equal(await page.getByRole("region", { name: "Encryption" }).getByText("Key rotation").count(), 0);
      await check(tab, dark ? "security-findings-dark" : "security-findings");
      if (!dark) {
        await findings.nth(1).getByRole("link", { name: "Open Environment access" }).click();
        await page.waitForURL(`**/projects/${project.id}/access`);
        await page.getByRole("heading", { name: "Environment access" }).waitFor();
      }
      await tab.context.close();
    }
  });
});

describe("invitations in Chromium", () => {
  test("who invited whom before and after sign-in, a new link from the pending list, roles explained, who can grant access", async (t) => {
    const server = await startServer(t);
    const alice = await server.signIn("alice@example.test", "Alice");
    const project = await alice.createProject({ name: "checkout-api", environments: ["development", "production"] });
    const owner = await openTab(server, { client: alice });
    const { page } = owner;
    await page.goto(`/projects/${project.id}/members`);

    // The role picked is explained in one line, and the select is described by it.
    // Only the owner is listed yet (no role select in the table): this is the invite form's.
    const roleSelect = page.getByLabel("Role");
    await roleSelect.selectOption("viewer");
    await page.getByText("Viewer: Reads secrets in the environments granted to them; changes nothing.").waitFor();
    assert.equal(await roleSelect.getAttribute("aria-describedby"), "invite-role-help");
    await roleSelect.selectOption("member");
    await page.getByText("Member: Reads and changes secrets in the environments granted to them.").waitFor();

    await page.getByLabel("E-mail address").fill("bob@example.test");
    await page.getByRole("button", { name: "Send invitation" }).click();
    const firstLink = await page
      .getByRole("status")
      .filter({ hasText: "Invitation created for bob@example.test." })
      .getByLabel("Invitation link")
      .inputValue();

    // A new link from the pending list: confirmed, shown once with Copy, the old one dead.
    await page.getByRole("button", { name: "New link for the invitation of bob@example.test" }).click();
    const dialog = page.getByRole("dialog", { name: "A new link for bob@example.test?" });
    await dialog.getByText("the old one stops working").waitFor();
    await dialog.getByRole("button", { name: "Make a new link" }).click();
    await dialog.waitFor({ state: "detached" });
    const renewed = page.getByRole("status").filter({ hasText: "New link for bob@example.test: the previous link no longer works" });
    const newLink = await renewed.getByLabel("New invitation link").inputValue();
    assert.match(newLink, new RegExp(`^${server.url}/invite#[A-Za-z0-9_-]{43}$`));
    assert.notEqual(newLink, firstLink);
    // The dead link's box is gone: only the new link is offered.
    assert.equal(await page.getByLabel("Invitation link", { exact: true }).count(), 0);
    await renewed.getByRole("button", { name: "Copy link" }).click();
    await assertEventually(() => page.evaluate(() => navigator.clipboard.readText()), newLink);
    await check(owner, "members-new-link");
    assert.equal((await server.client().json("POST", "/api/invitations/preview", { token: new URL(firstLink).hash.slice(1) })).status, 410);

    // The old link, opened signed out: the sign-in page says it no longer works.
    const stale = await openTab(server);
    await stale.page.goto(linkPath(firstLink));
    await stale.page.waitForURL("**/sign-in");
    await stale.page
      .getByText("This invitation is invalid, expired, or already used. Ask the person who invited you for a new link.")
      .waitFor();
    await stale.context.close();

    // Bob opens the new link signed out, in dark mode: who invited him to what, before signing in.
    const bob = await openTab(server, { dark: true });
    await bob.page.goto(linkPath(newLink));
    await bob.page.waitForURL("**/sign-in");
    const summary = "Alice (alice@example.test) invited you to checkout-api as member.";
    await bob.page.getByRole("region", { name: "Your invitation" }).getByText(summary).waitFor();
    await check(bob, "sign-in-invitation-dark");
    await bob.page.getByLabel("E-mail address").fill("bob@example.test");
    await bob.page.getByRole("button", { name: "Sign in" }).click();
    await bob.page.waitForURL((url) => url.pathname === "/invite");
    // And after: the same sentence above the accept button.
    await bob.page.getByText(summary).waitFor();
    await check(bob, "invite-summary-dark");
    // The skip link moves focus to the page and leaves the address alone: the invitation
    // lives in its fragment, which "#main" used to replace.
    await bob.page.getByRole("link", { name: "Skip to content" }).focus();
    await bob.page.keyboard.press("Enter");
    await bob.page.waitForFunction(() => document.activeElement?.id === "main");
    assert.equal(new URL(bob.page.url()).hash, new URL(newLink).hash);
    await bob.page.getByText(summary).waitFor();
    await bob.page.getByRole("button", { name: "Accept invitation" }).click();
    await bob.page.getByText("You joined the project as member.").waitFor();
    // The Accept button went with the form: the outcome's heading has the focus.
    await assertFocus(
      bob.page,
      "the welcome heading",
      () => document.activeElement?.tagName === "H1" && document.activeElement.textContent?.startsWith("Welcome") === true,
    );
    await bob.page.getByRole("link", { name: "Open the project" }).click();

    // No environment yet: told who can grant it, by name.
    await bob.page.getByText("You have no access to any environment of this project yet.").waitFor();
    await bob.page.getByText("Owners and admins grant access: ask Alice (alice@example.test).").waitFor();
    await check(bob, "no-access-who-grants-dark");
    await bob.page.goto(`/projects/${project.id}/development`);
    await bob.page.getByText("You do not have access to the development environment of this project.").waitFor();
    await bob.page.getByText("Owners and admins grant access: ask Alice (alice@example.test).").waitFor();

    // The role change select explains the current role in one line.
    await page.reload();
    const bobRole = page.getByLabel("Role of bob@example.test", { exact: true });
    await bobRole.waitFor();
    const helpId = await bobRole.getAttribute("aria-describedby");
    assert.equal(await page.locator(`[id="${helpId}"]`).innerText(), "Reads and changes secrets in the environments granted to them.");
    await check(owner, "members-role-help");
    // Cancel goes with the change it cancels: the focus returns to the select, not to the page.
    await bobRole.selectOption("viewer");
    await page.getByRole("button", { name: "Cancel role change of bob@example.test" }).click();
    await assertFocus(page, "the role select", () => document.activeElement?.getAttribute("aria-label") === "Role of bob@example.test");
    assert.equal(await bobRole.inputValue(), "member");
  });

  test("a form sent with Enter keeps the focus on its button while it is busy and after, and a second Enter sends nothing", async (t) => {
    const server = await startServer(t);
    const alice = await server.signIn("alice@example.test", "Alice");
    const project = await alice.createProject({ name: "focus", environments: ["production"] });
    const { page } = await openTab(server, { client: alice });
    await page.goto(`/projects/${project.id}/members`);
    let posts = 0;
    let release = () => {};
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    await page.route(`**/api/projects/${project.id}/invitations`, async (route) => {
      if (route.request().method() !== "POST") return route.continue();
      posts++;
      await held;
      await route.continue();
    });
    await page.getByLabel("E-mail address").fill("hana@example.test");
    const send = page.getByRole("button", { name: "Send invitation" });
    await send.focus();
    await page.keyboard.press("Enter");
    const busy = page.getByRole("button", { name: "Inviting…" });
    await busy.waitFor();
    assert.equal(await busy.getAttribute("aria-disabled"), "true");
    const onTheButton = () => document.activeElement?.textContent === "Inviting…";
    await assertFocus(page, "the busy button", onTheButton);
    // A disabled button would have dropped the focus to the page; this one refuses the press.
    await page.keyboard.press("Enter");
    release();
    await page.getByRole("status").filter({ hasText: "Invitation created for hana@example.test." }).waitFor();
    await assertFocus(page, "the button again", () => document.activeElement?.textContent === "Send invitation");
    assert.equal(posts, 1, "one invitation sent");
    assert.equal((await alice.json("GET", `/api/projects/${project.id}/invitations`)).body.invitations.length, 1);
  });

  test("outside production with SMTP_URL, the link box says the e-mail failed instead of that none is sent, and the list marks it", async (t) => {
    // A mail server that is not there: the send fails at once.
    const server = await startServer(t, { env: { SMTP_URL: `smtp://127.0.0.1:${await freePort()}` } });
    const alice = await server.signIn("alice@example.test", "Alice");
    const project = await alice.createProject({ name: "mailer", environments: ["production"] });
    const owner = await openTab(server, { client: alice });
    const { page } = owner;
    await page.goto(`/projects/${project.id}/members`);
    await page.getByLabel("E-mail address").fill("gina@example.test");
    await page.getByRole("button", { name: "Send invitation" }).click();
    const box = page.getByRole("status").filter({ hasText: "Invitation created for gina@example.test." });
    await box.getByText("The e-mail could not be sent: give them this link.").waitFor();
    assert.equal(await box.getByText(/sends no e-mail/).count(), 0);
    await page
      .getByRole("row", { name: /gina@example\.test/ })
      .getByText("e-mail not delivered")
      .waitFor();
  });

  test("the invitations list follows what a role change voids, and a revoked invitation's link box goes with it", async (t) => {
    const server = await startServer(t);
    const alice = await server.signIn("alice@example.test", "Alice");
    const bob = await server.signIn("bob@example.test", "Bob");
    const project = await alice.createProject({ name: "checkout-api", environments: ["production"] });
    const invitedBob = await alice.json("POST", `/api/projects/${project.id}/invitations`, { email: "bob@example.test", role: "admin" });
    const token = new URL(invitedBob.body.devAcceptUrl).hash.slice(1);
    assert.equal((await bob.json("POST", "/api/invitations/accept", { token })).status, 200);
    // Bob, an admin, invites Carol; demoted to member he can no longer back that invitation.
    const byBob = await bob.json("POST", `/api/projects/${project.id}/invitations`, { email: "carol@example.test", role: "member" });
    assert.equal(byBob.status, 201, JSON.stringify(byBob.body));

    const owner = await openTab(server, { client: alice });
    const { page } = owner;
    await page.goto(`/projects/${project.id}/members`);
    const carolRevoke = page.getByRole("button", { name: "Revoke the invitation of carol@example.test" });
    await carolRevoke.waitFor();

    // A link shown for an invitation, then revoked: the box offering it goes.
    await page.getByLabel("E-mail address").fill("dave@example.test");
    await page.getByRole("button", { name: "Send invitation" }).click();
    const box = page.getByRole("status").filter({ hasText: "Invitation created for dave@example.test." });
    await box.getByLabel("Invitation link").waitFor();
    await page.getByRole("button", { name: "Revoke the invitation of dave@example.test" }).click();
    const dialog = page.getByRole("dialog", { name: "Revoke the invitation of dave@example.test?" });
    await dialog.getByRole("button", { name: "Revoke", exact: true }).click();
    await dialog.waitFor({ state: "detached" });
    await page.getByRole("button", { name: "Revoke the invitation of dave@example.test" }).waitFor({ state: "detached" });
    assert.equal(await page.getByLabel("Invitation link", { exact: true }).count(), 0, "no box offers the dead link");

    // Revoked elsewhere meanwhile (another admin's tab): the 404 is said, and the row and the box go all the same.
    await page.getByLabel("E-mail address").fill("erin@example.test");
    await page.getByRole("button", { name: "Send invitation" }).click();
    await page.getByRole("status").filter({ hasText: "Invitation created for erin@example.test." }).getByLabel("Invitation link").waitFor();
    // Another admin revokes it just before this page's request reaches the server.
    await page.route(
      `**/api/projects/${project.id}/invitations/*`,
      async (route) => {
        if (route.request().method() === "DELETE") {
          assert.equal((await alice.json("DELETE", new URL(route.request().url()).pathname)).status, 200);
        }
        await route.continue();
      },
      { times: 1 },
    );
    await page.getByRole("button", { name: "Revoke the invitation of erin@example.test" }).click();
    const gone = page.getByRole("dialog", { name: "Revoke the invitation of erin@example.test?" });
    await gone.getByRole("button", { name: "Revoke", exact: true }).click();
    await gone.getByRole("alert").filter({ hasText: "Invitation not found." }).waitFor();
    await page.getByRole("button", { name: "Revoke the invitation of erin@example.test" }).waitFor({ state: "detached" });
    assert.equal(await page.getByLabel("Invitation link", { exact: true }).count(), 0, "no box offers the dead link");
    await gone.getByRole("button", { name: "Cancel" }).click();

    // What the demotion ends is said before it is made (src/lost-rights.ts).
    const bobRole = page.getByLabel("Role of bob@example.test", { exact: true });
    await bobRole.selectOption("member");
    assert.match(
      (await bobRole.getAttribute("aria-describedby").then((id) => page.locator(`#${id}`).textContent())) ?? "",
      /Member: .* Service tokens they created are revoked, invitations they sent are voided, and a Vercel sync that uses their token is paused\.$/,
    );
    await page.getByRole("button", { name: "Change role of bob@example.test to member" }).click();
    await page.getByRole("status").filter({ hasText: "bob@example.test is now a member." }).waitFor();
    await carolRevoke.waitFor({ state: "detached" });
    assert.deepEqual((await alice.json("GET", `/api/projects/${project.id}/invitations`)).body.invitations, []);
  });

  test("a new link for one invitation leaves another's link, shown once, in place; an invitation revoked before it is accepted from the inbox says so", async (t) => {
    const server = await startServer(t);
    const alice = await server.signIn("alice@example.test", "Alice");
    const bobClient = await server.signIn("bob@example.test", "Bob");
    const project = await alice.createProject({ name: "ledger", environments: ["production"] });
    const forBob = await alice.json("POST", `/api/projects/${project.id}/invitations`, { email: "bob@example.test", role: "member" });
    assert.equal(forBob.status, 201, JSON.stringify(forBob.body));

    const owner = await openTab(server, { client: alice });
    const { page } = owner;
    await page.goto(`/projects/${project.id}/members`);
    // The invitation's notices are filled into status regions already in the page, not inserted with their text.
    const inviteStatus = page
      .locator("form")
      .filter({ has: page.getByRole("heading", { name: "Invite someone" }) })
      .getByRole("status");
    assert.equal(await inviteStatus.textContent(), "");
    await page.getByLabel("E-mail address").fill("dave@example.test");
    await page.getByRole("button", { name: "Send invitation" }).click();
    // The same region, now filled: the form still holds one status region.
    const daveBox = inviteStatus.filter({ hasText: "Invitation created for dave@example.test." });
    await daveBox.waitFor();
    assert.equal(await inviteStatus.count(), 1);
    const daveLink = await daveBox.getByLabel("Invitation link").inputValue();
    await page.getByRole("button", { name: "New link for the invitation of bob@example.test" }).click();
    const dialog = page.getByRole("dialog", { name: "A new link for bob@example.test?" });
    await dialog.getByRole("button", { name: "Make a new link" }).click();
    await page.getByRole("status").filter({ hasText: "New link for bob@example.test" }).getByLabel("New invitation link").waitFor();
    assert.equal(await daveBox.getByLabel("Invitation link").inputValue(), daveLink, "Dave's link, shown only once, is still there");

    // Bob sees the invitation in his inbox; it is revoked before he accepts.
    const bob = await openTab(server, { client: bobClient });
    await bob.page.goto("/");
    await bob.page.getByRole("heading", { name: "Invitations for you" }).waitFor();
    const revoked = await alice.json("DELETE", `/api/projects/${project.id}/invitations/${forBob.body.invitation.id}`);
    assert.equal(revoked.status, 200, JSON.stringify(revoked.body));
    await bob.page.getByRole("button", { name: "Accept and open ledger" }).click();
    await bob.page
      .getByRole("alert")
      .filter({ hasText: /Invitation not found\.|This invitation is invalid, expired, or already used\./ })
      .waitFor();
    await bob.page.getByRole("button", { name: "Accept and open ledger" }).waitFor({ state: "detached" });
  });
});
