// Fuzz: seeded random requests to every route of the API of a real server: valid-ish and
// invalid bodies, params, queries and headers (wrong types, huge strings, unicode, nulls,
// nested objects, bad ids, odd encodings) as the owner, a member, a CLI token, a service
// token, a bad token and nobody. Any 5xx fails the drill, printed with the request that
// caused it (ids and credentials replaced by names). The routes come from the server itself
// (Fastify's printRoutes of the same app); ROUTES below must name each of them, so a new
// route fails the drill until it is added here with the shape of its body and query.
import fs from "node:fs";
import { gzipSync } from "node:zlib";
import { startFakeVercel } from "../test/fake-vercel.ts";
import { createServerDatabase, findPostgresBin } from "../test/postgres.ts";
import {
  addMember,
  Caller,
  cliToken,
  createProject,
  type DrillOptions,
  type DrillResult,
  drillSeed,
  makeTempDir,
  Random,
  randomMasterKey,
  removeDir,
  request,
  type ServerProcess,
  signIn,
  startServer,
} from "./lib.ts";

type Gen = (r: Random, w: World) => unknown;
interface RouteShape {
  /** The body's fields with a generator of a valid-ish value each. */
  body?: Record<string, Gen>;
  /** Query parameters the route reads, with valid-ish values. */
  query?: Record<string, Gen>;
}

const ENVIRONMENTS = ["development", "staging", "production"];
const VERCEL_TOKEN = "fuzz_vercel_token_0123456789";

const secretKey: Gen = (r) => r.pick(["API_KEY", "DATABASE_URL", `K_${r.int(1000)}`, "lower_case", "_X"]);
const secretValue: Gen = (r) => r.pick(["v", "postgres://u:p@h/db", "multi\nline", "ünïcødé 🔑", "x".repeat(r.int(10_000) + 1)]);
const role: Gen = (r) => r.pick(["owner", "admin", "member", "viewer"]);
const environments: Gen = (r) => ENVIRONMENTS.filter(() => r.chance(0.6));
const email: Gen = (r) => `fuzz${r.int(50)}@fuzz.test`;
const name: Gen = (r) => r.pick(["api", "web app", `p-${r.int(10_000)}`, "名前", "a".repeat(60)]);

