import type { FastifyInstance } from "fastify";
import type { ZodTypeProvider } from "fastify-type-provider-zod";
import { z } from "zod";
import { type AccessGuard, ENVIRONMENTS } from "../core/access.ts";
import { Environment, EnvironmentParams, Ok, Permission, ProjectParams, Role, SECURITY, Timestamp } from "../core/api-schemas.ts";
import type { Auth } from "../core/auth.ts";
import type { InvitationsService } from "../invitations/invitations.service.ts";
import type { EnvironmentAccessService } from "./environment-access.service.ts";
import { ASSIGNABLE_ROLES, type MembersService } from "./members.service.ts";

const AssignableRole = z.enum(ASSIGNABLE_ROLES);
const RoleChange = z.strictObject({ role: AssignableRole });

const NewInvitation = z.strictObject({
  email: z.string().trim().toLowerCase().max(254).pipe(z.email()).describe("Up to 254 characters"),
  role: AssignableRole,
  environments: z
    .array(z.enum(ENVIRONMENTS))
    .max(ENVIRONMENTS.length)
    .refine((list) => new Set(list).size === list.length)
    .optional()
    .describe("Granted on acceptance; needs environments:manage, and not for role admin"),
});

const TokenBody = z.strictObject({ token: z.string().min(1).max(512).describe("The token of the invitation link (its fragment)") });

const MemberParams = ProjectParams.extend({ userId: z.string() });
const InvitationParams = ProjectParams.extend({ invitationId: z.string() });
const AccessParams = EnvironmentParams.extend({ userId: z.string() });

const Member = z.object({
  userId: z.string(),
  email: z.string().optional().describe("Omitted when unknown"),
  name: z.string().optional().describe("Omitted when unknown"),
  role: Role,
  isYou: z.boolean(),
  createdAt: Timestamp,
});

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

const AccessMatrix = z.object({
  environments: z.array(Environment),
  members: z.array(
    z.object({
      userId: z.string(),
      email: z.string().optional(),
      role: Role,
      isYou: z.boolean(),
      secretPermissions: z.array(Permission),
      access: z.record(z.string(), z.enum(["implicit", "granted", "none"])).describe("implicit for owners and admins"),
    }),
  ),
});

interface Deps {
  auth: Auth;
  access: AccessGuard;
  members: MembersService;
  invitations: InvitationsService;
  environmentAccess: EnvironmentAccessService;
}

/**
 * Members, invitations and environment access. Every route is browser only (a CLI token
 * answers 403), and every project route runs the access guard before its body is checked.
 */
export function registerMemberRoutes(app: FastifyInstance, { auth, access, members, invitations, environmentAccess }: Deps): void {
  const routes = app.withTypeProvider<ZodTypeProvider>();
  const tags = ["Members, invitations and environment access"];
  const security = SECURITY.browser;

  routes.get(
    "/api/projects/:projectId/members",
    {
      preValidation: [auth.browser, access.route("members:read")],
      schema: {
        tags,
        summary: "List the members",
        security,
        params: ProjectParams,
        response: { 200: z.object({ members: z.array(Member) }) },
      },
    },
    async (req) => ({ members: members.list(auth.caller(req), req.params.projectId) }),
  );

  routes.patch(
    "/api/projects/:projectId/members/:userId",
    {
      preValidation: [auth.browser, access.route("members:update_role")],
      schema: {
        tags,
        summary: "Change a member's role",
        description: "Not the owner's, and not one's own.",
        security,
        params: MemberParams,
        body: RoleChange,
        response: { 200: z.object({ member: z.object({ userId: z.string(), email: z.string().optional(), role: Role }) }) },
      },
    },
    async (req) => ({ member: members.changeRole(auth.caller(req), req.params.projectId, req.params.userId, req.body.role) }),
  );

  // Membership only here: leaving needs no permission; the service checks members:remove
  // when the target is someone else.
  routes.delete(
    "/api/projects/:projectId/members/:userId",
    {
      preValidation: [auth.browser, access.route()],
      schema: {
        tags,
        summary: "Remove a member, or leave",
        description: "Removing another needs members:remove; leaving needs membership only. The owner can neither be removed nor leave.",
        security,
        params: MemberParams,
        response: { 200: Ok },
      },
    },
    async (req) => {
      members.remove(auth.caller(req), req.params.projectId, req.params.userId);
      return { ok: true as const };
    },
  );

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
    async (req) => ({ invitations: invitations.list(auth.caller(req), req.params.projectId) }),
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
      invitations.revoke(auth.caller(req), req.params.projectId, req.params.invitationId);
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
      config: { rateLimit: { max: 20, timeWindow: 60_000, keyGenerator: (req) => `preview-ip:${req.ip}` } },
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

  routes.get(
    "/api/projects/:projectId/environment-access",
    {
      preValidation: [auth.browser, access.route("environments:manage")],
      schema: { tags, summary: "Who may use which environment", security, params: ProjectParams, response: { 200: AccessMatrix } },
    },
    async (req) => environmentAccess.matrix(auth.caller(req), req.params.projectId),
  );

  routes.put(
    "/api/projects/:projectId/environments/:env/access/:userId",
    {
      preValidation: [auth.browser, access.route("environments:manage", { environment: true })],
      schema: {
        tags,
        summary: "Grant a member or viewer an environment",
        description: "Idempotent.",
        security,
        params: AccessParams,
        response: { 200: z.object({ ok: z.literal(true), access: z.literal("granted") }) },
      },
    },
    async (req) => {
      environmentAccess.grant(auth.caller(req), req.params.projectId, req.params.env, req.params.userId);
      return { ok: true as const, access: "granted" as const };
    },
  );

  routes.delete(
    "/api/projects/:projectId/environments/:env/access/:userId",
    {
      preValidation: [auth.browser, access.route("environments:manage", { environment: true })],
      schema: {
        tags,
        summary: "Take an environment away",
        description: "Effective on the member's next request.",
        security,
        params: AccessParams,
        response: { 200: z.object({ ok: z.literal(true), access: z.literal("none") }) },
      },
    },
    async (req) => {
      environmentAccess.revoke(auth.caller(req), req.params.projectId, req.params.env, req.params.userId);
      return { ok: true as const, access: "none" as const };
    },
  );
}
