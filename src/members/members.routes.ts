import type { FastifyInstance } from "fastify";
import type { ZodTypeProvider } from "fastify-type-provider-zod";
import { z } from "zod";
import type { AccessGuard } from "../core/access.ts";
import { Environment, EnvironmentParams, Ok, Permission, ProjectParams, Role, SECURITY, Timestamp } from "../core/api-schemas.ts";
import type { Auth } from "../core/auth.ts";
import type { EnvironmentAccessService } from "./environment-access.service.ts";
import { ASSIGNABLE_ROLES, type MembersService } from "./members.service.ts";

const AssignableRole = z.enum(ASSIGNABLE_ROLES);
const RoleChange = z.strictObject({ role: AssignableRole });

const MemberParams = ProjectParams.extend({ userId: z.string() });
const AccessParams = EnvironmentParams.extend({ userId: z.string() });

const Member = z.object({
  userId: z.string(),
  email: z.string().optional().describe("Omitted when unknown"),
  name: z.string().optional().describe("Omitted when unknown"),
  role: Role,
  isYou: z.boolean(),
  createdAt: Timestamp,
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
  environmentAccess: EnvironmentAccessService;
}

/**
 * Members and environment access. Every route is browser only (a CLI token answers 403),
 * and every route runs the access guard before its body is checked.
 */
export function registerMemberRoutes(app: FastifyInstance, { auth, access, members, environmentAccess }: Deps): void {
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
    async (req) => ({ members: await members.list(auth.caller(req), req.params.projectId) }),
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
    async (req) => ({ member: await members.changeRole(auth.caller(req), req.params.projectId, req.params.userId, req.body.role) }),
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
      await members.remove(auth.caller(req), req.params.projectId, req.params.userId);
      return { ok: true as const };
    },
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
      await environmentAccess.grant(auth.caller(req), req.params.projectId, req.params.env, req.params.userId);
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
      await environmentAccess.revoke(auth.caller(req), req.params.projectId, req.params.env, req.params.userId);
      return { ok: true as const, access: "none" as const };
    },
  );
}
