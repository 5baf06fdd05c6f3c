import type { FastifyInstance } from "fastify";
import type { ZodTypeProvider } from "fastify-type-provider-zod";
import { z } from "zod";
import type { AccessGuard } from "../../core/access.ts";
import { Environment, Ok, ProjectParams, SECURITY, Timestamp } from "../../core/api-schemas.ts";
import type { Auth } from "../../core/auth.ts";
import { isPathSegment } from "./vercel.client.ts";
import { TARGETS, type VercelService } from "./vercel.service.ts";

// Browser only; every route runs the access guard (integrations:manage) before its body
// is looked at, and the service checks again. The token and the deploy hook never leave.

const BASE = "/api/projects/:projectId/integrations/hosting";
const MINUTE_MS = 60_000;

const TeamId = z
  .string()
  .regex(/^team_[A-Za-z0-9_-]{1,100}$/)
  .describe("team_ followed by characters");
/** Left out, null or "" is no team (the token owner's personal account). */
const OptionalTeamId = z
  .union([TeamId, z.literal(""), z.null()])
  .optional()
  .transform((teamId) => teamId || undefined);

const Connect = z.strictObject({
  token: z
    .string()
    .trim()
    .regex(/^[\x21-\x7e]{1,512}$/)
    .describe("A Vercel access token; saved encrypted, never returned"),
  teamId: OptionalTeamId,
});

const Link = z.strictObject({
  hostProjectId: z
    .string()
    .trim()
    .min(1)
    .max(200)
    // It becomes a path segment at Vercel: one that cannot be encoded or moves up the path names no project.
    .refine(isPathSegment),
  teamId: TeamId.optional(),
  mappings: z
    .record(z.string(), z.enum(TARGETS))
    .refine((mappings) => Object.keys(mappings).length > 0, "mappingsRequired")
    .refine((mappings) => new Set(Object.values(mappings)).size === Object.keys(mappings).length, "mappingTwice")
    .describe("Environment to Vercel target; at least one, no two on the same target"),
  conflictPolicy: z.enum(["skip", "overwrite"]).default("skip").describe("What a sync does with a variable it did not create"),
  autoRedeploy: z.boolean().default(false).describe("Needs a deploy hook"),
  deployHookUrl: z
    .string()
    .trim()
    .min(1)
    .max(2000)
    .nullable()
    .optional()
    .describe("On the Vercel API host; null removes it, left out keeps it"),
});

const SyncRequest = z
  .strictObject({
    redeploy: z.boolean().optional().describe("true also calls the deploy hook"),
  })
  .nullish();
const OptionsQuery = z.object({ teamId: OptionalTeamId });

const Trigger = z.enum(["manual", "automatic"]);
const Deployment = z.object({
  at: Timestamp,
  trigger: Trigger,
  ok: z.boolean(),
  jobId: z.string().nullable(),
  state: z.string().nullable(),
  error: z.string().optional(),
});
const Count = z.number().int();
/** A run: only status, trigger and startedAt while it is running. */
const Run = z.object({
  status: z.enum(["running", "ok", "partial", "failed"]),
  trigger: Trigger,
  startedAt: Timestamp,
  finishedAt: Timestamp.optional(),
  created: Count.optional(),
  updated: Count.optional(),
  unchanged: Count.optional(),
  skipped: Count.optional(),
  deleted: Count.optional(),
  failed: Count.optional(),
  results: z
    .array(
      z.object({
        environment: z.string(),
        target: z.string(),
        key: z.string().describe('"*" when a whole environment failed'),
        result: z.enum(["skipped", "failed"]),
        reason: z.string(),
      }),
    )
    .optional()
    .describe("Every key that was skipped or failed, with the reason"),
  error: z.string().optional(),
  deployment: Deployment.optional(),
});

