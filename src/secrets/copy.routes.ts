import type { FastifyInstance } from "fastify";
import type { ZodTypeProvider } from "fastify-type-provider-zod";
import { z } from "zod";
import type { AccessGuard } from "../core/access.ts";
import { ENVIRONMENTS } from "../core/access.ts";
import { SECURITY } from "../core/api-schemas.ts";
import type { Auth } from "../core/auth.ts";
import type { CopyService } from "./copy.service.ts";

const Params = z.object({ projectId: z.string(), env: z.string(), secretId: z.string() });
const Body = z.strictObject({ to: z.enum(ENVIRONMENTS), overwrite: z.boolean().optional().default(false) });
const Copied = z.object({
  secret: z.object({ id: z.string(), key: z.string(), version: z.number().int(), createdAt: z.string(), updatedAt: z.string() }),
  result: z.enum(["created", "updated", "unchanged"]),
});

/** POST …/environments/<env>/secrets/<secret_id>/copy (README, "Secrets"). */
export function registerCopyRoutes(
  app: FastifyInstance,
  { auth, access, copy }: { auth: Auth; access: AccessGuard; copy: CopyService },
): void {
  app.withTypeProvider<ZodTypeProvider>().post(
    "/api/projects/:projectId/environments/:env/secrets/:secretId/copy",
    {
      // The source's checks before the body is validated (membership 404, then permission
      // and environment); the target's are in the service, once the body names it.
      preValidation: [auth.browser, access.route("secrets:read", { environment: true })],
      schema: {
        tags: ["Secrets"],
        summary: "Copy a secret to another environment",
        description: "201 when the key is new there; with overwrite, an existing key there takes the value (200, updated or unchanged).",
        security: SECURITY.browser,
        params: Params,
        body: Body,
        response: { 200: Copied, 201: Copied },
      },
    },
    async (req, reply) => {
      const copied = await copy.copy(auth.caller(req), req.params.projectId, req.params.env, req.params.secretId, req.body);
      return reply.code(copied.result === "created" ? 201 : 200).send(copied);
    },
  );
}
