// Machine access for the CLI: a service token (SECRETS_SERVER_TOKEN or --token-file), or an
// identity token exchanged for a short access token (SECRETS_SERVER_IDENTITY_TOKEN, or the
// job's own token in GitHub Actions). Such a command never reads or writes credentials.json:
// a CI runner or a server has no login, and its home folder may be shared or read-only.
import fs from "node:fs";
import path from "node:path";
import { failureReason, type HttpAnswer, httpRequest } from "../core/http-client.ts";
import { isLoopbackHost } from "../core/loopback.ts";
import { printable, UUID } from "../core/text.ts";
import { type ApiResponse, apiBody, type BearerSource, post } from "./api.ts";
import { CliError, EXIT } from "./errors.ts";

const SERVICE_TOKEN = /^svc_(st|wt)_[A-Za-z0-9_-]{20,}$/;
const JWT = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$/;
const TOKEN_FILE_MAX_BYTES = 4096;
const GITHUB_TIMEOUT_MS = 10_000;

export const TOKEN_FILE_OPTION = { "token-file": { type: "string" } } as const;

/** GET /api/service-accounts/me */
export interface ServiceAccountMe {
  serviceAccount: { id: string; name: string; projectId: string; projectName: string; role: string; environments: string[] };
  expiresAt: string | null;
}

/** `audience`: SECRETS_SERVER_AUDIENCE, asked of GitHub instead of the server's URL. */
type IdentitySource = { from: "env"; jwt: string } | { from: "github"; requestUrl: string; requestToken: string; audience?: string };

/** A credential of a service account, given to this process rather than stored by `login`. */
export class MachineAuth implements BearerSource {
  #bearer?: Promise<string>;
  #me?: Promise<ServiceAccountMe>;

  readonly kind: "service_token" | "workload";
  /** Where the credential came from, for messages: never the credential itself. */
  readonly source: string;
  private readonly serviceToken?: string;
  private readonly workload?: { serviceAccountId: string; identity: IdentitySource };

  private constructor(
    kind: "service_token" | "workload",
    source: string,
    serviceToken?: string,
    workload?: { serviceAccountId: string; identity: IdentitySource },
  ) {
    this.kind = kind;
    this.source = source;
    this.serviceToken = serviceToken;
    this.workload = workload;
  }

  static fromServiceToken(token: string, source: string): MachineAuth {
    return new MachineAuth("service_token", source, token);
  }

  static fromIdentity(serviceAccountId: string, identity: IdentitySource): MachineAuth {
    const source =
      identity.from === "env"
        ? "SECRETS_SERVER_IDENTITY_TOKEN for SECRETS_SERVER_SERVICE_ACCOUNT"
        : "the GitHub Actions job's identity token for SECRETS_SERVER_SERVICE_ACCOUNT";
    return new MachineAuth("workload", source, undefined, { serviceAccountId, identity });
  }

  /** The long-lived service token, which keys the fallback copy; none for workload identity. */
  fallbackSecret(): string | undefined {
    return this.serviceToken;
  }

  /** The bearer token: the service token, or the access token of the last exchange (renew() and a failed exchange start a new one). */
  bearer(server: string): Promise<string> {
    if (this.serviceToken) return Promise.resolve(this.serviceToken);
    // A failed exchange is not kept: the next request (a later poll of run --watch) tries again.
    this.#bearer ??= exchange(server, this.workload!.serviceAccountId, this.workload!.identity).catch((error: unknown) => {
      this.#bearer = undefined;
      throw error;
    });
    return this.#bearer;
  }

  /** For workload identity, the next request exchanges a new identity token; a service token stays as it is. */
  renew(): boolean {
    if (this.serviceToken) return false;
    this.#bearer = undefined;
    return true;
  }

  refused(server: string): CliError {
    if (this.kind === "service_token") {
      return new CliError(
        `${server} refused the service token from ${this.source}: it is invalid, expired or revoked, or used from a network ` +
          `the token does not allow. Check that the token is complete and meant for this server, or create a new one for the service account.`,
        EXIT.auth,
      );
    }
    return new CliError(
      `${server} refused the access token from the identity exchange, and the one from a new exchange too: the service account or its trust was removed.`,
      EXIT.auth,
    );
  }

  /** The account behind the credential, asked once per command. */
  me(request: (method: string, path: string) => Promise<ApiResponse>, server: string): Promise<ServiceAccountMe> {
    return (this.#me ??= request("GET", "/api/service-accounts/me").then((res) => {
      if (res.status !== 200)
        throw new CliError(
          `${server} answered ${res.status} to /api/service-accounts/me. Is it a secrets-server with service accounts?`,
          EXIT.failed,
        );
      return apiBody(res, server, "/api/service-accounts/me") as unknown as ServiceAccountMe;
    }));
  }
}

