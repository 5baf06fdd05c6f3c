// Across environments in Chromium at 1280×800 and 390×844: keys ×
// environments as present, missing, same or different without any value reaching the
// page, "missing in production" at a glance, and copy or replace in one action.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { check, useBrowser } from "./browser.ts";
import { auditEvents, startServer } from "./helpers.ts";
import { addMember } from "./secrets-helpers.ts";
import { assertNoSidewaysScroll, exported, openAt, put, rowAction, SIZES } from "./ui-secrets-helpers.ts";

useBrowser();

const VALUES = ["postgres://dev-and-staging", "postgres://production-only-value", "key-in-lower-envs", "only-in-production"];

describe("secrets across environments", () => {
  for (const size of SIZES) {
    test(`${size.name}: the overview shows present, missing, same and different without values; copy and replace in one action, audited`, async (t) => {
      const server = await startServer(t);
      const alice = await server.signIn("alice@example.test");
      const project = await alice.createProject({ name: "across", environments: ["development", "staging", "production"] });
      await put(alice, project.id, "development", "DATABASE_URL", VALUES[0]!);
      await put(alice, project.id, "staging", "DATABASE_URL", VALUES[0]!);
      await put(alice, project.id, "production", "DATABASE_URL", VALUES[1]!);
      await put(alice, project.id, "development", "API_KEY", VALUES[2]!);
      await put(alice, project.id, "staging", "API_KEY", VALUES[2]!);
      await put(alice, project.id, "production", "ONLY_PROD", VALUES[3]!);

      const tab = await openAt(server, alice, size, `/projects/${project.id}/staging`);
      const { page } = tab;
      const bodies: string[] = [];
      page.on("response", async (res) => {
        if (new URL(res.url()).pathname.startsWith("/api/")) bodies.push(await res.text().catch(() => ""));
      });
      await page.getByRole("link", { name: "Across environments" }).click();
      await page.waitForURL(/\?view=compare$/);
      const gaps = page.getByRole("list", { name: "Missing keys per environment" });
      await gaps.getByText("Missing in production: 1 key").waitFor();
      assert.match(await gaps.innerText(), /Missing in development: 1 key \(ONLY_PROD\)/);
      assert.match(await gaps.innerText(), /Missing in staging: 1 key \(ONLY_PROD\)/);
      assert.match(await gaps.innerText(), /Missing in production: 1 key \(API_KEY\)/);
      assert.match(await gaps.getByRole("listitem").first().innerText(), /^Missing in production/, "production's gaps come first");

      // Cell texts as a screen reader reads them (buttons name their key and environments);
      // a phone leaves out the status column and the version numbers.
      const cells = async (key: string) =>
        (
          await page
            .getByRole("row", { name: new RegExp(`^${key}`) })
            .getByRole("cell")
            .allInnerTexts()
        ).map((text) => text.replace(/\s+/g, " ").trim());
      const shown = (full: string[]) => (size.phone ? full.slice(0, -1).map((text) => text.replace(/ v\d+/, "")) : full);
      assert.deepEqual(
        await cells("DATABASE_URL"),
        shown([
          "Different (value A) v1",
          "Different (value A) v1",
          "Different (value B) v1 Replace DATABASE_URL in production with the value from staging",
          "Different values",
        ]),
      );
      assert.deepEqual(
        await cells("API_KEY"),
        shown(["Same v1", "Same v1", "Missing Copy API_KEY from staging to production", "Missing in production"]),
      );
      assert.deepEqual(
        await cells("ONLY_PROD"),
        shown([
          "Missing Copy ONLY_PROD from production to development",
          "Missing Copy ONLY_PROD from production to staging",
          "Present v1",
          "Missing in development, staging",
        ]),
      );
      // No value is in the page or in anything the page fetched; the comparison is audited as
      // one, not as reveals.
      const html = await page.content();
      for (const value of VALUES) {
        assert.ok(!html.includes(value), `the page shows no value (${value})`);
        assert.ok(!bodies.some((body) => body.includes(value)), `no answer carries a value (${value})`);
      }
      assert.equal((await auditEvents(alice, project.id, "secrets.compared")).length, 1);
      assert.equal((await auditEvents(alice, project.id, "secret.revealed")).length, 0);
      await check(tab, `secrets-across-${size.name}`);
      await assertNoSidewaysScroll(page, size.name);

      // Missing in production: copied from staging in one click.
      await page.getByRole("button", { name: "Copy API_KEY from staging to production" }).click();
      await page.getByRole("status").filter({ hasText: "Copied API_KEY from staging to production." }).waitFor();
      await page.getByText("Missing in production: 1 key").waitFor({ state: "detached" });
      assert.deepEqual(await cells("API_KEY"), shown(["Same v1", "Same v1", "Same v1", "Same everywhere"]));
      assert.equal((await exported(alice, project.id, "production")).API_KEY, VALUES[2]);

      // A different value is replaced after a confirmation: promote staging to production.
      await page.getByRole("button", { name: "Replace DATABASE_URL in production with the value from staging" }).click();
      const confirm = page.getByRole("dialog", { name: "Replace DATABASE_URL in production?" });
      await check(tab, `secrets-across-replace-${size.name}`);
      await confirm.getByRole("button", { name: "Replace in production" }).click();
      await page.getByRole("status").filter({ hasText: "Copied DATABASE_URL from staging to production." }).waitFor();
      assert.deepEqual(await cells("DATABASE_URL"), shown(["Same v1", "Same v1", "Same v2", "Same everywhere"]));
      assert.equal((await exported(alice, project.id, "production")).DATABASE_URL, VALUES[0]);

      const copied = await auditEvents(alice, project.id, "secret.copied");
      assert.deepEqual(
        copied.map((e) => [e.metadata.key, e.metadata.environment, e.metadata.toEnvironment, e.metadata.result]),
        [
          ["API_KEY", "staging", "production", "created"],
          ["DATABASE_URL", "staging", "production", "updated"],
        ],
      );

      // From the grid: the row menu copies to another environment; an existing key there
      // is replaced only after a confirmation.
      await page.getByRole("link", { name: "Staging only" }).click();
      await put(alice, project.id, "staging", "NEW_FLAG", "on");
      await page.reload();
      await rowAction(page, "NEW_FLAG", "Copy to production");
      await page.getByRole("status").filter({ hasText: "Copied NEW_FLAG to production." }).waitFor();
      assert.equal((await exported(alice, project.id, "production")).NEW_FLAG, "on");
      await put(alice, project.id, "development", "NEW_FLAG", "off");
      await rowAction(page, "NEW_FLAG", "Copy to development");
      const replace = page.getByRole("dialog", { name: "Replace NEW_FLAG in development?" });
      await replace.getByRole("button", { name: "Replace in development" }).click();
      await page.getByRole("status").filter({ hasText: "Copied NEW_FLAG to development." }).waitFor();
      assert.equal((await exported(alice, project.id, "development")).NEW_FLAG, "on");

      // The audit log reads both as sentences.
      await page.goto(`/projects/${project.id}/audit?category=secrets`);
      const log = page.getByRole("list", { name: "Audit events, newest first" });
      await log.getByText("You copied API_KEY from staging to production").waitFor();
      await log.getByText("You compared the values of 3 keys across development, staging, production (no value shown)").first().waitFor();
      await tab.context.close();
    });
  }

  test("a member sees only the environments granted, and a viewer gets no copy buttons", async (t) => {
    const server = await startServer(t);
    const alice = await server.signIn("alice@example.test");
    const mia = await server.signIn("mia@example.test");
    const vic = await server.signIn("vic@example.test");
    const project = await alice.createProject({ name: "grants", environments: ["development", "staging", "production"] });
    await addMember(alice, mia, project.id, "member", ["development", "staging"]);
    await addMember(alice, vic, project.id, "viewer", ["development", "staging"]);
    await put(alice, project.id, "development", "SHARED", "dev");
    await put(alice, project.id, "production", "SECRET_PROD", "prod");

    const tab = await openAt(server, mia, SIZES[0], `/projects/${project.id}/development?view=compare`);
    const { page } = tab;
    await page.getByText("Missing in staging: 1 key").waitFor();
    assert.deepEqual(await page.getByRole("columnheader").allInnerTexts(), ["Key", "Development", "Staging", "Status"]);
    assert.equal(await page.getByText("SECRET_PROD").count(), 0, "a key only in an environment not granted is not shown");
    await page.getByRole("button", { name: "Copy SHARED from development to staging" }).waitFor();
    await tab.context.close();

    const viewer = await openAt(server, vic, SIZES[1], `/projects/${project.id}/development?view=compare`);
    await viewer.page.getByText("Missing in staging: 1 key").waitFor();
    assert.equal(await viewer.page.getByRole("button", { name: /^Copy SHARED/ }).count(), 0);
    await check(viewer, "secrets-across-viewer-phone");
    await viewer.context.close();
  });

  test("a replace or a copy that fails says why: the confirmation stays open on its error, the grid names the key", async (t) => {
    const server = await startServer(t);
    const alice = await server.signIn("alice@example.test");
    const mia = await server.signIn("mia@example.test");
    const project = await alice.createProject({ name: "refused", environments: ["development", "staging"] });
    await addMember(alice, mia, project.id, "member", ["development", "staging"]);
    await put(alice, project.id, "development", "DIFFERS", "development-value");
    await put(alice, project.id, "staging", "DIFFERS", "staging-value");
    const access = (env: string) => `/api/projects/${project.id}/environments/${env}/access/${mia.user!.id}`;

    const tab = await openAt(server, mia, SIZES[0], `/projects/${project.id}/development?view=compare`);
    const { page } = tab;
    await page.getByRole("button", { name: "Replace DIFFERS in staging with the value from development" }).click();
    const confirm = page.getByRole("dialog", { name: "Replace DIFFERS in staging?" });
    await confirm.waitFor();
    // Her access to staging goes while she reads the question.
    assert.equal((await alice.json("DELETE", access("staging"))).status, 200);
    await confirm.getByRole("button", { name: "Replace in staging" }).click();
    await confirm.getByRole("alert").filter({ hasText: "You do not have access to the staging environment of this project." }).waitFor();
    assert.ok(await confirm.isVisible(), "the dialog stays open on its error");
    assert.equal((await exported(alice, project.id, "staging")).DIFFERS, "staging-value");
    await confirm.getByRole("button", { name: "Cancel" }).click();

    // The grid: a copy is a reveal, refused once her access to development goes too.
    await page.goto(`/projects/${project.id}/development`);
    await page.getByRole("button", { name: "Copy DIFFERS" }).waitFor();
    assert.equal((await alice.json("DELETE", access("development"))).status, 200);
    await page.getByRole("button", { name: "Copy DIFFERS" }).click();
    await page
      .getByRole("alert")
      .filter({ hasText: "Could not copy DIFFERS: You do not have access to the development environment of this project." })
      .waitFor();
    await tab.context.close();
  });
});
