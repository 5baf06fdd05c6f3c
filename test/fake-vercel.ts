// A small fake of the Vercel REST API, following the parts of its documentation the client uses: tokens, teams,
// projects (paginated), env vars with ids and targets, decrypt=true, upsert, ENV_CONFLICT,
// deploy hooks, 403 with invalidToken for bad tokens, and injectable 429/5xx answers.
import crypto from "node:crypto";
import http from "node:http";
import type { AddressInfo } from "node:net";

/** The requests a sync makes to create vars in, and to update a var of, the tests' usual project prj_web. */
export const isEnvCreate = (r: { method: string; path: string }) => r.method === "POST" && r.path === "/v10/projects/prj_web/env";
export const isEnvUpdate = (r: { method: string; path: string }) => r.method === "PATCH" && r.path.startsWith("/v9/projects/prj_web/env/");
export const isEnvList = (r: { method: string; path: string }) => r.method === "GET" && r.path === "/v10/projects/prj_web/env";

export interface FakeEnvVar {
  id: string;
  key: string;
  value: string;
  type: "encrypted" | "plain" | "sensitive" | "system" | "secret";
  target: string[];
  gitBranch?: string;
  /** Set by a test for a var moved to a custom environment: listed without `target`. */
  customEnvironmentIds?: string[];
  createdAt: number;
  updatedAt: number;
}

export interface FakeProject {
  id: string;
  name: string;
  /** null for the token owner's personal account. */
  teamId: string | null;
  envs: FakeEnvVar[];
  hooks: { id: string; url: string }[];
  createdAt: number;
}

export interface RecordedRequest {
  method: string;
  path: string;
  query: URLSearchParams;
  authorization?: string;
  body: unknown;
  at: number;
}

interface Injection {
  status: number;
  times: number;
  retryAfterSeconds?: number;
  resetOnly?: boolean;
  match: (req: RecordedRequest) => boolean;
  /** Carry the request out, then answer `status` anyway: a write whose answer is lost. */
  afterDoing?: boolean;
  /** Answer `status` with valid JSON this many bytes long, streamed without Content-Length. */
  padToBytes?: number;
  /** Answer `status` with this body instead of an error. */
  body?: unknown;
}

interface Hold {
  match: (req: RecordedRequest) => boolean;
  reached: Promise<void>;
  signalReached: () => void;
  released: Promise<void>;
  release: () => void;
}

const RESERVED = new Set([
  "AWS_SECRET_KEY",
  "AWS_EXECUTION_ENV",
  "AWS_LAMBDA_LOG_GROUP_NAME",
  "AWS_LAMBDA_LOG_STREAM_NAME",
  "AWS_LAMBDA_FUNCTION_NAME",
  "AWS_LAMBDA_FUNCTION_MEMORY_SIZE",
  "AWS_LAMBDA_FUNCTION_VERSION",
  "NOW_REGION",
  "TZ",
  "LAMBDA_TASK_ROOT",
  "LAMBDA_RUNTIME_DIR",
]);
const TARGETS = new Set(["production", "preview", "development"]);
const TYPES = new Set(["encrypted", "plain", "sensitive", "system", "secret"]);

function vercelError(status: number, code: string, message: string, extra: Record<string, unknown> = {}) {
  return { status, body: { error: { code, message, ...extra } } };
}

export class FakeVercel {
  url = "";
  private server?: http.Server;
  readonly requests: RecordedRequest[] = [];
  /** token → teams it may reach (its personal account always). */
  readonly tokens = new Map<string, Set<string>>();
  readonly teams = new Map<string, { id: string; slug: string; name: string; createdAt: number }>();
  readonly projects = new Map<string, FakeProject>();
  readonly hookCalls: { projectId: string; hookId: string; jobId: string }[] = [];
  /** Caps every page, to force pagination with few items. */
  maxPageSize = 100;
  /**
   * Env lists come whole (as Vercel sends them) unless this caps their pages, which then
   * follow `until` like the teams'. `envPagesNeverEnd`: every page names a next one.
   */
  envPageSize: number | undefined;
  envPagesNeverEnd = false;
  /** Bytes of padding sent by `padToBytes` answers: less than asked when the client stopped reading. */
  paddingSent = 0;
  private injections: Injection[] = [];
  private holds: Hold[] = [];
  private clockMs = 1_700_000_000_000;

