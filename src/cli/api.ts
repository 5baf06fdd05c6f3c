import { failureReason, type HttpAnswer, HttpFailure, httpRequest } from "../core/http-client.ts";
import { isLoopbackHost } from "../core/loopback.ts";
import { printable } from "../core/text.ts";
import { forgetServer, readCredentials, type ServerCredentials, withCredentialsLock, writeCredentials } from "./credentials.ts";
import { CliError, EXIT, UnreachableError } from "./errors.ts";

export const DEFAULT_SERVER = "http://localhost:8080";
const REQUEST_TIMEOUT_MS = 30_000;
// Refresh a little before the recorded expiry, so a token does not die in flight.
const EXPIRY_MARGIN_MS = 30_000;

// biome-ignore lint/suspicious/noExplicitAny: a body is whatever the caller reads of it; callers that care name T
export interface ApiResponse<T = any> {
  status: number;
  body: T;
  /** A response header by name, or null. */
  header(name: string): string | null;
}

/**
 * `https://host/` and `https://host` are the same server; anything but http(s) is refused.
 * A bare `host` or `host:port` gets https, or http on a loopback address (a local server has
 * no certificate, and nothing crosses the network).
 */
export function normalizeServerUrl(input: string): string {
  const given = input.trim();
  let url: URL;
  try {
    url = new URL(given.includes("://") ? given : withScheme(given));
  } catch {
    throw new CliError(
      `"${printable(input)}" is not a URL. Use the server's address, for example https://secrets.example.com.`,
      EXIT.usage,
    );
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    throw new CliError(`The server URL must start with http:// or https:// (got "${printable(input)}").`, EXIT.usage);
  }
  // Tokens and values would cross the network in clear text; the server demands https for
  // APP_URL in production by the same rule.
  if (url.protocol === "http:" && !isLoopbackHost(url.hostname) && process.env.SECRETS_SERVER_ALLOW_HTTP !== "1") {
    throw new CliError(
      `${url.origin} uses plain http, which would send your tokens and secrets unencrypted. Use https, ` +
        `or set SECRETS_SERVER_ALLOW_HTTP=1 if this network is trusted.`,
      EXIT.usage,
    );
  }
  return url.origin + url.pathname.replace(/\/+$/, "");
}

function withScheme(hostAndPort: string): string {
  const url = new URL(`http://${hostAndPort}`);
  return `${isLoopbackHost(url.hostname) ? "http" : "https"}://${hostAndPort}`;
}

/** `login` alone when it would go to `server` (see resolveServer's order), else with --server. */
function loginHint(server: string): string {
  let plain: string | undefined;
  try {
    plain = process.env.SECRETS_SERVER_URL
      ? normalizeServerUrl(process.env.SECRETS_SERVER_URL)
      : (readCredentials().defaultServer ?? DEFAULT_SERVER);
  } catch {
    plain = undefined;
  }
  return server === plain ? "secrets-server login" : `secrets-server login --server ${server}`;
}

function sessionEndedError(server: string): CliError {
  return new CliError(`Your CLI session for ${server} has expired or was revoked. Run: ${loginHint(server)}`, EXIT.auth);
}

/** Turns an error answer into the CLI's message and exit code; the server's own sentence is kept. */
export function errorFor(res: ApiResponse, server: string): CliError {
  // The server's sentence is shown, never obeyed: no control character reaches the terminal.
  const message = typeof res.body?.error === "string" ? printable(res.body.error) : `The server answered ${res.status}.`;
  if (res.status === 401) return sessionEndedError(server);
  if (res.status === 403 || res.status === 404) return new CliError(message, EXIT.denied);
  // Only a server that is not there (a proxy's 502/503/504) or cannot serve (our own 503: disk
  // full, stopping) lets `--fallback` use the saved copy: a 500 is the server answering.
  if (res.status === 502 || res.status === 503 || res.status === 504) return new UnreachableError(`${server} failed: ${message}`);
  // Any other 5xx is the server answering with a failure (a value it could not decrypt), not an outage.
  if (res.status >= 500) return new CliError(`${server} failed: ${message}`, EXIT.failed);
  return new CliError(message, EXIT.failed);
}

