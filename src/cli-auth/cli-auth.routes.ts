import { isServiceAccount } from "../core/caller.ts";
import type { FastifyInstance, FastifyRequest } from "fastify";
import { z } from "zod";
import type { Auth } from "../core/auth.ts";
import { HttpError, parse } from "../core/errors.ts";
import { INVALID_DEVICE_CODE, MALFORMED_USER_CODE, normalizeUserCode, type CliAuthService } from "./cli-auth.service.ts";

/** Device starts per client address and minute. */
export const DEVICE_START_LIMIT_PER_MINUTE = 10;
/**
 * Approvals (successful or not) per minute, per signed-in user and per client address.
 * A user code has 20^8 (about 2.6e10) values and lives 10 minutes, so at these rates
 * guessing someone else's pending code is hopeless.
 */
export const APPROVE_LIMIT_PER_USER_PER_MINUTE = 10;
export const APPROVE_LIMIT_PER_IP_PER_MINUTE = 30;

const DeviceStartBody = z.strictObject({ deviceName: z.string().optional() });
const DeviceCodeBody = z.strictObject({ deviceCode: z.string().regex(/^[A-Za-z0-9_-]{32,128}$/) });
const ApproveBody = z.strictObject({ userCode: z.string().max(64), approve: z.boolean().optional() });
const PendingBody = z.strictObject({ userCode: z.string().max(64) });
const RefreshBody = z.strictObject({ refreshToken: z.string().max(512) });
const SessionParams = z.object({ sessionId: z.string() });

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
    keyGenerator: (req) => `cli-approve-ip:${req.ip}`,
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

  app.post(
    "/api/cli/auth/device",
    { config: { rateLimit: { max: DEVICE_START_LIMIT_PER_MINUTE, timeWindow: 60_000, keyGenerator: (req) => `cli-device:${req.ip}` } } },
    async (req) => {
      const input = parse(DeviceStartBody, req.body ?? {}, "Send an optional deviceName string, nothing else.");
      return cliAuth.startDevice(input.deviceName);
    },
  );

  app.post("/api/cli/auth/token", async (req, reply) => {
    const input = parse(DeviceCodeBody, req.body, INVALID_DEVICE_CODE);
    const result = cliAuth.poll(input.deviceCode);
    return reply.code(result.statusCode).send(result.body);
  });

  app.post("/api/cli/auth/approve", { preHandler: auth.browser }, async (req) => {
    const body = req.body;
    if (body === null || typeof body !== "object" || Array.isArray(body)) throw new HttpError(400, MALFORMED_USER_CODE);
    const fields = body as Record<string, unknown>;
    // Any string that is not a code (too long included) gets the code's own message.
    if (typeof fields.userCode !== "string" || fields.userCode.length > 64 || !normalizeUserCode(fields.userCode)) {
      throw new HttpError(400, MALFORMED_USER_CODE);
    }
    // Strictly boolean: the string "false" must never approve by accident.
    if (fields.approve !== undefined && typeof fields.approve !== "boolean") {
      throw new HttpError(400, "approve must be true or false.");
    }
    const input = parse(ApproveBody, body, "Send { userCode, approve } only.");
    await limitApprovals(req);
    return cliAuth.approve(auth.caller(req), input.userCode, input.approve !== false);
  });

  // Not in api.md: lets the approval page show the device name before the user clicks.
  // Browser only, and it shares the approve limits, so it is no faster a way to guess codes.
  app.post("/api/cli/auth/pending", { preHandler: auth.browser }, async (req) => {
    const input = parse(PendingBody, req.body, MALFORMED_USER_CODE);
    if (!normalizeUserCode(input.userCode)) throw new HttpError(400, MALFORMED_USER_CODE);
    await limitApprovals(req);
    return { request: cliAuth.describePending(input.userCode) };
  });

  app.post("/api/cli/auth/refresh", async (req) => {
    const input = parse(RefreshBody, req.body, "Send { refreshToken } from the last login or refresh.");
    return cliAuth.refresh(input.refreshToken);
  });

  // No preHandler: an unknown or expired token is already logged out, which is what was asked.
  app.post("/api/cli/auth/logout", async (req) => {
    // A service token is ended by revoking it, not by logging out: nothing to do for it.
    cliAuth.logout(req.caller && !isServiceAccount(req.caller) ? req.caller : null);
    return { ok: true };
  });

  app.get("/api/cli/sessions", { preHandler: auth.browser }, async (req) => {
    return { sessions: cliAuth.listSessions(auth.caller(req)) };
  });

  app.delete("/api/cli/sessions", { preHandler: auth.browser }, async (req) => {
    return { revoked: cliAuth.revokeAllSessions(auth.caller(req)) };
  });

  app.delete("/api/cli/sessions/:sessionId", { preHandler: auth.browser }, async (req) => {
    const { sessionId } = parse(SessionParams, req.params, "Session not found.");
    cliAuth.revokeSession(auth.caller(req), sessionId);
    return { ok: true };
  });
}
