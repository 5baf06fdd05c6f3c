import type { FastifyInstance, FastifyRequest } from "fastify";
import type { ZodTypeProvider } from "fastify-type-provider-zod";
import { z } from "zod";
import { ErrorBody, Ok, SECURITY, Timestamp } from "../core/api-schemas.ts";
import type { Auth } from "../core/auth.ts";
import { isServiceAccount } from "../core/caller.ts";
import { perNetwork } from "../core/client-address.ts";
import { HttpError } from "../core/errors.ts";
import { type CliAuthService, normalizeUserCode } from "./cli-auth.service.ts";

/** Device starts per client address and minute. */
const DEVICE_START_LIMIT_PER_MINUTE = 10;
/**
 * Approvals (successful or not) per minute, per signed-in user and per client address.
 * A user code has 20^8 (about 2.6e10) values and lives 10 minutes, so at these rates
 * guessing someone else's pending code is hopeless.
 */
const APPROVE_LIMIT_PER_USER_PER_MINUTE = 10;
const APPROVE_LIMIT_PER_IP_PER_MINUTE = 30;

const DeviceStartBody = z.strictObject({ deviceName: z.string().optional().describe("Sanitized and cut to 60 characters") }).nullish();
const DeviceCodeBody = z.strictObject({ deviceCode: z.string().regex(/^[A-Za-z0-9_-]{32,128}$/) });
// Any string that is not a code (too long included) gets the code's own message.
const UserCode = z
  .string()
  .max(64)
  .refine((code) => normalizeUserCode(code) !== undefined)
  .describe("8 characters, as two groups of 4; the dash is optional");
// Strictly boolean: the string "false" must never approve by accident.
const ApproveBody = z.strictObject({ userCode: UserCode, approve: z.boolean().optional().describe("false denies; left out approves") });
const PendingBody = z.strictObject({ userCode: UserCode });
const RefreshBody = z.strictObject({ refreshToken: z.string().max(512) });
const SessionParams = z.object({ sessionId: z.string() });

const TokenPair = z.object({
  status: z.literal("approved"),
  accessToken: z.string().describe("svc_at_…, valid 60 minutes"),
  refreshToken: z.string().describe("svc_rt_…, valid 30 days, single use"),
  accessExpiresAt: Timestamp,
  refreshExpiresAt: Timestamp,
  email: z.string().describe("Of the approving user"),
});
const CliSession = z.object({ id: z.string(), deviceName: z.string(), createdAt: Timestamp, lastUsedAt: Timestamp, expiresAt: Timestamp });

interface Deps {
  auth: Auth;
  cliAuth: CliAuthService;
}

