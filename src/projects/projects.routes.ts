import type { FastifyInstance } from "fastify";
import type { ZodTypeProvider } from "fastify-type-provider-zod";
import { z } from "zod";
import type { AccessGuard } from "../core/access.ts";
import { ENVIRONMENTS } from "../core/access.ts";
import { Environment, Ok, Permission, ProjectParams, Role, SECURITY, Timestamp } from "../core/api-schemas.ts";
import type { Auth } from "../core/auth.ts";
import { fitsUnits, isPlainText, isSingleLine, isVisibleName, looksLikeToken } from "../core/text.ts";
import type { ProjectsService } from "./projects.service.ts";

// The name goes into audit metadata, whose writer refuses token-shaped text: 400, not 500.
const Name = z
  .string()
  // Stored composed (NFC): an accent typed either way is stored one way.
  .normalize("NFC")
  .trim()
  .min(1)
  .refine(isVisibleName)
  // UTF-16 units like the UI's check (zod's .max would count code points).
  .refine(fitsUnits(60))
  .refine((name) => !looksLikeToken(name))
  .refine(isSingleLine)
  .describe("1 to 60 characters, one line, unique among the caller's projects as it reads (ignoring case and invisible characters)");
const Description = z.string().refine(fitsUnits(280)).refine(isPlainText).describe("Up to 280 characters");

const NewProject = z.strictObject({
  name: Name,
  description: Description.optional(),
  environments: z
    .array(z.enum(ENVIRONMENTS))
    .min(1)
    .max(ENVIRONMENTS.length)
    .refine((list) => new Set(list).size === list.length),
});

// No body, null or {} is "nothing to update", as on PATCH secret.
const ProjectChanges = z
  .strictObject({
    name: Name.optional(),
    description: Description.nullable().optional().describe("Empty or null clears it"),
  })
  .nullish()
  // {"bogus": 1} also fails this (unknown keys are dropped first): the table answers "+" first.
  .refine((body) => body !== null && body !== undefined && Object.keys(body).length > 0, "nothingToUpdate");

const Project = z.object({
  id: z.string(),
  role: Role.describe("The caller's role in the project"),
  permissions: z.array(Permission).describe("What the caller's role may do, derived on every request"),
  name: z.string(),
  description: z.string().optional().describe("Omitted when empty"),
  environments: z.array(Environment).describe("Only those the caller may access"),
  secretCounts: z.record(z.string(), z.number().int()).describe("Environment to number of secrets, for the listed environments"),
  createdAt: Timestamp,
  updatedAt: Timestamp,
});
const ProjectEnvelope = z.object({ project: Project });

export function registerProjectRoutes(
  app: FastifyInstance,
  { auth, access, projects }: { auth: Auth; access: AccessGuard; projects: ProjectsService },
): void {
  const routes = app.withTypeProvider<ZodTypeProvider>();
  const tags = ["Projects"];

  routes.get(
    "/api/projects",
    {
      preValidation: auth.browserOrCli,
      schema: {
        tags,
        summary: "List the caller's projects",
        description: "Most recently updated first. A service token sees its own project only.",
        security: SECURITY.browserOrToken,
        response: { 200: z.object({ projects: z.array(Project) }) },
      },
    },
    async (req) => ({ projects: await projects.list(auth.principal(req)) }),
  );

  routes.post(
    "/api/projects",
    {
      preValidation: auth.browser,
      schema: {
        tags,
        summary: "Create a project",
        description: "The caller becomes its owner.",
        security: SECURITY.browser,
        body: NewProject,
        response: { 201: ProjectEnvelope },
      },
    },
    async (req, reply) => {
      const project = await projects.create(auth.caller(req), req.body);
      return reply.code(201).send({ project });
    },
  );

  routes.get(
    "/api/projects/:projectId",
    {
      preValidation: [auth.browserOrCli, access.route("project:read")],
      schema: {
        tags,
        summary: "Read a project",
        security: SECURITY.browserOrToken,
        params: ProjectParams,
        response: { 200: ProjectEnvelope },
      },
    },
    async (req) => ({ project: await projects.get(auth.principal(req), req.params.projectId) }),
  );

  routes.patch(
    "/api/projects/:projectId",
    {
      preValidation: [auth.browser, access.route("project:update")],
      schema: {
        tags,
        summary: "Rename a project or change its description",
        security: SECURITY.browser,
        params: ProjectParams,
        body: ProjectChanges,
        response: { 200: ProjectEnvelope },
      },
    },
    async (req) => ({ project: await projects.update(auth.caller(req), req.params.projectId, req.body ?? {}) }),
  );

  routes.delete(
    "/api/projects/:projectId",
    {
      preValidation: [auth.browser, access.route("project:delete")],
      schema: {
        tags,
        summary: "Delete a project",
        description: "Removes its secrets, versions, members, invitations, environment access and integrations; audit events are kept.",
        security: SECURITY.browser,
        params: ProjectParams,
        response: { 200: Ok },
      },
    },
    async (req) => {
      await projects.delete(auth.caller(req), req.params.projectId);
      return { ok: true as const };
    },
  );
}
