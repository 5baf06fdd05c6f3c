import type { FastifyInstance } from "fastify";
import type { ZodTypeProvider } from "fastify-type-provider-zod";
import { z } from "zod";
import { SECURITY } from "../core/api-schemas.ts";
import { DOCS_STYLESHEET, renderDocsPage } from "./docs-page.ts";

/**
 * The API's own reference: the OpenAPI document and a page for people, both public (the
 * contract holds no secret) and both built from the route schemas, so they cannot drift.
 */
export function registerApiDocsRoutes(app: FastifyInstance): void {
  const routes = app.withTypeProvider<ZodTypeProvider>();
  const tags = ["API reference"];
  // Rendered once: routes cannot change after the server is ready.
  let page: string | undefined;

  routes.get(
    "/api/openapi.json",
    {
      schema: {
        tags,
        summary: "This document",
        description: "OpenAPI 3.1, generated from the schemas every route declares.",
        security: SECURITY.none,
        response: { 200: z.record(z.string(), z.unknown()) },
      },
    },
    async () => app.swagger() as unknown as Record<string, unknown>,
  );

  routes.get(
    "/api/docs",
    {
      schema: {
        tags,
        summary: "The API reference as a page",
        description: "HTML rendered from this document, with no script; works without a network.",
        security: SECURITY.none,
        response: { 200: z.string().describe("text/html") },
      },
    },
    async (_req, reply) => {
      page ??= renderDocsPage(app.swagger() as unknown as Record<string, unknown>);
      return reply.type("text/html; charset=utf-8").send(page);
    },
  );

  routes.get(
    "/api/docs/style.css",
    {
      schema: {
        tags,
        summary: "The reference page's stylesheet",
        security: SECURITY.none,
        response: { 200: z.string().describe("text/css") },
      },
    },
    async (_req, reply) => reply.type("text/css; charset=utf-8").send(DOCS_STYLESHEET),
  );
}
