import { type AccessGuard, ENVIRONMENTS, type Role } from "../core/access.ts";
import type { Caller } from "../core/caller.ts";
import type { Clock } from "../core/clock.ts";
import type { Config } from "../core/config.ts";
import { ALGORITHM, type Keyring } from "../core/crypto.ts";
import { HttpError } from "../core/errors.ts";
import type { AuditCategory } from "./audit.actions.ts";
import type { AuditEventRow, AuditFilter, AuditRepo } from "./audit.repo.ts";
import type { AuditWriter } from "./audit.writer.ts";

export const PAGE_SIZE_DEFAULT = 50;
export const PAGE_SIZE_MAX = 100;
const INVALID_CURSOR = "Invalid cursor.";
/** The most events one export writes: the newest ones; the answer says when older ones were left out. */
export const EXPORT_MAX_EVENTS = 10_000;

// The CLI token lifetimes cli-auth.service.ts issues; reported, not configurable.
const CLI_ACCESS_TOKEN_MINUTES = 60;
const CLI_REFRESH_TOKEN_DAYS = 30;

export interface AuditQuery {
  limit: number;
  category?: AuditCategory;
  action?: string;
  actorUserId?: string;
  environment?: string;
  key?: string;
  /** Inclusive lower bound (ISO text). */
  fromAt?: string;
  /** Upper bound (ISO text); exclusive for a date-only `to`, which covers its whole day. */
  to?: { at: string; exclusive: boolean };
  cursor?: string;
  /** `from` and `to` as the caller wrote them: an export records the filters given. */
  given?: { from?: string; to?: string };
}

export const FINDING_SEVERITIES = ["critical", "warning", "info"] as const;
export type FindingSeverity = (typeof FINDING_SEVERITIES)[number];
/** Where to act: a section of the project's pages (its path segment) or a README section title. */
export type FindingPlace = { page: "access" | "members" | "service-accounts" | "vercel" } | { readme: string };
/** A note of the security overview in machine-readable form: severity, stable code, sentence, place. */
export interface Finding {
  severity: FindingSeverity;
  code: string;
  message: string;
  where: FindingPlace;
}

export interface AuditEventView {
  id: string;
  at: string;
  action: string;
  category: string;
  targetType: string;
  targetId: string;
  metadata: Record<string, unknown>;
  /** null for the server's own actions (an automatic sync). */
  actor: { userId: string; email: string | null; isYou: boolean; isMember: boolean } | null;
  /** The service account that caused the event, as named then; null for people and the server. */
  serviceAccount: { id: string; name: string } | null;
}

/** The security overview's `access.serviceAccounts` (live tokens only). */
export interface ServiceAccountCounts {
  accounts: number;
  tokens: number;
  tokensWithoutExpiry: number;
  tokensUnusedFor90Days: number;
  trusts: number;
}

export interface AuditPage {
  events: AuditEventView[];
  nextCursor: string | null;
}

const CURSOR_AT = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const CURSOR_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/**
 * The position after an event: its time and id, which order the log. A position rather
 * than an offset, so events written between two page reads shift nothing.
 */
export function encodeCursor(event: { at: string; id: string }): string {
  return Buffer.from(JSON.stringify([event.at, event.id]), "utf8").toString("base64url");
}

function decodeCursor(cursor: string): { at: string; id: string } {
  let decoded: unknown;
  try {
    if (!/^[A-Za-z0-9_-]{1,200}$/.test(cursor)) throw new Error("not base64url");
    decoded = JSON.parse(Buffer.from(cursor, "base64url").toString("utf8"));
  } catch {
    throw new HttpError(400, INVALID_CURSOR);
  }
  if (
    !Array.isArray(decoded) ||
    decoded.length !== 2 ||
    typeof decoded[0] !== "string" ||
    typeof decoded[1] !== "string" ||
    !CURSOR_AT.test(decoded[0]) ||
    Number.isNaN(Date.parse(decoded[0])) ||
    !CURSOR_ID.test(decoded[1])
  ) {
    throw new HttpError(400, INVALID_CURSOR);
  }
  return { at: decoded[0], id: decoded[1] };
}

/** The repo's filter for a query's conditions; the caller sets the position and the row count. */
export function auditFilter(projectId: string, query: Omit<AuditQuery, "limit" | "cursor">): Omit<AuditFilter, "limit"> {
  return {
    projectId,
    action: query.action,
    category: query.category,
    actorUserId: query.actorUserId,
    environment: query.environment,
    key: query.key,
    fromAt: query.fromAt,
    toAt: query.to?.at,
    toExclusive: query.to?.exclusive,
  };
}

