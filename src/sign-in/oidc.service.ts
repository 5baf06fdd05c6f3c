import * as client from "openid-client";
import type { Logger } from "pino";
import type { Clock } from "../core/clock.ts";
import { type Config, ConfigError } from "../core/config.ts";
import { safeEqual } from "../core/crypto.ts";
import { isLoopbackHost } from "../core/loopback.ts";
import { displayName, foldEmail, isSingleLine } from "../core/text.ts";
import type { UserRow, UsersService } from "../users/users.service.ts";
import type { SignInErrorCode } from "./sign-in-errors.ts";

const OIDC_SCOPES = "openid email profile";
/** How long a started sign-in may take at the identity provider. */
export const OIDC_SIGN_IN_SECONDS = 10 * 60;
const DISCOVERY_TIMEOUT_SECONDS = 10;

/** What the sealed cookie carries from /start to /callback. */
export interface PendingSignIn {
  state: string;
  nonce: string;
  codeVerifier: string;
  returnTo: string;
  expiresAt: string;
}

export class SignInFailure extends Error {
  readonly code: SignInErrorCode;

  constructor(code: SignInErrorCode, detail?: string) {
    super(detail ?? code);
    this.code = code;
  }
}

interface Deps {
  config: Config;
  clock: Clock;
  users: UsersService;
  log: Pick<Logger, "info" | "warn" | "error">;
}

export type OidcService = Awaited<ReturnType<typeof createOidcService>>;

/**
 * Discovers the issuer at start. A wrong or unreachable issuer stops a production server
 * with a ConfigError naming what is wrong. In development the server starts anyway (so
 * the rest can be worked on) and discovery is retried at the next sign-in.
 */
export async function createOidcService({ config, clock, users, log }: Deps) {
  const settings = config.oidc;
  if (!settings) throw new Error("createOidcService needs AUTH_PROVIDER=oidc");
  const issuerUrl = new URL(settings.issuer);
  // Like APP_URL: plain http only on loopback in production (a test or local provider).
  if (config.isProduction && issuerUrl.protocol !== "https:" && !isLoopbackHost(issuerUrl.hostname)) {
    throw new ConfigError("OIDC_ISSUER must use https in production (plain http is allowed only for localhost).");
  }
  // Read at each use: with PORT=0 the app URL is settled only after listen.
  const redirectUri = () => `${config.appUrl}/api/auth/oidc/callback`;
  const allowedDomains = new Set(settings.allowedDomains);

  let configuration: client.Configuration | undefined;

  async function discover(): Promise<client.Configuration> {
    let discovered: client.Configuration;
    try {
      discovered = await client.discovery(issuerUrl, settings!.clientId, settings!.clientSecret, undefined, {
        execute: issuerUrl.protocol === "http:" ? [client.allowInsecureRequests] : [],
        timeout: DISCOVERY_TIMEOUT_SECONDS,
      });
    } catch (error) {
      throw new ConfigError(describeDiscoveryError(settings!.issuer, error));
    }
    const metadata = discovered.serverMetadata();
    // RFC 8414: an issuer that lists no methods supports client_secret_basic.
    const methods = metadata.token_endpoint_auth_methods_supported;
    const clientAuth =
      !methods || methods.includes("client_secret_basic")
        ? client.ClientSecretBasic(settings!.clientSecret)
        : client.ClientSecretPost(settings!.clientSecret);
    const result = new client.Configuration(metadata, settings!.clientId, settings!.clientSecret, clientAuth);
    if (issuerUrl.protocol === "http:") client.allowInsecureRequests(result);
    result.timeout = DISCOVERY_TIMEOUT_SECONDS;
    return result;
  }

  try {
    configuration = await discover();
    log.info({ issuer: configuration.serverMetadata().issuer }, "OpenID Connect issuer discovered");
  } catch (error) {
    if (config.isProduction) throw error;
    log.error({ issuer: settings.issuer }, `${(error as Error).message} Development mode starts anyway and retries at the next sign-in.`);
  }

  async function ready(): Promise<client.Configuration> {
    if (!configuration) {
      try {
        configuration = await discover();
      } catch (error) {
        throw new SignInFailure("provider_unavailable", (error as Error).message);
      }
    }
    return configuration;
  }

  function isAllowedEmail(email: string | null): boolean {
    if (allowedDomains.size === 0) return true;
    if (!email) return false;
    const domain = email.slice(email.lastIndexOf("@") + 1);
    return allowedDomains.has(domain);
  }

  return {
    /** The issuer's host, for the security overview. */
    issuerHost: issuerUrl.host,

    /** Builds the provider URL of a new sign-in and the state the cookie must carry back. */
    async start(returnTo: string): Promise<{ url: string; pending: PendingSignIn }> {
      const oidc = await ready();
      const pending: PendingSignIn = {
        state: client.randomState(),
        nonce: client.randomNonce(),
        codeVerifier: client.randomPKCECodeVerifier(),
        returnTo,
        expiresAt: new Date(clock.now().getTime() + OIDC_SIGN_IN_SECONDS * 1000).toISOString(),
      };
      const url = client.buildAuthorizationUrl(oidc, {
        redirect_uri: redirectUri(),
        scope: OIDC_SCOPES,
        code_challenge: await client.calculatePKCECodeChallenge(pending.codeVerifier),
        code_challenge_method: "S256",
        state: pending.state,
        nonce: pending.nonce,
      });
      return { url: url.href, pending };
    },

    /**
     * Completes a sign-in from the provider's redirect: checks state, exchanges the code
     * (with the PKCE verifier and nonce), and creates or refreshes the user of (issuer, sub).
     */
    async finish(query: Record<string, string>, pending: PendingSignIn | undefined): Promise<UserRow> {
      if (!pending || Date.parse(pending.expiresAt) <= clock.now().getTime()) throw new SignInFailure("sign_in_expired");
      // Checked here as well as by openid-client, to answer with its own reason; and before
      // the provider's error, which carries the state too: a link from elsewhere with
      // ?error=access_denied must not tell someone signing in that they cancelled.
      if (typeof query.state !== "string" || !safeEqual(query.state, pending.state)) throw new SignInFailure("state_mismatch");
      if (query.error === "access_denied") throw new SignInFailure("access_denied");
      const oidc = await ready();

      const current = new URL(redirectUri());
      current.search = new URLSearchParams(query).toString();
      let tokens: Awaited<ReturnType<typeof client.authorizationCodeGrant>>;
      try {
        tokens = await client.authorizationCodeGrant(oidc, current, {
          pkceCodeVerifier: pending.codeVerifier,
          expectedState: pending.state,
          expectedNonce: pending.nonce,
          idTokenExpected: true,
        });
      } catch (error) {
        throw toFailure(error);
      }
      const claims = tokens.claims()!;
      let profile: Record<string, unknown> = { ...claims };
      // Many providers put e-mail and name only in UserInfo when an access token is issued.
      if (claims.email === undefined && oidc.serverMetadata().userinfo_endpoint) {
        try {
          profile = { ...(await client.fetchUserInfo(oidc, tokens.access_token, claims.sub)), ...claims };
        } catch (error) {
          throw toFailure(error);
        }
      }

      // An address or a subject with a control character, or longer than OpenID Connect
      // (255) and e-mail (254) allow, is nothing a person signs in as; PostgreSQL refuses a
      // NUL, and its indexes a text of some 2.7 KB. No address then, and no sign-in without
      // a subject.
      if (!isSingleLine(claims.sub) || claims.sub.length > 255) {
        throw new SignInFailure("sign_in_failed", "the provider's subject holds a control character or is over 255 characters");
      }
      const email =
        typeof profile.email === "string" && profile.email.includes("@") && profile.email.length <= 254 && isSingleLine(profile.email)
          ? foldEmail(profile.email)
          : null;
      // Some providers send the claim as the string "true".
      const emailVerified = email !== null && (profile.email_verified === true || profile.email_verified === "true");
      const name = typeof profile.name === "string" ? displayName(profile.name) : null;
      if (allowedDomains.size > 0) {
        // An unverified address proves nothing about the domain.
        if (!isAllowedEmail(email)) throw new SignInFailure("domain_not_allowed");
        if (!emailVerified) throw new SignInFailure("email_not_verified");
      }
      const user = await users.upsertIdentity(
        { issuer: oidc.serverMetadata().issuer, subject: claims.sub, email, emailVerified, name },
        clock.now(),
      );
      if (user.disabledAt) throw new SignInFailure("account_disabled");
      return user;
    },
  };
}

