import swagger from "@fastify/swagger";
import type { FastifyInstance } from "fastify";
import { createJsonSchemaTransform } from "fastify-type-provider-zod";
import { z } from "zod";
import { ErrorBody } from "../core/api-schemas.ts";
import { sessionCookieName } from "../core/auth.ts";
import type { Config } from "../core/config.ts";
import type { ValidationMessages, ValidationRules } from "../core/errors.ts";
import { VERSION } from "../core/version.ts";

const DESCRIPTION = `A self-hosted secrets manager: secrets per project and environment, encrypted at rest, versioned and audited.

Every error answers \`{ "error": "<message>" }\`, a sentence for a person; the token poll of the CLI sign-in keeps the bodies it lists. A request that does not fit an operation's schema is refused before anything is read, with that operation's message. A project the caller does not belong to answers 404 "Project not found.", so project ids cannot be probed.

A state-changing request made with a browser session whose Origin header differs from the server's answers 403.`;

type Response = { description?: string; content?: unknown };
type Operation = {
  responses?: Record<string, Response>;
  requestBody?: { required?: boolean; content?: Record<string, { schema?: unknown }> };
};
type OpenApiDocument = Record<string, unknown> & { paths?: Record<string, Record<string, Operation>> };

const TEXT = { schema: { type: "string" } };
/** Answers that are not JSON, which a route's response schema cannot say: by route, the 200's content. */
const OTHER_CONTENT: Record<string, Record<string, unknown>> = {
  "GET /api/docs": { "text/html": TEXT },
  "GET /api/docs/style.css": { "text/css": TEXT },
  "GET /api/projects/:projectId/environments/:env/export": {
    "text/plain": { schema: { type: "string", description: "With format=dotenv or docker: the file" } },
    "text/x-shellscript": { schema: { type: "string", description: "With format=shell: the file" } },
    "application/yaml": { schema: { type: "string", description: "With format=yaml: the file" } },
  },
};

/**
 * Routes whose body may be left out, as api.md says. Their schemas allow null, but so does
 * the workload exchange's, whose body is required: it answers a missing one with its own
 * sentence rather than the validator's.
 */
const OPTIONAL_BODY = new Set([
  "POST /api/cli/auth/device",
  "POST /api/projects/:projectId/integrations/hosting/sync",
  "POST /api/projects/:projectId/environments/:env/secrets/:secretId/versions/:versionNumber/restore",
]);

const ERROR_RESPONSE = {
  description: "An error: a status and a sentence that says what went wrong and what to do",
  content: { "application/json": { schema: { $ref: "#/components/schemas/Error" } } },
};

/** The answers a route's message table gives, by status: what a request that does not fit its schema is told. */
function validationAnswers(rules: ValidationMessages[string] | undefined): Map<string, string[]> {
  const byStatus = new Map<string, string[]>();
  const add = (answer: ValidationRules) => {
    if (typeof answer === "string") answer = { status: 400, error: answer };
    if (!("status" in answer) || typeof answer.error !== "string") {
      for (const inner of Object.values(answer)) add(inner as ValidationRules);
      return;
    }
    const messages = byStatus.get(String(answer.status)) ?? [];
    if (!messages.includes(answer.error)) messages.push(answer.error);
    byStatus.set(String(answer.status), messages);
  };
  for (const part of Object.values(rules ?? {})) add(part);
  return byStatus;
}

/**
 * The OpenAPI 3.1 document, built by @fastify/swagger from every route's zod schemas (it
 * collects routes as they are registered, so this runs before any route). Routes with
 * `schema.hide` (the web UI's catch-all) are left out.
 */
export async function registerOpenApi(
  app: FastifyInstance,
  config: Pick<Config, "isProduction">,
  messages: ValidationMessages,
): Promise<void> {
  await app.register(swagger, {
    openapi: {
      openapi: "3.1.0",
      info: { title: "secrets-server", version: VERSION, description: DESCRIPTION },
      components: {
        securitySchemes: {
          session: {
            type: "apiKey",
            in: "cookie",
            name: sessionCookieName(config),
            description: "The browser session: an HttpOnly, SameSite=Lax cookie set by a sign-in endpoint.",
          },
          bearer: {
            type: "http",
            scheme: "bearer",
            description:
              "A CLI access token (svc_at_…, from the device sign-in), a service token (svc_st_…) or a workload access token (svc_wt_…), as `Authorization: Bearer <token>`.",
          },
        },
      },
    },
    transform: createJsonSchemaTransform({ skipList: [] }),
    transformObject: (documentObject) => {
      const document = (documentObject as { openapiObject: OpenApiDocument }).openapiObject;
      const components = (document.components ?? {}) as Record<string, Record<string, unknown>>;
      components.schemas = { ...components.schemas, Error: z.toJSONSchema(ErrorBody, { target: "draft-2020-12" }) };
      delete (components.schemas.Error as Record<string, unknown>).$schema;
      document.components = components;
      for (const [path, operations] of Object.entries(document.paths ?? {})) {
        for (const [method, operation] of Object.entries(operations)) {
          operation.responses ??= {};
          const responses = operation.responses;
          // The exact sentences of a request that does not fit the schema, from the route's message table.
          const route = `${method.toUpperCase()} ${path.replace(/\{(\w+)\}/g, ":$1")}`;
          const body = operation.requestBody;
          if (body && OPTIONAL_BODY.has(route)) body.required = false;
          const other = OTHER_CONTENT[route];
          const ok = responses["200"] as { content?: Record<string, unknown> } | undefined;
          if (other && ok) {
            // The docs pages are only their own type; the export is JSON, or with format a file.
            ok.content = route.endsWith("/export") ? { ...ok.content, ...other } : other;
          }
          for (const [status, sentences] of validationAnswers(messages[route])) {
            const described = `When the request does not fit: ${sentences.map((s) => `"${s}"`).join(", ")}`;
            const existing = responses[status];
            if (existing)
              existing.description =
                existing.description && existing.description !== "Default Response" ? `${existing.description}. ${described}` : described;
            else responses[status] = { ...ERROR_RESPONSE, description: described };
          }
          // Any operation may fail: with the error shape, whatever its status.
          if (!("default" in responses)) responses.default = ERROR_RESPONSE;
        }
      }
      return document as never;
    },
  });
}
