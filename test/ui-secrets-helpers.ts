// Shared by the secrets workspace's Chromium tests: the two screen sizes every item is
// checked at, opening a signed-in tab at one of them, and the row menu.
import assert from "node:assert/strict";
import type { Page } from "playwright-core";
import { openTab, type Tab, useSession } from "./browser.ts";
import type { Client, TestServer } from "./helpers.ts";

export const SIZES = [
  { name: "desktop", phone: false, dark: false, width: 1280, height: 800 },
  { name: "phone", phone: true, dark: true, width: 390, height: 844 },
] as const;
export type Size = (typeof SIZES)[number];

export async function openAt(server: TestServer, client: Client, size: Size, path: string): Promise<Tab> {
  const tab = await openTab(server, { phone: size.phone, dark: size.dark });
  await useSession(tab, server, client);
  await tab.page.setViewportSize({ width: size.width, height: size.height });
  await tab.page.goto(path);
  return tab;
}

/** Opens a secret's row menu with the mouse and picks one of its items. */
export async function rowAction(page: Page, key: string, item: string): Promise<void> {
  await page.getByRole("button", { name: `More actions for ${key}` }).click();
  await page.getByRole("menuitem", { name: item, exact: true }).click();
}

export async function put(client: Client, projectId: string, env: string, key: string, value: string): Promise<string> {
  const res = await client.json("POST", `/api/projects/${projectId}/environments/${env}/secrets`, { key, value });
  assert.equal(res.status, 201, JSON.stringify(res.body));
  return res.body.secret.id;
}

export async function exported(client: Client, projectId: string, env: string): Promise<Record<string, string>> {
  const res = await client.json("GET", `/api/projects/${projectId}/environments/${env}/export`);
  assert.equal(res.status, 200);
  return Object.fromEntries(res.body.secrets.map((s: { key: string; value: string }) => [s.key, s.value]));
}

/** Fails when the page scrolls sideways (anything but a table's own scroll box sticking out). */
export async function assertNoSidewaysScroll(page: Page, name: string): Promise<void> {
  const by = await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
  assert.ok(by <= 0, `${name}: the page scrolls sideways by ${by}px`);
}

export async function focusedName(page: Page): Promise<string | null> {
  return page.evaluate(() => {
    const el = document.activeElement as HTMLElement | null;
    return el?.getAttribute("aria-label") ?? el?.textContent?.trim() ?? null;
  });
}