/** Every route of the server (Fastify's route templates) with what it reads. */
const ROUTES: Record<string, RouteShape> = {
  "GET /healthz": {},
  "GET /api/openapi.json": {},
  "GET /api/docs": {},
  "GET /api/docs/style.css": {},
  "GET /api/auth/provider": {},
  "GET /api/auth/me": {},
  "POST /api/auth/sign-out": {},
  "POST /api/auth/dev/sign-in": { body: { email, name } },
  "POST /api/auth/workload/token": {
    body: { serviceAccountId: (r, w) => r.pick(w.accountIds), token: (r) => `eyJ${r.hex(20)}.${r.hex(20)}.${r.hex(10)}` },
  },
  "GET /api/projects": {},
  "POST /api/projects": { body: { name, description: (r) => r.pick(["", "about", null]), environments } },
  "GET /api/projects/:projectId": {},
  "PATCH /api/projects/:projectId": { body: { name, description: (r) => r.pick(["", "about", null]) } },
  "DELETE /api/projects/:projectId": {},
  "GET /api/projects/:projectId/environments/:env/secrets": {},
  "POST /api/projects/:projectId/environments/:env/secrets": { body: { key: secretKey, value: secretValue } },
  "GET /api/projects/:projectId/environments/:env/secrets/:secretId": {},
  "PATCH /api/projects/:projectId/environments/:env/secrets/:secretId": {
    body: { key: secretKey, value: secretValue, expectedVersion: (r) => r.int(4) },
  },
  "DELETE /api/projects/:projectId/environments/:env/secrets/:secretId": {},
  "GET /api/projects/:projectId/environments/:env/secrets/:secretId/versions": {},
  "GET /api/projects/:projectId/environments/:env/secrets/:secretId/versions/:versionNumber": {},
  "POST /api/projects/:projectId/environments/:env/secrets/:secretId/versions/:versionNumber/restore": {
    body: { expectedVersion: (r) => r.int(4) },
  },
  "GET /api/projects/:projectId/environments/:env/export": { query: { format: (r) => r.pick(["dotenv", "json", "yaml"]) } },
  "POST /api/projects/:projectId/environments/:env/import": {
    body: {
      entries: (r) =>
        Array.from({ length: r.int(5) }, () => ({
          key: secretKey(r, undefined as never),
          value: secretValue(r, undefined as never),
          overwrite: r.chance(0.5),
        })),
    },
  },
  // The cross-environment view and copy (README, "Secrets").
  "GET /api/projects/:projectId/secrets/compare": { query: { environments: (r) => environments(r, undefined as never) } },
  "POST /api/projects/:projectId/environments/:env/secrets/:secretId/copy": {
    body: { to: (r) => r.pick(ENVIRONMENTS), overwrite: (r) => r.chance(0.5) },
  },
  "PUT /api/projects/:projectId/environments/:env/access/:userId": {},
  "DELETE /api/projects/:projectId/environments/:env/access/:userId": {},
  "GET /api/projects/:projectId/environment-access": {},
  "GET /api/projects/:projectId/audit": {
    query: {
      limit: (r) => r.pick(["1", "50", "100", "101", "0"]),
      category: (r) => r.pick(["secrets", "access", "project", "integrations"]),
      action: (r) => r.pick(["secret.updated", "secret.revealed"]),
      actor: (r, w) => r.pick(w.userIds),
      from: (r) => r.pick(["2020-01-01", "2026-11-23T00:00:00Z"]),
      to: (r) => r.pick(["2030-01-01", "2026-11-23"]),
      cursor: (r) => r.hex(12),
      environment: (r) => r.pick([...ENVIRONMENTS, "prod"]),
      key: secretKey,
    },
  },
  "GET /api/projects/:projectId/audit/export": {
    query: {
      format: (r) => r.pick(["csv", "json", "xml"]),
      category: (r) => r.pick(["secrets", "access", "project", "integrations"]),
      environment: (r) => r.pick([...ENVIRONMENTS, "prod"]),
      key: secretKey,
      from: (r) => r.pick(["2020-01-01", "2026-11-23T00:00:00Z"]),
    },
  },
  "GET /api/projects/:projectId/security": {},
  "GET /api/projects/:projectId/service-accounts": {},
  "POST /api/projects/:projectId/service-accounts": {
    body: { name, description: (r) => r.pick(["ci", null]), role: (r) => r.pick(["viewer", "member"]), environments },
  },
  "GET /api/projects/:projectId/service-accounts/:accountId": {},
  "PATCH /api/projects/:projectId/service-accounts/:accountId": { body: { name, role: (r) => r.pick(["viewer", "member"]), environments } },
  "DELETE /api/projects/:projectId/service-accounts/:accountId": {},
  "POST /api/projects/:projectId/service-accounts/:accountId/tokens": {
    body: {
      name,
      expiresInDays: (r) => r.pick([1, 30, 365, null]),
      allowedCidrs: (r) => r.pick([["127.0.0.1/32"], ["10.0.0.0/8", "::1/128"], []]),
    },
  },
  "DELETE /api/projects/:projectId/service-accounts/:accountId/tokens/:tokenId": {},
  "POST /api/projects/:projectId/service-accounts/:accountId/trusts": {
    body: {
      issuer: (r) => r.pick(["https://token.actions.githubusercontent.com", "http://127.0.0.1:9/"]),
      audience: () => "secrets",
      subject: () => "repo:org/app:*",
    },
  },
  "DELETE /api/projects/:projectId/service-accounts/:accountId/trusts/:trustId": {},
  "GET /api/projects/:projectId/members": {},
  "PATCH /api/projects/:projectId/members/:userId": { body: { role } },
  "DELETE /api/projects/:projectId/members/:userId": {},
  "GET /api/projects/:projectId/invitations": {},
  "POST /api/projects/:projectId/invitations": { body: { email, role, environments } },
  "DELETE /api/projects/:projectId/invitations/:invitationId": {},
  "POST /api/projects/:projectId/invitations/:invitationId/renew": {},
  "POST /api/invitations/preview": { body: { token: (r) => r.hex(32) } },
  "GET /api/projects/:projectId/integrations/hosting": {},
  "POST /api/projects/:projectId/integrations/hosting": {
    body: { token: (r) => r.pick([VERCEL_TOKEN, "wrong_token"]), teamId: (r) => r.pick(["team_abc", "team_"]) },
  },
  "PUT /api/projects/:projectId/integrations/hosting": {
    body: {
      hostProjectId: (r) => r.pick(["prj_1", "x"]),
      mappings: (r) => r.pick([{ production: "production" }, { development: "preview", staging: "preview" }, {}]),
      conflictPolicy: (r) => r.pick(["skip", "overwrite"]),
      autoRedeploy: (r) => r.chance(0.5),
      deployHookUrl: (r) => r.pick([null, "https://api.vercel.com/v1/integrations/deploy/prj_1/abc"]),
    },
  },
  "DELETE /api/projects/:projectId/integrations/hosting": {},
  "GET /api/projects/:projectId/integrations/hosting/options": { query: { teamId: (r) => r.pick(["team_abc", "x"]) } },
  "POST /api/projects/:projectId/integrations/hosting/sync": { body: { redeploy: (r) => r.chance(0.5) } },
  "GET /api/invitations": {},
  "POST /api/invitations/accept": { body: { token: (r) => r.hex(32) } },
  "POST /api/invitations/:invitationId/accept": {},
  "GET /api/service-accounts/me": {},
  "POST /api/cli/auth/device": { body: { deviceName: name } },
  "POST /api/cli/auth/token": { body: { deviceCode: (r) => r.hex(24) } },
  "POST /api/cli/auth/approve": { body: { userCode: (r) => r.pick(["ABCD-EFGH", "abcdefgh", ""]), approve: (r) => r.chance(0.5) } },
  "POST /api/cli/auth/pending": { body: { userCode: (r) => r.pick(["ABCD-EFGH", "x"]) } },
  "POST /api/cli/auth/refresh": { body: { refreshToken: (r) => r.hex(40) } },
  "POST /api/cli/auth/logout": {},
  "GET /api/cli/sessions": {},
  "DELETE /api/cli/sessions": {},
  "DELETE /api/cli/sessions/:sessionId": {},
  "GET *": {},
};

