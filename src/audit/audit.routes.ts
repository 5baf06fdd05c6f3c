import type { FastifyInstance } from "fastify";
import { isEnvironment, type AccessGuard } from "../core/access.ts";
import type { Auth } from "../core/auth.ts";
import { HttpError } from "../core/errors.ts";
import { AUDIT_CATEGORIES, isAuditAction, type AuditCategory } from "./audit.actions.ts";
import { auditCsv } from "./audit.export.ts";
import { EXPORT_MAX_EVENTS, PAGE_SIZE_DEFAULT, PAGE_SIZE_MAX, type AuditQuery, type AuditService } from "./audit.service.ts";
import { isSecretKey } from "../core/secret-rules.ts";

export const INVALID_LIMIT = `limit must be a whole number from 1 to ${PAGE_SIZE_MAX}.`;
const INVALID_DATE = "Invalid date filter.";
const INVALID_ENVIRONMENT = "Invalid environment filter: use development, staging or production.";
const INVALID_KEY = "Invalid key filter: a secret key is letters, digits and _, not starting with a digit, at most 128 characters.";
const INVALID_FORMAT = "Invalid format: use csv or json.";

const USER_ID = /^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/;
const DATE_ONLY = /^(\d{4})-(\d{2})-(\d{2})$/;
const TIMESTAMP = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2})(?:\.\d{1,9})?)?(Z|[+-]\d{2}:\d{2})?$/;
const DAY_MS = 24 * 60 * 60 * 1000;

/** One query parameter as a single string; a repeated parameter is as invalid as a bad one. */
function single(value: unknown, message: string): string | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== "string") throw new HttpError(400, message);
  return value;
}

function isRealDate(year: string, month: string, day: string): boolean {
  const date = new Date(Date.UTC(Number(year), Number(month) - 1, Number(day)));
  return (
    date.getUTCFullYear() === Number(year) && date.getUTCMonth() === Number(month) - 1 && date.getUTCDate() === Number(day)
  );
}

/**
 * `YYYY-MM-DD` (a whole UTC day) or a full ISO timestamp; one without a zone is UTC, as
 * every time in this API is. Returns the day's start (and whether it was date-only).
 */
function parseDate(text: string): { at: Date; isDateOnly: boolean } {
  const dateOnly = text.match(DATE_ONLY);
  if (dateOnly) {
    if (!isRealDate(dateOnly[1]!, dateOnly[2]!, dateOnly[3]!)) throw new HttpError(400, INVALID_DATE);
    return { at: new Date(`${text}T00:00:00.000Z`), isDateOnly: true };
  }
  const timestamp = text.match(TIMESTAMP);
  if (!timestamp || !isRealDate(timestamp[1]!, timestamp[2]!, timestamp[3]!)) throw new HttpError(400, INVALID_DATE);
  if (Number(timestamp[4]) > 23 || Number(timestamp[5]) > 59 || Number(timestamp[6] ?? 0) > 59) {
    throw new HttpError(400, INVALID_DATE);
  }
  const at = new Date(timestamp[7] ? text : `${text}Z`);
  if (Number.isNaN(at.getTime())) throw new HttpError(400, INVALID_DATE);
  return { at, isDateOnly: false };
}

// Event times are compared as text. Past year 9999 toISOString() writes "+010000-…",
// which sorts before every stored time, so a bound beyond it is clamped to the last one.
const LAST_STORED_TIME = new Date("9999-12-31T23:59:59.999Z");

function storedTimeText(at: Date): string {
  return (at > LAST_STORED_TIME ? LAST_STORED_TIME : at).toISOString();
}

