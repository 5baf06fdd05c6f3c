import type { FastifyInstance } from "fastify";
import { z } from "zod";
import { ENVIRONMENTS } from "../core/access.ts";
import type { AccessGuard } from "../core/access.ts";
import type { Auth } from "../core/auth.ts";
import { looksLikeToken } from "../audit/audit.writer.ts";
import { HttpError, parse } from "../core/errors.ts";
import { fitsUnits, isPlainText, isSingleLine } from "../core/text.ts";
import type { ProjectsService } from "./projects.service.ts";

// The name goes into audit metadata, whose writer refuses token-shaped text: 400, not 500.
const Name = z
  .string()
  .trim()
  .min(1)
  // UTF-16 units like the UI's check (zod's .max would count code points).
  .refine(fitsUnits(60))
  .refine((name) => !looksLikeToken(name))
  .refine(isSingleLine);
const Description = z.string().refine(fitsUnits(280)).refine(isPlainText);

const NewProject = z.strictObject({
  name: Name,
  description: Description.optional(),
  environments: z
    .array(z.enum(ENVIRONMENTS))
    .min(1)
    .max(ENVIRONMENTS.length)
    .refine((list) => new Set(list).size === list.length),
});

const ProjectChanges = z.strictObject({
  name: Name.optional(),
  description: Description.nullable().optional(),
});

const ProjectParams = z.object({ projectId: z.string() });

export function registerProjectRoutes(app: FastifyInstance, { auth, access, projects }: { auth: Auth; access: AccessGuard; projects: ProjectsService }): void {
  app.get("/api/projects", { preHandler: auth.browserOrCli }, async (req) => {
    return { projects: projects.list(auth.principal(req)) };
  });

  app.post("/api/projects", { preHandler: auth.browser }, async (req, reply) => {
    const input = parse(NewProject, req.body, "invalid fields");
    const project = projects.create(auth.caller(req), input);
    return reply.code(201).send({ project });
  });

  app.get("/api/projects/:projectId", { preHandler: [auth.browserOrCli, access.route("project:read")] }, async (req) => {
    const { projectId } = parse(ProjectParams, req.params, "Project not found.");
    return { project: projects.get(auth.principal(req), projectId) };
  });

  app.patch("/api/projects/:projectId", { preHandler: [auth.browser, access.route("project:update")] }, async (req) => {
    const { projectId } = parse(ProjectParams, req.params, "Project not found.");
    // No body at all is "nothing to update" too, as on PATCH secret.
    const body = req.body ?? {};
    if (typeof body === "object" && !Array.isArray(body) && Object.keys(body).length === 0) {
      throw new HttpError(400, "Nothing to update.");
    }
    const input = parse(ProjectChanges, body, "invalid fields");
    if (input.name === undefined && input.description === undefined) throw new HttpError(400, "Nothing to update.");
    return { project: projects.update(auth.caller(req), projectId, input) };
  });

  app.delete("/api/projects/:projectId", { preHandler: [auth.browser, access.route("project:delete")] }, async (req) => {
    const { projectId } = parse(ProjectParams, req.params, "Project not found.");
    projects.delete(auth.caller(req), projectId);
    return { ok: true };
  });
}