interface Deps {
  repo: AuditRepo;
  /** Records the audit log's own exports. */
  writer: AuditWriter;
  access: AccessGuard;
  config: Config;
  keyring: Keyring;
  clock: Clock;
  /** Given by app.ts from the service-accounts feature (which writes audit events itself, so no import). */
  serviceAccountCounts: (projectId: string) => Promise<ServiceAccountCounts>;
  /** Names of the project's service accounts with a trust of subject "*" and no claims. */
  openTrustAccounts: (projectId: string) => Promise<string[]>;
  /** The members feature's counts, given by app.ts (members write audit events, so no import). */
  members: {
    countRoles(projectId: string): Promise<Record<Role, number>>;
    /** Only environments someone holds a grant to. */
    countGrantsPerEnvironment(projectId: string): Promise<{ environment: string; members: number; viewers: number }[]>;
    countUngranted(projectId: string): Promise<number>;
    membersAmong(projectId: string, userIds: string[]): Promise<Set<string>>;
  };
  /** The invitations feature's counts, given by app.ts likewise. */
  invitations: { countOpen(projectId: string, nowIso: string): Promise<{ pending: number; expired: number }> };
  /** The project's Vercel connection as the overview shows it, from the Vercel repo likewise. */
  hosting: {
    findHosting(projectId: string): Promise<
      | {
          provider: string;
          status: string;
          lastSyncAt: string | null;
          lastSyncStatus: string | null;
          pausedAt: string | null;
          pausedReason: string | null;
          connectedBy: string | null;
          connectedByEmail: string | null;
        }
      | undefined
    >;
  };
}

