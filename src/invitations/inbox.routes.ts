import type { FastifyInstance } from "fastify";
import type { ZodTypeProvider } from "fastify-type-provider-zod";
import { z } from "zod";
import { SECURITY, Timestamp } from "../core/api-schemas.ts";
import type { Auth } from "../core/auth.ts";
import type { InboxService } from "./inbox.service.ts";

const InvitationIdParams = z.object({ invitationId: z.uuid() });

const InboxInvitation = z.object({
  id: z.string(),
  project: z.object({ id: z.string(), name: z.string() }),
  role: z.enum(["admin", "member", "viewer"]),
  environments: z.array(z.string()),
  invitedBy: z.object({ email: z.string().nullable(), name: z.string().nullable() }).nullable(),
  createdAt: Timestamp,
  expiresAt: Timestamp,
});

interface Deps {
  auth: Auth;
  inbox: InboxService;
}

/** The caller's own pending invitations (browser only, like every members and invitations route). */
export function registerInboxRoutes(app: FastifyInstance, { auth, inbox }: Deps): void {
  const routes = app.withTypeProvider<ZodTypeProvider>();
  const tags = ["Members, invitations and environment access"];

  routes.get(
    "/api/invitations",
    {
      preValidation: auth.browser,
      schema: {
        tags,
        summary: "The caller's pending invitations",
        description: "Sent to the caller's verified e-mail address; none while it is not verified.",
        security: SECURITY.browser,
        response: { 200: z.object({ invitations: z.array(InboxInvitation), emailVerified: z.boolean() }) },
      },
    },
    async (req) => inbox.list(auth.caller(req)),
  );

  routes.post(
    "/api/invitations/:invitationId/accept",
    {
      preValidation: auth.browser,
      config: { rateLimit: { max: 30, timeWindow: 60_000 } },
      schema: {
        tags,
        summary: "Accept one of the caller's invitations",
        security: SECURITY.browser,
        params: InvitationIdParams,
        response: { 200: z.object({ projectId: z.string(), role: z.string() }) },
      },
    },
    async (req) => inbox.accept(auth.caller(req), req.params.invitationId),
  );
}