/** The state the requests draw on: callers and the ids of things that exist. */
interface World {
  server: ServerProcess;
  owner: Caller;
  member: Caller;
  cliUser: Caller;
  stranger: Caller;
  cli: Caller;
  service: Caller;
  nobody: Caller;
  badToken: Caller;
  projectId: string;
  strangerProjectId: string;
  secretIds: string[];
  accountIds: string[];
  tokenIds: string[];
  trustIds: string[];
  invitationIds: string[];
  sessionIds: string[];
  userIds: string[];
  /** Credentials to blank out of printed requests. */
  secrets: Set<string>;
  projects: number;
}

/** The routes of the app, as Fastify prints them: "METHOD /path/:param". */
async function serverRoutes(): Promise<string[]> {
  const { buildApp } = await import("../src/app.ts");
  const { loadConfig } = await import("../src/core/config.ts");
  const dataDir = makeTempDir("drill-routes-");
  const app = await buildApp(
    loadConfig({ DATA_DIR: dataDir, LOG_LEVEL: "silent", MASTER_KEY: randomMasterKey(), NODE_ENV: "development" }),
  );
  try {
    await app.app.ready();
    return parseRoutes(app.app.printRoutes({ commonPrefix: false }));
  } finally {
    await app.close();
    removeDir(dataDir);
  }
}

/** printRoutes draws a tree, four characters per level; a line's path extends its parent's. */
export function parseRoutes(tree: string): string[] {
  const routes: string[] = [];
  const stack: string[] = [];
  for (const line of tree.split("\n")) {
    const match = /^([│ ├└─]*)(\S+) \(([^)]+)\)$/.exec(line.replace(/\s+$/, ""));
    if (!match) continue;
    const depth = match[1]!.length / 4 - 1;
    stack.length = depth;
    const full = (stack[depth - 1] ?? "") + match[2]!;
    stack[depth] = full;
    for (const method of match[3]!.split(",").map((m) => m.trim())) {
      if (method !== "HEAD") routes.push(`${method} ${full}`);
    }
  }
  return routes;
}

