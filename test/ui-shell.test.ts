// The project shell in Chromium: the sections beside the page on a wide screen and behind a
// Sections menu on a phone, the environment switcher apart from them, addresses that can be
// bookmarked and gone back to, focus on the new page's heading, and members with their
// environment access on one page.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import type { Page } from "playwright-core";
import { assertEventually, assertFocus, check, environmentLink, goToSection, openTab, sectionLink, useBrowser } from "./browser.ts";
import { type Client, startServer } from "./helpers.ts";
import { addMember } from "./secrets-helpers.ts";

useBrowser();

const SECTIONS = ["Secrets", "Members & access", "Service accounts", "Audit log", "Security", "Vercel", "Settings"];

async function seedProject(alice: Client): Promise<string> {
  const project = await alice.createProject({ name: "checkout-api", environments: ["development", "staging", "production"] });
  for (const env of ["staging", "production"]) {
    for (const key of ["DATABASE_URL", "REDIS_URL", "STRIPE_SECRET_KEY"]) {
      const created = await alice.json("POST", `/api/projects/${project.id}/environments/${env}/secrets`, {
        key,
        value: `${env}-${key}-value`,
      });
      assert.equal(created.status, 201);
    }
  }
  return project.id;
}

/** The focused element's tag and text, to compare with the heading it should be. */
async function waitForFocusOn(page: Page, tag: string, text: string): Promise<void> {
  await page
    .waitForFunction(([t, x]) => document.activeElement?.tagName === t && document.activeElement?.textContent === x, [tag, text], {
      timeout: 5000,
    })
    .catch(() => undefined);
  const active = await page.evaluate(() => `${document.activeElement?.tagName} ${document.activeElement?.textContent?.slice(0, 60)}`);
  assert.equal(active, `${tag} ${text}`);
}

async function currentSection(page: Page): Promise<string[]> {
  return page.getByRole("navigation", { name: "Project" }).locator('a[aria-current="page"]').allTextContents();
}

