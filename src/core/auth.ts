import crypto from "node:crypto";
import type { FastifyInstance, FastifyReply, FastifyRequest, HookHandlerDoneFunction } from "fastify";
import {
  type Caller,
  CLI_SESSION_ENDED,
  isServiceAccount,
  NOT_SIGNED_IN,
  type Principal,
  SERVICE_TOKEN_INVALID,
  type ServiceAccountCaller,
} from "./caller.ts";
import { addressNetwork, perNetwork } from "./client-address.ts";
import type { Clock } from "./clock.ts";
import type { Config } from "./config.ts";
import { hashToken, randomToken } from "./crypto.ts";
import { HttpError } from "./errors.ts";

declare module "fastify" {
  interface FastifyRequest {
    /** Resolved from the request's credential before any handler runs; null when signed out. */
    caller: Principal | null;
    /** True when an Authorization header was sent but did not name a live CLI token. */
    badBearer: boolean;
    /** True when a svc_st_/svc_wt_ token was sent and refused; answered 401 in preParsing. */
    badServiceToken: boolean;
    /** The client as per-address limits count it: its address, or its IPv6 network (addressNetwork). */
    readonly clientNetwork: string;
  }
}

/** Sliding browser session: 7 days from the last use, never more than 30 days from sign-in. */
const SESSION_IDLE_DAYS = 7;
const SESSION_MAX_DAYS = 30;
const DAY_MS = 24 * 60 * 60 * 1000;
/**
 * Writing last-use on every request would make every read a write: once a minute is enough,
 * for every kind of credential. The write is conditional on the time read being still the
 * stored one (`unlessSince`), so requests that arrive together write it once.
 */
const TOUCH_INTERVAL_MS = 60 * 1000;

/** The last-use time a credential must be older than for a request at `now` to write it. */
export function touchDueBefore(now: Date): string {
  return new Date(now.getTime() - TOUCH_INTERVAL_MS).toISOString();
}

export const BROWSER_ONLY = "This action needs a browser session; CLI tokens cannot be used here.";

/** The one credential-less POST that is not for browsers (service-accounts.routes.ts). */
export const WORKLOAD_EXCHANGE_ROUTE = "/api/auth/workload/token";

/** Refused service credentials allowed per client address and minute, on every path. */
const BAD_SERVICE_TOKENS_PER_MINUTE = 60;

/**
 * The credential of an `Authorization: Bearer <token>` header, or undefined for any other
 * header. The scheme is matched without regard to case (RFC 7235), for every kind of token.
 */
function bearerToken(header: string): string | undefined {
  return header.match(/^bearer\s+(.+)$/is)?.[1];
}

/** Resolves service tokens and workload access tokens (the service-accounts feature). */
export interface ServiceTokenResolver {
  /** The account behind a svc_st_/svc_wt_ token presented from `clientIp`, or null when it must be refused. */
  resolve(token: string, clientIp: string): Promise<ServiceAccountCaller | null>;
}

/**
 * The rate-limit key of a request: per person, per service account, or per client address
 * when signed out, so limits counted per user count per service account too.
 */
export function rateLimitKey(req: FastifyRequest): string {
  if (!req.caller) return `ip:${req.clientNetwork}`;
  return isServiceAccount(req.caller) ? `service-account:${req.caller.serviceAccountId}` : `user:${req.caller.userId}`;
}

const STATE_CHANGING = new Set(["POST", "PUT", "PATCH", "DELETE"]);

/**
 * The route the router matched, as declared ("/api/projects/:projectId"), or "" when none
 * did. Guards key on this, never on req.url: the router decodes the path before matching,
 * so "/%61pi/projects/…" reaches an API handler while its raw URL does not start with /api/.
 */
export function matchedRoute(req: FastifyRequest): string {
  return req.routeOptions.url ?? "";
}

/** True when the request is handled by an API route (the UI's catch-all is not one). */
export function isApiRoute(req: FastifyRequest): boolean {
  return matchedRoute(req).startsWith("/api/");
}

