// The one way the UI talks to the server: JSON over fetch, same origin, session cookie.
// Errors carry the API's own message so every action can show it as is.

// The response types come from the server modules that build the responses, so the UI and
// the API cannot drift apart. Type imports only: esbuild erases them, and no server code
// reaches the browser bundle.
import type { AuditEventView, AuditService } from "../../src/audit/audit.service.ts";
import type { CliAuthService, CliSessionView } from "../../src/cli-auth/cli-auth.service.ts";
import type { Environment } from "../../src/core/access.ts";
import type { ConnectionView, VercelService } from "../../src/integrations/vercel/vercel.service.ts";
import type { InboxService } from "../../src/invitations/inbox.service.ts";
import type { InvitationsService, InvitationView } from "../../src/invitations/invitations.service.ts";
import type { MemberView } from "../../src/members/members.service.ts";
import type { ProjectView } from "../../src/projects/projects.service.ts";
import type { CopyService } from "../../src/secrets/copy.service.ts";
import type { ImportSummary, SecretsService, SecretWithValue } from "../../src/secrets/secrets.service.ts";
import type {
  ServiceAccountsService,
  ServiceAccountView,
  TokenView,
  TrustView,
} from "../../src/service-accounts/service-accounts.service.ts";
import type { LocalAccounts } from "../../src/sign-in/local.service.ts";
import type { toPublicUser } from "../../src/users/users.service.ts";

export class ApiError extends Error {
  readonly status: number;
  readonly body?: unknown;

  constructor(status: number, message: string, body?: unknown) {
    super(message);
    this.status = status;
    this.body = body;
  }
}

type Listener = () => void;
const signedOutListeners = new Set<Listener>();

/** Called when any request answers 401 `not signed in`: the app shows the sign-in page. */
export function onSignedOut(listener: Listener): () => void {
  signedOutListeners.add(listener);
  return () => signedOutListeners.delete(listener);
}

export async function request(method: string, path: string, body?: unknown): Promise<Response> {
  const headers: Record<string, string> = { accept: "application/json" };
  if (body !== undefined) headers["content-type"] = "application/json";
  let res: Response;
  try {
    res = await fetch(path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      credentials: "same-origin",
      cache: "no-store",
    });
  } catch {
    throw new ApiError(0, "Could not reach the server. Check your connection and try again.");
  }
  if (!res.ok) {
    let parsed: unknown;
    let message = `The server answered ${res.status}.`;
    try {
      parsed = await res.json();
      const error = (parsed as { error?: unknown }).error;
      if (typeof error === "string" && error) message = error;
    } catch {
      // Not JSON: keep the generic message.
    }
    if (res.status === 401 && !path.startsWith("/api/auth/")) {
      for (const listener of signedOutListeners) listener();
    }
    throw new ApiError(res.status, message, parsed);
  }
  return res;
}

export async function api<T = unknown>(method: string, path: string, body?: unknown): Promise<T> {
  const res = await request(method, path, body);
  const text = await res.text();
  return (text ? JSON.parse(text) : undefined) as T;
}

export const get = <T>(path: string) => api<T>("GET", path);

/**
 * Ends the browser session. Answers why it did not end (the network, a 503), so the page can
 * say so rather than show the sign-in page while the session still works (on a shared
 * computer, for the next person); a 401 means it had ended already.
 */
export async function signOut(): Promise<string | undefined> {
  try {
    await api("POST", "/api/auth/sign-out", {});
    return undefined;
  } catch (error) {
    if (error instanceof ApiError && error.status === 401) return undefined;
    return `Not signed out: ${error instanceof Error ? error.message : String(error)}`;
  }
}
export const post = <T>(path: string, body: unknown = {}) => api<T>("POST", path, body);
export const put = <T>(path: string, body?: unknown) => api<T>("PUT", path, body);
export const patch = <T>(path: string, body: unknown) => api<T>("PATCH", path, body);
export const del = <T>(path: string) => api<T>("DELETE", path);

// Re-exported under the server's names; the aliases below name what the pages ask for.
export type { AuditPage as AuditEventPage } from "../../src/audit/audit.service.ts";
export type { Environment, Permission, Role } from "../../src/core/access.ts";
export type { Target } from "../../src/integrations/vercel/vercel.service.ts";
export type { SyncSummary } from "../../src/integrations/vercel/vercel.sync.ts";
export type { AccessMatrix } from "../../src/members/environment-access.service.ts";
export type { ComparedEntry, Comparison } from "../../src/secrets/compare.service.ts";
export type { SecretMeta, VersionEntry } from "../../src/secrets/secrets.service.ts";
export type { ServiceAccountRole } from "../../src/service-accounts/service-accounts.service.ts";

/** What a server function answers, once its promise (if any) settles. */
type Answer<F extends (...args: never[]) => unknown> = Awaited<ReturnType<F>>;

export type User = ReturnType<typeof toPublicUser>;
export type Project = ProjectView;
export type SecretValue = SecretWithValue;
export type VersionHistory = Answer<SecretsService["versions"]>;
export type VersionValue = Answer<SecretsService["revealVersion"]>;
export type ImportResult = ImportSummary;
export type CopyAnswer = ReturnType<CopyService["copy"]>;
export type ExportedSecret = Extract<Answer<SecretsService["export"]>, { values: unknown }>["values"][number];
export type Member = MemberView;
export type Invitation = InvitationView;
export type InvitationCreated = Answer<InvitationsService["create"]>;
export type InvitationAccepted = Answer<InvitationsService["acceptToken"]>;
export type InvitationPreview = Answer<InvitationsService["preview"]>;
export type InvitationRenewed = Answer<InvitationsService["renewLink"]>;
export type AuditEvent = AuditEventView;
export type SecurityOverview = Answer<AuditService["overview"]>;
export type CliSession = CliSessionView;
export type PendingDeviceRequest = Answer<CliAuthService["describePending"]>;
export type DeviceApproval = Answer<CliAuthService["approve"]>;
export type InboxList = Answer<InboxService["list"]>;
export type InboxInvitation = InboxList["invitations"][number];
export type InboxAccepted = Answer<InboxService["accept"]>;
export type SetPasswordLink = Answer<LocalAccounts["describeLink"]>;
export type HostingConnection = ConnectionView;
export type ServiceAccount = ServiceAccountView;
export type ServiceToken = TokenView;
export type Trust = TrustView;
/** POST …/service-accounts/<id>/tokens: the only answer that carries the token itself. */
export type ServiceTokenCreated = Answer<ServiceAccountsService["createToken"]>;
export type HostingOptions = Answer<VercelService["options"]>;

/** GET /api/auth/provider, answered inline by the sign-in routes. */
export type { ProviderInfo } from "../../src/sign-in/sign-in.routes.ts";

// A value cannot be imported (that would bundle server code), so this list is a copy of
// src/core/access.ts's; these checks fail tsc when it stops matching the server's type.
export const ENVIRONMENTS = ["development", "staging", "production"] as const satisfies readonly Environment[];
type Holds<T extends true> = T;
// Every server environment is in the list (`satisfies` above checks the other direction).
export type EnvironmentsComplete = Holds<[Environment] extends [(typeof ENVIRONMENTS)[number]] ? true : false>;

export const projectPath = (projectId: string) => `/api/projects/${encodeURIComponent(projectId)}`;
export const envPath = (projectId: string, env: string) => `${projectPath(projectId)}/environments/${encodeURIComponent(env)}`;