async function ensureWorld(w: World): Promise<void> {
  for (const caller of [w.owner, w.member, w.cliUser, w.stranger]) {
    if ((await caller.call("GET", "/api/auth/me")).status === 401) {
      const fresh = await signIn(w.server, emailOf(w, caller));
      caller.cookie = fresh.cookie;
      w.secrets.add(fresh.cookie!);
    }
  }
  if ((await w.owner.call("GET", `/api/projects/${w.projectId}`)).status !== 200) {
    w.projectId = (await createProject(w.owner, `fuzz ${++w.projects}`)).id;
  }
  const p = `/api/projects/${w.projectId}`;
  const members = (await w.owner.ok("GET", `${p}/members`)).members as { userId: string; role: string }[];
  for (const [caller, as, envs] of [
    [w.member, "member", ["development"]],
    [w.cliUser, "admin", undefined],
  ] as const) {
    if (members.some((m) => m.userId === caller.userId)) continue;
    const pending = (await w.owner.ok("GET", `${p}/invitations`)).invitations as { id: string; email: string }[];
    for (const invitation of pending) {
      if (invitation.email === emailOf(w, caller)) await w.owner.ok("DELETE", `${p}/invitations/${invitation.id}`);
    }
    await addMember(w.owner, caller, w.projectId, emailOf(w, caller), as, envs ? [...envs] : undefined);
  }
  if ((await w.cli.call("GET", "/api/projects")).status === 401) {
    try {
      const { accessToken } = await cliToken(w.cliUser);
      w.cli.bearer = accessToken;
      w.secrets.add(accessToken);
    } catch {
      // The device flow's per-address limit (the fuzz calls it too): keep the dead token a while.
    }
  }
  const accounts = (await w.owner.ok("GET", `${p}/service-accounts`)).serviceAccounts as { id: string }[];
  w.accountIds = accounts.map((a) => a.id);
  if ((await w.service.call("GET", "/api/service-accounts/me")).status !== 200) {
    const { serviceAccount } = await w.owner.ok("POST", `${p}/service-accounts`, {
      name: `ci ${w.accountIds.length}`,
      role: "member",
      environments: ENVIRONMENTS,
    });
    const created = await w.owner.ok("POST", `${p}/service-accounts/${serviceAccount.id}/tokens`, { name: "fuzz" });
    w.service.bearer = created.token;
    w.secrets.add(created.token);
    w.accountIds.push(serviceAccount.id);
    w.tokenIds = [created.serviceToken?.id ?? created.id].filter(Boolean);
  }
  const env = `${p}/environments/production`;
  let secrets = (await w.owner.ok("GET", `${env}/secrets`)).secrets as { id: string }[];
  if (secrets.length < 3) {
    for (let i = 0; i < 3; i++) await w.owner.call("POST", `${env}/secrets`, { key: `SEED_${Date.now()}_${i}`, value: "seed value" });
    secrets = (await w.owner.ok("GET", `${env}/secrets`)).secrets;
  }
  w.secretIds = secrets.map((s) => s.id);
  const invitations = (await w.owner.ok("GET", `${p}/invitations`)).invitations as { id: string }[];
  if (invitations.length === 0) await w.owner.call("POST", `${p}/invitations`, { email: "pending@fuzz.test", role: "viewer" });
  w.invitationIds = ((await w.owner.ok("GET", `${p}/invitations`)).invitations as { id: string }[]).map((i) => i.id);
  w.sessionIds = ((await w.cliUser.ok("GET", "/api/cli/sessions")).sessions as { id: string }[]).map((s) => s.id);
}

function emailOf(w: World, caller: Caller): string {
  return caller === w.owner
    ? "owner@fuzz.test"
    : caller === w.member
      ? "member@fuzz.test"
      : caller === w.cliUser
        ? "cli@fuzz.test"
        : "stranger@fuzz.test";
}

// Strings that have broken parsers, validators, SQL and terminals.
const NASTY = [
  "",
  " ",
  "null",
  "undefined",
  "0",
  "-1",
  "1e309",
  "NaN",
  "true",
  "__proto__",
  "constructor",
  "toString",
  "../../../etc/passwd",
  "' OR 1=1 --",
  '"; DROP TABLE secrets; --',
  "<script>alert(1)</script>",
  "\u0000",
  "a\u0000b",
  "\r\n\r\nX-Injected: 1",
  "\u202e\u2066evil",
  "\ud800",
  "\udfff\ud800",
  "🔑🧪👩‍👩‍👧‍👦",
  "Z̤͔ͧ̑̓ä͖̭̈̇lͮ̒ͫǧ̗͚̚o̙̔ͮ̇͐̇",
  "日本語テキスト",
  "ﷺ",
  "%00",
  "%",
  "%zz",
  "${jndi:ldap://x}",
  "{{7*7}}",
  "team_",
  "https://example.test/",
  "javascript:alert(1)",
];

