import type { FastifyInstance } from "fastify";
import type { ZodTypeProvider } from "fastify-type-provider-zod";
import { z } from "zod";
import type { AccessGuard } from "../core/access.ts";
import { ENVIRONMENTS } from "../core/access.ts";
import { SECURITY } from "../core/api-schemas.ts";
import type { Auth } from "../core/auth.ts";
import type { CompareService } from "./compare.service.ts";

const Params = z.object({ projectId: z.string() });
// A comma-separated list, checked in the service like a path's environment (unknown 404,
// not granted 403), after membership and permission.
const Query = z.object({ environments: z.string().max(200).optional() });
const Entry = z.object({ secretId: z.string(), version: z.number().int(), updatedAt: z.string(), digest: z.string().nullable() });
const Comparison = z.object({
  environments: z.array(z.enum(ENVIRONMENTS)),
  keys: z.array(z.object({ key: z.string(), environments: z.partialRecord(z.enum(ENVIRONMENTS), Entry.nullable()) })),
});

/** GET /api/projects/<project_id>/secrets/compare (README, "Secrets"). */
export function registerCompareRoutes(
  app: FastifyInstance,
  { auth, access, compare }: { auth: Auth; access: AccessGuard; compare: CompareService },
): void {
  app.withTypeProvider<ZodTypeProvider>().get(
    "/api/projects/:projectId/secrets/compare",
    {
      // preValidation, not preHandler: membership and permission come before the query is
      // checked, so a non-member learns nothing from a malformed one.
      preValidation: [auth.browser, access.route("secrets:read")],
      // It decrypts every value of every environment compared, as an export does one's.
      config: { rateLimit: { max: 30, timeWindow: 60_000 } },
      schema: {
        tags: ["Secrets"],
        summary: "Compare the secrets of several environments",
        description:
          "Per key, each environment's version and a keyed digest of its value (equal digests: equal values), without any value. `environments` is a comma-separated list (default: every one the caller may read). 30 a minute.",
        security: SECURITY.browser,
        params: Params,
        querystring: Query,
        response: { 200: Comparison },
      },
    },
    async (req) => await compare.compare(auth.caller(req), req.params.projectId, req.query.environments),
  );
}
