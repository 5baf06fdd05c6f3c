import type { Environment } from "./access.ts";

/** A person making a request, resolved once per request from their credential. */
export interface Caller {
  userId: string;
  email: string | null;
  name: string | null;
  emailVerified: boolean;
  /** "browser" for a session cookie, "cli" for a Bearer access token. */
  via: "browser" | "cli";
  /** The browser session or CLI session the credential belongs to. */
  sessionId: string;
}

/** The 401 of a request without a usable person's credential. */
export const NOT_SIGNED_IN = "not signed in";

/** The 401 of a CLI access token that no longer works (expired, revoked, its person disabled). */
export const CLI_SESSION_ENDED = "Your CLI session has expired or was revoked. Run the CLI login command.";

/** One message for every failed service credential, whatever the reason (README, "Using a service token"). */
export const SERVICE_TOKEN_INVALID = "This service token is invalid, expired or revoked.";

/** A service account making a request with a service token or a workload access token. */
export interface ServiceAccountCaller {
  /** "service_token" for svc_st_, "workload" for an exchanged svc_wt_. */
  via: "service_token" | "workload";
  serviceAccountId: string;
  /** As of this request: audit events keep it after the account is deleted. */
  serviceAccountName: string;
  /** The one project the account belongs to; every other answers 404. */
  projectId: string;
  role: "viewer" | "member";
  /** The environments the account may use (read fresh on every request). */
  environments: Environment[];
  tokenId: string;
  /** When the presented token stops working; null for a service token without expiry. */
  expiresAt: string | null;
}

/** Whoever makes a request: a person (browser or CLI) or a service account. */
export type Principal = Caller | ServiceAccountCaller;

export function isServiceAccount(principal: Principal): principal is ServiceAccountCaller {
  return principal.via === "service_token" || principal.via === "workload";
}
