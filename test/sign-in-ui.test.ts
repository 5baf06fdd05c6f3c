// The sign-in pages in a real browser: Debian's Chromium through playwright-core, against
// a production-mode server (OIDC with a real oidc-provider, and local accounts).
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import type { Browser, Page } from "playwright-core";
import { launchChromium } from "./browser.ts";
import { freePort, runMain, startServer } from "./helpers.ts";
import { startProvider } from "./oidc-fixture.ts";

let browser: Browser;

before(async () => {
  browser = await launchChromium();
});

after(async () => {
  await browser?.close();
});

async function newPage(baseURL: string): Promise<{ page: Page; problems: string[] }> {
  const context = await browser.newContext({ baseURL });
  const page = await context.newPage();
  const problems: string[] = [];
  page.on("pageerror", (error) => problems.push(`page error: ${error.message}`));
  page.on("console", (message) => {
    if (message.type() === "error" && !/status of 4\d\d/.test(message.text())) problems.push(message.text());
  });
  return { page, problems };
}

test("Chromium: OIDC sign-in from the sign-in page, back to the page the user wanted", async (t) => {
  const port = await freePort();
  const provider = await startProvider(t, `http://127.0.0.1:${port}/api/auth/oidc/callback`, {
    "alice-sub": { email: "alice@example.com", email_verified: true, name: "Alice Liddell" },
  });
  const server = await startServer(t, {
    env: {
      NODE_ENV: "production",
      PORT: String(port),
      AUTH_PROVIDER: "oidc",
      OIDC_ISSUER: provider.issuer,
      OIDC_CLIENT_ID: provider.clientId,
      OIDC_CLIENT_SECRET: provider.clientSecret,
    },
  });
  const { page, problems } = await newPage(server.url);
  await page.goto("/cli-sessions");
  await page.waitForURL("**/sign-in");
  await page.getByRole("link", { name: "Sign in with your identity provider" }).click();
  await page.waitForURL("**/cli-sessions");
  await page.getByText("Alice Liddell").waitFor();
  const cookies = await page.context().cookies();
  const session = cookies.find((c) => c.name === "__Host-secrets_session");
  assert.ok(session, "the browser keeps the __Host- session cookie");
  assert.equal(session.secure, true);
  assert.equal(session.httpOnly, true);
  assert.ok(!cookies.some((c) => c.name === "__Host-secrets_oidc"), "the sign-in state cookie is gone");

  // A failed sign-in shows a fixed sentence for its code, nothing taken from the URL.
  const other = await newPage(server.url);
  await other.page.goto("/sign-in?error=domain_not_allowed");
  await other.page.getByRole("alert").getByText("Your account's e-mail domain is not allowed to sign in here.").waitFor();
  await other.page.goto("/sign-in?error=Call+this+number");
  await other.page.getByRole("alert").getByText("The sign-in did not complete. Try again.").waitFor();
  assert.deepEqual([...problems, ...other.problems], []);
});

test("Chromium: local accounts — setup link, sign-in form, set-password link, pending invitation", async (t) => {
  const server = await startServer(t, { env: { NODE_ENV: "production", AUTH_PROVIDER: "local" } });
  const line = server.logs.find((l) => l.includes("No account exists yet"))!;
  const setupLink = line.match(/(http:\/\/\S+\/set-password#[A-Za-z0-9_-]+)/)![1]!;

  const { page, problems } = await newPage(server.url);
  await page.goto(setupLink);
  await page.getByRole("heading", { name: "Create the first account" }).waitFor();
  await page.getByLabel("E-mail address").fill("owner@example.com");
  await page.getByLabel("Name (optional)").fill("Olga Owner");
  await page.getByLabel(/^Password/).fill("owner password 123");
  await page.getByLabel("Repeat the password").fill("owner password 123");
  await page.getByRole("button", { name: "Save and sign in" }).click();
  await page.getByRole("heading", { name: "Projects", exact: true }).waitFor();
  assert.equal(new URL(page.url()).hash, "", "the used token left the address bar");

  // Create a project and invite someone through the API with the browser's session.
  const project = await page.evaluate(async () => {
    const res = await fetch("/api/projects", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ name: "payments", environments: ["production"] }),
    });
    return (await res.json()).project as { id: string };
  });
  const invited = await page.evaluate(async (id) => {
    const res = await fetch(`/api/projects/${id}/invitations`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ email: "bob@example.com", role: "viewer" }),
    });
    return res.status;
  }, project.id);
  assert.equal(invited, 201);

  // Sign out, then the password form.
  await page.getByRole("button", { name: "Sign out" }).click();
  await page.waitForURL("**/sign-in");
  await page.getByLabel("E-mail address").fill("owner@example.com");
  await page.getByLabel("Password").fill("wrong password here");
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.getByRole("alert").getByText("Incorrect e-mail or password.").waitFor();
  await page.getByLabel("Password").fill("owner password 123");
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.getByRole("heading", { name: "Projects", exact: true }).waitFor();

  // Bob gets a link from the operator, sets his password, and finds the invitation waiting.
  const added = await runMain(["users", "add", "bob@example.com"], server.env);
  const bobLink = added.stdout.match(/(http:\/\/\S+\/set-password#[A-Za-z0-9_-]+)/)![1]!;
  const bob = await newPage(server.url);
  await bob.page.goto(bobLink);
  await bob.page.getByRole("heading", { name: "Set your password" }).waitFor();
  await bob.page.getByText("bob@example.com").waitFor();
  await bob.page.getByLabel(/^Password/).fill("bobs password 1234");
  await bob.page.getByLabel("Repeat the password").fill("bobs password 1234");
  await bob.page.getByRole("button", { name: "Save and sign in" }).click();
  await bob.page.getByRole("heading", { name: "Invitations for you" }).waitFor();
  await bob.page.getByText("Olga Owner").waitFor();
  await bob.page.getByRole("button", { name: "Accept and open payments" }).click();
  await bob.page.waitForURL(`**/projects/${project.id}**`);

  // A used link says so.
  const reuse = await newPage(server.url);
  await reuse.page.goto(bobLink);
  await reuse.page.getByRole("alert").getByText("This link is invalid, expired, or already used.", { exact: false }).waitFor();
  assert.deepEqual([...problems, ...bob.problems, ...reuse.problems], []);
});