/** Each parameter has its own message (api.md section 7), so they are checked one by one. */
export function parseAuditQuery(query: Record<string, unknown>): AuditQuery {
  const limitText = single(query.limit, INVALID_LIMIT);
  let limit = PAGE_SIZE_DEFAULT;
  if (limitText !== undefined) {
    if (!/^\d{1,3}$/.test(limitText)) throw new HttpError(400, INVALID_LIMIT);
    limit = Number(limitText);
    if (limit < 1 || limit > PAGE_SIZE_MAX) throw new HttpError(400, INVALID_LIMIT);
  }

  const category = single(query.category, "Invalid category filter.");
  if (category !== undefined && !(AUDIT_CATEGORIES as readonly string[]).includes(category)) {
    throw new HttpError(400, "Invalid category filter.");
  }

  const action = single(query.action, "Invalid action filter.");
  if (action !== undefined && !isAuditAction(action)) throw new HttpError(400, "Invalid action filter.");

  const actor = single(query.actor, "Invalid actor filter.");
  if (actor !== undefined && !USER_ID.test(actor)) throw new HttpError(400, "Invalid actor filter.");

  const environment = single(query.environment, INVALID_ENVIRONMENT);
  if (environment !== undefined && !isEnvironment(environment)) throw new HttpError(400, INVALID_ENVIRONMENT);

  const key = single(query.key, INVALID_KEY);
  if (key !== undefined && !isSecretKey(key)) throw new HttpError(400, INVALID_KEY);

  const fromText = single(query.from, INVALID_DATE);
  const toText = single(query.to, INVALID_DATE);
  const from = fromText === undefined ? undefined : parseDate(fromText);
  const to = toText === undefined ? undefined : parseDate(toText);
  // A date-only `to` covers its whole day: the bound is the next midnight, exclusive.
  const toBound = to && (to.isDateOnly ? { at: new Date(to.at.getTime() + DAY_MS), exclusive: true } : { at: to.at, exclusive: false });
  if (from && toBound && (toBound.exclusive ? from.at >= toBound.at : from.at > toBound.at)) {
    throw new HttpError(400, INVALID_DATE);
  }

  const cursor = single(query.cursor, "Invalid cursor.");

  return {
    limit,
    category: category as AuditCategory | undefined,
    action,
    actorUserId: actor?.toLowerCase(),
    environment,
    key,
    fromAt: from && storedTimeText(from.at),
    to: toBound && (toBound.at > LAST_STORED_TIME ? { at: storedTimeText(toBound.at), exclusive: false } : { at: toBound.at.toISOString(), exclusive: toBound.exclusive }),
    cursor,
  };
}

export function registerAuditRoutes(
  app: FastifyInstance,
  { auth, access, audit }: { auth: Auth; access: AccessGuard; audit: AuditService },
): void {
  app.get<{ Params: { projectId: string } }>(
    "/api/projects/:projectId/audit",
    { preHandler: [auth.browser, access.route("audit:read")] },
    async (req) => {
      const query = parseAuditQuery(req.query as Record<string, unknown>);
      return audit.list(auth.caller(req), req.params.projectId, query);
    },
  );

  // The filters of the list, without its page parameters (limit and cursor are ignored): the
  // newest EXPORT_MAX_EVENTS matching events, as a file. Rate limited: each one is a bulk read.
  app.get<{ Params: { projectId: string } }>(
    "/api/projects/:projectId/audit/export",
    { preHandler: [auth.browser, access.route("audit:read")], config: { rateLimit: { max: 10, timeWindow: 60_000 } } },
    async (req, reply) => {
      const raw = req.query as Record<string, unknown>;
      const format = single(raw.format, INVALID_FORMAT) ?? "json";
      if (format !== "csv" && format !== "json") throw new HttpError(400, INVALID_FORMAT);
      const query = parseAuditQuery({ ...raw, limit: undefined, cursor: undefined });
      const result = await audit.export(auth.caller(req), req.params.projectId, query, format);
      const day = new Date().toISOString().slice(0, 10);
      void reply
        .header("cache-control", "no-store")
        .header("content-disposition", `attachment; filename="audit-log-${day}.${format}"`)
        // Whether older matching events were left out (at most EXPORT_MAX_EVENTS are written).
        .header("x-audit-truncated", String(result.truncated));
      if (format === "json") return { events: result.events, truncated: result.truncated, maxEvents: EXPORT_MAX_EVENTS };
      return reply.type("text/csv; charset=utf-8").send(auditCsv(result.events));
    },
  );

  app.get<{ Params: { projectId: string } }>(
    "/api/projects/:projectId/security",
    { preHandler: [auth.browser, access.route("audit:read")] },
    async (req) => {
      return audit.overview(auth.caller(req), req.params.projectId);
    },
  );
}