const Connection = z.union([
  z.object({ connected: z.literal(false) }),
  z.object({
    connected: z.literal(true),
    status: z.enum(["connected", "active", "attention"]).describe("connected: token saved, no project linked; attention: reconnect needed"),
    hostProjectId: z.string().nullable(),
    hostProjectName: z.string().nullable(),
    teamId: z.string().nullable(),
    mappings: z.record(z.string(), z.string()),
    autoRedeploy: z.boolean(),
    hookConfigured: z.boolean(),
    conflictPolicy: z.enum(["skip", "overwrite"]),
    lastSyncAt: Timestamp.nullable(),
    lastSyncStatus: z.string().nullable(),
    lastError: z.string().nullable(),
    syncing: z.boolean(),
    pending: Count,
    environments: z.array(Environment),
    lastRun: Run.nullable(),
    lastDeployment: Deployment.nullable(),
    connectedBy: z.object({ userId: z.string(), email: z.string().nullable() }).nullable().describe("Whose token syncs"),
    paused: z.boolean().describe("No sync runs while the person who connected it cannot manage integrations"),
    pausedAt: Timestamp.nullable(),
    pausedReason: z.string().nullable(),
  }),
]);
const NamedItem = z.object({ id: z.string(), name: z.string() });

export function registerVercelRoutes(
  app: FastifyInstance,
  { auth, access, vercel }: { auth: Auth; access: AccessGuard; vercel: VercelService },
): void {
  const routes = app.withTypeProvider<ZodTypeProvider>();
  const tags = ["Vercel integration"];
  const security = SECURITY.browser;
  const guard = [auth.browser, access.route("integrations:manage")];

  routes.get(
    BASE,
    {
      preValidation: guard,
      schema: {
        tags,
        summary: "The project's Vercel connection",
        security,
        params: ProjectParams,
        response: { 200: Connection },
      },
    },
    async (req) => vercel.get(auth.caller(req), req.params.projectId),
  );

  routes.post(
    BASE,
    {
      preValidation: guard,
      config: { rateLimit: { max: 10, timeWindow: MINUTE_MS } },
      schema: {
        tags,
        summary: "Connect Vercel with an access token",
        description: "The token is checked with Vercel first. 10 a minute.",
        security,
        params: ProjectParams,
        body: Connect,
        response: { 201: Connection },
      },
    },
    async (req, reply) => {
      const connection = await vercel.connect(auth.caller(req), req.params.projectId, req.body);
      return reply.code(201).send(connection);
    },
  );

  routes.get(
    `${BASE}/options`,
    {
      preValidation: guard,
      config: { rateLimit: { max: 20, timeWindow: MINUTE_MS } },
      schema: {
        tags,
        summary: "The teams and projects the saved token reaches",
        description: "20 a minute.",
        security,
        params: ProjectParams,
        querystring: OptionsQuery,
        response: {
          200: z.object({
            teams: z.array(NamedItem),
            projects: z.array(NamedItem),
          }),
        },
      },
    },
    async (req) =>
      vercel.options(auth.caller(req), req.params.projectId, {
        teamId: req.query.teamId,
      }),
  );

  routes.put(
    BASE,
    {
      preValidation: guard,
      schema: {
        tags,
        summary: "Link a Vercel project and map environments to targets",
        security,
        params: ProjectParams,
        body: Link,
        response: { 200: Connection },
      },
    },
    async (req) => vercel.link(auth.caller(req), req.params.projectId, req.body),
  );

  routes.post(
    `${BASE}/sync`,
    {
      preValidation: guard,
      config: { rateLimit: { max: 6, timeWindow: MINUTE_MS } },
      schema: {
        tags,
        summary: "Sync now",
        description: "6 a minute.",
        security,
        params: ProjectParams,
        body: SyncRequest,
        response: { 200: z.object({ summary: Run }) },
      },
    },
    async (req) =>
      vercel.sync(auth.caller(req), req.params.projectId, {
        redeploy: req.body?.redeploy ?? false,
      }),
  );

  routes.delete(
    BASE,
    {
      preValidation: guard,
      schema: {
        tags,
        summary: "Disconnect Vercel",
        description: "Variables already at Vercel stay.",
        security,
        params: ProjectParams,
        response: { 200: Ok },
      },
    },
    async (req) => {
      await vercel.disconnect(auth.caller(req), req.params.projectId);
      return { ok: true as const };
    },
  );
}
