import type { FastifyInstance } from "fastify";
import { z } from "zod";
import { ENVIRONMENTS, type AccessGuard } from "../core/access.ts";
import type { Auth } from "../core/auth.ts";
import { parse } from "../core/errors.ts";
import type { EnvironmentAccessService } from "./environment-access.service.ts";
import type { InvitationsService } from "../invitations/invitations.service.ts";
import { ASSIGNABLE_ROLES, type MembersService } from "./members.service.ts";

const ROLE_MESSAGE = "Role must be admin, member, or viewer.";

const RoleChange = z.strictObject({ role: z.enum(ASSIGNABLE_ROLES) });

// Parsed in steps so each mistake gets a message that names it.
const InvitationShape = z.strictObject({
  email: z.unknown().optional(),
  role: z.unknown().optional(),
  environments: z.unknown().optional(),
});
const InvitationEmail = z.string().trim().toLowerCase().max(254).pipe(z.email());
const InvitationRole = z.enum(ASSIGNABLE_ROLES);
const InvitationEnvironments = z
  .array(z.enum(ENVIRONMENTS))
  .max(ENVIRONMENTS.length)
  .refine((list) => new Set(list).size === list.length);

const AcceptBody = z.strictObject({ token: z.string().min(1).max(512) });

const ProjectParams = z.object({ projectId: z.string() });
const MemberParams = z.object({ projectId: z.string(), userId: z.string() });
const InvitationParams = z.object({ projectId: z.string(), invitationId: z.string() });
const AccessParams = z.object({ projectId: z.string(), env: z.string(), userId: z.string() });

interface Deps {
  auth: Auth;
  access: AccessGuard;
  members: MembersService;
  invitations: InvitationsService;
  environmentAccess: EnvironmentAccessService;
}

/**
 * api.md 4.6. Every route is browser only (a CLI token answers 403), and every project
 * route runs the access guard before its body is parsed.
 */
export function registerMemberRoutes(app: FastifyInstance, { auth, access, members, invitations, environmentAccess }: Deps): void {
  app.get("/api/projects/:projectId/members", { preHandler: [auth.browser, access.route("members:read")] }, async (req) => {
    const { projectId } = parse(ProjectParams, req.params, "Project not found.");
    return { members: members.list(auth.caller(req), projectId) };
  });

  app.patch(
    "/api/projects/:projectId/members/:userId",
    { preHandler: [auth.browser, access.route("members:update_role")] },
    async (req) => {
      const { projectId, userId } = parse(MemberParams, req.params, "Member not found.");
      const { role } = parse(RoleChange, req.body, ROLE_MESSAGE);
      return { member: members.changeRole(auth.caller(req), projectId, userId, role) };
    },
  );

  // Membership only here: leaving needs no permission; the service checks members:remove
  // when the target is someone else.
  app.delete("/api/projects/:projectId/members/:userId", { preHandler: [auth.browser, access.route()] }, async (req) => {
    const { projectId, userId } = parse(MemberParams, req.params, "Member not found.");
    members.remove(auth.caller(req), projectId, userId);
    return { ok: true };
  });

  app.get(
    "/api/projects/:projectId/invitations",
    { preHandler: [auth.browser, access.route("invitations:read")] },
    async (req) => {
      const { projectId } = parse(ProjectParams, req.params, "Project not found.");
      return { invitations: invitations.list(auth.caller(req), projectId) };
    },
  );

  app.post(
    "/api/projects/:projectId/invitations",
    { preHandler: [auth.browser, access.route("members:invite")] },
    async (req, reply) => {
      const { projectId } = parse(ProjectParams, req.params, "Project not found.");
      const body = parse(InvitationShape, req.body, "Send an invitation as { email, role, environments? }.");
      const email = parse(InvitationEmail, body.email, "Enter a valid email address of up to 254 characters.");
      const role = parse(InvitationRole, body.role, ROLE_MESSAGE);
      const environments =
        body.environments === undefined
          ? undefined
          : parse(
              InvitationEnvironments,
              body.environments,
              "environments must be a list of distinct environments: development, staging, production.",
            );
      const result = await invitations.create(auth.caller(req), projectId, { email, role, environments });
      return reply.code(201).send(result);
    },
  );

  app.delete(
    "/api/projects/:projectId/invitations/:invitationId",
    { preHandler: [auth.browser, access.route("invitations:revoke")] },
    async (req) => {
      const { projectId, invitationId } = parse(InvitationParams, req.params, "Invitation not found.");
      invitations.revoke(auth.caller(req), projectId, invitationId);
      return { ok: true };
    },
  );

  app.post(
    "/api/projects/:projectId/invitations/:invitationId/renew",
    { preHandler: [auth.browser, access.route("members:invite")] },
    async (req) => {
      const { projectId, invitationId } = parse(InvitationParams, req.params, "Invitation not found.");
      return invitations.renewLink(auth.caller(req), projectId, invitationId);
    },
  );

  // No session: the invitee has not signed in yet, and the token itself is the credential.
  // Keyed by client address even when signed in, a few tries a minute: enough for a person,
  // not for guessing.
  app.post("/api/invitations/preview", { config: { rateLimit: { max: 20, timeWindow: 60_000, keyGenerator: (req) => `preview-ip:${req.ip}` } } }, async (req) => {
    const { token } = parse(AcceptBody, req.body, "Send the invitation token as { token }.");
    return invitations.preview(token);
  });

  // The token is a bearer credential for a membership: a few tries a minute is plenty for a person.
  app.post(
    "/api/invitations/accept",
    { preHandler: auth.browser, config: { rateLimit: { max: 30, timeWindow: 60_000 } } },
    async (req) => {
      const { token } = parse(AcceptBody, req.body, "Send the invitation token as { token }.");
      return invitations.acceptToken(auth.caller(req), token);
    },
  );

  app.get(
    "/api/projects/:projectId/environment-access",
    { preHandler: [auth.browser, access.route("environments:manage")] },
    async (req) => {
      const { projectId } = parse(ProjectParams, req.params, "Project not found.");
      return environmentAccess.matrix(auth.caller(req), projectId);
    },
  );

  app.put(
    "/api/projects/:projectId/environments/:env/access/:userId",
    { preHandler: [auth.browser, access.route("environments:manage", { environment: true })] },
    async (req) => {
      const { projectId, env, userId } = parse(AccessParams, req.params, "Member not found.");
      environmentAccess.grant(auth.caller(req), projectId, env, userId);
      return { ok: true, access: "granted" };
    },
  );

  app.delete(
    "/api/projects/:projectId/environments/:env/access/:userId",
    { preHandler: [auth.browser, access.route("environments:manage", { environment: true })] },
    async (req) => {
      const { projectId, env, userId } = parse(AccessParams, req.params, "Member not found.");
      environmentAccess.revoke(auth.caller(req), projectId, env, userId);
      return { ok: true, access: "none" };
    },
  );
}
