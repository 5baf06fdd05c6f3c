import type { Logger } from "pino";
import { type HttpAnswer, HttpFailure, httpRequest, retryAfterMs } from "../../core/http-client.ts";
import { isWellFormedText } from "../../core/secret-rules.ts";

// A small client of the Vercel REST API (the parts the sync needs). Every URL is built
// from VERCEL_API_URL; deploy hooks are checked against that same host before they are
// ever stored (see deployHookProblem), so the server can only ever call one host.

/** Why a call failed, in the terms the service decides on. */
export type VercelFailure =
  /** 401/403 with a rejected token: the connection needs a new token. */
  | "rejected"
  /** 403 for a team scope the token cannot reach. */
  | "scope"
  | "not_found"
  /** Any other 4xx: `code` and `failed` say more. */
  | "invalid"
  /** Network error, timeout, 5xx or 429 after the bounded retries, or a malformed answer. */
  | "unavailable";

/** The `code` of a call cut because the server is closing. */
export const SHUTDOWN = "shutdown";

/**
 * One path segment: an id Vercel sent (or one checked at the route) that would not encode
 * (a lone surrogate) or would move up the path (`.`, `..`) is a malformed answer, not a crash.
 */
function segment(id: string): string {
  if (!isPathSegment(id)) throw new VercelError("unavailable", 200, "malformed");
  return encodeURIComponent(id);
}

/** Whether an id can stand in a URL's path as one segment: it encodes, and it does not move up the path. */
export function isPathSegment(id: string): boolean {
  return isWellFormedText(id) && id !== "." && id !== "..";
}

export class VercelError extends Error {
  readonly failure: VercelFailure;
  readonly status: number;
  readonly code?: string;
  readonly body?: unknown;

  constructor(failure: VercelFailure, status: number, code?: string, body?: unknown) {
    // Never the response text or the URL: both can carry credentials.
    super(`Vercel answered ${status || "nothing"} (${failure})`);
    this.failure = failure;
    this.status = status;
    this.code = code;
    this.body = body;
  }
}

export interface VercelEnvVar {
  id: string;
  key: string;
  value?: string;
  type: string;
  target: string[];
  gitBranch?: string | null;
  decrypted?: boolean;
}

export interface NewEnvVar {
  key: string;
  value: string;
  type: "encrypted";
  target: string[];
}

export interface CreateResult {
  created: VercelEnvVar[];
  failed: { key?: string; code?: string }[];
  /** A 400: Vercel wrote none of the batch, whether or not its failures name every key. */
  nothingWritten: boolean;
}

export interface NamedItem {
  id: string;
  name: string;
}

export interface VercelClientOptions {
  baseUrl: string;
  log: Logger;
  /** First back-off step; doubles per attempt. */
  retryBaseMs: number;
  /** Aborted when the server shuts down, so no sync sleeps through a restart. */
  shutdown: AbortSignal;
  maxAttempts?: number;
  timeoutMs?: number;
}

/** Retry-After longer than this is not waited for: the call fails and the run reports it. */
const MAX_RETRY_AFTER_SECONDS = 60;
/** Pages followed at most per list of teams or projects (100 items each): a picker may show the first 2,000. */
const MAX_PAGES = 20;
/**
 * Pages followed at most per list of a project's env vars (which Vercel sends in one answer
 * today): 20,000 at its default page size. A sync must see every var, so a list that goes
 * on past this fails the run rather than have it act on part of it.
 */
const MAX_ENV_PAGES = 1000;
const PAGE_LIMIT = 100;
/**
 * The largest answer read: a project's whole env list at Vercel's own limits (values read
 * back decrypted) is well below it. A VERCEL_API_URL that answers more, or never stops,
 * fails the call instead of filling the server's memory.
 */
const MAX_ANSWER_BYTES = 64 * 1024 * 1024;
const DEPLOY_HOOK_PATH = "/v1/integrations/deploy/";

export type VercelClient = ReturnType<typeof createVercelClient>;

