import type { FastifyInstance } from "fastify";
import type { ZodTypeProvider } from "fastify-type-provider-zod";
import { z } from "zod";
import { Ok, SECURITY } from "../core/api-schemas.ts";
import type { Auth } from "../core/auth.ts";
import { isServiceAccount, NOT_SIGNED_IN } from "../core/caller.ts";
import type { Clock } from "../core/clock.ts";
import type { AuthProvider, Config } from "../core/config.ts";
import { HttpError } from "../core/errors.ts";
import { DISPLAY_NAME_MAX, isSingleLine } from "../core/text.ts";
import { toPublicUser, type UsersService } from "../users/users.service.ts";
import { SIGN_IN_ERRORS } from "./sign-in-errors.ts";

const DevSignIn = z.strictObject({
  email: z.email().max(254),
  name: z.string().trim().min(1).max(DISPLAY_NAME_MAX).refine(isSingleLine).optional(),
});

/** A signed-in person as the sign-in routes answer them. */
export const UserEnvelope = z.object({ user: z.object({ id: z.string(), email: z.string().nullable(), name: z.string().nullable() }) });

/** What GET /api/auth/provider answers. */
export interface ProviderInfo {
  provider: AuthProvider;
  production: boolean;
}

interface Deps {
  auth: Auth;
  config: Config;
  clock: Clock;
  users: UsersService;
}

export const SIGN_IN_TAGS = ["Sign-in"];

/** The browser sign-in endpoints every provider shares, plus the development sign-in. */
export function registerSignInRoutes(app: FastifyInstance, { auth, config, clock, users }: Deps): void {
  const routes = app.withTypeProvider<ZodTypeProvider>();
  const tags = SIGN_IN_TAGS;

  // Tells the UI which sign-in form to show.
  routes.get(
    "/api/auth/provider",
    {
      schema: {
        tags,
        summary: "How people sign in to this server",
        security: SECURITY.none,
        response: { 200: z.object({ provider: z.enum(["dev", "oidc", "local"]), production: z.boolean() }) },
      },
    },
    async (): Promise<ProviderInfo> => ({ provider: config.authProvider, production: config.isProduction }),
  );

  routes.get(
    "/api/auth/me",
    {
      schema: {
        tags,
        summary: "The signed-in person",
        description: "A browser session or a CLI token; 401 otherwise (a service account has /api/service-accounts/me).",
        security: SECURITY.browserOrToken,
        response: { 200: UserEnvelope },
      },
    },
    async (req) => {
      if (req.badBearer || !req.caller || isServiceAccount(req.caller)) throw new HttpError(401, NOT_SIGNED_IN);
      const user = (await users.findById(req.caller.userId))!;
      return { user: toPublicUser(user) };
    },
  );

  routes.post(
    "/api/auth/sign-out",
    {
      schema: {
        tags,
        summary: "End the browser session",
        description:
          "Clears the cookie and ends the session on the server; without a session there is nothing to end, and the answer is the same.",
        security: SECURITY.sessionIfAny,
        response: { 200: Ok },
      },
    },
    async (req, reply) => {
      await auth.endBrowserSession(req, reply);
      return { ok: true as const };
    },
  );

  // Development only: anyone can be anyone, so it does not exist in production at all.
  if (config.authProvider === "dev" && !config.isProduction) {
    routes.post(
      "/api/auth/dev/sign-in",
      {
        schema: {
          tags,
          summary: "Sign in as anyone (development only)",
          description:
            "Exists only with AUTH_PROVIDER=dev outside production mode. The e-mail counts as verified; sets the session cookie.",
          security: SECURITY.none,
          body: DevSignIn,
          response: { 200: UserEnvelope },
        },
      },
      async (req, reply) => {
        const email = req.body.email.toLowerCase();
        const user = await users.upsertIdentity(
          { issuer: "dev", subject: email, email, emailVerified: true, name: req.body.name ?? null },
          clock.now(),
        );
        if (!(await auth.startBrowserSession(req, reply, user.id))) throw new HttpError(403, SIGN_IN_ERRORS.account_disabled);
        return { user: toPublicUser(user) };
      },
    );
  }
}
