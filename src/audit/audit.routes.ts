import type { FastifyInstance } from "fastify";
import type { ZodTypeProvider } from "fastify-type-provider-zod";
import { z } from "zod";
import type { AccessGuard } from "../core/access.ts";
import { Environment, ProjectParams, Role, SECURITY, Timestamp } from "../core/api-schemas.ts";
import type { Auth } from "../core/auth.ts";
import { isSecretKey } from "../core/secret-rules.ts";
import { AUDIT_CATEGORIES, isAuditAction } from "./audit.actions.ts";
import { auditCsv } from "./audit.export.ts";
import {
  type AuditQuery,
  type AuditService,
  EXPORT_MAX_EVENTS,
  FINDING_SEVERITIES,
  PAGE_SIZE_DEFAULT,
  PAGE_SIZE_MAX,
} from "./audit.service.ts";

const USER_ID = /^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/;
const DATE_ONLY = /^(\d{4})-(\d{2})-(\d{2})$/;
const TIMESTAMP = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2})(?:\.\d{1,9})?)?(Z|[+-]\d{2}:\d{2})?$/;
const DAY_MS = 24 * 60 * 60 * 1000;

function isRealDate(year: string, month: string, day: string): boolean {
  // setUTCFullYear, not Date.UTC, which reads years 0 to 99 as 1900 to 1999.
  const date = new Date(0);
  date.setUTCFullYear(Number(year), Number(month) - 1, Number(day));
  return date.getUTCFullYear() === Number(year) && date.getUTCMonth() === Number(month) - 1 && date.getUTCDate() === Number(day);
}

interface DateBound {
  at: Date;
  isDateOnly: boolean;
  /** As the caller wrote it (checked by parseDate's patterns), for the record of an export. */
  given: string;
}

/**
 * `YYYY-MM-DD` (a whole UTC day) or a full ISO timestamp; one without a zone is UTC, as
 * every time in this API is. The day's start (and whether it was date-only), or undefined.
 */
function parseDate(text: string): DateBound | undefined {
  const dateOnly = text.match(DATE_ONLY);
  if (dateOnly) {
    if (!isRealDate(dateOnly[1]!, dateOnly[2]!, dateOnly[3]!)) return undefined;
    return { at: new Date(`${text}T00:00:00.000Z`), isDateOnly: true, given: text };
  }
  const timestamp = text.match(TIMESTAMP);
  if (!timestamp || !isRealDate(timestamp[1]!, timestamp[2]!, timestamp[3]!)) return undefined;
  if (Number(timestamp[4]) > 23 || Number(timestamp[5]) > 59 || Number(timestamp[6] ?? 0) > 59) return undefined;
  const at = new Date(timestamp[7] ? text : `${text}Z`);
  return Number.isNaN(at.getTime()) ? undefined : { at, isDateOnly: false, given: text };
}

// Event times are compared as text. Past year 9999 toISOString() writes "+010000-…",
// which sorts before every stored time, so a bound beyond it is clamped to the last one.
const LAST_STORED_TIME = new Date("9999-12-31T23:59:59.999Z");

function storedTimeText(at: Date): string {
  return (at > LAST_STORED_TIME ? LAST_STORED_TIME : at).toISOString();
}

// Each parameter is a single string: repeated, it arrives as a list and is as wrong as a bad value.
const AuditDate = z
  .string()
  .transform((text, ctx) => {
    const parsed = parseDate(text);
    if (parsed) return parsed;
    ctx.addIssue({ code: "custom", message: "date" });
    return z.NEVER;
  })
  .describe("YYYY-MM-DD or a full ISO timestamp (UTC when no zone is given)");

const AuditFilters = z.object({
  category: z.enum(AUDIT_CATEGORIES).optional(),
  action: z.string().refine(isAuditAction).optional().describe("An exact action, such as secret.updated; wins over category"),
  actor: z.string().regex(USER_ID).optional().describe("A user or service account id"),
  environment: Environment.optional(),
  key: z.string().refine(isSecretKey).optional().describe("A secret key"),
  from: AuditDate.optional(),
  to: AuditDate.optional().describe("A date-only `to` includes its whole day"),
});