function fuzzString(r: Random): string {
  const roll = r.next();
  if (roll < 0.5) return r.pick(NASTY);
  if (roll < 0.7) return r.hex(r.int(40));
  if (roll < 0.85)
    return String.fromCodePoint(...Array.from({ length: r.int(30) }, () => r.int(0x2ffff)).filter((c) => c < 0xd800 || c > 0xdfff));
  if (roll < 0.97) return "x".repeat(r.pick([129, 281, 1000, 10_001, 20_000]));
  return "y".repeat(r.pick([100_000, 300_000]));
}

function fuzzValue(r: Random, depth = 0): unknown {
  const roll = r.next();
  if (roll < 0.35) return fuzzString(r);
  if (roll < 0.5) return r.pick([0, -1, 1, 1.5, -0.5, 2 ** 31, 2 ** 53 + 1, 1e308, -1e308, 5e-324, 1e21]);
  if (roll < 0.58) return r.chance(0.5);
  if (roll < 0.68) return null;
  if (depth > 3) return fuzzString(r);
  if (roll < 0.84) return Array.from({ length: r.int(4) }, () => fuzzValue(r, depth + 1));
  const object: Record<string, unknown> = {};
  for (let i = r.int(4); i > 0; i--)
    object[r.chance(0.2) ? r.pick(["__proto__", "constructor", "prototype"]) : fuzzString(r).slice(0, 50)] = fuzzValue(r, depth + 1);
  return object;
}

const BAD_IDS = [
  "0",
  "-1",
  "1.5",
  "99999999999999999999999",
  "null",
  "undefined",
  "%00",
  "%zz",
  "%",
  "%2F",
  "..",
  "%2e%2e",
  "%C3%B1",
  "%E2%80%AE",
  "%F0%9F%94%91",
  "%ED%A0%80",
  "x".repeat(3000),
  "' OR 1=1",
  "00000000-0000-0000-0000-000000000000",
  "__proto__",
  "a;b=c",
  "%20",
];

/** Percent-encodes text; a lone surrogate (which UTF-8 cannot encode) becomes an invalid UTF-8 sequence. */
function encode(text: string): string {
  try {
    return encodeURIComponent(text);
  } catch {
    return `${encodeURIComponent(text.replace(/[\ud800-\udfff]/g, "\ufffd"))}%ED%A0%80`;
  }
}

function paramValue(r: Random, w: World, param: string): string {
  if (r.chance(0.25)) {
    const bad = r.pick(BAD_IDS);
    return /^[\x21-\x7e]+$/.test(bad) ? bad : encode(bad);
  }
  const pick = (items: string[]) => (items.length > 0 ? r.pick(items) : r.hex(16));
  switch (param) {
    case "projectId":
      return r.chance(0.85) ? w.projectId : w.strangerProjectId;
    case "env":
      return r.pick([...ENVIRONMENTS, "prod", "Production", "test"]);
    case "secretId":
      return pick(w.secretIds);
    case "versionNumber":
      return r.pick(["1", "2", "3", "0", "-1", "1.0", "01", "1e2"]);
    case "userId":
      return pick(w.userIds);
    case "accountId":
      return pick(w.accountIds);
    case "tokenId":
      return pick(w.tokenIds);
    case "trustId":
      return pick(w.trustIds);
    case "invitationId":
      return pick(w.invitationIds);
    case "sessionId":
      return pick(w.sessionIds);
    default:
      return r.hex(8);
  }
}

interface Built {
  method: string;
  path: string;
  template: string;
  headers: Record<string, string>;
  body?: string | Buffer;
  who: string;
  bodyKind: string;
}

