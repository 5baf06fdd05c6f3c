// Editing in place in Chromium at 1280×800 and 390×844: the editor opens
// with the current value (an audited reveal, and it says so), monospace, line numbers for
// PEM and JSON, discard and save, a conflict explained with reload and reapply, and several
// KEY=VALUE lines pasted into the new-secret key field created through the import endpoint.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import type { Page } from "playwright-core";
import { assertEventually, check, useBrowser } from "./browser.ts";
import { auditEvents, startServer } from "./helpers.ts";
import { assertNoSidewaysScroll, exported, openAt, put, rowAction, SIZES } from "./ui-secrets-helpers.ts";

useBrowser();

const PEM = [
  "-----BEGIN PRIVATE KEY-----",
  "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7",
  "VJTUt9Us8cKjMzEfYyjiWA4R4/M2bS1GB4t7NXp98C3SC6dVMvDu",
  "-----END PRIVATE KEY-----",
].join("\n");
const JSON_VALUE = '{\n  "region": "eu-west-1",\n  "replicas": 3\n}';

/** The editor's textarea once it holds `value` (it is filled after the reveal answers). */
async function editorHolds(page: Page, value: string): Promise<void> {
  await page.waitForFunction((wanted) => (document.getElementById("edit-value") as HTMLTextAreaElement | null)?.value === wanted, value, {
    timeout: 5000,
  });
}

/** Dispatches a paste of `text` into the focused field, as a paste from the clipboard does. */
async function paste(page: Page, text: string): Promise<void> {
  await page.evaluate((content) => {
    const data = new DataTransfer();
    data.setData("text/plain", content);
    document.activeElement!.dispatchEvent(new ClipboardEvent("paste", { clipboardData: data, bubbles: true, cancelable: true }));
  }, text);
}

