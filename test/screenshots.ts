// The README's screenshots, made rather than drawn: a real server on a temporary data
// folder, a project seeded through the API as a small team would have it after a few
// weeks, and Chromium photographing the main pages at a laptop's and a phone's size.
// `npm run screenshots` writes docs/screenshots/; the test run writes a temporary folder
// (test/screenshots.test.ts), so the script cannot silently stop working.
import fs from "node:fs";
import path from "node:path";
import type { Page } from "playwright-core";
import { launchChromium } from "./browser.ts";
import { type Client, ROOT, startServer, type TestServer } from "./helpers.ts";
import { addMember } from "./secrets-helpers.ts";

export const DESKTOP = { width: 1280, height: 800 };
export const PHONE = { width: 390, height: 844 };

interface Shot {
  file: string;
  path: string;
  viewport: typeof DESKTOP;
  dark?: boolean;
  /** Waits for what the picture is of, then prepares it (opens a menu). */
  ready(page: Page): Promise<void>;
}

/** The files the script writes, by name; the test checks each. */
export const SHOT_FILES = [
  "secrets.png",
  "secrets-dark.png",
  "secrets-phone.png",
  "sections-menu-phone.png",
  "members.png",
  "members-phone.png",
  "audit.png",
  "security.png",
] as const;

const SECRETS: Record<string, Record<string, string>> = {
  development: {
    DATABASE_URL: "postgres://checkout:dev-password@localhost:5432/checkout_dev",
    REDIS_URL: "redis://localhost:6379/0",
    STRIPE_SECRET_KEY: "sk_test_51Hx0devOnlyKeyForScreenshots",
    STRIPE_WEBHOOK_SECRET: "whsec_devOnlyWebhookSecret",
    SENTRY_DSN: "https://public@sentry.example.test/42",
    LOG_LEVEL: "debug",
    FEATURE_NEW_CHECKOUT: "true",
  },
  staging: {
    DATABASE_URL: "postgres://checkout:staging-password@db.staging.internal:5432/checkout",
    REDIS_URL: "redis://cache.staging.internal:6379/0",
    STRIPE_SECRET_KEY: "sk_test_51Hx0stagingKeyForScreenshots",
    STRIPE_WEBHOOK_SECRET: "whsec_stagingWebhookSecret",
    SENTRY_DSN: "https://public@sentry.example.test/42",
    LOG_LEVEL: "info",
    FEATURE_NEW_CHECKOUT: "true",
    SMTP_PASSWORD: "staging-smtp-password",
  },
  production: {
    DATABASE_URL: "postgres://checkout:prod-password@db.prod.internal:5432/checkout",
    REDIS_URL: "redis://cache.prod.internal:6379/0",
    STRIPE_SECRET_KEY: "sk_live_51Hx0productionKeyForScreenshots",
    STRIPE_WEBHOOK_SECRET: "whsec_productionWebhookSecret",
    SENTRY_DSN: "https://public@sentry.example.test/42",
    LOG_LEVEL: "warn",
    SMTP_HOST: "smtp.mail.example.test",
    SMTP_USER: "checkout@example.test",
    SMTP_PASSWORD: "production-smtp-password",
    JWT_SIGNING_KEY: "-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIScreenshotsOnlyNotARealKeyAtAll\n-----END PRIVATE KEY-----",
    AWS_ACCESS_KEY_ID: "AKIAEXAMPLESCREENSHOT",
    AWS_SECRET_ACCESS_KEY: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    S3_BUCKET: "checkout-receipts-prod",
    CDN_URL: "https://cdn.example.test/checkout",
  },
};