function buildRequest(r: Random, w: World, route: string): Built {
  const [method, template] = route.split(" ") as [string, string];
  const shape = ROUTES[route] ?? {};
  let path =
    template === "*"
      ? "/" +
        r.pick([
          "",
          "projects",
          "cli/authorize?code=ABCD",
          "invite",
          "assets/none.js",
          "%2e%2e/%2e%2e/etc/passwd",
          "a".repeat(2000),
          encode(fuzzString(r).slice(0, 200)),
        ])
      : template.replace(/:(\w+)/g, (_, param: string) => paramValue(r, w, param));

  // Query: the route's own parameters with valid-ish or nasty values, or garbage.
  if (template !== "*" && r.chance(0.4)) {
    const pairs: string[] = [];
    for (const [key, gen] of Object.entries(shape.query ?? {})) {
      if (r.chance(0.5)) pairs.push(`${key}=${encode(String(r.chance(0.6) ? gen(r, w) : fuzzString(r)))}`);
    }
    if (r.chance(0.3))
      pairs.push(r.pick(["%", "a[b]=c&a[b][c]=d", "format=dotenv&format=json", `x=${"q".repeat(5000)}`, "=&&=", "%zz=%zz"]));
    if (pairs.length > 0) path += `?${pairs.join("&")}`;
  }

  const who = r.pick(["owner", "owner", "member", "cli", "service", "nobody", "badToken"] as const);
  const caller = w[who];
  const headers = caller.headers(method);

  let body: string | Buffer | undefined;
  let bodyKind = "none";
  const roll = r.next();
  const hasBodyShape = shape.body !== undefined;
  if (method === "GET" || method === "DELETE" ? roll < 0.1 : true) {
    if (roll < (hasBodyShape ? 0.45 : 0.1) && shape.body) {
      const object: Record<string, unknown> = {};
      for (const [field, gen] of Object.entries(shape.body)) if (r.chance(0.85)) object[field] = gen(r, w);
      for (let i = r.int(3); i > 0; i--) {
        const keys: string[] = Object.keys(shape.body);
        const target: string = r.chance(0.8) && keys.length > 0 ? r.pick(keys) : fuzzString(r).slice(0, 30);
        if (r.chance(0.2)) delete object[target];
        else object[target] = fuzzValue(r);
      }
      body = JSON.stringify(object);
      bodyKind = "valid-ish json";
    } else if (roll < 0.62) {
      body = JSON.stringify(fuzzValue(r));
      bodyKind = "random json";
    } else if (roll < 0.7) {
      body = r.pick([
        "{",
        "[1,",
        '{"a":}',
        "{'a':1}",
        "\u0000",
        "nul",
        '{"a":1}{"b":2}',
        "\ufeff{}",
        '{"__proto__":{"polluted":1}}',
        "1".repeat(400),
      ]);
      bodyKind = "broken json";
    } else if (roll < 0.74) {
      const depth = r.pick([100, 1000, 5000]);
      body = "[".repeat(depth) + "]".repeat(depth);
      bodyKind = `nested ${depth}`;
    } else if (roll < 0.8) {
      headers["content-type"] = r.pick([
        "text/plain",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
        "application/xml",
        "application/json; charset=utf-16",
        "application/JSON",
        "application/json;;",
        "*/*",
      ]);
      body = r.pick(["a=1&b=2", "--x\r\nContent-Disposition: form-data; name=a\r\n\r\n1\r\n--x--", "<a/>", "{}", fuzzString(r)]);
      bodyKind = `content-type ${headers["content-type"]}`;
    } else if (roll < 0.84) {
      headers["content-encoding"] = r.pick(["gzip", "deflate", "br", "identity", "x-unknown"]);
      body = r.chance(0.5) ? gzipSync(Buffer.from(JSON.stringify(fuzzValue(r)))) : Buffer.from(r.hex(64), "hex");
      bodyKind = `content-encoding ${headers["content-encoding"]}`;
    } else if (roll < 0.85) {
      body = JSON.stringify({ entries: [{ key: "HUGE", value: "z".repeat(r.pick([1_100_000, 2_100_000])), overwrite: false }] });
      bodyKind = `huge json (${body.length} bytes)`;
    } else if (roll < 0.92) {
      bodyKind = "empty";
      if (r.chance(0.5)) body = "";
    }
  }
  if (body !== undefined && headers["content-type"] === undefined && r.chance(0.95)) headers["content-type"] = "application/json";

  // Header noise: odd Origins, credentials and proxies' headers.
  if (r.chance(0.25)) {
    const extra = r.pick([
      ["origin", "http://evil.test"],
      ["origin", "null"],
      [
        "authorization",
        r.pick([
          "Bearer",
          "Bearer ",
          "Basic Zm9vOmJhcg==",
          `Bearer ${"t".repeat(5000)}`,
          "Bearer svc_st_x",
          "Bearer svc_wt_x",
          "bearer  x",
        ]),
      ],
      ["cookie", r.pick(["secrets_session=", "secrets_session=%zz", `secrets_session=${"c".repeat(5000)}`, "a=b; a=c", "=;=;"])],
      ["x-forwarded-for", r.pick(["1.2.3.4", "garbage", "::1, 10.0.0.1"])],
      ["accept", r.pick(["text/html", "application/xml", "*/*;q=0", ""])],
      ["accept-encoding", r.pick(["gzip, br", "identity;q=0", "*"])],
      ["if-none-match", '"x"'],
      ["range", "bytes=0-1"],
      ["x-http-method-override", "DELETE"],
      ["host", r.pick(["evil.test", "127.0.0.1:1"])],
    ] as const);
    headers[extra[0]] = extra[1];
    if (extra[0] === "authorization" && who !== "cli" && who !== "service") delete headers.cookie;
  }
  // The CLI's own logout would end the session the next requests use: send it a stranger's token.
  if (route === "POST /api/cli/auth/logout" && (who === "cli" || who === "service")) headers.authorization = `Bearer ${r.hex(32)}`;
  return { method, path, template, headers, body, who, bodyKind };
}