function env(name: string, from: NodeJS.ProcessEnv): string | undefined {
  const value = from[name]?.trim();
  return value ? value : undefined;
}

/**
 * The machine credential this command is given, or undefined to use `login`'s credentials.
 * Order: a service token (--token-file or SECRETS_SERVER_TOKEN), then the identity exchange,
 * then credentials.json. Two credentials of which neither clearly wins are refused.
 */
export function machineAuth(tokenFile: string | undefined, from: NodeJS.ProcessEnv = process.env): MachineAuth | undefined {
  const envToken = env("SECRETS_SERVER_TOKEN", from);
  const identityToken = env("SECRETS_SERVER_IDENTITY_TOKEN", from);
  const serviceAccountId = env("SECRETS_SERVER_SERVICE_ACCOUNT", from);
  if (tokenFile !== undefined && envToken) {
    throw new CliError(
      "Both --token-file and SECRETS_SERVER_TOKEN are set. Use one: unset SECRETS_SERVER_TOKEN or drop --token-file.",
      EXIT.usage,
    );
  }
  if ((tokenFile !== undefined || envToken) && identityToken) {
    throw new CliError(
      `Both a service token (${tokenFile !== undefined ? "--token-file" : "SECRETS_SERVER_TOKEN"}) and SECRETS_SERVER_IDENTITY_TOKEN are set. Use one of them.`,
      EXIT.usage,
    );
  }
  if (tokenFile !== undefined) return MachineAuth.fromServiceToken(readTokenFile(tokenFile), `--token-file ${tokenFile}`);
  if (envToken) return MachineAuth.fromServiceToken(checkServiceToken(envToken, "SECRETS_SERVER_TOKEN"), "SECRETS_SERVER_TOKEN");

  const requestUrl = env("ACTIONS_ID_TOKEN_REQUEST_URL", from);
  const requestToken = env("ACTIONS_ID_TOKEN_REQUEST_TOKEN", from);
  if (identityToken && !serviceAccountId) {
    throw new CliError(
      "SECRETS_SERVER_IDENTITY_TOKEN needs SECRETS_SERVER_SERVICE_ACCOUNT: the id of the service account that trusts the token's issuer.",
      EXIT.usage,
    );
  }
  if (!serviceAccountId) return undefined;
  if (!UUID.test(serviceAccountId)) {
    throw new CliError(
      "SECRETS_SERVER_SERVICE_ACCOUNT must be the service account's id (a UUID, shown in the web UI and the API), not its name.",
      EXIT.usage,
    );
  }
  if (identityToken) {
    if (!JWT.test(identityToken))
      throw new CliError("SECRETS_SERVER_IDENTITY_TOKEN is not a JWT (three base64url parts joined by dots).", EXIT.usage);
    return MachineAuth.fromIdentity(serviceAccountId, { from: "env", jwt: identityToken });
  }
  if (requestUrl && requestToken) {
    const audience = env("SECRETS_SERVER_AUDIENCE", from);
    return MachineAuth.fromIdentity(serviceAccountId, { from: "github", requestUrl, requestToken, audience });
  }
  throw new CliError(
    "SECRETS_SERVER_SERVICE_ACCOUNT is set but there is no identity token to exchange: set SECRETS_SERVER_IDENTITY_TOKEN, " +
      "or in GitHub Actions give the job `permissions: id-token: write` (which sets ACTIONS_ID_TOKEN_REQUEST_URL and ACTIONS_ID_TOKEN_REQUEST_TOKEN).",
    EXIT.usage,
  );
}

/** The token's shape only; the message never quotes it. */
function checkServiceToken(token: string, source: string): string {
  if (!SERVICE_TOKEN.test(token)) {
    throw new CliError(
      `${source} does not hold a service token: expected svc_st_ followed by the rest of the token, on one line.`,
      EXIT.usage,
    );
  }
  return token;
}