  async start(): Promise<this> {
    this.server = http.createServer((req, res) => void this.handle(req, res));
    await new Promise<void>((resolve) => this.server!.listen(0, "127.0.0.1", resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this;
  }

  async stop(): Promise<void> {
    for (const hold of this.holds) hold.release();
    if (!this.server) return;
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server!.close(() => resolve()));
    this.server = undefined;
  }

  private tick(): number {
    this.clockMs += 1000;
    return this.clockMs;
  }

  addToken(token: string, teams: string[] = []): void {
    this.tokens.set(token, new Set(teams));
  }

  revokeToken(token: string): void {
    this.tokens.delete(token);
  }

  addTeam(id: string, name: string): void {
    this.teams.set(id, { id, slug: name.toLowerCase().replace(/\W+/g, "-"), name, createdAt: this.tick() });
  }

  addProject(id: string, name: string, teamId: string | null = null): FakeProject {
    const project: FakeProject = { id, name, teamId, envs: [], hooks: [], createdAt: this.tick() };
    this.projects.set(id, project);
    return project;
  }

  /** Adds a deploy hook to a project and returns its URL (the credential). */
  addHook(projectId: string): string {
    const id = crypto.randomBytes(8).toString("hex");
    const url = `${this.url}/v1/integrations/deploy/${projectId}/${id}`;
    this.projects.get(projectId)!.hooks.push({ id, url });
    return url;
  }

  addEnv(projectId: string, input: Omit<FakeEnvVar, "id" | "createdAt" | "updatedAt">): FakeEnvVar {
    const now = this.tick();
    const envVar: FakeEnvVar = { ...input, id: crypto.randomBytes(8).toString("hex"), createdAt: now, updatedAt: now };
    this.projects.get(projectId)!.envs.push(envVar);
    return envVar;
  }

  envs(projectId: string): FakeEnvVar[] {
    return this.projects.get(projectId)!.envs;
  }

  /** The var for a key and target (no git branch), or undefined. */
  envFor(projectId: string, key: string, target: string): FakeEnvVar | undefined {
    return this.envs(projectId).find((e) => e.key === key && !e.gitBranch && e.target.includes(target));
  }

  /** The next `times` requests that match answer `status` (a 429 carries Retry-After). */
  inject(
    status: number,
    options: {
      times?: number;
      retryAfterSeconds?: number;
      /** A 429 that gives its wait only as X-RateLimit-Reset and `error.limit.reset`, without Retry-After. */
      resetOnly?: boolean;
      match?: (req: RecordedRequest) => boolean;
      afterDoing?: boolean;
      padToBytes?: number;
      body?: unknown;
    } = {},
  ): void {
    this.injections.push({
      status,
      times: options.times ?? 1,
      retryAfterSeconds: options.retryAfterSeconds,
      resetOnly: options.resetOnly,
      match: options.match ?? (() => true),
      afterDoing: options.afterDoing,
      padToBytes: options.padToBytes,
      body: options.body,
    });
  }

  clearInjections(): void {
    this.injections = [];
  }

  /** Holds matching requests until release(); `reached` resolves when the first one arrives. */
  hold(match: (req: RecordedRequest) => boolean): { reached: Promise<void>; release: () => void } {
    let signalReached!: () => void;
    let release!: () => void;
    const reached = new Promise<void>((resolve) => (signalReached = resolve));
    const released = new Promise<void>((resolve) => (release = resolve));
    const hold: Hold = { match, reached, signalReached, released, release };
    this.holds.push(hold);
    return {
      reached,
      release: () => {
        this.holds = this.holds.filter((h) => h !== hold);
        release();
      },
    };
  }

  private async handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const text = Buffer.concat(chunks).toString("utf8");
    let body: unknown;
    try {
      body = text ? JSON.parse(text) : undefined;
    } catch {
      body = undefined;
    }
    const url = new URL(req.url ?? "/", "http://fake");
    const recorded: RecordedRequest = {
      method: req.method ?? "GET",
      path: url.pathname,
      query: url.searchParams,
      authorization: req.headers.authorization,
      body,
      at: Date.now(),
    };
    this.requests.push(recorded);

    for (const hold of this.holds) {
      if (hold.match(recorded)) {
        hold.signalReached();
        await hold.released;
      }
    }

    const send = (status: number, payload: unknown, headers: Record<string, string> = {}) => {
      res.writeHead(status, { "content-type": "application/json", ...headers });
      res.end(JSON.stringify(payload));
    };

    const injection = this.injections.find((i) => i.times > 0 && i.match(recorded));
    if (injection) {
      injection.times -= 1;
      if (injection.status === 429) {
        const seconds = injection.retryAfterSeconds ?? 1;
        const reset = Math.ceil((Date.now() + seconds * 1000) / 1000);
        return send(
          429,
          {
            error: {
              code: "rate_limited",
              message: "Rate limit exceeded",
              limit: { remaining: 0, reset, resetMs: reset * 1000, total: 100 },
            },
          },
          {
            ...(injection.resetOnly ? {} : { "retry-after": String(seconds) }),
            "x-ratelimit-limit": "100",
            "x-ratelimit-remaining": "0",
            "x-ratelimit-reset": String(reset),
          },
        );
      }
      if (injection.afterDoing) this.route(recorded);
      if (injection.padToBytes !== undefined) return this.sendPadded(res, injection.status, recorded, injection.padToBytes);
      if (injection.body !== undefined) return send(injection.status, injection.body);
      return send(injection.status, { error: { code: "internal_server_error", message: "An unexpected error happened." } });
    }

    const answer = this.route(recorded);
    send(answer.status, answer.body);
  }