export function createAuditService({
  repo,
  writer,
  access,
  config,
  keyring,
  clock,
  serviceAccountCounts,
  openTrustAccounts,
  members: membersFeature,
  invitations: invitationsFeature,
  hosting: hostingFeature,
}: Deps) {
  /** The page's events as the API shows them; whether each actor is a member is read now. */
  async function toViews(projectId: string, rows: AuditEventRow[], caller: Caller): Promise<AuditEventView[]> {
    const actorIds = [...new Set(rows.flatMap((row) => (row.actor_user_id === null ? [] : [row.actor_user_id])))];
    const members = await membersFeature.membersAmong(projectId, actorIds);
    return rows.map((row) => toView(row, members, caller));
  }

  function toView(row: AuditEventRow, members: Set<string>, caller: Caller): AuditEventView {
    return {
      id: row.id,
      at: row.at,
      action: row.action,
      category: row.category,
      targetType: row.target_type,
      targetId: row.target_id,
      metadata: JSON.parse(row.metadata) as Record<string, unknown>,
      // Computed at read time: a member removed since the event shows isMember false.
      actor:
        row.actor_user_id === null
          ? null
          : {
              userId: row.actor_user_id,
              email: row.actor_email,
              isYou: row.actor_user_id === caller.userId,
              isMember: members.has(row.actor_user_id),
            },
      serviceAccount: row.service_account_id === null ? null : { id: row.service_account_id, name: row.service_account_name ?? "" },
    };
  }

  function authenticationProvider(): string {
    // For OIDC, the issuer's host names the provider (accounts.google.com, login.example.com).
    if (config.authProvider === "oidc" && config.oidc) return new URL(config.oidc.issuer).host;
    return config.authProvider;
  }

  async function resolvedFilter(projectId: string, query: AuditQuery): Promise<Omit<AuditFilter, "limit">> {
    const filter = auditFilter(projectId, query);
    // The actor filter names a person or a service account; ids are UUIDs, so an id that
    // caused service-account events of this project is that account's (deleted or not).
    if (filter.actorUserId !== undefined && (await repo.hasServiceAccountEvents(projectId, filter.actorUserId))) {
      filter.serviceAccountId = filter.actorUserId;
      filter.actorUserId = undefined;
    }
    return filter;
  }

  return {
    async list(caller: Caller, projectId: string, query: AuditQuery): Promise<AuditPage> {
      await access.require(caller, projectId, "audit:read");
      const before = query.cursor === undefined ? undefined : decodeCursor(query.cursor);
      // One row more than the page tells whether another page exists, without a count.
      const filter = await resolvedFilter(projectId, query);
      const rows = await repo.page({ ...filter, before, limit: query.limit + 1 });
      const page = rows.slice(0, query.limit);
      const last = page.at(-1);
      return {
        events: await toViews(projectId, page, caller),
        nextCursor: rows.length > query.limit && last ? encodeCursor(last) : null,
      };
    },

    /**
     * The newest EXPORT_MAX_EVENTS events matching the query's filters, for a download.
     * Answers only once its own `audit.exported` event is on disk, like a secrets export.
     */
    async export(
      caller: Caller,
      projectId: string,
      query: AuditQuery,
      format: "csv" | "json",
    ): Promise<{ events: AuditEventView[]; truncated: boolean }> {
      await access.require(caller, projectId, "audit:read");
      const rows = await repo.page({ ...(await resolvedFilter(projectId, query)), limit: EXPORT_MAX_EVENTS + 1 });
      const truncated = rows.length > EXPORT_MAX_EVENTS;
      const events = await toViews(projectId, rows.slice(0, EXPORT_MAX_EVENTS), caller);
      const filters: Record<string, string> = {};
      for (const name of ["category", "action", "actorUserId", "environment", "key"] as const) {
        const value = query[name];
        if (value !== undefined) filters[name === "actorUserId" ? "actor" : name] = value;
      }
      // As given: a date-only `to` is searched up to the next midnight, but recorded as the day asked for.
      if (query.given?.from !== undefined) filters.from = query.given.from;
      if (query.given?.to !== undefined) filters.to = query.given.to;
      await writer.recordRead(caller, {
        projectId,
        action: "audit.exported",
        targetType: "project",
        targetId: projectId,
        metadata: { format, count: events.length, truncated, filters },
      });
      return { events, truncated };
    },

    /** The security overview (README, "Security overview"), from live data. Counts only: no key material, value or token is read. */
    async overview(caller: Caller, projectId: string) {
      const { projectEnvironments } = await access.require(caller, projectId, "audit:read");
      const currentKeyVersion = keyring.currentVersion;
      const records = await repo.countRecords(projectId, currentKeyVersion);
      const members = await membersFeature.countRoles(projectId);
      const invitations = await invitationsFeature.countOpen(projectId, clock.now().toISOString());
      const hostingRow = await hostingFeature.findHosting(projectId);
      const hosting = hostingRow
        ? {
            provider: hostingRow.provider,
            status: hostingRow.status,
            lastSyncAt: hostingRow.lastSyncAt,
            lastSyncStatus: hostingRow.lastSyncStatus,
            connectedBy: hostingRow.connectedBy === null ? null : { userId: hostingRow.connectedBy, email: hostingRow.connectedByEmail },
            paused: hostingRow.pausedAt !== null,
            pausedAt: hostingRow.pausedAt,
            pausedReason: hostingRow.pausedReason,
          }
        : null;
      // Every environment of the project, the ones nobody holds a grant to included.
      const grantCounts = new Map((await membersFeature.countGrantsPerEnvironment(projectId)).map((c) => [c.environment, c]));
      const environments = ENVIRONMENTS.filter((e) => projectEnvironments.includes(e)).map(
        (environment) => grantCounts.get(environment) ?? { environment, members: 0, viewers: 0 },
      );
      // Set in the environment (or its file), as opposed to the generated development key file.
      const keyConfigured = Boolean(config.masterKey);
      const otherRecords = records.other;

      // Each note is also a finding: the same sentence with a severity, a stable code and
      // where to act (a page of this project, or a README section for server settings).
      const notes: string[] = [];
      const findings: Finding[] = [];
      const note = (severity: FindingSeverity, code: string, message: string, where: FindingPlace) => {
        notes.push(message);
        findings.push({ severity, code, message, where });
      };
      if (config.authProvider === "dev") {
        note(
          "critical",
          "dev_sign_in",
          "The development sign-in is on: anyone who can reach this server can sign in as any e-mail address. Set AUTH_PROVIDER to oidc or local and NODE_ENV=production before storing real secrets.",
          { readme: "Signing in" },
        );
      } else if (!config.isProduction) {
        note(
          "warning",
          "development_mode",
          "The server runs in development mode. Set NODE_ENV=production for Secure cookies and no invitation links in responses.",
          { readme: "Configuration" },
        );
      }
      if (!keyConfigured) {
        note(
          "warning",
          "master_key_file",
          "The master key is a generated file inside the data folder, so a copy of that folder holds both the key and the secrets. Put the key in MASTER_KEY and keep it out of backups of the data folder.",
          { readme: "Configuration" },
        );
      }
      if (otherRecords > 0) {
        note(
          "warning",
          "old_key_version",
          `${otherRecords} encrypted ${otherRecords === 1 ? "record uses" : "records use"} an older master key version. Run "secrets-server rotate-key" to re-encrypt ${otherRecords === 1 ? "it" : "them"} with version ${currentKeyVersion}.`,
          { readme: "Encryption at rest and key rotation" },
        );
      }
      const ungranted = await membersFeature.countUngranted(projectId);
      if (ungranted > 0) {
        note(
          "info",
          "members_without_access",
          `${ungranted} ${ungranted === 1 ? "member or viewer has" : "members or viewers have"} no environment access and cannot read any secret. Grant environments under Environment access, or remove them from the project.`,
          { page: "access" },
        );
      }
      if (invitations.expired > 0) {
        note(
          "info",
          "expired_invitations",
          `${invitations.expired} ${invitations.expired === 1 ? "invitation has" : "invitations have"} expired without being accepted. Revoke ${invitations.expired === 1 ? "it" : "them"}, and invite again if still needed.`,
          { page: "members" },
        );
      }
      const open = await openTrustAccounts(projectId);
      if (open.length > 0) {
        const named = open.map((name) => `"${name}"`).join(", ");
        note(
          "critical",
          "open_workload_trust",
          `${open.length === 1 ? `The service account ${named} accepts` : `The service accounts ${named} accept`} an identity token from any workload of a trusted issuer: a trust with subject "*" and no claims. On GitHub Actions that is a workflow in any repository anywhere that asks for the audience. Narrow the subject (for example repo:OWNER/NAME:ref:refs/heads/main) or require claims, such as repository.`,
          { page: "service-accounts" },
        );
      }
      if (hosting?.paused) {
        note(
          "warning",
          "vercel_paused",
          `Vercel syncing is paused: ${hosting.connectedBy?.email ?? "the person who connected it"} no longer manages this project's integrations, so their access token is not used. An admin or the owner should reconnect Vercel with their own token, or disconnect it.`,
          { page: "vercel" },
        );
      } else if (hosting?.status === "attention") {
        note(
          "warning",
          "vercel_attention",
          "The Vercel integration needs attention: reconnect it with a new access token so syncing can resume.",
          { page: "vercel" },
        );
      } else if (hosting?.lastSyncStatus === "failed") {
        note("warning", "vercel_sync_failed", "The last Vercel sync failed. Open the integration to see the error, then sync again.", {
          page: "vercel",
        });
      } else if (hosting?.lastSyncStatus === "partial") {
        note(
          "info",
          "vercel_sync_partial",
          "The last Vercel sync left some variables out. Open the integration to see which, then sync again.",
          { page: "vercel" },
        );
      }
      // Findings only (the notes predate them): what the service-account counts warn about.
      const machines = await serviceAccountCounts(projectId);
      const never = machines.tokensWithoutExpiry;
      if (never > 0) {
        findings.push({
          severity: "warning",
          code: "service_tokens_without_expiry",
          message: `${never} service ${never === 1 ? "token never expires" : "tokens never expire"}: a leaked one works until someone revokes it. Replace ${never === 1 ? "it" : "them"} with tokens that expire, or with a trust.`,
          where: { page: "service-accounts" },
        });
      }
      const unused = machines.tokensUnusedFor90Days;
      if (unused > 0) {
        findings.push({
          severity: "info",
          code: "service_tokens_unused",
          message: `${unused} service ${unused === 1 ? "token has" : "tokens have"} not been used for 90 days. Revoke ${unused === 1 ? "it" : "them"} if nothing needs ${unused === 1 ? "it" : "them"}.`,
          where: { page: "service-accounts" },
        });
      }
      // Most severe first; the order within a severity is the notes' order.
      findings.sort((a, b) => FINDING_SEVERITIES.indexOf(a.severity) - FINDING_SEVERITIES.indexOf(b.severity));

      return {
        encryption: {
          algorithm: ALGORITHM,
          secretsEncryptedAtRest: true,
          keyConfigured,
          currentKeyVersion,
          records: { total: records.total, onCurrentKeyVersion: records.onCurrentKeyVersion, other: records.other },
          keyRotation: true,
          externalKms: false,
        },
        authentication: {
          provider: authenticationProvider(),
          cliAccessTokenMinutes: CLI_ACCESS_TOKEN_MINUTES,
          cliRefreshTokenDays: CLI_REFRESH_TOKEN_DAYS,
        },
        access: { members, pendingInvitations: invitations.pending, serviceAccounts: machines },
        integrations: { hosting },
        auditLog: { events: await repo.countProjectEvents(projectId) },
        notes,
        findings,
        environments,
      };
    },
  };
}

export type AuditService = ReturnType<typeof createAuditService>;