function readTokenFile(file: string): string {
  const full = path.resolve(file);
  let text: string;
  try {
    const stat = fs.statSync(full);
    if (!stat.isFile()) throw new CliError(`--token-file ${file} is not a file.`, EXIT.usage);
    if (stat.size > TOKEN_FILE_MAX_BYTES) throw new CliError(`--token-file ${file} is too large to hold a service token.`, EXIT.usage);
    // Group read is allowed (systemd's LoadCredential and shared service groups); anyone
    // else reading it, or anyone but the owner writing it, is worth a word but not a refusal:
    // a container's mounted secrets are 0444 by default, with nobody else there to read them.
    if (process.platform !== "win32" && (stat.mode & 0o022 || stat.mode & 0o004)) {
      process.stderr.write(
        `Warning: ${file} is ${stat.mode & 0o004 ? "readable by every user" : "writable by others"} (mode 0${(stat.mode & 0o777).toString(8)}). ` +
          `A service token file should be chmod 600 (systemd's LoadCredential gives 0400).\n`,
      );
    }
    text = fs.readFileSync(full, "utf8");
  } catch (error) {
    if (error instanceof CliError) throw error;
    throw new CliError(
      `Cannot read --token-file ${file}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}.`,
      EXIT.usage,
    );
  }
  const token = text.trim();
  if (!token) throw new CliError(`--token-file ${file} is empty.`, EXIT.usage);
  return checkServiceToken(token, `--token-file ${file}`);
}

/** GitHub Actions: the job's identity token, requested for the audience the trust names. */
async function githubIdentityToken(requestUrl: string, requestToken: string, audience: string): Promise<string> {
  let url: URL;
  try {
    url = new URL(requestUrl);
  } catch {
    throw new CliError("ACTIONS_ID_TOKEN_REQUEST_URL is not a URL.", EXIT.usage);
  }
  // The request token is a credential of the job: never in clear text across a network.
  if (url.protocol !== "https:" && !(url.protocol === "http:" && isLoopbackHost(url.hostname))) {
    throw new CliError("ACTIONS_ID_TOKEN_REQUEST_URL must be an https URL.", EXIT.usage);
  }
  // GitHub's URL already carries a query (api-version); appended as text, so its own
  // parameters are sent exactly as given.
  const withAudience = `${requestUrl}${url.search ? "&" : "?"}audience=${encodeURIComponent(audience)}`;
  let res: HttpAnswer;
  let body: unknown;
  try {
    res = await httpRequest(withAudience, {
      headers: { authorization: `Bearer ${requestToken}`, accept: "application/json", "user-agent": "secrets-server-cli" },
      timeoutMs: GITHUB_TIMEOUT_MS,
    });
    try {
      body = JSON.parse(res.text);
    } catch {
      body = undefined;
    }
  } catch (error) {
    throw new CliError(`Could not get the job's identity token from GitHub Actions (${failureReason(error)}).`, EXIT.unreachable);
  }
  const value = (body as { value?: unknown } | undefined)?.value;
  if (res.status !== 200 || typeof value !== "string" || !JWT.test(value)) {
    throw new CliError(
      `GitHub Actions did not give the job an identity token (HTTP ${res.status}). Does the job have \`permissions: id-token: write\`?`,
      EXIT.auth,
    );
  }
  return value;
}

async function exchange(server: string, serviceAccountId: string, identity: IdentitySource): Promise<string> {
  const audience = (identity.from === "github" && identity.audience) || server;
  const jwt = identity.from === "env" ? identity.jwt : await githubIdentityToken(identity.requestUrl, identity.requestToken, audience);
  const res = await post(server, "/api/auth/workload/token", { serviceAccountId, token: jwt });
  if (res.status === 401) {
    throw new CliError(
      `${server} did not accept the identity token for service account ${serviceAccountId}. Check that the account id is right and that one of ` +
        `its trusts matches the token: issuer, audience${identity.from === "github" ? ` (requested: ${audience})` : ""}, subject and claims. ` +
        `The server's log says which check failed.`,
      EXIT.auth,
    );
  }
  const accessToken = (res.body as { accessToken?: unknown } | undefined)?.accessToken;
  if (res.status !== 200 || typeof accessToken !== "string" || !SERVICE_TOKEN.test(accessToken)) {
    const message = typeof res.body?.error === "string" ? printable(res.body.error) : `HTTP ${res.status}`;
    // 502/503/504 never come here (send() answers them as unreachable): any other status is a failure.
    throw new CliError(`The identity exchange at ${server} failed: ${message}`, EXIT.failed);
  }
  return accessToken;
}
