import type { FastifyInstance } from "fastify";
import type { ZodTypeProvider } from "fastify-type-provider-zod";
import { z } from "zod";
import { SECURITY, Timestamp } from "../core/api-schemas.ts";
import type { Auth } from "../core/auth.ts";
import { perNetwork } from "../core/client-address.ts";
import { HttpError } from "../core/errors.ts";
import { DISPLAY_NAME_MAX, isSingleLine } from "../core/text.ts";
import { toPublicUser } from "../users/users.service.ts";
import { LINK_UNUSABLE, type LocalAccounts, SIGN_IN_FAILED } from "./local.service.ts";
import { PASSWORD_MAX_LENGTH, PASSWORD_MIN_LENGTH } from "./passwords.ts";
import { SIGN_IN_TAGS, UserEnvelope } from "./sign-in.routes.ts";

const SignIn = z.strictObject({
  email: z.string().trim().min(1).max(254),
  password: z.string().min(1).max(PASSWORD_MAX_LENGTH),
});
const Token = z.string().min(1).max(200).describe("The token of the one-time link");
const LinkLookup = z.strictObject({ token: Token });
const SetPassword = z.strictObject({
  token: Token,
  password: z.string().min(PASSWORD_MIN_LENGTH).max(PASSWORD_MAX_LENGTH),
  name: z.string().trim().min(1).max(DISPLAY_NAME_MAX).refine(isSingleLine).optional(),
  email: z.email().max(254).optional(),
});

/** Attempts per address, on top of the failure limits of the service. */
const LOCAL_SIGN_IN_PER_ADDRESS_PER_MINUTE = 20;

interface Deps {
  auth: Auth;
  local: LocalAccounts;
}

/**
 * AUTH_PROVIDER=local: sign-in with e-mail and password, and the two calls of the page a
 * one-time link opens. Tokens travel only in POST bodies, never in a URL a log could keep.
 */
export function registerLocalRoutes(app: FastifyInstance, { auth, local }: Deps): void {
  const routes = app.withTypeProvider<ZodTypeProvider>();
  const tags = SIGN_IN_TAGS;
  const perAddress = (name: string, max: number) => ({
    rateLimit: { max, timeWindow: 60_000, keyGenerator: perNetwork(name) },
  });

  routes.post(
    "/api/auth/local/sign-in",
    {
      config: perAddress("local-sign-in", LOCAL_SIGN_IN_PER_ADDRESS_PER_MINUTE),
      schema: {
        tags,
        summary: "Sign in with e-mail and password (AUTH_PROVIDER=local)",
        description: "Sets the session cookie. 20 attempts a minute per client address.",
        security: SECURITY.none,
        body: SignIn,
        response: { 200: UserEnvelope },
      },
    },
    async (req, reply) => {
      const user = await local.signIn(req.body.email, req.body.password, req.clientNetwork);
      // The password was reset (or the account disabled) while its hash was checked: the old one is wrong now.
      if (!(await auth.startBrowserSession(req, reply, user.id, { passwordHash: user.passwordHash })))
        throw new HttpError(401, SIGN_IN_FAILED);
      // The sign-in stands either way; a hash left as it was is made again next time.
      await local.upgradePasswordHash(user, req.body.password).catch((error: unknown) => {
        if (!(error instanceof HttpError && error.statusCode === 503))
          req.log.warn({ err: error }, "the password's hash could not be made again");
      });
      return { user: toPublicUser(user) };
    },
  );

  routes.post(
    "/api/auth/local/link",
    {
      config: perAddress("local-link", 30),
      schema: {
        tags,
        summary: "What a one-time link is for (AUTH_PROVIDER=local)",
        security: SECURITY.none,
        body: LinkLookup,
        response: {
          200: z.object({
            link: z.object({ purpose: z.enum(["setup", "invite", "reset"]), email: z.string().nullable(), expiresAt: Timestamp }),
          }),
        },
      },
    },
    async (req) => ({ link: await local.describeLink(req.body.token) }),
  );

  routes.post(
    "/api/auth/local/set-password",
    {
      config: perAddress("local-link", 30),
      schema: {
        tags,
        summary: "Set a password through a one-time link (AUTH_PROVIDER=local)",
        description: "Signs the person in.",
        security: SECURITY.none,
        body: SetPassword,
        response: { 200: UserEnvelope },
      },
    },
    async (req, reply) => {
      const user = await local.setPassword(req.body);
      // Reset again or disabled in the moment since: the password set here no longer opens the account.
      if (!(await auth.startBrowserSession(req, reply, user.id, { passwordHash: user.passwordHash })))
        throw new HttpError(410, LINK_UNUSABLE);
      return { user: toPublicUser(user) };
    },
  );
}