/**
 * API routes a page on another site may send a browser to: the OpenID provider's redirect
 * back to the callback (by design), and the API reference, public and read by no one's
 * credentials (a link to it from a wiki must open it).
 */
const CROSS_SITE_ROUTES = ["/api/auth/oidc/", "/api/docs", "/api/openapi.json"];

function isCrossSiteRoute(req: FastifyRequest): boolean {
  const route = matchedRoute(req);
  return CROSS_SITE_ROUTES.some((prefix) => route.startsWith(prefix));
}

export function sessionCookieName(config: Pick<Config, "isProduction">): string {
  // __Host- binds the cookie to this exact origin over https, with no Domain attribute.
  return config.isProduction ? "__Host-secrets_session" : "secrets_session";
}

export type Auth = ReturnType<typeof createAuth>;

/** A credential's user, read with the credential. */
export interface SessionUserRow {
  id: string;
  email: string | null;
  name: string | null;
  email_verified: number;
}

export interface BrowserSessionRow extends SessionUserRow {
  session_id: string;
  created_at: string;
  last_seen_at: string;
  expires_at: string;
}

export interface AccessTokenRow extends SessionUserRow {
  session_id: string;
  last_used_at: string;
}

/**
 * The credential rows read on every request, from the features that own them
 * (sign-in/browser-sessions.repo.ts, cli-auth/access-tokens.repo.ts), passed in by app.ts
 * since core imports no feature.
 */
export interface CredentialRepos {
  browserSessions: {
    find(tokenHash: string): Promise<BrowserSessionRow | undefined>;
    touch(sessionId: string, lastSeenAt: string, expiresAt: string, unlessSince: string): Promise<void>;
    insert(
      row: { id: string; userId: string; tokenHash: string; createdAt: string; expiresAt: string },
      checked?: { passwordHash: string | null },
    ): Promise<boolean>;
    delete(tokenHash: string): Promise<void>;
  };
  accessTokens: {
    findLive(tokenHash: string, nowIso: string): Promise<AccessTokenRow | undefined>;
    touchSession(sessionId: string, lastUsedAt: string, unlessSince: string): Promise<void>;
  };
}