const PageQuery = AuditFilters.extend({
  limit: z
    .string()
    .regex(/^\d{1,3}$/)
    .transform(Number)
    .pipe(z.number().min(1).max(PAGE_SIZE_MAX))
    .optional()
    .describe(`1 to ${PAGE_SIZE_MAX}, ${PAGE_SIZE_DEFAULT} when left out`),
  cursor: z.string().optional().describe("The nextCursor of the previous page"),
});

/** The filters of the list without its page parameters (limit and cursor are ignored). */
const ExportQuery = AuditFilters.extend({ format: z.enum(["csv", "json"]).optional().describe("json when left out") });

/** `from` after `to` matches nothing, which is surely a mistake: refused like a bad date. */
function inOrder(query: { from?: DateBound; to?: DateBound }): boolean {
  const { from, to } = query;
  if (!from || !to) return true;
  return to.isDateOnly ? from.at.getTime() < to.at.getTime() + DAY_MS : from.at <= to.at;
}

const PageQueryInOrder = PageQuery.refine(inOrder, "dateOrder");
const ExportQueryInOrder = ExportQuery.refine(inOrder, "dateOrder");

function toAuditQuery(query: z.output<typeof PageQuery>): AuditQuery {
  const { from, to } = query;
  // A date-only `to` covers its whole day: the bound is the next midnight, exclusive.
  const toBound = to && (to.isDateOnly ? { at: new Date(to.at.getTime() + DAY_MS), exclusive: true } : { at: to.at, exclusive: false });
  return {
    limit: query.limit ?? PAGE_SIZE_DEFAULT,
    category: query.category,
    action: query.action,
    actorUserId: query.actor?.toLowerCase(),
    environment: query.environment,
    key: query.key,
    fromAt: from && storedTimeText(from.at),
    to:
      toBound &&
      (toBound.at > LAST_STORED_TIME
        ? { at: storedTimeText(toBound.at), exclusive: false }
        : { at: toBound.at.toISOString(), exclusive: toBound.exclusive }),
    cursor: query.cursor,
    given: { from: from?.given, to: to?.given },
  };
}

const AuditEvent = z.object({
  id: z.string(),
  at: Timestamp,
  action: z.string(),
  category: z.string().describe("secrets, access, project or integrations"),
  targetType: z.string(),
  targetId: z.string(),
  metadata: z.record(z.string(), z.unknown()).describe("Never holds secret values or tokens"),
  actor: z
    .object({ userId: z.string(), email: z.string().nullable(), isYou: z.boolean(), isMember: z.boolean() })
    .nullable()
    .describe("Null for a service account's events and the server's own"),
  serviceAccount: z
    .object({ id: z.string(), name: z.string() })
    .nullable()
    .describe("The service account that caused the event, as named then"),
});

const Count = z.number().int();
const SecurityOverview = z.object({
  encryption: z.object({
    algorithm: z.string(),
    secretsEncryptedAtRest: z.boolean(),
    keyConfigured: z.boolean(),
    currentKeyVersion: Count,
    records: z.object({ total: Count, onCurrentKeyVersion: Count, other: Count }),
    keyRotation: z.boolean(),
    externalKms: z.boolean(),
  }),
  authentication: z.object({ provider: z.string(), cliAccessTokenMinutes: Count, cliRefreshTokenDays: Count }),
  access: z.object({
    members: z.record(Role, Count),
    pendingInvitations: Count,
    serviceAccounts: z.object({ accounts: Count, tokens: Count, tokensWithoutExpiry: Count, tokensUnusedFor90Days: Count, trusts: Count }),
  }),
  integrations: z.object({
    hosting: z
      .object({
        provider: z.string(),
        status: z.string(),
        lastSyncAt: z.string().nullable(),
        lastSyncStatus: z.string().nullable(),
        connectedBy: z.object({ userId: z.string(), email: z.string().nullable() }).nullable(),
        paused: z.boolean(),
        pausedAt: z.string().nullable(),
        pausedReason: z.string().nullable(),
      })
      .nullable()
      .describe("Null when not connected"),
  }),
  auditLog: z.object({ events: Count }),
  notes: z.array(z.string()),
  findings: z
    .array(
      z.object({
        severity: z.enum(FINDING_SEVERITIES),
        code: z.string(),
        message: z.string(),
        where: z.union([z.object({ page: z.enum(["access", "members", "service-accounts", "vercel"]) }), z.object({ readme: z.string() })]),
      }),
    )
    .describe("The notes with a severity, a stable code and where to act; most severe first"),
  environments: z
    .array(z.object({ environment: z.string(), members: Count, viewers: Count }))
    .describe("Per environment, how many members and viewers hold a grant"),
});