  /** The route's answer with a padding field that makes it `bytes` long, in 1 MiB chunks; stops when the client goes. */
  private async sendPadded(res: http.ServerResponse, status: number, req: RecordedRequest, bytes: number): Promise<void> {
    const answer = JSON.stringify(this.route(req).body);
    res.writeHead(status, { "content-type": "application/json" });
    res.on("error", () => {});
    const chunk = " ".repeat(1024 * 1024);
    let left = Math.max(0, bytes - answer.length);
    while (left > 0 && !res.destroyed) {
      const piece = left >= chunk.length ? chunk : chunk.slice(0, left);
      left -= piece.length;
      this.paddingSent += piece.length;
      if (!res.write(piece)) await new Promise((resolve) => res.once("drain", resolve).once("close", resolve));
    }
    // White space before the JSON is still the same JSON.
    if (!res.destroyed) res.end(answer);
  }

  private route(req: RecordedRequest): { status: number; body: unknown } {
    const parts = req.path.split("/").filter(Boolean);

    // Deploy hooks need no token: the URL is the credential.
    if (req.method === "POST" && parts[0] === "v1" && parts[1] === "integrations" && parts[2] === "deploy" && parts.length === 5) {
      const project = this.projects.get(parts[3]!);
      const hook = project?.hooks.find((h) => h.id === parts[4]);
      if (!project || !hook) return vercelError(404, "not_found", "Deploy hook not found.");
      const jobId = crypto.randomBytes(6).toString("hex");
      this.hookCalls.push({ projectId: project.id, hookId: hook.id, jobId });
      return { status: 201, body: { job: { id: jobId, state: "PENDING", createdAt: Date.now() } } };
    }

    const token = req.authorization?.match(/^Bearer (.+)$/)?.[1];
    const teams = token === undefined ? undefined : this.tokens.get(token);
    if (!teams) return vercelError(403, "forbidden", "Not authorized", { invalidToken: true });

    if (req.method === "GET" && req.path === "/v2/user") {
      return { status: 200, body: { user: { id: "user_1", email: "owner@example.test", name: "Owner", username: "owner" } } };
    }
    if (req.method === "GET" && req.path === "/v2/teams") {
      const visible = [...this.teams.values()].filter((t) => teams.has(t.id));
      return this.page(visible, "teams", req.query.get("until"), req.query.get("limit"));
    }

    const teamId = req.query.get("teamId");
    if (teamId !== null && !teams.has(teamId)) {
      return vercelError(403, "forbidden", `Not authorized: Trying to access resource under scope "${teamId}".`);
    }
    const scope = teamId ?? null;

    if (req.method === "GET" && req.path === "/v10/projects") {
      const visible = [...this.projects.values()].filter((p) => p.teamId === scope);
      return this.page(
        visible.map((p) => ({ id: p.id, name: p.name, accountId: p.teamId ?? "user_1", createdAt: p.createdAt })),
        "projects",
        req.query.get("from"),
        req.query.get("limit"),
      );
    }

    const projectMatch = parts[1] === "projects" && parts[2] !== undefined;
    if (!projectMatch) return vercelError(404, "not_found", "Not found.");
    const project = [...this.projects.values()].find((p) => (p.id === parts[2] || p.name === parts[2]) && p.teamId === scope);
    if (!project) return vercelError(404, "not_found", "Project not found.");
    const version = parts[0];

    if (req.method === "GET" && version === "v9" && parts.length === 3) {
      return {
        status: 200,
        body: {
          id: project.id,
          name: project.name,
          accountId: project.teamId ?? "user_1",
          link: { deployHooks: project.hooks.map((h) => ({ ...h, name: "main", ref: "main" })) },
        },
      };
    }
    if (parts[3] !== "env") return vercelError(404, "not_found", "Not found.");

    if (req.method === "GET" && version === "v10" && parts.length === 4) {
      const decrypt = req.query.get("decrypt") === "true";
      if (this.envPagesNeverEnd) {
        const next = this.tick();
        return { status: 200, body: { envs: [], pagination: { count: 0, next, prev: null } } };
      }
      if (this.envPageSize !== undefined) {
        const paged = this.page(project.envs, "envs", req.query.get("until"), String(this.envPageSize));
        const envs = (paged.body.envs as FakeEnvVar[]).map((e) => this.present(e, decrypt));
        return { status: 200, body: { ...paged.body, envs } };
      }
      return {
        status: 200,
        body: {
          envs: project.envs.map((e) => this.present(e, decrypt)),
          pagination: { count: project.envs.length, next: null, prev: null },
        },
      };
    }
    if (req.method === "GET" && version === "v1" && parts.length === 5) {
      const envVar = project.envs.find((e) => e.id === parts[4]);
      if (!envVar) return vercelError(404, "not_found", "Environment variable not found.");
      return { status: 200, body: this.present(envVar, true) };
    }
    if (req.method === "POST" && version === "v10" && parts.length === 4) {
      return this.create(project, req.body, req.query.get("upsert") === "true");
    }
    if (req.method === "PATCH" && version === "v9" && parts.length === 5) {
      const envVar = project.envs.find((e) => e.id === parts[4]);
      if (!envVar) return vercelError(404, "not_found", "Environment variable not found.");
      const changes = (req.body ?? {}) as Partial<FakeEnvVar>;
      const next = { ...envVar, ...changes };
      const clash = this.clash(project, next, envVar.id);
      if (clash)
        return vercelError(400, "ENV_CONFLICT", "A variable with this name already exists.", { envVarId: clash.id, key: next.key });
      Object.assign(envVar, changes, { updatedAt: this.tick() });
      return { status: 200, body: this.present(envVar, false) };
    }
    if (req.method === "DELETE" && version === "v9" && parts.length === 5) {
      const index = project.envs.findIndex((e) => e.id === parts[4]);
      if (index < 0) return vercelError(404, "not_found", "Environment variable not found.");
      const [removed] = project.envs.splice(index, 1);
      return { status: 200, body: this.present(removed!, false) };
    }
    return vercelError(404, "not_found", "Not found.");
  }

