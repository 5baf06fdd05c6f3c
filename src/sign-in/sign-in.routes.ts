import { isServiceAccount } from "../core/caller.ts";
import type { FastifyInstance } from "fastify";
import { z } from "zod";
import type { Auth } from "../core/auth.ts";
import type { Clock } from "../core/clock.ts";
import type { AuthProvider, Config } from "../core/config.ts";
import { HttpError, parse } from "../core/errors.ts";
import { DISPLAY_NAME_MAX, isSingleLine } from "../core/text.ts";
import { toPublicUser, type UsersService } from "../users/users.service.ts";

const DevSignIn = z.strictObject({
  email: z.email().max(254),
  name: z.string().trim().min(1).max(DISPLAY_NAME_MAX).refine(isSingleLine).optional(),
});

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

/** operations.md's browser sign-in endpoints that every provider shares, plus the dev sign-in. */
export function registerSignInRoutes(app: FastifyInstance, { auth, config, clock, users }: Deps): void {
  // Tells the UI which sign-in form to show.
  app.get("/api/auth/provider", async (): Promise<ProviderInfo> => ({ provider: config.authProvider, production: config.isProduction }));

  app.get("/api/auth/me", async (req) => {
    // A service account is no user: it has /api/service-accounts/me instead.
    if (req.badBearer || !req.caller || isServiceAccount(req.caller)) throw new HttpError(401, "not signed in");
    const user = users.findById(req.caller.userId)!;
    return { user: toPublicUser(user) };
  });

  app.post("/api/auth/sign-out", async (req, reply) => {
    auth.endBrowserSession(req, reply);
    return { ok: true };
  });

  // Development only: anyone can be anyone, so it does not exist in production at all.
  if (config.authProvider === "dev" && !config.isProduction) {
    app.post("/api/auth/dev/sign-in", async (req, reply) => {
      const input = parse(DevSignIn, req.body, "Enter a valid e-mail address (and optionally a name of up to 100 characters).");
      const email = input.email.toLowerCase();
      const user = users.upsertIdentity(
        { issuer: "dev", subject: email, email, emailVerified: true, name: input.name ?? null },
        clock.now(),
      );
      auth.startBrowserSession(reply, user.id);
      return { user: toPublicUser(user) };
    });
  }
}