export function registerCliAuthRoutes(app: FastifyInstance, { auth, cliAuth }: Deps): void {
  const approvesPerUser = app.createRateLimit({
    max: APPROVE_LIMIT_PER_USER_PER_MINUTE,
    timeWindow: 60_000,
    keyGenerator: (req) => `cli-approve-user:${req.caller && !isServiceAccount(req.caller) ? req.caller.userId : ""}`,
  });
  const approvesPerIp = app.createRateLimit({
    max: APPROVE_LIMIT_PER_IP_PER_MINUTE,
    timeWindow: 60_000,
    keyGenerator: perNetwork("cli-approve-ip"),
  });
  // Both limits count every well-formed attempt, found or not; a malformed code looks nothing
  // up, so it costs nothing. (The plugin's route option runs only one limiter per request.)
  async function limitApprovals(req: FastifyRequest): Promise<void> {
    const results = [await approvesPerUser(req), await approvesPerIp(req)];
    for (const result of results) {
      if (!result.isAllowed && result.isExceeded) {
        const seconds = Math.max(1, result.ttlInSeconds);
        throw new HttpError(429, `Too many code confirmations. Try again in ${seconds} seconds.`, undefined, {
          "retry-after": String(seconds),
        });
      }
    }
  }

  const routes = app.withTypeProvider<ZodTypeProvider>();
  const tags = ["CLI sign-in"];

  routes.post(
    "/api/cli/auth/device",
    {
      config: { rateLimit: { max: DEVICE_START_LIMIT_PER_MINUTE, timeWindow: 60_000, keyGenerator: perNetwork("cli-device") } },
      schema: {
        tags,
        summary: "Start a device sign-in",
        description:
          "The CLI shows the user code and verification URL, then polls /api/cli/auth/token. The request expires after 10 minutes.",
        security: SECURITY.none,
        body: DeviceStartBody,
        response: {
          200: z.object({
            deviceCode: z.string().describe("For the CLI only"),
            userCode: z.string(),
            verificationUrl: z.string(),
            expiresIn: z.number().int().describe("Seconds"),
            interval: z.number().int().describe("Seconds between polls"),
          }),
        },
      },
    },
    async (req) => cliAuth.startDevice(req.body?.deviceName),
  );

  routes.post(
    "/api/cli/auth/token",
    {
      schema: {
        tags,
        summary: "Poll a device sign-in",
        description:
          "202 while pending; 200 with the tokens exactly once after approval; 400 with a status when denied or expired (or already used).",
        security: SECURITY.none,
        body: DeviceCodeBody,
        response: {
          200: TokenPair,
          202: z.object({ status: z.literal("pending") }),
          400: z.union([z.object({ status: z.enum(["denied", "expired"]) }), ErrorBody]),
        },
      },
    },
    async (req, reply) => {
      const result = await cliAuth.poll(req.body.deviceCode);
      return reply.code(result.statusCode).send(result.body);
    },
  );

  routes.post(
    "/api/cli/auth/approve",
    {
      preValidation: auth.browser,
      schema: {
        tags,
        summary: "Approve or deny a device sign-in",
        description: "A browser session only: a CLI token can never approve.",
        security: SECURITY.browser,
        body: ApproveBody,
        response: { 200: z.object({ ok: z.literal(true), approved: z.boolean(), deviceName: z.string() }) },
      },
    },
    async (req) => {
      // After the schema: a malformed code looks nothing up, so it costs nothing.
      await limitApprovals(req);
      return cliAuth.approve(auth.caller(req), req.body.userCode, req.body.approve !== false);
    },
  );

  // Lets the approval page show the device name before the user clicks. Browser only, and
  // it shares the approve limits, so it is no faster a way to guess codes.
  routes.post(
    "/api/cli/auth/pending",
    {
      preValidation: auth.browser,
      schema: {
        tags,
        summary: "Describe a pending device sign-in",
        security: SECURITY.browser,
        body: PendingBody,
        response: { 200: z.object({ request: z.object({ userCode: z.string(), deviceName: z.string(), expiresAt: Timestamp }) }) },
      },
    },
    async (req) => {
      await limitApprovals(req);
      return { request: await cliAuth.describePending(req.body.userCode) };
    },
  );

  routes.post(
    "/api/cli/auth/refresh",
    {
      schema: {
        tags,
        summary: "Trade a refresh token for a new pair",
        description: "Single use: presenting a token that was already rotated revokes the whole session.",
        security: SECURITY.none,
        body: RefreshBody,
        response: { 200: TokenPair },
      },
    },
    async (req) => cliAuth.refresh(req.body.refreshToken),
  );

  // No guard: an unknown or expired token is already logged out, which is what was asked.
  routes.post(
    "/api/cli/auth/logout",
    {
      schema: {
        tags,
        summary: "End the CLI session of the bearer token",
        description: "Idempotent: an unknown or expired token still answers ok.",
        security: SECURITY.token,
        response: { 200: Ok },
      },
    },
    async (req) => {
      // A service token is ended by revoking it, not by logging out: nothing to do for it.
      await cliAuth.logout(req.caller && !isServiceAccount(req.caller) ? req.caller : null);
      return { ok: true as const };
    },
  );

  routes.get(
    "/api/cli/sessions",
    {
      preValidation: auth.browser,
      schema: {
        tags,
        summary: "The caller's active CLI sessions",
        description: "Never token material.",
        security: SECURITY.browser,
        response: { 200: z.object({ sessions: z.array(CliSession) }) },
      },
    },
    async (req) => ({ sessions: await cliAuth.listSessions(auth.caller(req)) }),
  );

  routes.delete(
    "/api/cli/sessions",
    {
      preValidation: auth.browser,
      schema: {
        tags,
        summary: "End every CLI session of the caller",
        security: SECURITY.browser,
        response: { 200: z.object({ revoked: z.number().int() }) },
      },
    },
    async (req) => ({ revoked: await cliAuth.revokeAllSessions(auth.caller(req)) }),
  );

  routes.delete(
    "/api/cli/sessions/:sessionId",
    {
      preValidation: auth.browser,
      schema: { tags, summary: "End one CLI session", security: SECURITY.browser, params: SessionParams, response: { 200: Ok } },
    },
    async (req) => {
      await cliAuth.revokeSession(auth.caller(req), req.params.sessionId);
      return { ok: true as const };
    },
  );
}
