import swagger from "@fastify/swagger";
import type { FastifyInstance } from "fastify";
import { createJsonSchemaTransform } from "fastify-type-provider-zod";
import { z } from "zod";
import { ErrorBody } from "../core/api-schemas.ts";
import { sessionCookieName } from "../core/auth.ts";
import type { Config } from "../core/config.ts";
import { VERSION } from "../core/version.ts";

const DESCRIPTION = `A self-hosted secrets manager: secrets per project and environment, encrypted at rest, versioned and audited.

Every error answers \`{ "error": "<message>" }\`, a sentence for a person; the token poll of the CLI sign-in keeps the bodies it lists. A request that does not fit an operation's schema is refused before anything is read, with that operation's message. A project the caller does not belong to answers 404 "Project not found.", so project ids cannot be probed.

A state-changing request made with a browser session whose Origin header differs from the server's answers 403.`;

type OpenApiDocument = Record<string, unknown> & { paths?: Record<string, Record<string, { responses?: Record<string, unknown> }>> };

const ERROR_RESPONSE = {
  description: "An error: a status and a sentence that says what went wrong and what to do",
  content: { "application/json": { schema: { $ref: "#/components/schemas/Error" } } },
};

/**
 * The OpenAPI 3.1 document, built by @fastify/swagger from every route's zod schemas (it
 * collects routes as they are registered, so this runs before any route). Routes with
 * `schema.hide` (the web UI's catch-all) are left out.
 */
export async function registerOpenApi(app: FastifyInstance, config: Pick<Config, "isProduction">): Promise<void> {
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
      // Any operation may fail: with the error shape, whatever its status.
      for (const operations of Object.values(document.paths ?? {})) {
        for (const operation of Object.values(operations)) {
          if (operation.responses && !("default" in operation.responses)) operation.responses.default = ERROR_RESPONSE;
        }
      }
      return document as never;
    },
  });
}
