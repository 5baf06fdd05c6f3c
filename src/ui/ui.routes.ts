import type { FastifyInstance } from "fastify";
import { readAsset } from "../core/assets.ts";
import { HttpError } from "../core/errors.ts";

/** Serves the single-page UI: every GET outside /api that is not a file gets index.html. */
export function registerUiRoutes(app: FastifyInstance): void {
  const index = readAsset("web/index.html");
  app.get("/*", { config: { rateLimit: false } }, async (req, reply) => {
    if (req.url.startsWith("/api/") || req.url === "/api") throw new HttpError(404, "Not found.");
    return reply.type("text/html; charset=utf-8").header("cache-control", "no-cache").send(index);
  });
}
