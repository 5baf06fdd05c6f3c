// Debian's Chromium driven by playwright-core, for the UI test files: one browser per file,
// a fresh context per tab that fetches nothing but the test server, and an axe-core check
// (serious and critical violations fail) that photographs each page checked.
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { after, before } from "node:test";
import { isDeepStrictEqual } from "node:util";
import { type Browser, type BrowserContext, chromium, type Page } from "playwright-core";
import { type Client, ROOT, TEST_DATABASE, type TestServer } from "./helpers.ts";

/**
 * Debian's Chromium in its headless build (package chromium-headless-shell: the same source
 * and version as the chromium package, without the desktop browser around Blink), which is
 * also what Playwright runs for headless tests. Its pages render as the full browser's do, at
 * about half the CPU: the UI files took 306 s instead of 195 s with it. The full browser is
 * used where only it is installed.
 */
const CHROMIUM = ["/usr/bin/chromium-headless-shell", "/usr/bin/chromium"].find((file) => fs.existsSync(file)) ?? "/usr/bin/chromium";
const SCREENSHOTS = path.join(ROOT, "test-output", "screenshots");
const AXE_SOURCE = fs.readFileSync(path.join(ROOT, "node_modules/axe-core/axe.min.js"), "utf8");

let browser: Browser | undefined;

/** Debian's Chromium, headless; launch() gives every run a fresh, empty temporary profile. */
export function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: [
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
  });
}

/** Launches the browser before the file's tests and closes it after them; call at top level. */
export function useBrowser(): void {
  before(async () => {
    fs.mkdirSync(SCREENSHOTS, { recursive: true });
    browser = await launchChromium();
  });
  after(async () => {
    await browser?.close();
  });
}

export interface Tab {
  page: Page;
  context: BrowserContext;
  /** Console errors, page errors, CSP violations and requests outside the server seen so far. */
  problems: string[];
}

export interface TabOptions {
  /** Whose session cookie the tab holds; none signs nobody in. */
  client?: Client;
  phone?: boolean;
  dark?: boolean;
  timezoneId?: string;
}

/** A fresh browser context on the test server, CSP enforced. */
export async function openTab(server: TestServer, options: TabOptions = {}): Promise<Tab> {
  if (!browser) throw new Error("call useBrowser() at the top of the test file");
  const context = await browser.newContext({
    baseURL: server.url,
    acceptDownloads: true,
    viewport: options.phone ? { width: 375, height: 740 } : { width: 1280, height: 860 },
    colorScheme: options.dark ? "dark" : "light",
    ...(options.timezoneId ? { timezoneId: options.timezoneId } : {}),
  });
  await context.grantPermissions(["clipboard-read", "clipboard-write"], { origin: server.url });
  // Nothing may be fetched from anywhere but the server itself.
  await context.route(/.*/, (route) => (route.request().url().startsWith(server.url) ? route.continue() : route.abort()));
  const tab: Tab = { page: await context.newPage(), context, problems: [] };
  if (options.client) await useSession(tab, server, options.client);
  const { page, problems } = tab;
  page.on("console", (message) => {
    // 4xx answers the UI handles (signed out, a 409) are logged by Chromium as resource errors.
    if (message.type() === "error" && !/Failed to load resource: the server responded with a status of 4\d\d/.test(message.text())) {
      problems.push(message.text());
    }
  });
  page.on("pageerror", (error) => problems.push(`page error: ${error.message}`));
  page.on("requestfailed", (request) => {
    if (!request.url().startsWith(server.url)) problems.push(`outside request: ${request.url()}`);
  });
  return tab;
}

/** Copies an API client's session cookie into a browser context. */
export async function useSession(tab: Tab, server: TestServer, client: Client): Promise<void> {
  await tab.context.addCookies([...client.cookies].map(([name, value]) => ({ name, value, url: server.url })));
}

/** Runs axe-core in the page and fails on serious or critical violations or any problem seen; saves a screenshot on SQLite. */
export async function check(tab: Tab, name: string): Promise<void> {
  const { page } = tab;
  await page.evaluate(() => document.fonts.ready);
  // page.evaluate runs through the DevTools protocol, which the page's CSP does not govern.
  await page.evaluate(AXE_SOURCE);
  const violations = (await page.evaluate(async () => {
    const axe = (window as unknown as { axe: { run(ctx: Document, opts: unknown): Promise<{ violations: unknown[] }> } }).axe;
    const result = await axe.run(document, { resultTypes: ["violations"] });
    return result.violations;
  })) as { id: string; impact: string; help: string; nodes: { target: string[] }[] }[];
  // One picture per page is enough: the PostgreSQL pass would write the same page under the
  // same name, and its full-page captures cost about a fifth of a UI file's time.
  if (TEST_DATABASE === "sqlite") await page.screenshot({ path: path.join(SCREENSHOTS, `${name}.png`), fullPage: true });
  const bad = violations.filter((v) => v.impact === "serious" || v.impact === "critical");
  assert.deepEqual(
    bad.map((v) => `${v.impact} ${v.id}: ${v.help} at ${v.nodes.map((n) => n.target.join(" ")).join(", ")}`),
    [],
    `accessibility violations on ${name}`,
  );
  assert.deepEqual(tab.problems, [], `console errors or CSP violations on ${name}`);
}

/** A link of the project's section navigation (the side column, or the phone's Sections menu). */
export function sectionLink(page: Page, name: string) {
  return page.getByRole("navigation", { name: "Project" }).getByRole("link", { name, exact: true });
}

/**
 * Goes to a section of the project as a person would: through the side navigation on a wide
 * screen, or by opening the Sections menu first on a phone.
 */
export async function goToSection(page: Page, name: string): Promise<void> {
  const nav = page.getByRole("navigation", { name: "Project" });
  await nav.waitFor();
  const menu = nav.getByRole("button", { name: /^Sections/ });
  if ((await menu.isVisible()) && (await menu.getAttribute("aria-expanded")) !== "true") await menu.click();
  await sectionLink(page, name).click();
}

/** A link of the environment switcher above the secrets. */
export function environmentLink(page: Page, name: string) {
  return page.getByRole("navigation", { name: "Environments" }).getByRole("link", { name, exact: true });
}

/** Waits until `isFocused` (run in the page) holds, then asserts it, naming what has focus if not. */
export async function assertFocus(page: Page, what: string, isFocused: () => boolean): Promise<void> {
  const ok = await page
    .waitForFunction(isFocused, undefined, { timeout: 5000 })
    .then(() => true)
    .catch(() => false);
  assert.ok(ok, `focus is on ${what}; it is on ${await page.evaluate(() => document.activeElement?.outerHTML.slice(0, 120))}`);
}

/**
 * Polls `read` until it gives `expected` (deep equality), then passes; fails with the last
 * value after 5 s. For page state an action changes on a later render or frame (effects,
 * focus, the clipboard): reading it once right after the action races the page.
 */
export async function assertEventually<T>(read: () => Promise<T>, expected: T, message?: string): Promise<void> {
  const deadline = Date.now() + 5000;
  let actual = await read();
  while (!isDeepStrictEqual(actual, expected) && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 25));
    actual = await read();
  }
  assert.deepEqual(actual, expected, message);
}