export function createVercelClient(options: VercelClientOptions) {
  const base = new URL(options.baseUrl);
  const maxAttempts = options.maxAttempts ?? 4;
  const timeoutMs = options.timeoutMs ?? 15_000;
  const log = options.log;

  interface CallOptions {
    token?: string;
    query?: Record<string, string | undefined>;
    body?: unknown;
    /** 5xx and network errors are retried only when repeating the call is harmless. */
    idempotent: boolean;
    /** A label for log lines: never the URL, which for a deploy hook is a credential. */
    label: string;
  }

  function apiUrl(path: string, query: Record<string, string | undefined> = {}): URL {
    const url = new URL(options.baseUrl + path);
    for (const [name, value] of Object.entries(query)) if (value !== undefined) url.searchParams.set(name, value);
    return url;
  }

  /** The server is closing: the call was cut, not failed by Vercel (a run ends interrupted). */
  const stopping = () => new VercelError("unavailable", 0, SHUTDOWN);

  function sleep(ms: number): Promise<void> {
    return new Promise((resolve, reject) => {
      if (options.shutdown.aborted) return reject(stopping());
      const timer = setTimeout(() => {
        options.shutdown.removeEventListener("abort", onAbort);
        resolve();
      }, ms);
      const onAbort = () => {
        clearTimeout(timer);
        reject(stopping());
      };
      options.shutdown.addEventListener("abort", onAbort, { once: true });
    });
  }

  /**
   * How long a 429 asks us to wait: `Retry-After` (seconds, or an HTTP date), else the
   * window's end, `X-RateLimit-Reset` or the body's `error.limit.reset` (epoch seconds).
   * Without any of them the backoff alone would spend every attempt within seconds.
   */
  function rateLimitWaitMs(answer: HttpAnswer, body: unknown): number | undefined {
    const retryAfter = retryAfterMs(answer.header("retry-after"));
    if (retryAfter !== undefined) return retryAfter;
    const reset = Number(
      answer.header("x-ratelimit-reset")?.trim() || (body as { error?: { limit?: { reset?: unknown } } } | null)?.error?.limit?.reset,
    );
    if (Number.isFinite(reset) && reset > 0) return Math.max(0, reset * 1000 - Date.now());
    return undefined;
  }

  function backoffMs(attempt: number): number {
    const step = options.retryBaseMs * 2 ** (attempt - 1);
    return step + Math.floor(Math.random() * (options.retryBaseMs + 1));
  }

  function classify(status: number, body: unknown): VercelError {
    const error = (body as { error?: { code?: unknown; message?: unknown; invalidToken?: unknown } } | null)?.error;
    const code = typeof error?.code === "string" ? error.code : undefined;
    if (status === 401) return new VercelError("rejected", status, code, body);
    if (status === 403) {
      const message = typeof error?.message === "string" ? error.message : "";
      if (error?.invalidToken !== true && message.startsWith("Not authorized: Trying to access resource under scope")) {
        return new VercelError("scope", status, code, body);
      }
      return new VercelError("rejected", status, code, body);
    }
    if (status === 404) return new VercelError("not_found", status, code, body);
    if (status >= 400 && status < 500) return new VercelError("invalid", status, code, body);
    return new VercelError("unavailable", status, code, body);
  }

  async function call(method: string, url: URL, call: CallOptions): Promise<{ status: number; body: unknown }> {
    for (let attempt = 1; ; attempt++) {
      let status = 0;
      let body: unknown = null;
      let waitMs: number | undefined;
      try {
        const headers: Record<string, string> = {};
        if (call.token !== undefined) headers.authorization = `Bearer ${call.token}`;
        if (call.body !== undefined) headers["content-type"] = "application/json";
        // A redirect could point anywhere: httpRequest follows none. An answer is read no
        // further than MAX_ANSWER_BYTES, announced or counted as it arrives.
        const res = await httpRequest(url.href, {
          method,
          headers,
          body: call.body === undefined ? undefined : JSON.stringify(call.body),
          timeoutMs,
          maxBytes: MAX_ANSWER_BYTES,
          signal: options.shutdown,
        });
        status = res.status;
        try {
          body = res.text ? JSON.parse(res.text) : null;
        } catch {
          body = null;
        }
        if (status >= 200 && status < 300) return { status, body };
        if (status === 429) {
          waitMs = rateLimitWaitMs(res, body);
          if (waitMs !== undefined && waitMs > MAX_RETRY_AFTER_SECONDS * 1000) throw new VercelError("unavailable", status, "rate_limited");
        } else if (status < 500 || !call.idempotent) {
          throw status >= 300 && status < 400 ? new VercelError("unavailable", status) : classify(status, body);
        }
      } catch (error) {
        if (error instanceof VercelError) throw error;
        if (options.shutdown.aborted) throw stopping();
        // Neither is a passing fault: asking again would get the same.
        if (error instanceof HttpFailure && error.code === "TOO_LARGE") throw new VercelError("unavailable", 0, "too_large");
        if (error instanceof HttpFailure && error.code === "REDIRECT") throw new VercelError("unavailable", 0, "redirect");
        if (!call.idempotent) throw new VercelError("unavailable", 0);
        // Network error or timeout: retried below like a 5xx.
      }
      if (attempt >= maxAttempts) {
        log.warn({ vercel: call.label, status, attempts: attempt }, "Vercel request failed; giving up");
        // A 429 keeps its status: Vercel did nothing with the request (a create wrote no var).
        if (status === 429) throw new VercelError("unavailable", status, "rate_limited");
        throw status === 0 ? new VercelError("unavailable", 0) : classify(status, body);
      }
      const delay = Math.max(waitMs ?? 0, backoffMs(attempt));
      log.warn({ vercel: call.label, status, attempt, retryInMs: delay }, "Vercel request failed; retrying");
      await sleep(delay);
    }
  }

  function list<T>(body: unknown, field: string): T[] {
    const items = (body as Record<string, unknown> | null)?.[field];
    if (!Array.isArray(items)) throw new VercelError("unavailable", 200, "malformed");
    return items as T[];
  }

  function nextCursor(body: unknown): string | undefined {
    const next = (body as { pagination?: { next?: unknown } } | null)?.pagination?.next;
    if (typeof next === "number" || (typeof next === "string" && next !== "")) return String(next);
    return undefined;
  }

  /**
   * Follows `pagination.next` to the end, passing the cursor back as received, for at most
   * `maxPages` pages; `whole`: a list still going on after them fails instead of being cut.
   */
  async function paged<T extends { id?: unknown }>(
    path: string,
    field: string,
    cursorParam: "from" | "until",
    token: string,
    query: Record<string, string | undefined>,
    label: string,
    { maxPages = MAX_PAGES, whole = false } = {},
  ): Promise<T[]> {
    const items = new Map<string, T>();
    let cursor: string | undefined;
    for (let page = 0; page < maxPages; page++) {
      const { body } = await call("GET", apiUrl(path, { ...query, [cursorParam]: cursor }), { token, idempotent: true, label });
      // An item that is not an object (a null among them) is malformed: left out, as one without an id.
      for (const item of list<T | null>(body, field)) if (typeof item?.id === "string") items.set(item.id, item);
      cursor = nextCursor(body);
      if (cursor === undefined) return [...items.values()];
    }
    if (whole) throw new VercelError("unavailable", 200, "too_many_pages");
    return [...items.values()];
  }

  function projectPath(projectId: string, rest = ""): string {
    return `/projects/${segment(projectId)}${rest}`;
  }

  function envPath(projectId: string, envId: string): string {
    return projectPath(projectId, `/env/${segment(envId)}`);
  }

  return {
    /** Checks the token: resolves when Vercel accepts it. */
    async getUser(token: string): Promise<void> {
      const { body } = await call("GET", apiUrl("/v2/user"), { token, idempotent: true, label: "GET /v2/user" });
      if (!body || typeof body !== "object" || !("user" in body)) throw new VercelError("unavailable", 200, "malformed");
    },

    async listTeams(token: string): Promise<NamedItem[]> {
      const teams = await paged<{ id: string; name?: string; slug?: string }>(
        "/v2/teams",
        "teams",
        "until",
        token,
        { limit: String(PAGE_LIMIT) },
        "GET /v2/teams",
      );
      return teams.map((t) => ({ id: t.id, name: String(t.name ?? t.slug ?? t.id) }));
    },

    async listProjects(token: string, teamId: string | null): Promise<NamedItem[]> {
      const projects = await paged<{ id: string; name?: string }>(
        "/v10/projects",
        "projects",
        "from",
        token,
        { teamId: teamId ?? undefined, limit: String(PAGE_LIMIT) },
        "GET /v10/projects",
      );
      return projects.map((p) => ({ id: p.id, name: String(p.name ?? p.id) }));
    },

    /** The project by id or name, or undefined when it does not exist in the scope. */
    async findProject(token: string, teamId: string | null, idOrName: string): Promise<NamedItem | undefined> {
      try {
        const { body } = await call("GET", apiUrl(`/v9${projectPath(idOrName)}`, { teamId: teamId ?? undefined }), {
          token,
          idempotent: true,
          label: "GET /v9/projects/:id",
        });
        const project = body as { id?: unknown; name?: unknown } | null;
        if (typeof project?.id !== "string") throw new VercelError("unavailable", 200, "malformed");
        return { id: project.id, name: typeof project.name === "string" ? project.name : project.id };
      } catch (error) {
        if (error instanceof VercelError && error.failure === "not_found") return undefined;
        throw error;
      }
    },

    /** Every env var of the project, `encrypted` ones decrypted where Vercel allows. */
    async listEnvVars(token: string, teamId: string | null, projectId: string): Promise<VercelEnvVar[]> {
      const vars = await paged<VercelEnvVar>(
        `/v10${projectPath(projectId, "/env")}`,
        "envs",
        "until",
        token,
        { teamId: teamId ?? undefined, decrypt: "true" },
        "GET /v10/projects/:id/env",
        { maxPages: MAX_ENV_PAGES, whole: true },
      );
      // A var of a custom environment carries no `target` array: it covers none of the
      // three targets a sync writes, and the plan must not read a length from nothing.
      return vars.filter((v) => typeof v.key === "string").map((v) => (Array.isArray(v.target) ? v : { ...v, target: [] }));
    },

    /** One var's readable value, or undefined when Vercel will not return it (sensitive). */
    async readEnvValue(token: string, teamId: string | null, projectId: string, envId: string): Promise<string | undefined> {
      const { body } = await call("GET", apiUrl(`/v1${envPath(projectId, envId)}`, { teamId: teamId ?? undefined }), {
        token,
        idempotent: true,
        label: "GET /v1/projects/:id/env/:envId",
      });
      const envVar = body as VercelEnvVar | null;
      return envVar && (envVar.decrypted === true || envVar.type === "plain") && typeof envVar.value === "string"
        ? envVar.value
        : undefined;
    },

    /**
     * Creates vars without upsert, so a var someone else made in the meantime is reported
     * as a conflict instead of being overwritten. Not idempotent, hence no 5xx retry.
     */
    async createEnvVars(token: string, teamId: string | null, projectId: string, vars: NewEnvVar[]): Promise<CreateResult> {
      let body: unknown;
      let nothingWritten = false;
      try {
        ({ body } = await call("POST", apiUrl(`/v10${projectPath(projectId, "/env")}`, { teamId: teamId ?? undefined }), {
          token,
          body: vars,
          idempotent: false,
          label: "POST /v10/projects/:id/env",
        }));
      } catch (error) {
        // Nothing written: a 400 carries the per-item reasons in `failed`.
        if (error instanceof VercelError && error.failure === "invalid" && Array.isArray((error.body as { failed?: unknown })?.failed)) {
          body = { created: [], failed: (error.body as { failed: unknown[] }).failed };
          nothingWritten = true;
        } else {
          throw error;
        }
      }
      const raw = body as { created?: unknown; failed?: unknown } | null;
      const created = Array.isArray(raw?.created) ? (raw.created as VercelEnvVar[]) : raw?.created ? [raw.created as VercelEnvVar] : [];
      const failed = (Array.isArray(raw?.failed) ? raw.failed : []).map((f) => {
        const error = (f as { error?: { code?: unknown; key?: unknown; envVarKey?: unknown } })?.error;
        const key = typeof error?.key === "string" ? error.key : typeof error?.envVarKey === "string" ? error.envVarKey : undefined;
        return { key, code: typeof error?.code === "string" ? error.code : undefined };
      });
      return { created, failed, nothingWritten };
    },

    /** `encrypt`: the var becomes `encrypted` too (it was `plain`). */
    async updateEnvValue(
      token: string,
      teamId: string | null,
      projectId: string,
      envId: string,
      value: string,
      encrypt = false,
    ): Promise<void> {
      await call("PATCH", apiUrl(`/v9${envPath(projectId, envId)}`, { teamId: teamId ?? undefined }), {
        token,
        body: encrypt ? { value, type: "encrypted" } : { value },
        idempotent: true,
        label: "PATCH /v9/projects/:id/env/:envId",
      });
    },

    async deleteEnvVar(token: string, teamId: string | null, projectId: string, envId: string): Promise<void> {
      try {
        await call("DELETE", apiUrl(`/v9${envPath(projectId, envId)}`, { teamId: teamId ?? undefined }), {
          token,
          idempotent: true,
          label: "DELETE /v9/projects/:id/env/:envId",
        });
      } catch (error) {
        // Already gone (or removed by a retried DELETE): the outcome we wanted.
        if (error instanceof VercelError && error.failure === "not_found") return;
        throw error;
      }
    },

    /** POSTs the (already validated) deploy hook once; 5xx is not retried: no double deploy. */
    async triggerDeployHook(hookUrl: string): Promise<{ jobId: string | null; state: string | null }> {
      if (deployHookProblem(hookUrl, options.baseUrl)) throw new VercelError("invalid", 0, "hook_url");
      const { body } = await call("POST", new URL(hookUrl), { idempotent: false, label: "POST deploy hook" });
      const job = (body as { job?: { id?: unknown; state?: unknown } } | null)?.job;
      return {
        jobId: typeof job?.id === "string" ? job.id : null,
        state: typeof job?.state === "string" ? job.state : null,
      };
    },

    baseHost: base.host,
  };
}