async function send(
  server: string,
  method: string,
  path: string,
  body: unknown,
  token: string | undefined,
  extraHeaders: Record<string, string> = {},
): Promise<ApiResponse> {
  const headers: Record<string, string> = { accept: "application/json", "user-agent": "secrets-server-cli", ...extraHeaders };
  if (body !== undefined) headers["content-type"] = "application/json";
  if (token) headers.authorization = `Bearer ${token}`;
  let res: HttpAnswer;
  try {
    res = await httpRequest(server + path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      timeoutMs: REQUEST_TIMEOUT_MS,
    });
  } catch (error) {
    // Reached, but the answer was too large to be one of ours: no fallback copy stands in for it.
    if (error instanceof HttpFailure && error.code === "TOO_LARGE") throw new CliError(`Stopped reading ${server}: ${error.message}.`);
    // Something answered (a proxy asking for a sign-in, an address that moved): not an outage either.
    if (error instanceof HttpFailure && error.code === "REDIRECT") {
      throw new CliError(
        `${server} answered with ${printable(error.message)}, which the CLI does not follow. ` +
          "If a proxy in front of the server asks for a sign-in, let the CLI's requests through; if the server moved, use its new URL.",
      );
    }
    throw new UnreachableError(`Could not reach ${server} (${printable(failureReason(error))}). Check the URL and your network.`);
  }
  const { text } = res;
  if (res.status === 502 || res.status === 503 || res.status === 504) {
    // Our own 503 (disk full, shutting down) says why in { error }; a proxy's page does not.
    throw new UnreachableError(`${server} is unavailable (HTTP ${res.status}): ${serverSentence(text) ?? "Try again shortly."}`);
  }
  let parsed: unknown = text;
  if ((res.header("content-type") ?? "").includes("application/json") && text) {
    try {
      parsed = JSON.parse(text);
    } catch {
      parsed = text;
    }
  }
  return { status: res.status, body: parsed, header: res.header };
}

/**
 * The body of an answer that must be the API's JSON object. Anything else is a page at the
 * wrong address (the UI answers every path outside /api/ with its page, so a server URL
 * with a path in it gets HTML), or a proxy's: said so, rather than failing later on a
 * field that is not there.
 */
export function apiBody(res: ApiResponse, server: string, path: string): Record<string, unknown> {
  if (typeof res.body === "object" && res.body !== null && !Array.isArray(res.body)) return res.body as Record<string, unknown>;
  const type = res.header("content-type")?.split(";")[0]?.trim() || "no content type";
  throw new CliError(
    `${server} answered ${path.split("?")[0]} with ${printable(type).slice(0, 60)}, not the API's JSON: is ${server} the secrets server's address?`,
    EXIT.failed,
  );
}

/**
 * The tokens of a sign-in or a refresh, checked: an answer without them (a page at the wrong
 * address that says 200) would otherwise be saved as credentials that work nowhere. `email`
 * is "" when the answer has none (refresh keeps the one it had).
 */
export function tokensFrom(res: ApiResponse, server: string, path: string): ServerCredentials {
  const body = apiBody(res, server, path);
  const { email, accessToken, refreshToken, accessExpiresAt, refreshExpiresAt } = body;
  if (![accessToken, refreshToken, accessExpiresAt, refreshExpiresAt].every((field) => typeof field === "string" && field !== "")) {
    throw new CliError(
      `${server} answered ${path} without the tokens the API sends: is ${server} the secrets server's address?`,
      EXIT.failed,
    );
  }
  return {
    email: typeof email === "string" ? email : "",
    accessToken: accessToken as string,
    refreshToken: refreshToken as string,
    accessExpiresAt: accessExpiresAt as string,
    refreshExpiresAt: refreshExpiresAt as string,
  };
}

function serverSentence(text: string): string | undefined {
  try {
    const error = (JSON.parse(text) as { error?: unknown }).error;
    return typeof error === "string" && error.length > 0 ? printable(error.slice(0, 300)) : undefined;
  } catch {
    return undefined;
  }
}

/** Calls outside Api's refresh: the device flow and refresh (no token), logout (the token to end). */
export function post(server: string, path: string, body: unknown, token?: string): Promise<ApiResponse> {
  return send(server, "POST", path, body, token);
}

