import type { FastifyInstance } from "fastify";
import type { ZodTypeProvider } from "fastify-type-provider-zod";
import { z } from "zod";
import { type AccessGuard, ASSIGNABLE_ROLES, ENVIRONMENTS } from "../core/access.ts";
import { Environment, Ok, ProjectParams, SECURITY, Timestamp } from "../core/api-schemas.ts";
import type { Auth } from "../core/auth.ts";
import { perNetwork } from "../core/client-address.ts";
import { foldEmail } from "../core/text.ts";
import type { InvitationsService } from "./invitations.service.ts";

const AssignableRole = z.enum(ASSIGNABLE_ROLES);

const NewInvitation = z.strictObject({
  email: z.string().max(254).transform(foldEmail).pipe(z.email()).describe("Up to 254 characters"),
  role: AssignableRole,
  environments: z
    .array(z.enum(ENVIRONMENTS))
    .max(ENVIRONMENTS.length)
    .refine((list) => new Set(list).size === list.length)
    .optional()
    .describe("Granted on acceptance; needs environments:manage, and not for role admin"),
});

const TokenBody = z.strictObject({ token: z.string().min(1).max(512).describe("The token of the invitation link (its fragment)") });

const InvitationParams = ProjectParams.extend({ invitationId: z.string() });

const Invitation = z.object({
  id: z.string(),
  email: z.string(),
  role: AssignableRole,
  environments: z.array(Environment),
  createdAt: Timestamp,
  expiresAt: Timestamp,
  expired: z.boolean(),
  delivery: z.enum(["sent", "failed"]).optional().describe("Whether the e-mail reached the mail server; only when the server sends mail"),
});
const InvitationLink = z.object({
  invitation: Invitation,
  devAcceptUrl: z.string().optional().describe("The link, outside production mode only"),
});

interface Deps {
  auth: Auth;
  access: AccessGuard;
  invitations: InvitationsService;
}

/**
 * A project's invitations (browser only, the access guard before the body is checked), and
 * the invitee's side of a link: its preview before sign-in and its acceptance.
 */
export function registerInvitationRoutes(app: FastifyInstance, { auth, access, invitations }: Deps): void {
  const routes = app.withTypeProvider<ZodTypeProvider>();
  // One group with members in the API reference: both are how people come into a project.
  const tags = ["Members, invitations and environment access"];
  const security = SECURITY.browser;

  routes.get(
    "/api/projects/:projectId/invitations",
    {
      preValidation: [auth.browser, access.route("invitations:read")],
      schema: {
        tags,
        summary: "List pending invitations",
        security,
        params: ProjectParams,
        response: { 200: z.object({ invitations: z.array(Invitation) }) },
      },
    },
    async (req) => ({ invitations: await invitations.list(auth.caller(req), req.params.projectId) }),
  );

  routes.post(
    "/api/projects/:projectId/invitations",
    {
      preValidation: [auth.browser, access.route("members:invite")],
      schema: {
        tags,
        summary: "Invite someone by e-mail",
        description: "Valid 7 days. The link is e-mailed when the server sends mail, and answered as devAcceptUrl outside production mode.",
        security,
        params: ProjectParams,
        body: NewInvitation,
        response: { 201: InvitationLink },
      },
    },
    async (req, reply) => {
      const result = await invitations.create(auth.caller(req), req.params.projectId, req.body);
      return reply.code(201).send(result);
    },
  );

  routes.delete(
    "/api/projects/:projectId/invitations/:invitationId",
    {
      preValidation: [auth.browser, access.route("invitations:revoke")],
      schema: { tags, summary: "Revoke an invitation", security, params: InvitationParams, response: { 200: Ok } },
    },
    async (req) => {
      await invitations.revoke(auth.caller(req), req.params.projectId, req.params.invitationId);
      return { ok: true as const };
    },
  );

  routes.post(
    "/api/projects/:projectId/invitations/:invitationId/renew",
    {
      preValidation: [auth.browser, access.route("members:invite")],
      schema: {
        tags,
        summary: "Issue a new link for an invitation",
        description: "The old link stops working; the invitation is valid 7 days from now.",
        security,
        params: InvitationParams,
        response: { 200: InvitationLink },
      },
    },
    async (req) => invitations.renewLink(auth.caller(req), req.params.projectId, req.params.invitationId),
  );

  // No session: the invitee has not signed in yet, and the token itself is the credential.
  // Keyed by client address even when signed in, a few tries a minute: enough for a person,
  // not for guessing.
  routes.post(
    "/api/invitations/preview",
    {
      config: { rateLimit: { max: 20, timeWindow: 60_000, keyGenerator: perNetwork("preview-ip") } },
      schema: {
        tags,
        summary: "What an invitation link offers, before sign-in",
        description: "20 a minute per client address.",
        security: SECURITY.none,
        body: TokenBody,
        response: {
          200: z.object({
            projectName: z.string(),
            invitedBy: z.object({ name: z.string().optional(), email: z.string() }).nullable(),
            role: AssignableRole,
            environments: z.array(Environment),
            expiresAt: Timestamp,
          }),
        },
      },
    },
    async (req) => invitations.preview(req.body.token),
  );

  // The token is a bearer credential for a membership: a few tries a minute is plenty for a person.
  routes.post(
    "/api/invitations/accept",
    {
      preValidation: auth.browser,
      config: { rateLimit: { max: 30, timeWindow: 60_000 } },
      schema: {
        tags,
        summary: "Accept an invitation link",
        description: "The caller's verified e-mail must be the invited one; a link works once.",
        security,
        body: TokenBody,
        response: { 200: z.object({ projectId: z.string(), role: AssignableRole }) },
      },
    },
    async (req) => invitations.acceptToken(auth.caller(req), req.body.token),
  );
}