function toFailure(error: unknown): SignInFailure {
  if (error instanceof SignInFailure) return error;
  if (isNetworkError(error)) return new SignInFailure("provider_unavailable", describe(error));
  if (error instanceof client.AuthorizationResponseError && error.error === "access_denied") {
    return new SignInFailure("access_denied");
  }
  if (error instanceof client.ClientError && /"state"/.test(error.message)) return new SignInFailure("state_mismatch");
  // invalid_grant (a replayed or expired code), a bad ID token, and the like.
  return new SignInFailure("sign_in_failed", describe(error));
}

function isNetworkError(error: unknown): boolean {
  for (let e: unknown = error, depth = 0; e instanceof Error && depth < 5; e = e.cause, depth++) {
    if (e.name === "AbortError" || e.name === "TimeoutError") return true;
    if (e instanceof TypeError && /fetch failed/i.test(e.message)) return true;
    if (
      /^(ECONNREFUSED|ECONNRESET|ENOTFOUND|EAI_AGAIN|ETIMEDOUT|EHOSTUNREACH|UND_ERR_\w+)$/.test(String((e as NodeJS.ErrnoException).code))
    ) {
      return true;
    }
  }
  return false;
}

/** One line about an error for the log: names and codes, never a response body or token. */
function describe(error: unknown): string {
  const parts: string[] = [];
  for (let e: unknown = error, depth = 0; e instanceof Error && depth < 3; e = e.cause, depth++) {
    const code = (e as { code?: unknown }).code;
    parts.push(`${e.name}${typeof code === "string" ? ` ${code}` : ""}: ${e.message}`);
  }
  return parts.join(" <- ") || String(error);
}

function describeDiscoveryError(issuer: string, error: unknown): string {
  const where = `${issuer.replace(/\/+$/, "")}/.well-known/openid-configuration`;
  if (isNetworkError(error)) {
    return `OIDC_ISSUER ${issuer} could not be reached (${describe(error)}). Check the URL and that this server can reach ${where}.`;
  }
  return `OIDC_ISSUER ${issuer} is not a working OpenID Connect issuer: ${describe(error)}. ${where} must answer with this exact issuer.`;
}