describe("the project shell in Chromium", () => {
  test("wide screen: sections in a side column, environments switched above the secrets, back button, focus, landmarks", async (t) => {
    const server = await startServer(t);
    const alice = await server.signIn("alice@example.test");
    const projectId = await seedProject(alice);
    const tab = await openTab(server, { client: alice });
    const { page } = tab;
    await page.goto(`/projects/${projectId}/production`);
    await page.getByRole("row", { name: /STRIPE_SECRET_KEY/ }).waitFor();

    // Every section an owner has, Secrets current; no menu button on a wide screen.
    const nav = page.getByRole("navigation", { name: "Project" });
    assert.deepEqual(await nav.getByRole("link").allTextContents(), SECTIONS);
    assert.deepEqual(await currentSection(page), ["Secrets"]);
    assert.equal(await nav.getByRole("button", { name: /^Sections/ }).isVisible(), false);
    // The environments are not sections: a switcher of their own, above the secrets.
    for (const env of ["Development", "Staging", "Production"]) assert.equal(await nav.getByRole("link", { name: env }).count(), 0);
    assert.equal(await environmentLink(page, "Production").getAttribute("aria-current"), "page");
    assert.equal(await environmentLink(page, "Staging").getAttribute("aria-current"), null);
    // A column beside the page: the navigation ends left of the main region, at the same height.
    const navBox = (await nav.boundingBox())!;
    const mainBox = (await page.getByRole("main").boundingBox())!;
    assert.ok(navBox.x + navBox.width <= mainBox.x, `nav ${JSON.stringify(navBox)} beside main ${JSON.stringify(mainBox)}`);
    assert.ok(Math.abs(navBox.y - mainBox.y) < 40);
    // Landmarks: one banner, one main, the project's navigation outside main, the switcher in it.
    assert.equal(await page.getByRole("banner").count(), 1);
    assert.equal(await page.getByRole("main").count(), 1);
    assert.equal(await page.getByRole("main").getByRole("navigation", { name: "Project" }).count(), 0);
    assert.equal(await page.getByRole("main").getByRole("navigation", { name: "Environments" }).count(), 1);
    await check(tab, "shell-desktop");

    // Switching environments: a new address, the page's heading takes focus.
    await environmentLink(page, "Staging").click();
    await page.waitForURL(`**/projects/${projectId}/staging`);
    await page.getByRole("heading", { name: "Staging secrets" }).waitFor();
    await waitForFocusOn(page, "H2", "Staging secrets");
    assert.equal(await environmentLink(page, "Staging").getAttribute("aria-current"), "page");
    await page.waitForFunction(() => document.title.startsWith("Staging"), undefined, { timeout: 5000 }).catch(() => undefined);
    assert.equal(await page.title(), "Staging secrets · checkout-api · Secrets");

    // A section, then back to the secrets: the environment last shown, not the first one.
    await goToSection(page, "Audit log");
    await page.waitForURL(`**/projects/${projectId}/audit`);
    await waitForFocusOn(page, "H2", "Audit log");
    assert.deepEqual(await currentSection(page), ["Audit log"]);
    assert.equal(await page.getByRole("navigation", { name: "Environments" }).count(), 0);
    assert.equal(await sectionLink(page, "Secrets").getAttribute("href"), `/projects/${projectId}/staging`);

    // The back button walks the same addresses back, each page drawn again.
    await page.goBack();
    await page.waitForURL(`**/projects/${projectId}/staging`);
    await page.getByRole("heading", { name: "Staging secrets" }).waitFor();
    assert.deepEqual(await currentSection(page), ["Secrets"]);
    await page.goBack();
    await page.waitForURL(`**/projects/${projectId}/production`);
    await page.getByRole("heading", { name: "Production secrets" }).waitFor();
    await page.goForward();
    await page.getByRole("heading", { name: "Staging secrets" }).waitFor();

    // Across environments, switching the environment keeps that view.
    await page.getByRole("link", { name: "Across environments" }).click();
    await page.waitForURL(`**/projects/${projectId}/staging?view=compare`);
    await environmentLink(page, "Production").click();
    await page.waitForURL(`**/projects/${projectId}/production?view=compare`);
    assert.equal(await page.getByRole("link", { name: "Across environments" }).getAttribute("aria-current"), "page");

    // A bookmarked address opens its page directly, in the dark theme too.
    const dark = await openTab(server, { client: alice, dark: true });
    await dark.page.goto(`/projects/${projectId}/security`);
    await dark.page.getByRole("heading", { name: "Security overview" }).waitFor();
    assert.deepEqual(await currentSection(dark.page), ["Security"]);
    await check(dark, "shell-desktop-dark");
  });

  test("keyboard: the sections are reached with Tab and followed with Enter; focus lands on the new heading", async (t) => {
    const server = await startServer(t);
    const alice = await server.signIn("alice@example.test");
    const projectId = await seedProject(alice);
    const tab = await openTab(server, { client: alice });
    const { page } = tab;
    await page.goto(`/projects/${projectId}/production`);
    await page.getByRole("row", { name: /REDIS_URL/ }).waitFor();

    // From the top of the page: the skip link, then the header, then the project's sections.
    let reached = false;
    for (let i = 0; i < 12 && !reached; i++) {
      await page.keyboard.press("Tab");
      reached = await page.evaluate(() => document.activeElement?.textContent === "Members & access");
    }
    assert.ok(reached, "Members & access is reached with Tab");
    await page.keyboard.press("Enter");
    await page.waitForURL(`**/projects/${projectId}/members`);
    await waitForFocusOn(page, "H2", "Members and environment access");
    // The next Tab goes on from the heading into the page, not back to the top.
    await page.keyboard.press("Tab");
    assert.equal(await page.evaluate(() => document.activeElement?.closest("main") !== null), true, "Tab moves on inside main");

    // The skip link jumps past the header and the sections to the main region.
    await page.goto(`/projects/${projectId}/audit`);
    await page.getByRole("heading", { name: "Audit log" }).waitFor();
    await page.keyboard.press("Tab");
    assert.equal(await page.evaluate(() => document.activeElement?.textContent), "Skip to content");
    await page.keyboard.press("Enter");
    await assertFocus(page, "main", () => document.activeElement?.id === "main");
  });

  test("phone: a Sections menu instead of the column, the first secret on the first screen, Escape closes the menu", async (t) => {
    const server = await startServer(t);
    const alice = await server.signIn("alice@example.test");
    const projectId = await seedProject(alice);
    for (const dark of [false, true]) {
      const tab = await openTab(server, { client: alice, phone: true, dark });
      const { page } = tab;
      await page.goto(`/projects/${projectId}/production`);
      const firstRow = page.getByRole("row", { name: /DATABASE_URL|REDIS_URL|STRIPE_SECRET_KEY/ }).first();
      await firstRow.waitFor();

      const menu = page.getByRole("button", { name: /^Sections/ });
      assert.equal(await menu.isVisible(), true);
      assert.equal(await menu.getAttribute("aria-expanded"), "false");
      assert.match(await menu.innerText(), /Secrets/, "the button names the current section");
      assert.equal(await sectionLink(page, "Audit log").isVisible(), false, "the sections are folded away");
      // The first secret is entirely on the first screen, without scrolling.
      const viewport = page.viewportSize()!;
      const row = (await firstRow.boundingBox())!;
      assert.ok(row.y + row.height <= viewport.height, `the first secret ends at ${row.y + row.height}px of ${viewport.height}px`);
      assert.equal(
        await page.evaluate(() => document.documentElement.scrollWidth <= document.documentElement.clientWidth),
        true,
        "no sideways scroll",
      );
      await check(tab, dark ? "shell-phone-dark" : "shell-phone");

      // Open, Escape closes it and gives focus back to the button.
      await menu.click();
      await assertEventually(() => menu.getAttribute("aria-expanded"), "true");
      await sectionLink(page, "Audit log").waitFor();
      if (!dark) await check(tab, "shell-phone-menu");
      await page.keyboard.press("Tab");
      await page.keyboard.press("Escape");
      // The menu closes on the next render, not within the key press: wait for it.
      await assertFocus(page, "the menu button", () => document.activeElement?.getAttribute("aria-expanded") === "false");
      assert.equal(await menu.evaluate((el) => el === document.activeElement), true, "focus back on the menu button");
      assert.equal(await sectionLink(page, "Audit log").isVisible(), false);

      // Following a section folds the menu on the next page.
      await goToSection(page, "Members & access");
      await page.waitForURL(`**/projects/${projectId}/members`);
      await page.getByRole("heading", { name: "Members and environment access" }).waitFor();
      assert.equal(await menu.getAttribute("aria-expanded"), "false");
      assert.match(await menu.innerText(), /Members & access/);
      // The environment switcher stays reachable on the phone, without the menu.
      await goToSection(page, "Secrets");
      await environmentLink(page, "Staging").click();
      await page.getByRole("heading", { name: "Staging secrets" }).waitFor();
      await tab.context.close();
    }
  });
});