  /** Without decrypt, encrypted and sensitive values are ciphertext that changes every time. */
  private present(e: FakeEnvVar, decrypt: boolean) {
    const readable = e.type === "plain" || (decrypt && (e.type === "encrypted" || e.type === "secret"));
    return {
      id: e.id,
      key: e.key,
      value: readable ? e.value : `eyJ${crypto.randomBytes(12).toString("base64url")}`,
      type: e.type,
      // A var moved to a custom environment lists `customEnvironmentIds` and no `target`.
      ...(e.customEnvironmentIds ? { customEnvironmentIds: [...e.customEnvironmentIds] } : { target: [...e.target] }),
      ...(e.gitBranch ? { gitBranch: e.gitBranch } : {}),
      createdAt: e.createdAt,
      updatedAt: e.updatedAt,
      decrypted: readable && e.type !== "plain",
    };
  }

  private clash(project: FakeProject, candidate: { key: string; gitBranch?: string; target: string[] }, exceptId?: string) {
    return project.envs.find(
      (e) =>
        e.id !== exceptId &&
        e.key === candidate.key &&
        (e.gitBranch ?? "") === (candidate.gitBranch ?? "") &&
        e.target.some((t) => candidate.target.includes(t)),
    );
  }

  private create(project: FakeProject, body: unknown, upsert: boolean): { status: number; body: unknown } {
    const single = !Array.isArray(body);
    const items = (single ? [body] : body) as Record<string, unknown>[];
    const created: unknown[] = [];
    const failed: unknown[] = [];
    for (const item of items) {
      const key = typeof item?.key === "string" ? item.key : "";
      const target = Array.isArray(item?.target) ? (item.target as string[]) : [];
      const gitBranch = typeof item?.gitBranch === "string" ? item.gitBranch : undefined;
      const fail = (code: string, message: string, extra: Record<string, unknown> = {}) =>
        failed.push({ error: { code, message, key, envVarKey: key, target, ...extra } });
      if (!/^[A-Za-z][A-Za-z0-9_]*$/.test(key) || RESERVED.has(key)) {
        fail("bad_request", "The name of the environment variable is invalid or reserved.");
        continue;
      }
      if (
        typeof item.type !== "string" ||
        !TYPES.has(item.type) ||
        typeof item.value !== "string" ||
        target.length === 0 ||
        !target.every((t) => TARGETS.has(t))
      ) {
        fail("bad_request", "Invalid request: type, value and target are required.");
        continue;
      }
      if (item.type === "sensitive" && target.includes("development")) {
        fail("bad_request", "Sensitive variables cannot target development.");
        continue;
      }
      const clashes = project.envs.filter(
        (e) => e.key === key && (e.gitBranch ?? "") === (gitBranch ?? "") && e.target.some((t) => target.includes(t)),
      );
      if (clashes.length > 0) {
        const exact =
          clashes.length === 1 && clashes[0]!.target.length === target.length && clashes[0]!.target.every((t) => target.includes(t));
        if (upsert && exact) {
          Object.assign(clashes[0]!, { value: item.value, type: item.type, updatedAt: this.tick() });
          created.push(this.present(clashes[0]!, false));
          continue;
        }
        fail("ENV_CONFLICT", "A variable with the same name and target already exists.", { envVarId: clashes[0]!.id });
        continue;
      }
      const envVar = this.addEnv(project.id, {
        key,
        value: item.value as string,
        type: item.type as FakeEnvVar["type"],
        target: [...target],
        ...(gitBranch ? { gitBranch } : {}),
      });
      created.push(this.present(envVar, false));
    }
    if (created.length === 0) {
      const first = (failed[0] as { error: Record<string, unknown> } | undefined)?.error ?? {
        code: "bad_request",
        message: "Nothing was written.",
      };
      return { status: 400, body: { error: first, ...(single ? {} : { failed }) } };
    }
    return { status: 201, body: { created: single ? created[0] : created, failed } };
  }

  private page(items: { id: string; createdAt: number }[], field: string, cursor: string | null, limitText: string | null) {
    const limit = Math.min(Number(limitText ?? 20) || 20, 100, this.maxPageSize);
    // Newest first, like Vercel; the cursor is the createdAt of the last item sent.
    const sorted = [...items].sort((a, b) => b.createdAt - a.createdAt);
    const start = cursor === null ? 0 : sorted.findIndex((i) => i.createdAt < Number(cursor));
    const slice = start < 0 ? [] : sorted.slice(start, start + limit);
    const more = start >= 0 && start + limit < sorted.length;
    return {
      status: 200,
      body: { [field]: slice, pagination: { count: slice.length, next: more ? slice[slice.length - 1]!.createdAt : null, prev: null } },
    };
  }
}

export async function startFakeVercel(): Promise<FakeVercel> {
  return new FakeVercel().start();
}
