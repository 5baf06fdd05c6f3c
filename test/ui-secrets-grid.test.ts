// The secrets grid in Chromium at 1280×800 and 390×844: sorted by
// key, sortable, one line per row whatever is revealed, keys breaking only after an
// underscore, reveal and copy as named icons, the row menu from the keyboard, and bulk
// selection with delete and download.
import assert from "node:assert/strict";
import fs from "node:fs";
import { describe, test } from "node:test";
import { parse } from "dotenv";
import { assertEventually, check, useBrowser } from "./browser.ts";
import { auditEvents, startServer } from "./helpers.ts";
import { assertNoSidewaysScroll, exported, focusedName, openAt, put, SIZES } from "./ui-secrets-helpers.ts";

useBrowser();

const PEM = [
  "-----BEGIN CERTIFICATE-----",
  ...Array.from({ length: 20 }, (_, i) => `MIIDdzCCAl+gAwIBAgIEAgAAuTANBgkqhkiG9w0BAQUFADBaMQswCQYDVQQGEwJJ${i}`),
  "-----END CERTIFICATE-----",
].join("\n");

describe("secrets grid", () => {
  test("the CLI's hand-over link (?delete=KEYS) selects those keys and opens the confirmation; nothing goes without the click", async (t) => {
    const server = await startServer(t);
    const alice = await server.signIn("alice@example.test");
    const project = await alice.createProject({ name: "handover", environments: ["development"] });
    for (const key of ["OLD_ONE", "OLD_TWO", "KEPT"]) await put(alice, project.id, "development", key, `${key}-v`);
    const tab = await openAt(
      server,
      alice,
      SIZES[0],
      `/projects/${project.id}/development?delete=OLD_ONE,OLD_TWO,NOT_THERE,${encodeURIComponent("Session expired – sign in at https://evil.example")}`,
    );
    const { page } = tab;
    const confirm = page.getByRole("dialog", { name: "Delete 2 secrets?" });
    await confirm.getByRole("listitem").first().waitFor();
    assert.deepEqual(await confirm.getByRole("list", { name: "Secrets to delete" }).getByRole("listitem").allInnerTexts(), [
      "OLD_ONE",
      "OLD_TWO",
    ]);
    // Only keys are named back: the rest of a link is anyone's text.
    await page.getByText("Not in development: NOT_THERE.").waitFor();
    assert.equal(await page.getByText("evil.example").count(), 0);
    // The link is spent: a reload does not ask again.
    assert.equal(new URL(page.url()).search, "");
    assert.deepEqual(Object.keys(await exported(alice, project.id, "development")).sort(), ["KEPT", "OLD_ONE", "OLD_TWO"]);
    await check(tab, "secrets-handover-confirm");
    await confirm.getByRole("button", { name: "Delete 2 secrets" }).click();
    await page.getByText("Deleted 2 secrets.").waitFor();
    assert.deepEqual(Object.keys(await exported(alice, project.id, "development")), ["KEPT"]);
    await tab.context.close();
  });

  test("changed or deleted elsewhere: an older revealed value is neither shown nor copied, a deleted secret's row goes, and each action says what it did", async (t) => {
    const server = await startServer(t);
    const alice = await server.signIn("alice@example.test");
    const project = await alice.createProject({ name: "elsewhere", environments: ["development"] });
    const base = `/api/projects/${project.id}/environments/development/secrets`;
    const alpha = await put(alice, project.id, "development", "ALPHA", "alpha-v1");
    const beta = await put(alice, project.id, "development", "BETA", "beta-v1");
    const delta = await put(alice, project.id, "development", "DELTA", "delta-v1");
    const tab = await openAt(server, alice, SIZES[0], `/projects/${project.id}/development`);
    const { page } = tab;
    await page.getByRole("button", { name: "Reveal ALPHA" }).click();
    await page.getByText("alpha-v1").waitFor();

    // Saved elsewhere at version 2; this tab reads the list again when it creates a secret.
    assert.equal((await alice.json("PATCH", `${base}/${alpha}`, { value: "alpha-v2" })).status, 200);
    await page.getByRole("button", { name: "New secret" }).click();
    const create = page.getByRole("dialog", { name: "New secret in development" });
    await create.getByLabel("Key").fill("GAMMA");
    await create.getByLabel("Value", { exact: true }).fill("gamma-v1");
    await create.getByRole("button", { name: "Create secret" }).click();
    await page.getByRole("status").filter({ hasText: "Created GAMMA." }).waitFor();
    await page.getByRole("row", { name: /ALPHA/ }).getByText("v2").waitFor();
    await page.getByRole("button", { name: "Reveal ALPHA" }).waitFor();
    assert.equal(await page.getByText("alpha-v1").count(), 0, "version 1's value is not shown beside version 2");
    await page.getByRole("button", { name: "Copy ALPHA" }).click();
    await page.getByRole("button", { name: "Copied ALPHA" }).waitFor();
    assert.equal(await page.evaluate(() => navigator.clipboard.readText()), "alpha-v2");
    // Saved again elsewhere, and revealed while the list still says version 2: the list
    // catches up, and the value shows beside its own version.
    assert.equal((await alice.json("PATCH", `${base}/${alpha}`, { value: "alpha-v3" })).status, 200);
    await page.getByRole("button", { name: "Reveal ALPHA" }).click();
    await page.getByText("alpha-v3").waitFor();
    await page.getByRole("row", { name: /ALPHA/ }).getByRole("cell", { name: "v3", exact: true }).waitFor();

    // Deleted elsewhere: a reveal says so and the row goes.
    assert.equal((await alice.json("DELETE", `${base}/${beta}`)).status, 200);
    await page.getByRole("button", { name: "Reveal BETA" }).click();
    await page.getByText("BETA: it was deleted meanwhile").waitFor();
    await page.getByRole("row", { name: /BETA/ }).waitFor({ state: "detached" });
    // Deleting one that is gone already is done, not an error that keeps the dialog open.
    const gamma = (await alice.json("GET", base)).body.secrets.find((s: { key: string }) => s.key === "GAMMA").id;
    assert.equal((await alice.json("DELETE", `${base}/${gamma}`)).status, 200);
    await page.getByRole("button", { name: "More actions for GAMMA" }).click();
    await page.getByRole("menuitem", { name: "Delete" }).click();
    await page.getByRole("dialog", { name: "Delete GAMMA?" }).getByRole("button", { name: "Delete secret" }).click();
    await page.getByRole("status").filter({ hasText: "GAMMA was already deleted" }).waitFor();
    await page.getByRole("row", { name: /GAMMA/ }).waitFor({ state: "detached" });
    await page.getByRole("dialog").waitFor({ state: "detached" });
    // Editing one deleted elsewhere: the dialog says so, and the row behind it goes.
    assert.equal((await alice.json("DELETE", `${base}/${delta}`)).status, 200);
    await page.getByRole("button", { name: "More actions for DELTA" }).click();
    await page.getByRole("menuitem", { name: "Edit" }).click();
    const edit = page.getByRole("dialog", { name: "Edit DELTA" });
    await edit.getByText("Secret not found.").waitFor();
    await page.getByRole("row", { name: /DELTA/ }).waitFor({ state: "detached" });
    await edit.getByRole("button", { name: "Close" }).click();
    // A delete that goes through says so too.
    await page.getByRole("button", { name: "More actions for ALPHA" }).click();
    await page.getByRole("menuitem", { name: "Delete" }).click();
    await page.getByRole("dialog", { name: "Delete ALPHA?" }).getByRole("button", { name: "Delete secret" }).click();
    await page.getByRole("status").filter({ hasText: "Deleted ALPHA." }).waitFor();
    await tab.context.close();
  });

  test("a revealed value does not come back with Back after leaving the page (the back/forward cache)", async (t) => {
    const server = await startServer(t);
    const alice = await server.signIn("alice@example.test");
    const project = await alice.createProject({ name: "bfcache", environments: ["development"] });
    await put(alice, project.id, "development", "KEPT_BACK", "kept-back-value-123");
    const tab = await openAt(server, alice, SIZES[0], `/projects/${project.id}/development`);
    const { page } = tab;
    await page.getByRole("button", { name: "Reveal KEPT_BACK" }).click();
    await page.getByText("kept-back-value-123").waitFor();
    // Chromium's headless build keeps no page in that cache ("disabled for delegate"): what a
    // browser does as it puts the page there is done by hand. Left for the cache, the page is
    // emptied, so the cache holds no value.
    await page.evaluate(() => window.dispatchEvent(new PageTransitionEvent("pagehide", { persisted: true })));
    assert.equal(await page.getByText("kept-back-value-123").count(), 0, "the value stays in the page left for the cache");
    assert.equal(await page.getByRole("button", { name: "Reveal KEPT_BACK" }).count(), 0);
    // Shown from the cache, it is loaded anew: the grid, its value hidden.
    await Promise.all([
      page.waitForEvent("load"),
      page.evaluate(() => window.dispatchEvent(new PageTransitionEvent("pageshow", { persisted: true }))),
    ]);
    await page.getByRole("button", { name: "Reveal KEPT_BACK" }).waitFor();
    assert.equal(await page.getByText("kept-back-value-123").count(), 0);
    await tab.context.close();
  });

  test("phone: a 128-character key with no underscore to break at stays inside the page", async (t) => {
    const server = await startServer(t);
    const alice = await server.signIn("alice@example.test");
    const project = await alice.createProject({ name: "long", environments: ["production"] });
    await put(alice, project.id, "production", `K${"X".repeat(127)}`, "v");
    const tab = await openAt(server, alice, SIZES[1], `/projects/${project.id}/production`);
    await tab.page.getByRole("button", { name: /^Reveal KXXX/ }).waitFor();
    await assertNoSidewaysScroll(tab.page, "phone, long key");
    await tab.context.close();
  });

  for (const size of SIZES) {
    test(`${size.name}: alphabetical by default, sortable, one line per row, keys wrap only at underscores; reveal, copy and the row menu`, async (t) => {
      const server = await startServer(t);
      const alice = await server.signIn("alice@example.test");
      const project = await alice.createProject({ name: "grid", environments: ["staging", "production"] });
      await put(alice, project.id, "production", "ZETA", "z");
      const middle = await put(alice, project.id, "production", "MIDDLE", "m1");
      await put(alice, project.id, "production", "AWS_SECRET_ACCESS_KEY_FOR_THE_BACKUP_BUCKET", "wJalrXUtnFEMI/K7MDENG");
      await put(alice, project.id, "production", "TLS_CERT", PEM);
      assert.equal(
        (await alice.json("PATCH", `/api/projects/${project.id}/environments/production/secrets/${middle}`, { value: "m2" })).status,
        200,
      );

      const tab = await openAt(server, alice, size, `/projects/${project.id}/production`);
      const { page } = tab;
      const keys = () => page.locator("table.secrets-grid tbody th").allInnerTexts();
      await page.getByRole("row", { name: /ZETA/ }).waitFor();
      assert.deepEqual(await keys(), ["AWS_SECRET_ACCESS_KEY_FOR_THE_BACKUP_BUCKET", "MIDDLE", "TLS_CERT", "ZETA"]);
      const keyHeader = page.getByRole("columnheader", { name: /Key/ });
      assert.equal(await keyHeader.getAttribute("aria-sort"), "ascending");
      await keyHeader.getByRole("button").click();
      await assertEventually(() => keyHeader.getAttribute("aria-sort"), "descending");
      assert.deepEqual(await keys(), ["ZETA", "TLS_CERT", "MIDDLE", "AWS_SECRET_ACCESS_KEY_FOR_THE_BACKUP_BUCKET"]);
      if (!size.phone) {
        // Updated: newest first on the first click; the other columns lose their sort.
        const updated = page.getByRole("columnheader", { name: /Updated/ });
        await updated.getByRole("button").click();
        await assertEventually(() => updated.getAttribute("aria-sort"), "descending");
        assert.equal(await keyHeader.getAttribute("aria-sort"), null);
        assert.equal((await keys())[0], "MIDDLE");
        const version = page.getByRole("columnheader", { name: /Version/ });
        await version.getByRole("button").click();
        await assertEventually(() => version.getAttribute("aria-sort"), "ascending");
        assert.equal((await keys())[3], "MIDDLE");
        await keyHeader.getByRole("button").click();
      } else {
        // The phone keeps key, value and buttons: version and time give way.
        assert.equal(await page.getByRole("columnheader", { name: /Version/ }).isVisible(), false);
        await keyHeader.getByRole("button").click();
      }
      assert.deepEqual((await keys())[0], "AWS_SECRET_ACCESS_KEY_FOR_THE_BACKUP_BUCKET");

      // A key wraps only after an underscore: every line of it but the last ends with "_".
      const lines = await page
        .locator("code.key")
        .first()
        .evaluate((code) => {
          const text = code.textContent ?? "";
          const range = document.createRange();
          const tops: number[] = [];
          let offset = 0;
          for (const node of code.childNodes) {
            if (node.nodeType !== Node.TEXT_NODE) continue;
            for (let i = 0; i < (node.textContent ?? "").length; i++) {
              range.setStart(node, i);
              range.setEnd(node, i + 1);
              tops[offset++] = Math.round(range.getBoundingClientRect().top);
            }
          }
          const out: string[] = [];
          tops.forEach((top, i) => {
            if (i === 0 || top !== tops[i - 1]) out.push("");
            out[out.length - 1] = (out[out.length - 1] ?? "") + (text[i] ?? "");
          });
          return out;
        });
      assert.equal(lines.join(""), "AWS_SECRET_ACCESS_KEY_FOR_THE_BACKUP_BUCKET");
      for (const line of lines.slice(0, -1)) assert.ok(line.endsWith("_"), `a key line breaks mid-word: ${JSON.stringify(lines)}`);
      if (size.phone) assert.ok(lines.length > 1, "the long key wraps on a phone");

      // Revealing a multi-line value leaves every row where it was.
      const heights = () =>
        page.locator("table.secrets-grid tbody tr").evaluateAll((rows) => rows.map((r) => Math.round(r.getBoundingClientRect().height)));
      const before = await heights();
      const reveal = page.getByRole("button", { name: "Reveal TLS_CERT" });
      assert.match((await reveal.getAttribute("title")) ?? "", /audit log/);
      await reveal.click();
      await page.getByRole("button", { name: "Hide TLS_CERT" }).waitFor();
      await page
        .getByRole("row", { name: /TLS_CERT/ })
        .getByText("-----BEGIN CERTIFICATE-----", { exact: false })
        .waitFor();
      assert.deepEqual(await heights(), before);
      assert.equal((await auditEvents(alice, project.id, "secret.revealed")).length, 1);
      // The expand toggle is there only when something is hidden: another line, or a line
      // wider than the column (a phone's column is narrower).
      await page.getByRole("button", { name: "More of TLS_CERT" }).waitFor();
      await page.getByRole("button", { name: "Reveal AWS_SECRET_ACCESS_KEY_FOR_THE_BACKUP_BUCKET" }).click();
      await page.getByRole("button", { name: "Hide AWS_SECRET_ACCESS_KEY_FOR_THE_BACKUP_BUCKET" }).waitFor();
      await page.getByText("wJalrXUtnFEMI/K7MDENG").waitFor();
      const more = page.getByRole("button", { name: "More of AWS_SECRET_ACCESS_KEY_FOR_THE_BACKUP_BUCKET" });
      if (size.phone) await more.waitFor();
      else assert.equal(await more.count(), 0);
      await page.getByRole("button", { name: "Hide AWS_SECRET_ACCESS_KEY_FOR_THE_BACKUP_BUCKET" }).click();

      // Copy, an icon button named for its row, reads the value (a reveal) into the clipboard.
      await page.getByRole("button", { name: "Copy ZETA" }).click();
      await page.getByRole("button", { name: "Copied ZETA" }).waitFor();
      assert.equal(await page.evaluate(() => navigator.clipboard.readText()), "z");
      assert.equal((await auditEvents(alice, project.id, "secret.revealed")).length, 3);
      // Safari's rule, played in Chromium: a clipboard write only while the click is being
      // handled, which the reveal's request outlives. The value goes to the clipboard anyway.
      // A script of text: tsx names the functions of a closure with a helper the page lacks.
      await page.evaluate(`(async () => {
        await navigator.clipboard.writeText("");
        const clipboard = navigator.clipboard;
        const write = clipboard.write.bind(clipboard);
        const writeText = clipboard.writeText.bind(clipboard);
        let inClick = false;
        document.addEventListener("click", () => { inClick = true; setTimeout(() => { inClick = false; }); }, true);
        const refused = () => Promise.reject(new DOMException("Not in a user gesture", "NotAllowedError"));
        clipboard.write = (items) => (inClick ? write(items) : refused());
        clipboard.writeText = (text) => (inClick ? writeText(text) : refused());
      })()`);
      await page.getByRole("button", { name: "Copy ZETA" }).click();
      await page.getByRole("button", { name: "Copied ZETA" }).waitFor();
      assert.equal(await page.evaluate(() => navigator.clipboard.readText()), "z");
      assert.equal((await auditEvents(alice, project.id, "secret.revealed")).length, 4);
      await page.reload();
      await page.getByRole("button", { name: "Copy ZETA" }).waitFor();
      // A clipboard that refuses the item gets the text the other way, and the value is read
      // once all the same.
      await page.evaluate(async () => {
        navigator.clipboard.write = () => Promise.reject(new DOMException("refused", "NotAllowedError"));
        await navigator.clipboard.writeText("");
      });
      await page.getByRole("button", { name: "Copy ZETA" }).click();
      await page.getByRole("button", { name: "Copied ZETA" }).waitFor();
      assert.equal(await page.evaluate(() => navigator.clipboard.readText()), "z");
      assert.equal((await auditEvents(alice, project.id, "secret.revealed")).length, 5);

      // The row menu, keyboard only (WAI-ARIA menu button).
      const menuButton = page.getByRole("button", { name: "More actions for MIDDLE" });
      assert.equal(await menuButton.getAttribute("aria-haspopup"), "menu");
      await menuButton.focus();
      await page.keyboard.press("Enter");
      const menu = page.getByRole("menu", { name: "More actions for MIDDLE" });
      await menu.waitFor();
      assert.equal(await menuButton.getAttribute("aria-expanded"), "true");
      assert.deepEqual(await menu.getByRole("menuitem").allInnerTexts(), ["Edit", "History", "Copy to staging", "Delete"]);
      assert.equal(await focusedName(page), "Edit");
      await page.keyboard.press("ArrowDown");
      assert.equal(await focusedName(page), "History");
      await page.keyboard.press("ArrowUp");
      await page.keyboard.press("ArrowUp");
      assert.equal(await focusedName(page), "Delete", "ArrowUp wraps to the last item");
      await page.keyboard.press("Home");
      assert.equal(await focusedName(page), "Edit");
      await page.keyboard.press("End");
      assert.equal(await focusedName(page), "Delete");
      await page.keyboard.press("Escape");
      await menu.waitFor({ state: "hidden" });
      assert.equal(await menuButton.getAttribute("aria-expanded"), "false");
      assert.equal(await focusedName(page), "More actions for MIDDLE");
      await page.keyboard.press("ArrowUp");
      await menu.waitFor();
      assert.equal(await focusedName(page), "Delete", "ArrowUp on the button opens at the last item");
      await page.keyboard.press("Escape");
      await page.keyboard.press("ArrowDown");
      await page.keyboard.press("ArrowDown");
      await page.keyboard.press("Enter");
      const history = page.getByRole("dialog", { name: "History of MIDDLE" });
      await history.getByText("v2").first().waitFor();
      await page.keyboard.press("Escape");
      await history.waitFor({ state: "detached" });

      await assertNoSidewaysScroll(page, size.name);
      await menuButton.click();
      await menu.waitFor();
      await check(tab, `secrets-grid-menu-${size.name}`);
      await tab.context.close();
    });

    test(`${size.name}: select secrets, download the selection (one audited reveal per key) and delete it after a confirmation listing the keys`, async (t) => {
      const server = await startServer(t);
      const alice = await server.signIn("alice@example.test");
      const project = await alice.createProject({ name: "bulk", environments: ["production"] });
      for (const [key, value] of [
        ["A_ONE", "1"],
        ["B_TWO", "two words"],
        ["C_THREE", "line1\nline2"],
        ["D_FOUR", "4"],
      ]) {
        await put(alice, project.id, "production", key!, value!);
      }
      const tab = await openAt(server, alice, size, `/projects/${project.id}/production`);
      const { page } = tab;
      await page.getByRole("row", { name: /D_FOUR/ }).waitFor();
      const all = page.getByRole("checkbox", { name: "Select all shown secrets" });

      await page.getByRole("checkbox", { name: "Select B_TWO" }).check();
      await page.getByRole("checkbox", { name: "Select C_THREE" }).check();
      const bar = page.getByRole("group", { name: "Selected secrets" });
      await bar.getByText("2 secrets selected").waitFor();
      assert.equal(await all.evaluate((el) => (el as HTMLInputElement).indeterminate), true);

      const [json] = await Promise.all([
        page.waitForEvent("download"),
        bar.getByRole("button", { name: "Download selected as JSON" }).click(),
      ]);
      assert.deepEqual(JSON.parse(fs.readFileSync((await json.path())!, "utf8")), {
        secrets: [
          { key: "B_TWO", value: "two words" },
          { key: "C_THREE", value: "line1\nline2" },
        ],
      });
      // The audit names exactly the keys that left, and no environment export happened.
      const revealed = await auditEvents(alice, project.id, "secret.revealed");
      assert.deepEqual(revealed.map((e) => e.metadata.key).sort(), ["B_TWO", "C_THREE"]);
      assert.equal((await auditEvents(alice, project.id, "secrets.exported")).length, 0);
      const [dotenv] = await Promise.all([
        page.waitForEvent("download"),
        bar.getByRole("button", { name: "Download selected as .env" }).click(),
      ]);
      assert.deepEqual(parse(fs.readFileSync((await dotenv.path())!, "utf8")), { B_TWO: "two words", C_THREE: "line1\nline2" });
      await check(tab, `secrets-bulk-${size.name}`);

      await bar.getByRole("button", { name: "Delete selected" }).click();
      const confirm = page.getByRole("dialog", { name: "Delete 2 secrets?" });
      await confirm.getByRole("listitem").first().waitFor();
      assert.deepEqual(await confirm.getByRole("list", { name: "Secrets to delete" }).getByRole("listitem").allInnerTexts(), [
        "B_TWO",
        "C_THREE",
      ]);
      await check(tab, `secrets-bulk-confirm-${size.name}`);
      await confirm.getByRole("button", { name: "Delete 2 secrets" }).click();
      await page.getByRole("status").filter({ hasText: "Deleted 2 secrets." }).waitFor();
      assert.deepEqual(Object.keys(await exported(alice, project.id, "production")), ["A_ONE", "D_FOUR"]);
      assert.equal(await bar.count(), 0, "the selection is gone with its secrets");

      // Select all takes the shown rows only (a search narrows them).
      await page.getByLabel("Search keys").fill("a_");
      await page.getByRole("row", { name: /D_FOUR/ }).waitFor({ state: "detached" });
      await all.check();
      await bar.getByText("1 secret selected").waitFor();
      await page.getByLabel("Search keys").fill("");
      await all.check();
      await bar.getByText("2 secrets selected").waitFor();
      await bar.getByRole("button", { name: "Clear selection" }).click();
      await bar.waitFor({ state: "detached" });
      await assertNoSidewaysScroll(page, size.name);
      await tab.context.close();
    });
  }
});