export function isExpired(credentials: ServerCredentials): boolean {
  return Date.parse(credentials.accessExpiresAt) - EXPIRY_MARGIN_MS <= Date.now();
}

/**
 * Exchanges the refresh token for a new pair, under the credentials lock. If another
 * process already refreshed (the file holds a different access token than `stale`), its
 * pair is used instead: presenting the same refresh token twice would revoke the session.
 */
export async function refreshCredentials(server: string, stale: string | undefined): Promise<ServerCredentials> {
  return withCredentialsLock(async () => {
    const data = readCredentials();
    const current = data.servers[server];
    if (!current) throw new CliError(`Not signed in to ${server}. Run: ${loginHint(server)}`, EXIT.auth);
    if (current.accessToken !== stale && !isExpired(current)) return current;
    const res = await post(server, "/api/cli/auth/refresh", { refreshToken: current.refreshToken });
    if (res.status === 401) {
      forgetServer(data, server);
      writeCredentials(data);
      throw sessionEndedError(server);
    }
    if (res.status !== 200) throw errorFor(res, server);
    const tokens = tokensFrom(res, server, "/api/cli/auth/refresh");
    const next: ServerCredentials = { ...tokens, email: tokens.email || current.email };
    data.servers[server] = next;
    writeCredentials(data);
    return next;
  });
}

/** A credential given to the process (a service token, a workload access token) instead of login's. */
export interface BearerSource {
  bearer(server: string): Promise<string>;
  /** Forgets a bearer that may have expired, so the next one is new; false when it cannot be renewed (a service token). */
  renew(): boolean;
  /** The error for a 401: what to check, never "run login". */
  refused(server: string): CliError;
}

/**
 * An authenticated client for one server: with login's credentials, refreshes by itself when
 * the access token has expired; with a machine credential, uses it and touches no file.
 */
export class Api {
  /** Read from credentials.json once, then kept: a command's requests share one read. */
  #credentials?: ServerCredentials;

  readonly server: string;
  readonly machine?: BearerSource;

  constructor(server: string, machine?: BearerSource) {
    this.server = server;
    this.machine = machine;
  }

  credentials(): ServerCredentials {
    if (this.#credentials) return this.#credentials;
    const found = readCredentials().servers[this.server];
    if (!found) throw new CliError(`Not signed in to ${this.server}. Run: ${loginHint(this.server)}`, EXIT.auth);
    return (this.#credentials = found);
  }

  /**
   * Sends with the access token; on an expired one (by our clock or the server's 401) refreshes once and retries.
   * A token another process refreshed meanwhile answers 401, and refreshCredentials then takes the file's newer pair.
   */
  async request(method: string, path: string, body?: unknown, headers?: Record<string, string>): Promise<ApiResponse> {
    if (this.machine) {
      let res = await send(this.server, method, path, body, await this.machine.bearer(this.server), headers);
      // A workload access token lasts 15 minutes: a long `run --watch` exchanges again.
      if (res.status === 401 && this.machine.renew()) {
        res = await send(this.server, method, path, body, await this.machine.bearer(this.server), headers);
      }
      if (res.status === 401) throw this.machine.refused(this.server);
      return res;
    }
    let credentials = this.credentials();
    if (isExpired(credentials)) credentials = this.#credentials = await refreshCredentials(this.server, credentials.accessToken);
    let res = await send(this.server, method, path, body, credentials.accessToken, headers);
    if (res.status === 401) {
      credentials = this.#credentials = await refreshCredentials(this.server, credentials.accessToken);
      res = await send(this.server, method, path, body, credentials.accessToken, headers);
      if (res.status === 401) throw sessionEndedError(this.server);
    }
    return res;
  }

  /** Like request, but any answer other than `expected`, with the API's JSON, becomes a CliError. */
  // biome-ignore lint/suspicious/noExplicitAny: as ApiResponse
  async expect<T = any>(expected: number, method: string, path: string, body?: unknown): Promise<T> {
    const res = await this.request(method, path, body);
    if (res.status !== expected) throw errorFor(res, this.server);
    return apiBody(res, this.server, path) as T;
  }
}
