import type { FastifyError, FastifyInstance } from "fastify";
import type { z } from "zod";
import { storageCondition, storageMessage, type StorageMonitor } from "./storage.ts";

/** The one error type: a status and a message the client may read. */
export class HttpError extends Error {
  constructor(
    readonly statusCode: number,
    message: string,
    /** Extra fields for the few bodies the spec shapes differently (token polling). */
    readonly body?: Record<string, unknown>,
    readonly headers?: Record<string, string>,
  ) {
    super(message);
  }
}

/** Parses input with a zod schema; any failure is a 400 with the endpoint's own message. */
export function parse<S extends z.ZodType>(schema: S, input: unknown, message: string): z.output<S> {
  const result = schema.safeParse(input);
  if (!result.success) throw new HttpError(400, message);
  return result.data;
}

export function registerErrorHandling(app: FastifyInstance, storage?: Pick<StorageMonitor, "report">): void {
  app.setNotFoundHandler((_req, reply) => {
    void reply.code(404).send({ error: "Not found." });
  });

  app.setErrorHandler((error: FastifyError | HttpError, req, reply) => {
    if (error instanceof HttpError) {
      if (error.headers) void reply.headers(error.headers);
      return reply.code(error.statusCode).send(error.body ?? { error: error.message });
    }
    const status = typeof error.statusCode === "number" ? error.statusCode : 500;
    if (status === 429) return reply.code(429).send({ error: error.message || "Too many requests. Try again later." });
    if (status >= 400 && status < 500) {
      // Fastify's own client errors: bad JSON, wrong content type, body too large.
      return reply.code(status).send({ error: clientErrorMessage(error, status) });
    }
    // A full, failing, read-only or locked disk is the machine's condition, not a bug: 503
    // with Retry-After and a sentence saying what is wrong, logged once a minute (not a
    // stack per request). Reveals and exports audit before they answer, so they fail
    // closed here too: no value leaves without its audit event.
    const condition = storageCondition(error);
    if (condition !== undefined) {
      storage?.report(condition, error);
      const { message, retryAfterSeconds } = storageMessage(condition);
      return reply.code(503).header("retry-after", String(retryAfterSeconds)).send({ error: message });
    }
    req.log.error({ err: error }, "request failed");
    return reply.code(500).send({ error: "Something went wrong on the server. Try again; if it keeps happening, check the server log." });
  });
}

function clientErrorMessage(error: FastifyError, status: number): string {
  switch (error.code) {
    case "FST_ERR_CTP_INVALID_JSON_BODY":
    case "FST_ERR_CTP_EMPTY_JSON_BODY":
      return "The request body is not valid JSON.";
    case "FST_ERR_CTP_BODY_TOO_LARGE":
      return "The request body is too large.";
    case "FST_ERR_CTP_INVALID_MEDIA_TYPE":
      return "Send the request body as JSON (Content-Type: application/json).";
    case "FST_ERR_VALIDATION":
      return "invalid request";
    default:
      if (status === 404) return "Not found.";
      if (status === 413) return "The request body is too large.";
      return "The request could not be understood.";
  }
}
