// The Service accounts page in Chromium (playwright-core, Debian's Chromium) against a real
// server: accounts, tokens shown once, trusts, and what the audit log and the security
// overview say about them. Pages are checked with axe-core like test/ui.test.ts.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import type { Page } from "playwright-core";
import { assertFocus, check, goToSection, openTab, sectionLink, useBrowser } from "./browser.ts";
import { startServer } from "./helpers.ts";
import { addMember } from "./secrets-helpers.ts";

useBrowser();

const INVALID_TOKEN = { error: "This service token is invalid, expired or revoked." };

/** Whether `text` is anywhere in the document: its markup, or the value of any field. */
function inDom(page: Page, text: string): Promise<boolean> {
  return page.evaluate(
    (t) =>
      document.documentElement.outerHTML.includes(t) ||
      [...document.querySelectorAll("input, textarea")].some((el) => (el as HTMLInputElement | HTMLTextAreaElement).value.includes(t)),
    text,
  );
}

describe("service accounts in Chromium", () => {
  test("create an account, a token shown once that works until revoked, a trust from the GitHub example; audit and security say so", async (t) => {
    const server = await startServer(t);
    const alice = await server.signIn("alice@example.test");
    const project = await alice.createProject({ name: "shop", environments: ["development", "production"] });
    const secret = await alice.json("POST", `/api/projects/${project.id}/environments/production/secrets`, {
      key: "DATABASE_URL",
      value: "postgres://shop-db",
    });
    assert.equal(secret.status, 201);

    const tab = await openTab(server, { client: alice });
    const { page } = tab;
    await page.goto(`/projects/${project.id}/development`);
    await goToSection(page, "Service accounts");
    await page.getByText("No service accounts yet.").waitFor();
    assert.equal(await page.title(), "Service accounts · shop · Secrets");
    await check(tab, "service-accounts-empty");

    // Create: name, role, environments.
    await page.getByRole("button", { name: "New service account" }).click();
    let dialog = page.getByRole("dialog", { name: "New service account" });
    await dialog.getByLabel("Name").fill("deploy-bot");
    await dialog.getByLabel("Description (optional)").fill("Deploys the shop from CI");
    await dialog.getByLabel("Member: reads").check();
    // Saving with no environment says so, announced, and takes the focus to the first choice.
    await dialog.getByRole("button", { name: "Create service account" }).click();
    await dialog.getByRole("alert").filter({ hasText: "Choose at least one environment." }).waitFor();
    await assertFocus(page, "the first environment", () => (document.activeElement as HTMLInputElement | null)?.type === "checkbox");
    await dialog.getByLabel("Production").check();
    assert.equal(await dialog.getByRole("alert").count(), 0, "the message goes once one is chosen");
    await check(tab, "service-account-create");
    await dialog.getByRole("button", { name: "Create service account" }).click();
    await page.waitForURL(/\/service-accounts\/[0-9a-f-]{36}$/);
    const accountId = new URL(page.url()).pathname.split("/").at(-1)!;
    const heading = page.getByRole("heading", { level: 2, name: "deploy-bot" });
    await heading.waitFor();
    await assertFocus(
      page,
      "the account's heading",
      () => document.activeElement?.tagName === "H2" && document.activeElement.textContent === "deploy-bot",
    );
    const details = page.getByRole("region", { name: "Details" });
    await details.getByText("Production").waitFor();
    await details.getByText("member", { exact: true }).waitFor();

    // The same name again: the API's message at the form.
    await page.getByRole("link", { name: "Service accounts", exact: true }).first().click();
    const row = page.getByRole("row", { name: /deploy-bot/ });
    await row.getByRole("cell", { name: "member" }).waitFor();
    assert.deepEqual(await row.getByRole("cell").allTextContents(), ["member", "Production", "0", "0", "never"]);
    await page.getByRole("button", { name: "New service account" }).click();
    dialog = page.getByRole("dialog", { name: "New service account" });
    await dialog.getByLabel("Name").fill("DEPLOY-BOT");
    await dialog.getByLabel("Development").check();
    await dialog.getByRole("button", { name: "Create service account" }).click();
    await dialog.getByRole("alert").filter({ hasText: "A service account with this name already exists." }).waitFor();
    await dialog.getByRole("button", { name: "Cancel" }).click();
    await dialog.waitFor({ state: "detached" });
    await check(tab, "service-accounts-list");
    await page.getByRole("link", { name: "deploy-bot" }).click();
    await heading.waitFor();

    // A token: shown once, copied, works over HTTP.
    await page.getByRole("button", { name: "New token" }).click();
    dialog = page.getByRole("dialog", { name: "New token for deploy-bot" });
    await dialog.getByLabel("Name").fill("github-deploy");
    await dialog.getByLabel("Expires after").selectOption("30");
    await check(tab, "service-token-create");
    // While the request is on its way, Escape, × and Cancel do not close the dialog: closing
    // would not stop it, and the token would be made but never shown.
    const held = Promise.withResolvers<void>();
    const reached = Promise.withResolvers<void>();
    await page.route("**/tokens", async (route) => {
      reached.resolve();
      await held.promise;
      await route.continue();
    });
    const creating = dialog.getByRole("button", { name: "Create token" }).click();
    await reached.promise;
    await dialog.getByRole("button", { name: "Creating…" }).waitFor();
    // Twice: Chromium holds back only the first Escape since a click.
    await page.keyboard.press("Escape");
    await page.keyboard.press("Escape");
    assert.equal(await dialog.getByRole("button", { name: "Cancel" }).isDisabled(), true);
    assert.equal(await dialog.getByRole("button", { name: "Close" }).isDisabled(), true);
    assert.equal(await dialog.isVisible(), true, "Escape left the dialog open");
    held.resolve();
    await creating;
    await page.unroute("**/tokens");
    dialog = page.getByRole("dialog", { name: "Token github-deploy created" });
    const field = dialog.getByLabel("Service token");
    await field.waitFor();
    const token = await field.inputValue();
    assert.match(token, /^svc_st_[A-Za-z0-9_-]{43,}$/);
    await dialog.getByText("You will not see this token again.").waitFor();
    assert.equal(await field.getAttribute("readonly"), "");
    await assertFocus(page, "the token", () => (document.activeElement as HTMLInputElement | null)?.readOnly === true);
    await check(tab, "service-token-shown");
    await dialog.getByRole("button", { name: "Copy token" }).click();
    await dialog.getByRole("button", { name: "Copied token" }).waitFor();
    assert.equal(await page.evaluate(() => navigator.clipboard.readText()), token);

    const machine = server.client().withBearer(token);
    const me = await machine.json("GET", "/api/service-accounts/me");
    assert.equal(me.status, 200);
    assert.deepEqual(me.body.serviceAccount, {
      id: accountId,
      name: "deploy-bot",
      projectId: project.id,
      projectName: "shop",
      role: "member",
      environments: ["production"],
    });
    // Something for the audit log to say about the service account.
    assert.equal(
      (await machine.json("GET", `/api/projects/${project.id}/environments/production/secrets/${secret.body.secret.id}`)).status,
      200,
    );

    await dialog.getByRole("button", { name: "Done" }).click();
    await dialog.waitFor({ state: "detached" });
    await assertFocus(page, "the New token button", () => document.activeElement?.textContent === "New token");
    const tokenRow = page.getByRole("row", { name: /github-deploy/ });
    await tokenRow.getByRole("button", { name: "Revoke token github-deploy" }).waitFor();
    await page.getByRole("status").filter({ hasText: "Token github-deploy created." }).waitFor();
    assert.equal(await inDom(page, token), false, "the token is gone from the page with its dialog");

    // Revoke, confirmed: the token stops working.
    await tokenRow.getByRole("button", { name: "Revoke token github-deploy" }).click();
    dialog = page.getByRole("dialog", { name: "Revoke token github-deploy?" });
    await dialog.getByRole("button", { name: "Revoke token", exact: true }).click();
    await page.getByText("No tokens.").waitFor();
    await page.getByRole("status").filter({ hasText: "Token github-deploy revoked." }).waitFor();
    const refused = await machine.json("GET", "/api/service-accounts/me");
    assert.equal(refused.status, 401);
    assert.deepEqual(refused.body, INVALID_TOKEN);

    // A token without expiry, limited to a network; a wrong network is named at the form.
    await page.getByRole("button", { name: "New token" }).click();
    dialog = page.getByRole("dialog", { name: "New token for deploy-bot" });
    await dialog.getByLabel("Name").fill("web-1");
    await dialog.getByLabel("Expires after").selectOption("never");
    await dialog.getByLabel("Allowed networks (optional)").fill("10.0.0.0/8\n10.1.0.0/33");
    await dialog.getByRole("button", { name: "Create token" }).click();
    await dialog.getByRole("alert").filter({ hasText: "“10.1.0.0/33” is not a network" }).waitFor();
    // The field it is about is marked and focused, not another.
    assert.equal(await dialog.getByLabel("Allowed networks (optional)").getAttribute("aria-invalid"), "true");
    assert.equal(await dialog.getByLabel("Name").getAttribute("aria-invalid"), "false");
    await assertFocus(page, "the networks field", () => document.activeElement?.tagName === "TEXTAREA");
    // What the API refuses, the form names before sending: leading zeros, a mapped network under /96.
    for (const wrong of ["10.0.0.01/32", "10.0.0.0/08", "::ffff:10.0.0.0/64"]) {
      await dialog.getByLabel("Allowed networks (optional)").fill(wrong);
      await dialog.getByRole("button", { name: "Create token" }).click();
      await dialog
        .getByRole("alert")
        .filter({ hasText: `“${wrong}” is not a network` })
        .waitFor();
    }
    await dialog.getByLabel("Allowed networks (optional)").fill("10.0.0.0/8\n2001:db8::/32");
    await dialog.getByRole("button", { name: "Create token" }).click();
    dialog = page.getByRole("dialog", { name: "Token web-1 created" });
    const second = await dialog.getByLabel("Service token").inputValue();
    await dialog.getByText("Never expires. Accepted only from 10.0.0.0/8, 2001:db8::/32.").waitFor();
    // Escape closes it too, and the token goes with it.
    await page.keyboard.press("Escape");
    await dialog.waitFor({ state: "detached" });
    await page.getByRole("row", { name: /web-1/ }).getByText("10.0.0.0/8, 2001:db8::/32").waitFor();
    assert.equal(await inDom(page, second), false);
    // From 127.0.0.1, outside its networks: refused.
    assert.deepEqual((await server.client().withBearer(second).json("GET", "/api/service-accounts/me")).body, INVALID_TOKEN);

    // A trust from the GitHub Actions example.
    await page.getByRole("button", { name: "Add trust" }).click();
    dialog = page.getByRole("dialog", { name: "Add a trust" });
    await dialog.getByRole("button", { name: "Fill in the GitHub Actions example" }).click();
    await dialog.getByRole("status").filter({ hasText: "replace OWNER/REPO with your repository" }).waitFor();
    assert.equal(await dialog.getByLabel("Issuer").inputValue(), "https://token.actions.githubusercontent.com");
    assert.equal(await dialog.getByLabel("Audience").inputValue(), server.url);
    assert.equal(await dialog.getByLabel("Subject").inputValue(), "repo:OWNER/REPO:ref:refs/heads/main");
    assert.match((await dialog.getByLabel("Subject").getAttribute("aria-describedby"))!, /subject-hint/);
    await dialog.getByLabel("Claims (optional)").fill("environment production");
    await check(tab, "service-account-trust");
    await dialog.getByRole("button", { name: "Add trust" }).click();
    await dialog.getByRole("alert").filter({ hasText: "Write each claim as name=value" }).waitFor();
    // A claim given twice would keep one value without a word, and the trust would be broader than written.
    await dialog.getByLabel("Claims (optional)").fill("environment=production\nenvironment=staging");
    await dialog.getByRole("button", { name: "Add trust" }).click();
    await dialog.getByRole("alert").filter({ hasText: "The claim environment is given twice: a claim has one value." }).waitFor();
    await dialog.getByLabel("Claims (optional)").fill("__proto__=x");
    await dialog.getByRole("button", { name: "Add trust" }).click();
    await dialog.getByRole("alert").filter({ hasText: "A claim cannot be named __proto__." }).waitFor();
    // A pasted subject longer than the server takes is said so, not cut short and saved (every exchange would fail).
    await dialog.getByLabel("Claims (optional)").fill("environment=production");
    const longSubject = `repo:OWNER/REPO:${"x".repeat(500)}`;
    await dialog.getByLabel("Subject").fill(longSubject);
    assert.equal(await dialog.getByLabel("Subject").inputValue(), longSubject);
    await dialog.getByRole("button", { name: "Add trust" }).click();
    await dialog
      .getByRole("alert")
      .filter({ hasText: `The subject has at most 500 characters: it has ${longSubject.length}.` })
      .waitFor();
    await dialog.getByLabel("Subject").fill("repo:OWNER/REPO:ref:refs/heads/main");
    await dialog.getByLabel("Claims (optional)").fill(`environment=${"p".repeat(501)}`);
    await dialog.getByRole("button", { name: "Add trust" }).click();
    await dialog
      .getByRole("alert")
      .filter({ hasText: "The value of the claim environment has at most 500 characters: it has 501." })
      .waitFor();
    // The server's issuer rule, with the form's sentence: white space in the path is refused there too.
    await dialog.getByLabel("Issuer").fill("https://token.actions.githubusercontent.com/a b");
    await dialog.getByRole("button", { name: "Add trust" }).click();
    await dialog.getByRole("alert").filter({ hasText: "The issuer must be the identity provider's https address" }).waitFor();
    await dialog.getByLabel("Issuer").fill("https://token.actions.githubusercontent.com");
    await dialog.getByLabel("Claims (optional)").fill("environment=production");
    await dialog.getByRole("button", { name: "Add trust" }).click();
    await dialog.waitFor({ state: "detached" });
    const trustRow = page.getByRole("row", { name: /token\.actions\.githubusercontent\.com/ });
    await trustRow.getByText("environment=production").waitFor();
    await page.getByRole("status").filter({ hasText: "Trust added for repo:OWNER/REPO:ref:refs/heads/main." }).waitFor();
    const saved = await alice.json("GET", `/api/projects/${project.id}/service-accounts/${accountId}`);
    assert.deepEqual(
      saved.body.serviceAccount.trusts.map((x: { issuer: string; audience: string; subject: string; claims: unknown }) => [
        x.issuer,
        x.audience,
        x.subject,
        x.claims,
      ]),
      [["https://token.actions.githubusercontent.com", server.url, "repo:OWNER/REPO:ref:refs/heads/main", { environment: "production" }]],
    );
    await check(tab, "service-account");

    // Edit: role back to viewer, only what changed is sent.
    const patches: unknown[] = [];
    page.on("request", (r) => {
      if (r.method() === "PATCH") patches.push(r.postDataJSON());
    });
    await page.getByRole("button", { name: "Edit", exact: true }).click();
    dialog = page.getByRole("dialog", { name: "Edit deploy-bot" });
    await dialog.getByLabel("Viewer: reads").check();
    await dialog.getByRole("button", { name: "Save" }).click();
    await dialog.waitFor({ state: "detached" });
    await details.getByText("viewer", { exact: true }).waitFor();
    assert.deepEqual(patches, [{ role: "viewer" }]);

    // The security overview warns about the token without expiry.
    await goToSection(page, "Security");
    await page.getByText("1 service token never expires").waitFor();
    const access = page.getByRole("region", { name: "Access" });
    await access.getByText("Tokens without expiry").waitFor();
    await access.getByRole("link", { name: "Review the service accounts" }).waitFor();
    await check(tab, "security-service-accounts");

    // Remove the trust, then delete the account, each confirmed.
    await page.goto(`/projects/${project.id}/service-accounts/${accountId}`);
    await page.getByRole("button", { name: "Remove the trust for repo:OWNER/REPO:ref:refs/heads/main" }).click();
    dialog = page.getByRole("dialog", { name: "Remove this trust?" });
    await dialog.getByRole("button", { name: "Remove trust" }).click();
    await page.getByText("No trusts.").waitFor();
    assert.deepEqual((await alice.json("GET", `/api/projects/${project.id}/service-accounts/${accountId}`)).body.serviceAccount.trusts, []);

    await page.getByRole("button", { name: "Delete service account" }).click();
    dialog = page.getByRole("dialog", { name: "Delete deploy-bot?" });
    await dialog.getByRole("button", { name: "Delete service account" }).click();
    await page.getByText("Service account “deploy-bot” was deleted.").waitFor();
    await page.getByText("No service accounts yet.").waitFor();

    // The audit log tells people's actions on accounts from the account's own.
    await goToSection(page, "Audit log");
    const events = page.getByRole("list", { name: "Audit events, newest first" });
    await events.getByText("You deleted service account deploy-bot").waitFor();
    for (const line of [
      "You created service account deploy-bot as member for production",
      "You created token github-deploy for service account deploy-bot",
      "You revoked token github-deploy of service account deploy-bot",
      "You created token web-1 for service account deploy-bot (no expiry), accepted only from 10.0.0.0/8, 2001:db8::/32",
      "You added a trust to service account deploy-bot: repo:OWNER/REPO:ref:refs/heads/main from https://token.actions.githubusercontent.com",
      "You changed the role of service account deploy-bot from member to viewer",
      "You removed a trust from service account deploy-bot: repo:OWNER/REPO:ref:refs/heads/main from https://token.actions.githubusercontent.com",
    ]) {
      assert.equal(await events.getByText(line, { exact: true }).count(), 1, line);
    }
    // The account's own event, with how it signed in.
    const revealed = events
      .getByRole("listitem")
      .filter({ hasText: "Service account deploy-bot revealed the value of DATABASE_URL in production" });
    assert.equal(await revealed.count(), 1);
    await revealed.getByText("service token", { exact: true }).waitFor();
    // The account (deleted now) is not offered as an actor; it was listed while it existed.
    await check(tab, "audit-service-accounts");
  });

  test("a new token stays on screen when the page's refresh after creating it fails", async (t) => {
    const server = await startServer(t);
    const alice = await server.signIn("alice@example.test");
    const project = await alice.createProject({ name: "shop", environments: ["production"] });
    const created = await alice.json("POST", `/api/projects/${project.id}/service-accounts`, {
      name: "deploy-bot",
      role: "member",
      environments: ["production"],
    });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const accountId = created.body.serviceAccount.id as string;
    const tab = await openTab(server, { client: alice });
    const { page } = tab;
    await page.goto(`/projects/${project.id}/service-accounts/${accountId}`);
    await page.getByRole("button", { name: "New token" }).click();
    let dialog = page.getByRole("dialog", { name: "New token for deploy-bot" });
    await dialog.getByLabel("Name").fill("ci");
    // The connection drops on the page's next read of the account (the refresh after the create).
    await page.route(
      `**/api/projects/${project.id}/service-accounts/${accountId}`,
      (route) => (route.request().method() === "GET" ? route.abort("connectionreset") : route.continue()),
      { times: 1 },
    );
    await dialog.getByRole("button", { name: "Create token" }).click();
    dialog = page.getByRole("dialog", { name: "Token ci created" });
    const token = await dialog.getByLabel("Service token").inputValue();
    assert.match(token, /^svc_st_/);
    await page.getByRole("alert").filter({ hasText: "Could not refresh" }).waitFor();
    // Still there after the failed refresh, and still usable.
    assert.equal(await dialog.getByLabel("Service token").inputValue(), token);
    assert.equal((await server.client().withBearer(token).json("GET", "/api/service-accounts/me")).status, 200);
    await dialog.getByRole("button", { name: "Done" }).click();
    await page.getByRole("alert").filter({ hasText: "Could not refresh" }).getByRole("button", { name: "Try again" }).click();
    await page.getByRole("row", { name: /\bci\b/ }).waitFor();
    assert.equal(await page.getByRole("alert").filter({ hasText: "Could not refresh" }).count(), 0);

    // The project itself (your role, your permissions) read again on a visit, and failing: said, not left stale in silence.
    await page.route(`**/api/projects/${project.id}`, (route) => route.abort("connectionreset"), { times: 1 });
    await page.getByRole("navigation").getByRole("link", { name: "Service accounts" }).first().click();
    const stale = page.getByRole("alert").filter({ hasText: "Could not refresh the project, so your role and access may have changed" });
    await stale.waitFor();
    await stale.getByRole("button", { name: "Try again" }).click();
    await stale.waitFor({ state: "detached" });
  });

  test("members and viewers do not see the tab; the page tells them who manages accounts", async (t) => {
    const server = await startServer(t);
    const alice = await server.signIn("alice@example.test");
    const bob = await server.signIn("bob@example.test");
    const project = await alice.createProject({ name: "shop", environments: ["production"] });
    await addMember(alice, bob, project.id, "member");

    const tab = await openTab(server, { client: bob });
    const { page } = tab;
    await page.goto(`/projects/${project.id}/members`);
    await page.getByRole("heading", { name: "Members" }).waitFor();
    await sectionLink(page, "Members & access").waitFor();
    assert.equal(await sectionLink(page, "Service accounts").count(), 0);
    await page.goto(`/projects/${project.id}/service-accounts`);
    await page.getByText("Only owners and admins of this project manage its service accounts.").waitFor();

    // The owner sees it, in light and dark.
    const owner = await openTab(server, { client: alice, dark: true });
    await owner.page.goto(`/projects/${project.id}/members`);
    await goToSection(owner.page, "Service accounts");
    await owner.page.getByText("No service accounts yet.").waitFor();
    await check(owner, "service-accounts-dark");
  });

  test("revoking a token already gone elsewhere says so and takes its row away; an automatic revocation reads as one in the audit log", async (t) => {
    const server = await startServer(t);
    const alice = await server.signIn("alice@example.test");
    const bob = await server.signIn("bob@example.test");
    const project = await alice.createProject({ name: "shop", environments: ["production"] });
    await addMember(alice, bob, project.id, "admin");
    const accounts = `/api/projects/${project.id}/service-accounts`;
    const account = (await alice.json("POST", accounts, { name: "ci", role: "viewer", environments: ["production"] })).body.serviceAccount;
    const gone = (await alice.json("POST", `${accounts}/${account.id}/tokens`, { name: "gone-token" })).body.tokenInfo;
    assert.equal((await bob.json("POST", `${accounts}/${account.id}/tokens`, { name: "bobs-token" })).status, 201);

    const tab = await openTab(server, { client: alice });
    const { page } = tab;
    await page.goto(`/projects/${project.id}/service-accounts/${account.id}`);
    const row = page.getByRole("row", { name: /gone-token/ });
    await row.waitFor();
    // Revoked through the API meanwhile (another tab, a script).
    assert.equal((await alice.json("DELETE", `${accounts}/${account.id}/tokens/${gone.id}`)).status, 200);
    await row.getByRole("button", { name: "Revoke token gone-token" }).click();
    const dialog = page.getByRole("dialog", { name: "Revoke token gone-token?" });
    await dialog.getByRole("button", { name: "Revoke token", exact: true }).click();
    await dialog.getByText("Token not found.").waitFor();
    await dialog.getByRole("button", { name: "Cancel" }).click();
    await row.waitFor({ state: "detached" });

    // Bob is no longer an admin: the token he made is revoked with him, and the log says why.
    const members = await alice.json("GET", `/api/projects/${project.id}/members`);
    const bobId = members.body.members.find((m: { email: string }) => m.email === "bob@example.test").userId;
    assert.equal((await alice.json("PATCH", `/api/projects/${project.id}/members/${bobId}`, { role: "member" })).status, 200);
    await page.goto(`/projects/${project.id}/audit`);
    await page
      .getByText(/revoked token bobs-token of service account ci: the person who created it can no longer manage service accounts/)
      .waitFor();
  });

  test("an account page answered another 404 than the account's own says what it was, not that the account was deleted", async (t) => {
    const server = await startServer(t);
    const alice = await server.signIn("alice@example.test");
    const project = await alice.createProject({ name: "shop", environments: ["production"] });
    const accounts = `/api/projects/${project.id}/service-accounts`;
    const account = (await alice.json("POST", accounts, { name: "ci", role: "viewer", environments: ["production"] })).body.serviceAccount;

    // The project went (or the visitor was removed) between the project's answer and the account's.
    const { page } = await openTab(server, { client: alice });
    await page.route(`**${accounts}/${account.id}`, (route) =>
      route.fulfill({ status: 404, contentType: "application/json", body: JSON.stringify({ error: "Project not found." }) }),
    );
    await page.goto(`/projects/${project.id}/service-accounts/${account.id}`);
    await page.getByText("Project not found.").waitFor();
    assert.equal(await page.getByRole("heading", { name: "Service account not found" }).count(), 0);
  });
});
