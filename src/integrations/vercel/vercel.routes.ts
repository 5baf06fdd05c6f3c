import type { FastifyInstance, FastifyRequest } from "fastify";
import { z } from "zod";
import type { AccessGuard } from "../../core/access.ts";
import type { Auth } from "../../core/auth.ts";
import { HttpError, parse } from "../../core/errors.ts";
import { MESSAGES, TARGETS, type LinkInput, type VercelService } from "./vercel.service.ts";

// api.md 4.4. Browser only; every route runs the access guard (integrations:manage)
// before its body is looked at, and the service checks again.

const BASE = "/api/projects/:projectId/integrations/hosting";
const MINUTE_MS = 60_000;

const TeamId = z.string().regex(/^team_[A-Za-z0-9_-]{1,100}$/);
const Token = z.string().trim().regex(/^[\x21-\x7e]{1,512}$/);

function isObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}

function projectIdOf(req: FastifyRequest): string {
  return (req.params as { projectId: string }).projectId;
}

/** POST body: each field gets its own sentence, and the token is never echoed. */
function parseConnect(body: unknown): { token: string; teamId?: string } {
  if (!isObject(body)) throw new HttpError(400, MESSAGES.enterToken);
  const token = parse(Token, body.token, MESSAGES.enterToken);
  const teamId = body.teamId === undefined || body.teamId === null || body.teamId === "" ? undefined : parse(TeamId, body.teamId, MESSAGES.teamShape);
  if (Object.keys(body).some((k) => k !== "token" && k !== "teamId")) throw new HttpError(400, MESSAGES.badBody);
  return { token, teamId };
}

const ALLOWED_LINK_FIELDS = new Set(["hostProjectId", "teamId", "mappings", "conflictPolicy", "autoRedeploy", "deployHookUrl"]);

/** PUT body, checked field by field in the order of api.md's PUT rules. */
function parseLink(body: unknown): LinkInput {
  if (!isObject(body)) throw new HttpError(400, MESSAGES.chooseProject);
  if (Object.keys(body).some((k) => !ALLOWED_LINK_FIELDS.has(k))) throw new HttpError(400, MESSAGES.badBody);
  const hostProjectId = parse(z.string().trim().min(1).max(200), body.hostProjectId, MESSAGES.chooseProject);
  const teamId = body.teamId === undefined ? undefined : parse(TeamId, body.teamId, MESSAGES.teamShape);
  if (!isObject(body.mappings) || Object.keys(body.mappings).length === 0) throw new HttpError(400, MESSAGES.mappingsRequired);
  const mappings: Record<string, (typeof TARGETS)[number]> = {};
  const seen = new Set<string>();
  for (const [environment, target] of Object.entries(body.mappings)) {
    const checked = parse(z.enum(TARGETS), target, MESSAGES.mappingTarget);
    if (seen.has(checked)) throw new HttpError(400, MESSAGES.mappingTwice);
    seen.add(checked);
    mappings[environment] = checked;
  }
  const conflictPolicy = body.conflictPolicy === undefined ? "skip" : parse(z.enum(["skip", "overwrite"]), body.conflictPolicy, MESSAGES.conflictPolicy);
  const autoRedeploy = body.autoRedeploy === undefined ? false : parse(z.boolean(), body.autoRedeploy, MESSAGES.autoRedeploy);
  let deployHookUrl: string | null | undefined;
  if (body.deployHookUrl === null || body.deployHookUrl === undefined) deployHookUrl = body.deployHookUrl as null | undefined;
  else deployHookUrl = parse(z.string().trim().min(1).max(2000), body.deployHookUrl, "The deploy hook URL must be a string or null.");
  return { hostProjectId, teamId, mappings, conflictPolicy, autoRedeploy, deployHookUrl };
}

function parseSync(body: unknown): { redeploy: boolean } {
  if (body === undefined || body === null) return { redeploy: false };
  const input = parse(z.strictObject({ redeploy: z.boolean().optional() }), body, MESSAGES.syncBody);
  return { redeploy: input.redeploy ?? false };
}

export function registerVercelRoutes(
  app: FastifyInstance,
  { auth, access, vercel }: { auth: Auth; access: AccessGuard; vercel: VercelService },
): void {
  // A fresh array per route: @fastify/rate-limit appends its hook to the route's preHandler
  // array, so one shared array would give every route the first route's limit.
  const guard = () => [auth.browser, access.route("integrations:manage")];

  app.get(BASE, { preHandler: guard() }, async (req) => {
    return vercel.get(auth.caller(req), projectIdOf(req));
  });

  app.post(BASE, { preHandler: guard(), config: { rateLimit: { max: 10, timeWindow: MINUTE_MS } } }, async (req, reply) => {
    const input = parseConnect(req.body);
    const connection = await vercel.connect(auth.caller(req), projectIdOf(req), input);
    return reply.code(201).send(connection);
  });

  app.get(`${BASE}/options`, { preHandler: guard(), config: { rateLimit: { max: 20, timeWindow: MINUTE_MS } } }, async (req) => {
    const query = req.query as Record<string, unknown>;
    const teamId = query.teamId === undefined || query.teamId === "" ? undefined : parse(TeamId, query.teamId, MESSAGES.teamShape);
    return vercel.options(auth.caller(req), projectIdOf(req), { teamId });
  });

  app.put(BASE, { preHandler: guard() }, async (req) => {
    return vercel.link(auth.caller(req), projectIdOf(req), parseLink(req.body));
  });

  app.post(`${BASE}/sync`, { preHandler: guard(), config: { rateLimit: { max: 6, timeWindow: MINUTE_MS } } }, async (req) => {
    return vercel.sync(auth.caller(req), projectIdOf(req), parseSync(req.body));
  });

  app.delete(BASE, { preHandler: guard() }, async (req) => {
    vercel.disconnect(auth.caller(req), projectIdOf(req));
    return { ok: true };
  });
}