describe("editing secrets in place", () => {
  for (const size of SIZES) {
    test(`${size.name}: prefilled (an audited reveal, said so), monospace, line numbers for PEM and JSON, discard, save`, async (t) => {
      const server = await startServer(t);
      const alice = await server.signIn("alice@example.test");
      const project = await alice.createProject({ name: "edit", environments: ["production"] });
      await put(alice, project.id, "production", "DATABASE_URL", "postgres://db.internal:5432/app");
      await put(alice, project.id, "production", "TLS_KEY", PEM);
      await put(alice, project.id, "production", "SETTINGS", JSON_VALUE);
      const tab = await openAt(server, alice, size, `/projects/${project.id}/production`);
      const { page } = tab;
      const patches: string[] = [];
      page.on("request", (r) => {
        if (r.method() === "PATCH") patches.push(r.postData() ?? "");
      });

      await rowAction(page, "DATABASE_URL", "Edit");
      const dialog = page.getByRole("dialog", { name: "Edit DATABASE_URL" });
      await dialog
        .getByRole("note")
        .filter({
          hasText: "Opening the editor read the current value: this is recorded in the project's audit log as a reveal under your name.",
        })
        .waitFor();
      await editorHolds(page, "postgres://db.internal:5432/app");
      const revealed = await auditEvents(alice, project.id, "secret.revealed");
      assert.deepEqual(
        revealed.map((e) => e.metadata.key),
        ["DATABASE_URL"],
      );
      const field = dialog.getByLabel("Value", { exact: true });
      assert.match(await field.evaluate((el) => getComputedStyle(el).fontFamily), /mono/i);
      assert.match(await dialog.getByLabel("Key").evaluate((el) => getComputedStyle(el).fontFamily), /mono/i);
      assert.equal(await dialog.locator(".gutter").isVisible(), false, "one line: no line numbers");

      // Nothing changed: Save sends nothing. A change, then Discard: back to the stored value.
      assert.equal(await dialog.getByRole("button", { name: "Save" }).getAttribute("aria-disabled"), "true");
      await dialog.getByLabel("Key").press("Enter");
      await field.fill("postgres://db.internal:5432/other");
      await dialog.getByRole("button", { name: "Discard changes" }).click();
      await assertEventually(() => field.inputValue(), "postgres://db.internal:5432/app");
      assert.deepEqual(patches, []);
      // A key shaped like one of our tokens: said here, and nothing is sent.
      await dialog.getByLabel("Key").fill(`svc_at_${"b".repeat(30)}`);
      await dialog.getByText("A key may not look like one of this server's tokens (svc_…).").waitFor();
      assert.equal(await dialog.getByRole("button", { name: "Save" }).isDisabled(), true);
      await dialog.getByRole("button", { name: "Discard changes" }).click();
      await assertEventually(() => dialog.getByLabel("Key").inputValue(), "DATABASE_URL");
      assert.deepEqual(patches, []);
      // Changing one character is one keystroke, not pasting the whole value again.
      await field.press("End");
      await field.press("Backspace");
      await field.type("x");
      await dialog.getByRole("button", { name: "Save" }).click();
      await dialog.waitFor({ state: "detached" });
      assert.equal((await exported(alice, project.id, "production")).DATABASE_URL, "postgres://db.internal:5432/apx");
      assert.deepEqual(
        patches.map((p) => JSON.parse(p)),
        [{ value: "postgres://db.internal:5432/apx", expectedVersion: 1 }],
      );

      // A PEM key: line numbers, one per line, and its line breaks kept.
      await rowAction(page, "TLS_KEY", "Edit");
      const pemDialog = page.getByRole("dialog", { name: "Edit TLS_KEY" });
      await editorHolds(page, PEM);
      await pemDialog.getByText("PEM block: line breaks are kept exactly.").waitFor();
      assert.equal(await pemDialog.locator(".gutter").innerText(), "1\n2\n3\n4");
      assert.equal(await pemDialog.getByLabel("Multi-line editor with line numbers").isChecked(), true);
      await check(tab, `secret-edit-pem-${size.name}`);
      await assertNoSidewaysScroll(page, `${size.name} PEM editor`);
      await pemDialog.getByRole("button", { name: "Cancel" }).click();

      // JSON: line numbers, and a note when an edit breaks it (saving stays possible).
      await rowAction(page, "SETTINGS", "Edit");
      const jsonDialog = page.getByRole("dialog", { name: "Edit SETTINGS" });
      await editorHolds(page, JSON_VALUE);
      await jsonDialog.getByText("JSON: valid.").waitFor();
      assert.equal(await jsonDialog.locator(".gutter").innerText(), "1\n2\n3\n4");
      await jsonDialog.getByLabel("Value", { exact: true }).fill('{\n  "region": "eu-west-1",\n  "replicas": 3,\n  "zones": [\n}');
      await jsonDialog.getByText("Starts like JSON but does not parse: check brackets and quotes.").waitFor();
      assert.equal(await jsonDialog.locator(".gutter").innerText(), "1\n2\n3\n4\n5");
      await jsonDialog.getByRole("button", { name: "Cancel" }).click();
      assert.equal(patches.length, 1);
      await tab.context.close();
    });

    test(`${size.name}: a conflicting save is explained, and reload and reapply keeps the edit on top of their version`, async (t) => {
      const server = await startServer(t);
      const alice = await server.signIn("alice@example.test");
      const project = await alice.createProject({ name: "conflict", environments: ["production"] });
      const id = await put(alice, project.id, "production", "API_URL", "https://api.one");
      const tab = await openAt(server, alice, size, `/projects/${project.id}/production`);
      const { page } = tab;
      await rowAction(page, "API_URL", "Edit");
      const dialog = page.getByRole("dialog", { name: "Edit API_URL" });
      await editorHolds(page, "https://api.one");
      // Someone else saves while the editor is open.
      assert.equal(
        (await alice.json("PATCH", `/api/projects/${project.id}/environments/production/secrets/${id}`, { value: "https://api.theirs" }))
          .status,
        200,
      );
      await dialog.getByLabel("Value", { exact: true }).fill("https://api.mine");
      await dialog.getByRole("button", { name: "Save" }).click();
      const conflict = dialog.getByRole("alert");
      await conflict.getByText("This secret was changed by someone else. Reload and try again.").waitFor();
      await conflict.getByText("Someone saved a new version while you were editing. Your edit is still here").waitFor();
      await check(tab, `secret-conflict-${size.name}`);
      await conflict.getByRole("button", { name: "Reload and reapply" }).click();
      await dialog.getByText("Editing version 2").waitFor();
      await dialog.getByText("Version 2 is loaded as the base, and your edit is kept in the fields below.").waitFor();
      assert.equal(await dialog.getByLabel("Value", { exact: true }).inputValue(), "https://api.mine");
      await dialog.getByRole("button", { name: "Save" }).click();
      await dialog.waitFor({ state: "detached" });
      const read = await alice.json("GET", `/api/projects/${project.id}/environments/production/secrets/${id}`);
      assert.equal(read.body.secret.value, "https://api.mine");
      assert.equal(read.body.secret.version, 3);

      // A rename onto another key is a 409 as well, but no one else's change: no reload offered.
      await put(alice, project.id, "production", "OTHER_URL", "https://other");
      await rowAction(page, "API_URL", "Edit");
      await editorHolds(page, "https://api.mine");
      await dialog.getByLabel("Key").fill("OTHER_URL");
      await dialog.getByRole("button", { name: "Save" }).click();
      await dialog.getByRole("alert").getByText("A secret with this key already exists in this environment.").waitFor();
      assert.equal(await dialog.getByRole("button", { name: "Reload and reapply" }).count(), 0);
      await dialog.getByRole("button", { name: "Cancel" }).click();
      await dialog.waitFor({ state: "detached" });

      // Their version can be taken instead of reapplying.
      await rowAction(page, "API_URL", "Edit");
      await editorHolds(page, "https://api.mine");
      assert.equal(
        (await alice.json("PATCH", `/api/projects/${project.id}/environments/production/secrets/${id}`, { value: "https://api.latest" }))
          .status,
        200,
      );
      await dialog.getByLabel("Value", { exact: true }).fill("https://api.again");
      await dialog.getByRole("button", { name: "Save" }).click();
      await dialog.getByRole("button", { name: "Reload and reapply" }).click();
      await dialog.getByRole("button", { name: "Use their version instead" }).click();
      await assertEventually(() => dialog.getByLabel("Value", { exact: true }).inputValue(), "https://api.latest");
      await dialog.getByRole("button", { name: "Cancel" }).click();
      assert.equal((await exported(alice, project.id, "production")).API_URL, "https://api.latest");

      // A rename alone meets their new value: reapplying keeps the rename and takes their
      // value, so saving does not put the old value back.
      await rowAction(page, "API_URL", "Edit");
      await editorHolds(page, "https://api.latest");
      assert.equal(
        (await alice.json("PATCH", `/api/projects/${project.id}/environments/production/secrets/${id}`, { value: "https://api.newest" }))
          .status,
        200,
      );
      await dialog.getByLabel("Key").fill("API_ENDPOINT");
      await dialog.getByRole("button", { name: "Save" }).click();
      await dialog.getByRole("button", { name: "Reload and reapply" }).click();
      await dialog.getByText("Their value, which you had not changed, is in the editor now.", { exact: false }).waitFor();
      assert.equal(await dialog.getByLabel("Value", { exact: true }).inputValue(), "https://api.newest");
      assert.equal(await dialog.getByLabel("Key").inputValue(), "API_ENDPOINT");
      await dialog.getByRole("button", { name: "Save" }).click();
      await dialog.waitFor({ state: "detached" });
      const after = await exported(alice, project.id, "production");
      assert.equal(after.API_ENDPOINT, "https://api.newest");
      assert.equal(after.API_URL, undefined);
      await tab.context.close();
    });

    test(`${size.name}: several KEY=VALUE lines pasted into the key field are previewed, then created through the import endpoint`, async (t) => {
      const server = await startServer(t);
      const alice = await server.signIn("alice@example.test");
      const project = await alice.createProject({ name: "paste", environments: ["production"] });
      await put(alice, project.id, "production", "EXISTING", "keep me");
      const tab = await openAt(server, alice, size, `/projects/${project.id}/production`);
      const { page } = tab;
      const imports: string[] = [];
      page.on("request", (r) => {
        if (r.method() === "POST" && r.url().endsWith("/import")) imports.push(r.postData() ?? "");
      });
      await page.getByRole("row", { name: /EXISTING/ }).waitFor();
      await page.getByRole("button", { name: "New secret" }).click();
      await page.getByRole("dialog", { name: "New secret in production" }).getByLabel("Key").focus();
      await paste(page, "NEW_ONE=first\nexport NEW_TWO='second value'\nEXISTING=overwrite attempt\nBLANK=\n1BAD=x\n");
      const preview = page.getByRole("dialog", { name: "New secrets in production" });
      await preview.getByText("You pasted 5 lines of KEY=VALUE. 2 secrets will be created; nothing is sent until you confirm.").waitFor();
      const items = await preview.getByRole("list", { name: "Pasted keys" }).getByRole("listitem").allInnerTexts();
      assert.deepEqual(
        items.map((item) => item.replace(/\s+/g, " ").trim()),
        [
          "NEW_ONE will be created",
          "NEW_TWO will be created",
          "EXISTING already exists: left as it is",
          "BLANK no value: left out",
          "1BAD not a valid key or value: left out",
        ],
      );
      assert.deepEqual(imports, [], "nothing sent before the confirmation");
      await check(tab, `secret-paste-preview-${size.name}`);
      await preview.getByRole("button", { name: "Create 2 secrets" }).click();
      await page.getByRole("status").filter({ hasText: "Created 2 secrets." }).waitFor();
      assert.deepEqual(
        imports.map((body) => JSON.parse(body)),
        [
          {
            entries: [
              { key: "NEW_ONE", value: "first", overwrite: false },
              { key: "NEW_TWO", value: "second value", overwrite: false },
            ],
          },
        ],
      );
      assert.deepEqual(await exported(alice, project.id, "production"), { EXISTING: "keep me", NEW_ONE: "first", NEW_TWO: "second value" });
      await page.getByRole("row", { name: /NEW_TWO/ }).waitFor();

      // One KEY=VALUE line fills both fields instead.
      await page.getByRole("button", { name: "New secret" }).click();
      const single = page.getByRole("dialog", { name: "New secret in production" });
      await single.getByLabel("Key").focus();
      await paste(page, "SINGLE_KEY=abc=def");
      assert.equal(await single.getByLabel("Key").inputValue(), "SINGLE_KEY");
      assert.equal(await single.getByLabel("Value", { exact: true }).inputValue(), "abc=def");
      await single.getByRole("button", { name: "Create secret" }).click();
      await page.getByRole("row", { name: /SINGLE_KEY/ }).waitFor();
      assert.equal(imports.length, 1);

      // An unquoted value over several lines: only its first line parses as KEY=VALUE, and
      // creating it would save that line alone. Nothing can be created; the lines are named.
      await page.getByRole("button", { name: "New secret" }).click();
      await page.getByRole("dialog", { name: "New secret in production" }).getByLabel("Key").focus();
      await paste(page, "TLS_KEY=-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END PRIVATE KEY-----\n");
      const cut = page.getByRole("dialog", { name: "New secrets in production" });
      await cut.getByRole("alert").filter({ hasText: "Lines 2, 3 of the paste are not KEY=VALUE, so nothing is created" }).waitFor();
      assert.equal(await cut.getByRole("button", { name: "Create 1 secret" }).isDisabled(), true);
      await cut.getByRole("button", { name: "Back to one secret" }).click();
      // A value past 10,000 characters is kept whole in the editor (a browser's maxLength
      // would cut a paste silently) and said to be too long.
      const editor = page.getByRole("dialog", { name: "New secret in production" });
      await editor.getByLabel("Value", { exact: true }).fill("v".repeat(10_001));
      await editor.getByRole("alert").filter({ hasText: "This value has 10,001 characters: a value has at most 10,000." }).waitFor();
      assert.equal((await editor.getByLabel("Value", { exact: true }).inputValue()).length, 10_001);
      // A key shaped like one of our tokens is refused here, as the server would refuse it.
      const tokenKey = `svc_st_${"a".repeat(24)}`;
      await editor.getByLabel("Key").fill(tokenKey);
      await editor.getByLabel("Value", { exact: true }).fill("short");
      await editor.getByText("A key may not look like one of this server's tokens (svc_…).").waitFor();
      assert.equal(await editor.getByLabel("Key").getAttribute("aria-invalid"), "true");
      assert.equal(await editor.getByRole("button", { name: "Create secret" }).isDisabled(), true);
      await editor.getByRole("button", { name: "Cancel" }).click();
      assert.equal(imports.length, 1);
      await assertNoSidewaysScroll(page, size.name);
      await tab.context.close();
    });
  }
});