describe("members and environment access on one page", () => {
  test("per member the role and the grants; invite with grants from the same page; the old access address shows it", async (t) => {
    const server = await startServer(t);
    const alice = await server.signIn("alice@example.test");
    const carol = await server.signIn("carol@example.test");
    const dan = await server.signIn("dan@example.test");
    const project = await alice.createProject({ name: "shop", environments: ["development", "staging", "production"] });
    await addMember(alice, carol, project.id, "member", ["staging"]);
    const tab = await openTab(server, { client: alice });
    const { page } = tab;
    await page.goto(`/projects/${project.id}/members`);
    await page
      .waitForFunction(() => document.title !== "Secrets" && document.title !== "Project · Secrets", undefined, { timeout: 5000 })
      .catch(() => undefined);
    assert.equal(await page.title(), "Members & access · shop · Secrets");

    // One row per member: role and grants together.
    const carolRow = page.getByRole("row", { name: /carol@example\.test/ });
    await carolRow.getByLabel("Role of carol@example.test").waitFor();
    assert.equal(await carolRow.getByLabel("carol@example.test can use staging").isChecked(), true);
    assert.equal(await carolRow.getByLabel("carol@example.test can use production").isChecked(), false);
    await page
      .getByRole("row", { name: /alice@example\.test/ })
      .getByText("Implicit")
      .waitFor();
    await check(tab, "members-access");

    // A grant from the row, written through the API.
    await carolRow.getByLabel("carol@example.test can use production").check();
    await page.getByRole("status").filter({ hasText: "carol@example.test can now use production." }).waitFor();
    const matrix = await alice.json("GET", `/api/projects/${project.id}/environment-access`);
    const carolAccess = matrix.body.members.find((m: { email: string }) => m.email === "carol@example.test").access;
    assert.deepEqual(carolAccess, { development: "none", staging: "granted", production: "granted" });

    // Promoted to admin in the same row: the switches give way to implicit access.
    await carolRow.getByLabel("Role of carol@example.test").selectOption("admin");
    await carolRow.getByRole("button", { name: "Change role of carol@example.test to admin" }).click();
    await page.getByRole("status").filter({ hasText: "carol@example.test is now an admin." }).waitFor();
    await carolRow.getByText("Implicit").waitFor();
    assert.equal(await carolRow.getByRole("checkbox").count(), 0);
    // Removing an admin says what goes with them (src/lost-rights.ts); Cancel keeps her.
    await carolRow.getByRole("button", { name: "Remove carol@example.test" }).click();
    const removeCarol = page.getByRole("dialog", { name: "Remove carol@example.test?" });
    assert.match(
      (await removeCarol.textContent()) ?? "",
      /Service tokens they created are revoked, invitations they sent are voided, and a Vercel sync that uses their token is paused\./,
    );
    await removeCarol.getByRole("button", { name: "Cancel" }).click();

    // Invite with grants from the same page; once accepted, the grants are in the new row.
    const inviteForm = page.locator("form").filter({ has: page.getByRole("heading", { name: "Invite someone" }) });
    await inviteForm.getByLabel("E-mail address").fill("dan@example.test");
    await inviteForm.getByLabel("Role").selectOption("viewer");
    await inviteForm.getByRole("group", { name: "Environments to grant on acceptance" }).getByLabel("Development").check();
    await inviteForm.getByRole("button", { name: "Send invitation" }).click();
    const link = await page
      .getByRole("status")
      .filter({ hasText: "Invitation created for dan@example.test." })
      .getByLabel("Invitation link")
      .inputValue();
    const accepted = await dan.json("POST", "/api/invitations/accept", { token: new URL(link).hash.slice(1) });
    assert.equal(accepted.status, 200);
    await page.reload();
    const danRow = page.getByRole("row", { name: /dan@example\.test/ }).filter({ has: page.getByLabel("Role of dan@example.test") });
    await danRow.waitFor();
    assert.equal(await danRow.getByLabel("dan@example.test can use development").isChecked(), true);
    assert.equal(await danRow.getByLabel("dan@example.test can use staging").isChecked(), false);

    // The former Environment access address shows the same page, Members & access current.
    await page.goto(`/projects/${project.id}/access`);
    await page.getByRole("heading", { name: "Members and environment access" }).waitFor();
    assert.deepEqual(await currentSection(page), ["Members & access"]);

    // A viewer reads the roles; the grants are for those who may change them.
    const danTab = await openTab(server, { client: dan });
    await danTab.page.goto(`/projects/${project.id}/members`);
    await danTab.page.getByRole("row", { name: /alice@example\.test/ }).waitFor();
    // A viewer's sections are the ones a viewer may use.
    assert.deepEqual(await danTab.page.getByRole("navigation", { name: "Project" }).getByRole("link").allTextContents(), [
      "Secrets",
      "Members & access",
    ]);
    assert.equal(await danTab.page.getByRole("checkbox").count(), 0);
    assert.equal(await danTab.page.getByRole("columnheader", { name: "Environments" }).count(), 0);
    await check(danTab, "members-access-viewer");
  });
});