export function createAuth(
  { browserSessions, accessTokens }: CredentialRepos,
  config: Config,
  clock: Clock,
  serviceTokens?: ServiceTokenResolver,
) {
  const cookieName = sessionCookieName(config);

  function toCaller(row: SessionUserRow, via: Caller["via"], sessionId: string): Caller {
    return { userId: row.id, email: row.email, name: row.name, emailVerified: row.email_verified === 1, via, sessionId };
  }

  async function resolveBearer(token: string | undefined): Promise<Caller | null> {
    if (token === undefined || !/^svc_at_[A-Za-z0-9_-]{20,200}$/.test(token)) return null;
    const now = clock.now();
    const nowIso = now.toISOString();
    const row = await accessTokens.findLive(hashToken(token), nowIso);
    if (!row) return null;
    const dueBefore = touchDueBefore(now);
    if (row.last_used_at <= dueBefore) await accessTokens.touchSession(row.session_id, nowIso, dueBefore);
    return toCaller(row, "cli", row.session_id);
  }

  async function resolveCookie(token: string): Promise<Caller | null> {
    if (token.length < 20 || token.length > 200) return null;
    const row = await browserSessions.find(hashToken(token));
    if (!row) return null;
    const now = clock.now();
    if (Date.parse(row.expires_at) <= now.getTime()) return null;
    const dueBefore = touchDueBefore(now);
    if (row.last_seen_at <= dueBefore) {
      const cap = Date.parse(row.created_at) + SESSION_MAX_DAYS * DAY_MS;
      const expiresAt = new Date(Math.min(now.getTime() + SESSION_IDLE_DAYS * DAY_MS, cap));
      await browserSessions.touch(row.session_id, now.toISOString(), expiresAt.toISOString(), dueBefore);
    }
    return toCaller(row, "browser", row.session_id);
  }

  function requireBrowser(req: FastifyRequest): Principal {
    // A service account gets the CLI token's answer: neither is a browser.
    if (req.caller && req.caller.via !== "browser") throw new HttpError(403, BROWSER_ONLY);
    // A dead CLI token where only a browser session counts is no sign-in either: api.md
    // answers approve's 401 "not signed in" (its CLI-session sentence is refresh's).
    if (!req.caller) throw new HttpError(401, NOT_SIGNED_IN);
    return req.caller;
  }

  function requireBrowserOrCli(req: FastifyRequest): Principal {
    if (req.badBearer) throw new HttpError(401, CLI_SESSION_ENDED);
    if (!req.caller) throw new HttpError(401, NOT_SIGNED_IN);
    return req.caller;
  }

  return {
    cookieName,

    /** Resolves the credential of every request once. */
    register(app: FastifyInstance): void {
      app.decorateRequest("caller", null);
      app.decorateRequest("badBearer", false);
      app.decorateRequest("badServiceToken", false);
      app.decorateRequest("clientNetwork", {
        getter(this: FastifyRequest) {
          return addressNetwork(this.ip, config.rateLimitIpv6Prefix);
        },
      });
      app.addHook("onRequest", async (req) => {
        // The workload exchange takes its credential from the body, and no header or cookie:
        // nothing a forged request could ride on, and its every refusal is its own 401
        // (machine-access.md), not a service token's or a session's.
        if (matchedRoute(req) === WORKLOAD_EXCHANGE_ROUTE) return;
        const authorization = req.headers.authorization;
        const bearer = authorization === undefined ? undefined : bearerToken(authorization);
        if (bearer !== undefined && /^svc_(st|wt)_/.test(bearer)) {
          const caller = /^svc_(st|wt)_[A-Za-z0-9_-]{43,200}$/.test(bearer)
            ? ((await serviceTokens?.resolve(bearer, req.ip)) ?? null)
            : null;
          // Not refused here: the route's rate limit (a later onRequest hook) must count the
          // attempt first, per address since there is no caller. refuseBadServiceTokens answers.
          req.badServiceToken = caller === null;
          req.caller = caller;
          return;
        }
        if (authorization !== undefined) {
          // A request with an Authorization header is a CLI request: its cookie is ignored,
          // so a browser-only endpoint can never be reached with a token plus a cookie.
          req.caller = await resolveBearer(bearer);
          req.badBearer = req.caller === null;
          return;
        }
        // Cross-site request forgery: a browser always sends Origin on these methods
        // from another site; "null" (sandboxed frames, some redirects) is not our origin.
        const origin = req.headers.origin;
        if (STATE_CHANGING.has(req.method) && origin !== undefined && origin !== config.appOrigin) {
          throw new HttpError(403, "Cross-origin request refused.");
        }
        // Origin guards writes; reads that reveal or export values are audited, so a link
        // on another site must not make a signed-in browser fetch them either. Browsers say
        // where a request comes from in Sec-Fetch-Site; the API is called by our own pages
        // only ("same-origin"), or typed in the address bar ("none"). The exceptions are
        // CROSS_SITE_ROUTES.
        const fetchSite = req.headers["sec-fetch-site"];
        if ((fetchSite === "cross-site" || fetchSite === "same-site") && isApiRoute(req) && !isCrossSiteRoute(req)) {
          throw new HttpError(403, "Cross-origin request refused.");
        }
        const token = req.cookies[cookieName];
        if (token) req.caller = await resolveCookie(token);
      });
    },

    /**
     * Answers a refused service credential, after every route's rate limit (onRequest) and
     * before its body is read: it is the same 401 on every endpoint and
     * says nothing about why. Refusals have a limit of their own per client address, which
     * also holds on paths without a rate limit (/healthz, the UI), so a flood of made-up
     * tokens is answered 429 without further lookups mattering. Registered after the
     * rate-limit plugin, whose limiter it uses.
     */
    refuseBadServiceTokens(app: FastifyInstance): void {
      const limit = app.createRateLimit({
        max: BAD_SERVICE_TOKENS_PER_MINUTE,
        timeWindow: 60_000,
        keyGenerator: perNetwork("bad-service-token"),
      });
      // A callback hook: every other request passes it without a promise.
      app.addHook("preParsing", (req, reply, _payload, done) => {
        if (!req.badServiceToken) {
          done();
          return;
        }
        limit(req).then((counted) => {
          if (!counted.isAllowed && counted.isExceeded) {
            void reply.header("retry-after", String(Math.max(1, counted.ttlInSeconds)));
            done(new HttpError(429, `Too many requests. Try again in ${Math.max(1, counted.ttlInSeconds)} seconds.`));
            return;
          }
          done(new HttpError(401, SERVICE_TOKEN_INVALID));
        }, done);
      });
    },

    /** preHandler of browser-only routes (a callback hook; also called with req alone). */
    browser: (req: FastifyRequest, _reply?: FastifyReply, done?: HookHandlerDoneFunction): void => {
      requireBrowser(req);
      done?.();
    },
    /** preHandler of routes the spec marks CLI (browser session or CLI token). */
    browserOrCli: (req: FastifyRequest, _reply?: FastifyReply, done?: HookHandlerDoneFunction): void => {
      requireBrowserOrCli(req);
      done?.();
    },

    /** The person calling a route guarded by `browser`; a service account never gets this far. */
    caller(req: FastifyRequest): Caller {
      if (!req.caller) throw new HttpError(401, NOT_SIGNED_IN);
      if (isServiceAccount(req.caller)) throw new HttpError(403, BROWSER_ONLY);
      return req.caller;
    },

    /** The caller of a route guarded by `browserOrCli`: a person or a service account. */
    principal(req: FastifyRequest): Principal {
      if (!req.caller) throw new HttpError(401, NOT_SIGNED_IN);
      return req.caller;
    },

    /** The service account of a request made with its token, for /api/service-accounts/me. */
    serviceAccount(req: FastifyRequest): ServiceAccountCaller {
      if (!req.caller || !isServiceAccount(req.caller)) throw new HttpError(401, NOT_SIGNED_IN);
      return req.caller;
    },

    /**
     * Starts a browser session for the user and sets its cookie (only the hash is stored);
     * false (and no cookie) when the user was disabled meanwhile, or, with `checked`, when
     * the password changed since the sign-in verified it: a reset or a disable that lands
     * while the sign-in waited for its hash wins. The session the browser held before (a
     * sign-in as someone else, or again) ends: its cookie is replaced, and nobody could sign
     * it out any more.
     */
    async startBrowserSession(
      req: FastifyRequest,
      reply: FastifyReply,
      userId: string,
      checked?: { passwordHash: string | null },
    ): Promise<boolean> {
      const token = randomToken(32);
      const now = clock.now();
      const expiresAt = new Date(now.getTime() + SESSION_IDLE_DAYS * DAY_MS);
      const started = await browserSessions.insert(
        { id: crypto.randomUUID(), userId, tokenHash: hashToken(token), createdAt: now.toISOString(), expiresAt: expiresAt.toISOString() },
        checked,
      );
      if (!started) return false;
      // Only once the new one is made: a refused sign-in leaves the browser as it was. Should
      // this delete fail, the new session's token was never sent, so nobody can use it.
      const replaced = req.cookies[cookieName];
      if (replaced) await browserSessions.delete(hashToken(replaced));
      void reply.setCookie(cookieName, token, {
        path: "/",
        httpOnly: true,
        sameSite: "lax",
        secure: config.isProduction,
        maxAge: SESSION_MAX_DAYS * 24 * 60 * 60,
      });
      return true;
    },

    async endBrowserSession(req: FastifyRequest, reply: FastifyReply): Promise<void> {
      const token = req.cookies[cookieName];
      if (token) await browserSessions.delete(hashToken(token));
      void reply.clearCookie(cookieName, { path: "/", httpOnly: true, sameSite: "lax", secure: config.isProduction });
    },
  };
}