/**
 * Why a deploy hook URL is refused, or undefined when it is acceptable: https (or the
 * scheme of VERCEL_API_URL), the same host and port as VERCEL_API_URL, no credentials,
 * and the path /v1/integrations/deploy/<project>/<hook>. This is what keeps the server
 * from being pointed at any other host (SSRF).
 */
export function deployHookProblem(hookUrl: string, apiBaseUrl: string): string | undefined {
  let url: URL;
  try {
    url = new URL(hookUrl);
  } catch {
    return "not a URL";
  }
  const base = new URL(apiBaseUrl);
  if (url.protocol !== "https:" && url.protocol !== base.protocol) return "scheme";
  if (url.username || url.password) return "credentials";
  // Host and port together; the parser lowercases names and drops default ports.
  if (url.host !== base.host) return "host";
  if (url.hash) return "fragment";
  const basePath = base.pathname.replace(/\/+$/, "");
  const hookPath = url.pathname.slice(basePath.length);
  if (!url.pathname.startsWith(basePath + DEPLOY_HOOK_PATH)) return "path";
  // The URL parser has already resolved dot segments; allow only plain id characters.
  if (!/^\/v1\/integrations\/deploy\/[A-Za-z0-9_-]{1,100}\/[A-Za-z0-9_-]{1,100}$/.test(hookPath)) return "path";
  return undefined;
}

/** The Vercel project id a deploy hook URL belongs to (its first path segment after /deploy/). */
export function deployHookProjectId(hookUrl: string, apiBaseUrl: string): string {
  const basePath = new URL(apiBaseUrl).pathname.replace(/\/+$/, "");
  return new URL(hookUrl).pathname.slice(basePath.length + DEPLOY_HOOK_PATH.length).split("/")[0]!;
}