function describe(w: World, b: Built): string {
  let text = `${b.method} ${b.path.length > 300 ? `${b.path.slice(0, 300)}…` : b.path} as ${b.who}, body: ${b.bodyKind}`;
  if (b.body !== undefined && typeof b.body === "string")
    text += ` ${JSON.stringify(b.body.slice(0, 300))}${b.body.length > 300 ? "…" : ""}`;
  const extra = Object.keys(b.headers).filter((h) => !["cookie", "authorization", "origin", "content-type"].includes(h));
  if (b.headers["content-type"]) text += `; content-type ${b.headers["content-type"]}`;
  if (extra.length > 0) text += `; headers ${extra.join(", ")}`;
  for (const secret of w.secrets) text = text.split(secret).join("<credential>");
  return text.replaceAll(w.projectId, ":projectId");
}

export async function drill(options: DrillOptions): Promise<DrillResult> {
  const total = options.short ? 500 : Number(process.env.FUZZ_REQUESTS) || 10_000;
  const seed = drillSeed();
  const r = new Random(seed);
  const routes = await serverRoutes();
  const unknown = routes.filter((route) => !(route in ROUTES));
  const stale = Object.keys(ROUTES).filter((route) => !routes.includes(route));
  if (unknown.length > 0 || stale.length > 0) {
    const line = `fuzz: the server's routes and the fuzz drill's list differ: ${[...unknown.map((u) => `new ${u}`), ...stale.map((s) => `gone ${s}`)].join("; ")} (add or remove them in drills/fuzz.drill.ts)`;
    return { ok: false, line };
  }

  // PostgreSQL refuses what SQLite stores (a NUL in text, say): the same requests must get
  // the same answers there, never a 500.
  let databaseUrl: string | undefined;
  if (options.database === "postgres") {
    if (!findPostgresBin()) return { ok: false, line: "fuzz: PostgreSQL's programs (initdb, pg_ctl, postgres) are not installed" };
    databaseUrl = await createServerDatabase();
  }
  const vercel = await startFakeVercel();
  vercel.addToken(VERCEL_TOKEN);
  const dataDir = makeTempDir("drill-fuzz-");
  const server = await startServer({
    dataDir,
    env: {
      VERCEL_API_URL: vercel.url,
      VERCEL_RETRY_BASE_MS: "0",
      SYNC_DEBOUNCE_MS: "200",
      ...(databaseUrl ? { DATABASE_URL: databaseUrl } : {}),
    },
  }).catch(async (error: unknown) => {
    await vercel.stop();
    removeDir(dataDir);
    throw error;
  });
  const failures: string[] = [];
  const statuses = new Map<number, number>();
  const perRoute = new Map<string, number>();
  let connectionErrors = 0;
  let repairsDeferred = 0;
  let sent = 0;
  const started = performance.now();
  try {
    const owner = await signIn(server, "owner@fuzz.test");
    const member = await signIn(server, "member@fuzz.test");
    const cliUser = await signIn(server, "cli@fuzz.test");
    const stranger = await signIn(server, "stranger@fuzz.test");
    const projectId = (await createProject(owner, "fuzz")).id;
    const strangerProjectId = (await createProject(stranger, "elsewhere")).id;
    const w: World = {
      server,
      owner,
      member,
      cliUser,
      stranger,
      cli: new Caller(server.url, server.origin),
      service: new Caller(server.url, server.origin),
      nobody: new Caller(server.url, server.origin),
      badToken: new Caller(server.url, server.origin, undefined, "not-a-real-token"),
      projectId,
      strangerProjectId,
      secretIds: [],
      accountIds: [],
      tokenIds: [],
      trustIds: [],
      invitationIds: [],
      sessionIds: [],
      userIds: [owner.userId!, member.userId!, cliUser.userId!, stranger.userId!],
      secrets: new Set([owner.cookie!, member.cookie!, cliUser.cookie!, stranger.cookie!]),
      projects: 1,
    };
    await ensureWorld(w);
    const trust = await owner.call("POST", `/api/projects/${w.projectId}/service-accounts/${w.accountIds[0]}/trusts`, {
      issuer: "https://token.actions.githubusercontent.com",
      audience: "secrets",
      subject: "repo:org/app:*",
    });
    if (trust.status === 201) w.trustIds.push(trust.body.trust?.id ?? trust.body.id);

    // Requests are drawn in batches of `concurrency`, in the seed's order; the world is
    // repaired (sessions, project, members, tokens) between rounds of 100.
    const concurrency = 4;
    const sendOne = async (index: number, b: Built) => {
      const key = `${b.method} ${b.template}`;
      perRoute.set(key, (perRoute.get(key) ?? 0) + 1);
      try {
        const res = await request(server.url, { method: b.method, path: b.path, headers: b.headers, body: b.body, timeoutMs: 30_000 });
        statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
        if (res.status >= 500) failures.push(`#${index} ${describe(w, b)} answered ${res.status} ${res.body.slice(0, 200)}`);
      } catch (error) {
        connectionErrors++;
        if (connectionErrors <= 3)
          options.log(
            `  fuzz: no answer to #${index} ${describe(w, b).slice(0, 300)}: ${error instanceof Error ? error.message : String(error)}`,
          );
        if (server.exited()) failures.push(`#${index} ${describe(w, b)}: the server exited (${String(error)})`);
      }
    };
    while (sent < total && !server.exited()) {
      const batch: Promise<void>[] = [];
      for (let i = 0; i < concurrency && sent < total; i++, sent++) {
        // The first pass visits every route once; then routes are drawn at random.
        const route = sent < routes.length ? routes[sent]! : r.pick(routes);
        batch.push(sendOne(sent, buildRequest(r, w, route)));
      }
      await Promise.all(batch);
      if (sent % 100 < concurrency && !server.exited()) {
        try {
          await ensureWorld(w);
        } catch (error) {
          // A repair that meets a limit (invitations accepted, CLI sign-ins) waits for the next round.
          repairsDeferred++;
          if (repairsDeferred === 1)
            options.log(
              `  fuzz: a repair waits for the next round: ${error instanceof Error ? error.message.slice(0, 200) : String(error)}`,
            );
        }
      }
    }
    if (server.exited()) failures.push("the server exited during the fuzz");
    else if ((await request(server.url, { method: "GET", path: "/healthz" })).status !== 200)
      failures.push("/healthz failed after the fuzz");
  } catch (error) {
    failures.push(`the drill itself failed: ${error instanceof Error ? error.message : String(error)}`);
  } finally {
    await server.stop();
    await vercel.stop();
    if (failures.length === 0) removeDir(dataDir);
  }
  const seconds = (performance.now() - started) / 1000;
  for (const failure of failures.slice(0, 10)) options.log(`  fuzz: ${failure}`);
  if (failures.length > 0 && fs.existsSync(dataDir)) options.log(`  fuzz: the data folder is kept for a look: ${dataDir}`);
  const fivexx = [...statuses].filter(([s]) => s >= 500).reduce((n, [, c]) => n + c, 0);
  const common = [...statuses]
    .sort((a, b) => b[1] - a[1])
    .slice(0, 6)
    .map(([s, c]) => `${s}×${c}`)
    .join(" ");
  const untouched = routes.filter((route) => !perRoute.has(route));
  const line =
    `fuzz${databaseUrl ? " (PostgreSQL)" : ""}: seed ${seed}, ${sent} requests to ${routes.length - untouched.length}/${routes.length} routes in ${seconds.toFixed(1)} s (${(sent / seconds).toFixed(0)}/s), ` +
    `${fivexx} 5xx, ${connectionErrors} connection errors; statuses ${common}`;
  return { ok: failures.length === 0 && untouched.length === 0, line };
}
