import type { FastifyError, FastifyInstance, FastifyRequest } from "fastify";
import { hasZodFastifySchemaValidationErrors, type ResponseSerializationError } from "fastify-type-provider-zod";
import { type StorageMonitor, storageCondition, storageMessage } from "./storage.ts";

/** The API's answer to a body whose fields are not what the endpoint takes (api.md). */
export const INVALID_FIELDS = "invalid fields";
/** A request the server cannot parse, whether Fastify or Node's HTTP parser refused it. */
export const NOT_UNDERSTOOD = "The request could not be understood.";

/** The one error type: a status and a message the client may read. */
export class HttpError extends Error {
  readonly statusCode: number;
  /** Extra fields for the few bodies the spec shapes differently (token polling). */
  readonly body?: Record<string, unknown>;
  readonly headers?: Record<string, string>;

  constructor(statusCode: number, message: string, body?: Record<string, unknown>, headers?: Record<string, string>) {
    super(message);
    this.statusCode = statusCode;
    this.body = body;
    this.headers = headers;
  }
}

/** What a request that fails its route's schema is answered: a message (400) or a status and message. */
export type ValidationAnswer = string | { status: number; error: string };

/**
 * Rules for one part of a request, tried in order; the first that names a problem answers.
 * A rule is a field ("expectedVersion", "mappings.*": `*` is any one segment) matching a
 * problem at or inside it; "" the part itself (not an object, missing); "+" an unknown
 * field; "#name" a refinement whose message is `name`; "*" any problem.
 */
export type ValidationRules = string | { status: number; error: string } | Record<string, ValidationAnswer>;

/** Per route ("PATCH /api/projects/:projectId"), per part of the request. */
export type ValidationMessages = Record<string, Partial<Record<"params" | "querystring" | "body", ValidationRules>>>;

/** What an answer falls back to when a route has no rule for a problem: never zod's own words. */
const FALLBACK: Record<string, { status: number; error: string }> = {
  params: { status: 404, error: "Not found." },
  querystring: { status: 400, error: "invalid request" },
  body: { status: 400, error: "invalid request" },
};

interface Issue {
  keyword: string;
  instancePath: string;
  message?: string;
}

function matches(rule: string, issue: Issue): boolean {
  if (rule === "*") return true;
  if (rule === "+") return issue.keyword === "unrecognized_keys";
  if (rule.startsWith("#")) return issue.keyword === "custom" && issue.message === rule.slice(1);
  const path = issue.instancePath
    .split("/")
    .slice(1)
    .filter((segment) => segment !== "");
  if (rule === "") return path.length === 0 && issue.keyword !== "unrecognized_keys" && issue.keyword !== "custom";
  const wanted = rule.split(".");
  return wanted.length <= path.length && wanted.every((segment, i) => segment === "*" || segment === path[i]);
}

function toAnswer(answer: ValidationAnswer): { status: number; error: string } {
  return typeof answer === "string" ? { status: 400, error: answer } : answer;
}

/** The answer of a failed schema, from the route's rules (see ValidationRules). */
function validationAnswer(
  messages: ValidationMessages,
  req: Pick<FastifyRequest, "method" | "routeOptions">,
  part: string,
  issues: readonly Issue[],
): { status: number; error: string } {
  const rules = messages[`${req.method} ${req.routeOptions.url}`]?.[part as "body"];
  const fallback = FALLBACK[part] ?? FALLBACK.body!;
  if (rules === undefined) return fallback;
  if (typeof rules === "string" || "status" in rules) return toAnswer(rules as ValidationAnswer);
  for (const [rule, answer] of Object.entries(rules)) {
    if (issues.some((issue) => matches(rule, issue))) return toAnswer(answer);
  }
  return fallback;
}

export function registerErrorHandling(
  app: FastifyInstance,
  storage?: Pick<StorageMonitor, "report">,
  messages: ValidationMessages = {},
): void {
  app.setNotFoundHandler((_req, reply) => {
    void reply.code(404).send({ error: "Not found." });
  });

  app.setErrorHandler((error: FastifyError | HttpError, req, reply) => {
    if (error instanceof HttpError) {
      if (error.headers) void reply.headers(error.headers);
      return reply.code(error.statusCode).send(error.body ?? { error: error.message });
    }
    if (hasZodFastifySchemaValidationErrors(error)) {
      const { status, error: message } = validationAnswer(messages, req, error.validationContext ?? "body", error.validation);
      return reply.code(status).send({ error: message });
    }
    if (error.code === "FST_ERR_RESPONSE_SERIALIZATION") {
      const { cause, method, url } = error as unknown as ResponseSerializationError;
      // An answer that does not fit its route's schema is a bug, and it never leaves as it
      // is, in any mode: what does not fit might be exactly what must not leave. The log
      // names the places and problems, never the values.
      const problems = cause.issues.map((issue) => `${issue.path.join(".") || "(body)"}: ${issue.code}`);
      req.log.error({ route: `${method} ${url}`, problems }, "a response did not match its schema");
      return reply.code(500).send({ error: SERVER_ERROR });
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
    return reply.code(500).send({ error: SERVER_ERROR });
  });
}

const SERVER_ERROR = "Something went wrong on the server. Try again; if it keeps happening, check the server log.";

function clientErrorMessage(error: FastifyError, status: number): string {
  switch (error.code) {
    case "FST_ERR_CTP_INVALID_JSON_BODY":
      return "The request body is not valid JSON.";
    case "FST_ERR_CTP_BODY_TOO_LARGE":
      return "The request body is too large.";
    case "FST_ERR_CTP_INVALID_MEDIA_TYPE":
      return "Send the request body as JSON (Content-Type: application/json).";
    default:
      if (status === 404) return "Not found.";
      if (status === 413) return "The request body is too large.";
      return NOT_UNDERSTOOD;
  }
}