export function registerAuditRoutes(
  app: FastifyInstance,
  { auth, access, audit }: { auth: Auth; access: AccessGuard; audit: AuditService },
): void {
  const routes = app.withTypeProvider<ZodTypeProvider>();
  const tags = ["Audit log and security overview"];

  routes.get(
    "/api/projects/:projectId/audit",
    {
      preValidation: [auth.browser, access.route("audit:read")],
      schema: {
        tags,
        summary: "A page of the project's audit log",
        description: "Newest first; nextCursor is null on the last page.",
        security: SECURITY.browser,
        params: ProjectParams,
        querystring: PageQueryInOrder,
        response: { 200: z.object({ events: z.array(AuditEvent), nextCursor: z.string().nullable() }) },
      },
    },
    async (req) => audit.list(auth.caller(req), req.params.projectId, toAuditQuery(req.query)),
  );

  // The filters of the list, without its page parameters (limit and cursor are ignored): the
  // newest EXPORT_MAX_EVENTS matching events, as a file. Rate limited: each one is a bulk read.
  routes.get(
    "/api/projects/:projectId/audit/export",
    {
      preValidation: [auth.browser, access.route("audit:read")],
      config: { rateLimit: { max: 10, timeWindow: 60_000 } },
      schema: {
        tags,
        summary: "Export the audit log as a file",
        description: `The newest ${EXPORT_MAX_EVENTS} events matching the filters, as JSON or CSV (an attachment; X-Audit-Truncated says whether older ones were left out). 10 a minute.`,
        security: SECURITY.browser,
        params: ProjectParams,
        querystring: ExportQueryInOrder,
        response: { 200: z.object({ events: z.array(AuditEvent), truncated: z.boolean(), maxEvents: Count }) },
      },
    },
    async (req, reply) => {
      const format = req.query.format ?? "json";
      const query = toAuditQuery({ ...req.query, limit: undefined, cursor: undefined });
      const result = await audit.export(auth.caller(req), req.params.projectId, query, format);
      const day = new Date().toISOString().slice(0, 10);
      void reply
        .header("cache-control", "no-store")
        .header("content-disposition", `attachment; filename="audit-log-${day}.${format}"`)
        // Whether older matching events were left out (at most EXPORT_MAX_EVENTS are written).
        .header("x-audit-truncated", String(result.truncated));
      if (format === "json") return { events: result.events, truncated: result.truncated, maxEvents: EXPORT_MAX_EVENTS };
      // A string with a text type is sent as it is, past the JSON response schema.
      return reply.type("text/csv; charset=utf-8").send(auditCsv(result.events) as never);
    },
  );

  routes.get(
    "/api/projects/:projectId/security",
    {
      preValidation: [auth.browser, access.route("audit:read")],
      schema: {
        tags,
        summary: "The project's security overview",
        description: "Read only; never key material, values or tokens.",
        security: SECURITY.browser,
        params: ProjectParams,
        response: { 200: SecurityOverview },
      },
    },
    async (req) => audit.overview(auth.caller(req), req.params.projectId),
  );
}