async function ok(client: Client, method: string, url: string, body?: unknown): Promise<any> {
  const res = await client.json(method, url, body);
  if (res.status >= 300) throw new Error(`${method} ${url}: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body;
}

/** A project three people work on: three environments, ~15 secrets, edits, reveals, grants. */
async function seed(server: TestServer): Promise<{ owner: Client; projectId: string }> {
  const owner = await server.signIn("alice@example.test", "Alice Martin");
  const bob = await server.signIn("bob@example.test", "Bob Chen");
  const carol = await server.signIn("carol@example.test", "Carol Diaz");
  const dan = await server.signIn("dan@example.test", "Dan Okafor");
  await owner.createProject({ name: "storefront", description: "Marketing site and blog", environments: ["development", "production"] });
  const project = await owner.createProject({
    name: "checkout-api",
    description: "Payments and order API behind the web shop",
    environments: ["development", "staging", "production"],
  });
  const base = `/api/projects/${project.id}`;
  for (const [env, secrets] of Object.entries(SECRETS)) {
    for (const [key, value] of Object.entries(secrets)) {
      await ok(owner, "POST", `${base}/environments/${env}/secrets`, { key, value });
      server.clock.advance(7 * 60_000);
    }
  }
  await addMember(owner, bob, project.id, "admin");
  await addMember(owner, carol, project.id, "member", ["development", "staging"]);
  await addMember(owner, dan, project.id, "viewer", ["development"]);
  await ok(owner, "POST", `${base}/invitations`, { email: "erin@example.test", role: "member", environments: ["development"] });
  server.clock.advance(3 * 3600_000);
  // A rotated key, a reveal, a changed flag: the audit log reads like a working day.
  const list = await ok(bob, "GET", `${base}/environments/production/secrets`);
  const stripe = list.secrets.find((s: { key: string }) => s.key === "STRIPE_SECRET_KEY");
  await ok(bob, "PATCH", `${base}/environments/production/secrets/${stripe.id}`, {
    value: "sk_live_51Hx0rotatedProductionKeyForScreenshots",
  });
  server.clock.advance(20 * 60_000);
  await ok(bob, "GET", `${base}/environments/production/secrets/${stripe.id}`);
  const staging = await ok(carol, "GET", `${base}/environments/staging/secrets`);
  const flag = staging.secrets.find((s: { key: string }) => s.key === "FEATURE_NEW_CHECKOUT");
  await ok(carol, "PATCH", `${base}/environments/staging/secrets/${flag.id}`, { value: "false" });
  return { owner, projectId: project.id };
}

function shots(projectId: string): Shot[] {
  const p = `/projects/${projectId}`;
  const secretsShown = (page: Page) =>
    page
      .getByRole("row", { name: /STRIPE_SECRET_KEY/ })
      .first()
      .waitFor();
  const membersShown = (page: Page) =>
    page
      .getByRole("row", { name: /dan@example\.test/ })
      .getByRole("checkbox")
      .first()
      .waitFor();
  const auditShown = (page: Page) => page.getByRole("list", { name: "Audit events, newest first" }).getByRole("listitem").first().waitFor();
  return [
    { file: "secrets.png", path: `${p}/production`, viewport: DESKTOP, ready: secretsShown },
    { file: "secrets-dark.png", path: `${p}/production`, viewport: DESKTOP, dark: true, ready: secretsShown },
    { file: "secrets-phone.png", path: `${p}/production`, viewport: PHONE, ready: secretsShown },
    {
      file: "sections-menu-phone.png",
      path: `${p}/staging`,
      viewport: PHONE,
      ready: async (page) => {
        await secretsShown(page);
        await page.getByRole("button", { name: /^Sections/ }).click();
        await page.getByRole("link", { name: "Audit log" }).waitFor();
      },
    },
    { file: "members.png", path: `${p}/members`, viewport: DESKTOP, ready: membersShown },
    { file: "members-phone.png", path: `${p}/members`, viewport: PHONE, ready: membersShown },
    { file: "audit.png", path: `${p}/audit`, viewport: DESKTOP, ready: auditShown },
    {
      file: "security.png",
      path: `${p}/security`,
      viewport: DESKTOP,
      ready: (page) => page.getByRole("region", { name: "Findings" }).waitFor(),
    },
  ];
}

/** Seeds a fresh server and writes every screenshot into `outDir`; returns the files' paths. */
export async function makeScreenshots(outDir: string): Promise<string[]> {
  fs.mkdirSync(outDir, { recursive: true });
  const server = await startServer(undefined);
  const browser = await launchChromium();
  try {
    const { owner, projectId } = await seed(server);
    const written: string[] = [];
    for (const shot of shots(projectId)) {
      const context = await browser.newContext({
        baseURL: server.url,
        viewport: shot.viewport,
        colorScheme: shot.dark ? "dark" : "light",
        deviceScaleFactor: 1,
      });
      try {
        await context.route(/.*/, (route) => (route.request().url().startsWith(server.url) ? route.continue() : route.abort()));
        await context.addCookies([...owner.cookies].map(([name, value]) => ({ name, value, url: server.url })));
        const page = await context.newPage();
        await page.goto(shot.path);
        await shot.ready(page);
        await page.evaluate(() => document.fonts.ready);
        const file = path.join(outDir, shot.file);
        await page.screenshot({ path: file, animations: "disabled", caret: "hide" });
        written.push(file);
      } finally {
        await context.close();
      }
    }
    return written;
  } finally {
    await browser.close();
    await server.stop();
    fs.rmSync(server.dataDir, { recursive: true, force: true });
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const outDir = path.resolve(process.argv[2] ?? path.join(ROOT, "docs", "screenshots"));
  const files = await makeScreenshots(outDir);
  for (const file of files) console.log(path.relative(process.cwd(), file));
}
