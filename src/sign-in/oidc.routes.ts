import type { FastifyInstance, FastifyReply } from "fastify";
import type { ZodTypeProvider } from "fastify-type-provider-zod";
import type { Logger } from "pino";
import { z } from "zod";
import { SECURITY } from "../core/api-schemas.ts";
import type { Auth } from "../core/auth.ts";
import { perNetwork } from "../core/client-address.ts";
import type { Config } from "../core/config.ts";
import type { Keyring } from "../core/crypto.ts";
import { OIDC_SIGN_IN_SECONDS, type OidcService, type PendingSignIn, SignInFailure } from "./oidc.service.ts";
import { SIGN_IN_TAGS } from "./sign-in.routes.ts";
import { createSealedCookie } from "./sign-in-cookie.ts";

// Never refused: a wrong returnTo lands on the home page, and the provider's answer is judged by the service.
const StartQuery = z.object({
  returnTo: z.string().optional().catch(undefined).describe("A path of this server to land on after sign-in"),
});
const ProviderValue = z.string().optional().catch(undefined);
/** The identity provider's answer; any other parameter it adds (iss, session_state) goes to the service too. */
const CallbackQuery = z.looseObject({ code: ProviderValue, state: ProviderValue, error: ProviderValue });
const Redirect = z.undefined().describe("A redirect (Location)");

/** The UI page that shows a failed sign-in; it reads `?error=<code>`. */
const SIGN_IN_PAGE = "/sign-in";

interface Deps {
  auth: Auth;
  config: Config;
  keyring: Keyring;
  oidc: OidcService;
  log: Pick<Logger, "warn">;
}

/**
 * Only a path of this server: an absolute or protocol-relative URL (//evil.test,
 * /\evil.test) would turn the sign-in into an open redirect. API paths make no sense
 * to land on, and a link that lands on one (a reveal) would act under the person's name,
 * so they fall back to the home page too, however they are escaped.
 */
function safeReturnTo(value: unknown, appOrigin: string): string {
  if (typeof value !== "string" || !value.startsWith("/") || value.startsWith("//") || value.startsWith("/\\")) return "/";
  if (value.length > 1000 || /[\u0000-\u001f\\]/.test(value)) return "/";
  let url: URL;
  try {
    url = new URL(value, appOrigin);
  } catch {
    return "/";
  }
  if (url.origin !== appOrigin) return "/";
  // The router decodes the path before matching: "/%61pi/projects/…" reaches the API, so the
  // decoded path is the one checked (a path without escapes decodes to itself).
  let decoded: string;
  try {
    decoded = decodeURIComponent(url.pathname);
  } catch {
    return "/";
  }
  if (isApiPath(decoded)) return "/";
  // Dot segments resolve away: "/..//evil.test" becomes the path "//evil.test", which a
  // browser reads as another host. Check the result, not only the input.
  if (url.pathname.startsWith("//")) return "/";
  return url.pathname + url.search + url.hash;
}

function isApiPath(pathname: string): boolean {
  const lower = pathname.toLowerCase();
  return lower === "/api" || lower.startsWith("/api/");
}

export function registerOidcRoutes(app: FastifyInstance, { auth, config, keyring, oidc, log }: Deps): void {
  const cookie = createSealedCookie<PendingSignIn>(keyring, config, "oidc");
  // Per address: a start costs nothing at the provider, but nobody needs more than this.
  const perAddress = { max: 30, timeWindow: 60_000, keyGenerator: perNetwork("oidc") };

  function fail(reply: FastifyReply, failure: SignInFailure) {
    return reply.redirect(`${SIGN_IN_PAGE}?error=${failure.code}`, 302);
  }

  const routes = app.withTypeProvider<ZodTypeProvider>();
  const tags = SIGN_IN_TAGS;

  routes.get(
    "/api/auth/oidc/start",
    {
      config: { rateLimit: perAddress },
      schema: {
        tags,
        summary: "Start an OpenID Connect sign-in (AUTH_PROVIDER=oidc)",
        description: "Redirects to the identity provider (authorization code flow with PKCE and state).",
        security: SECURITY.none,
        querystring: StartQuery,
        response: { 302: Redirect },
      },
    },
    async (req, reply) => {
      const returnTo = safeReturnTo(req.query.returnTo, config.appOrigin);
      let started: Awaited<ReturnType<OidcService["start"]>>;
      try {
        started = await oidc.start(returnTo);
      } catch (error) {
        if (!(error instanceof SignInFailure)) throw error;
        log.warn({ reason: error.code, detail: error.message }, "OIDC sign-in could not start");
        return fail(reply, error);
      }
      void reply.setCookie(cookie.name, cookie.seal(started.pending), cookie.options(OIDC_SIGN_IN_SECONDS));
      return reply.redirect(started.url, 302);
    },
  );

  routes.get(
    "/api/auth/oidc/callback",
    {
      config: { rateLimit: perAddress },
      schema: {
        tags,
        summary: "Where the identity provider sends the browser back",
        description: "Redirects to the UI with the session cookie set, or to the sign-in page with ?error=<code>.",
        security: SECURITY.none,
        querystring: CallbackQuery,
        response: { 302: Redirect },
      },
    },
    async (req, reply) => {
      const pending = cookie.open(req.cookies[cookie.name]);
      // One attempt per started sign-in, whatever the outcome.
      void reply.clearCookie(cookie.name, cookie.options(0));
      const query = Object.fromEntries(Object.entries(req.query).filter((e): e is [string, string] => typeof e[1] === "string"));
      try {
        const user = await oidc.finish(query, pending);
        // Disabled while the sign-in was under way.
        if (!(await auth.startBrowserSession(req, reply, user.id))) throw new SignInFailure("account_disabled");
        return reply.redirect(pending!.returnTo, 302);
      } catch (error) {
        if (!(error instanceof SignInFailure)) throw error;
        log.warn({ reason: error.code, detail: error.message }, "OIDC sign-in failed");
        return fail(reply, error);
      }
    },
  );
}
