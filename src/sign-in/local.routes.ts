import type { FastifyInstance, FastifyRequest } from "fastify";
import { z } from "zod";
import type { Auth } from "../core/auth.ts";
import { parse } from "../core/errors.ts";
import { DISPLAY_NAME_MAX, isSingleLine } from "../core/text.ts";
import { toPublicUser } from "../users/users.service.ts";
import type { LocalAccounts } from "./local.service.ts";
import { PASSWORD_MAX_LENGTH, PASSWORD_MIN_LENGTH } from "./passwords.ts";

const SignIn = z.strictObject({
  email: z.string().trim().min(1).max(254),
  password: z.string().min(1).max(PASSWORD_MAX_LENGTH),
});
const Token = z.string().min(1).max(200);
const LinkLookup = z.strictObject({ token: Token });
const SetPassword = z.strictObject({
  token: Token,
  password: z.string().min(PASSWORD_MIN_LENGTH).max(PASSWORD_MAX_LENGTH),
  name: z.string().trim().min(1).max(DISPLAY_NAME_MAX).refine(isSingleLine).optional(),
  email: z.email().max(254).optional(),
});

/** Attempts per address, on top of the failure limits of the service. */
export const LOCAL_SIGN_IN_PER_ADDRESS_PER_MINUTE = 20;

interface Deps {
  auth: Auth;
  local: LocalAccounts;
}

/**
 * AUTH_PROVIDER=local: sign-in with e-mail and password, and the two calls of the page a
 * one-time link opens. Tokens travel only in POST bodies, never in a URL a log could keep.
 */
export function registerLocalRoutes(app: FastifyInstance, { auth, local }: Deps): void {
  const perAddress = (name: string, max: number) => ({
    rateLimit: { max, timeWindow: 60_000, keyGenerator: (req: FastifyRequest) => `${name}:${req.ip}` },
  });

  app.post("/api/auth/local/sign-in", { config: perAddress("local-sign-in", LOCAL_SIGN_IN_PER_ADDRESS_PER_MINUTE) }, async (req, reply) => {
    const input = parse(SignIn, req.body, "Enter your e-mail address and password.");
    const user = await local.signIn(input.email, input.password, req.ip);
    auth.startBrowserSession(reply, user.id);
    return { user: toPublicUser(user) };
  });

  app.post("/api/auth/local/link", { config: perAddress("local-link", 30) }, async (req) => {
    const input = parse(LinkLookup, req.body, "Send the token of the link.");
    return { link: local.describeLink(input.token) };
  });

  app.post("/api/auth/local/set-password", { config: perAddress("local-link", 30) }, async (req, reply) => {
    const input = parse(
      SetPassword,
      req.body,
      `Choose a password of ${PASSWORD_MIN_LENGTH} to ${PASSWORD_MAX_LENGTH} characters (and a valid e-mail address and a name of up to 100 characters, when asked).`,
    );
    const user = await local.setPassword(input);
    auth.startBrowserSession(reply, user.id);
    return { user: toPublicUser(user) };
  });
}
