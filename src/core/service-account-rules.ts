// Service accounts' rules for the server and the web UI alike: what a workload identity
// trust may hold (the trust's check, the key set it fetches), so that the form refuses what
// the server would, with its own sentence; and the answer the account page tells apart.
import { isLoopbackHost } from "./loopback.ts";
import { isSingleLine } from "./text.ts";

export const SERVICE_ACCOUNT_NOT_FOUND = "Service account not found.";

/** The most characters (UTF-16 units) of a trust's issuer, audience, subject and each claim's value. */
export const TRUST_TEXT_MAX = 500;

/** https, or plain http on a loopback host (a test issuer, a sidecar), without credentials or a fragment; nothing else. */
function fetchableUrl(text: string): URL | undefined {
  // The URL parser drops tabs, line breaks and surrounding spaces, and escapes a NUL: an
  // issuer holding one would pass, and never equal a token's iss (PostgreSQL refuses NUL).
  if (!isSingleLine(text) || /\s/.test(text)) return undefined;
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return undefined;
  }
  if (url.username || url.password || url.hash) return undefined;
  return url.protocol === "https:" || (url.protocol === "http:" && isLoopbackHost(url.hostname)) ? url : undefined;
}

/** An issuer: a fetchable URL without a query (its configuration is found below its path). */
export function isAllowedIssuerUrl(text: string): boolean {
  const url = fetchableUrl(text);
  return url !== undefined && !url.search;
}

/**
 * The key set an issuer's configuration names: https, or http on a loopback host only for
 * an issuer that is itself there (a test issuer). An https issuer naming a local http
 * address would make this server fetch from its own machine's services. A query is allowed:
 * some providers name their key set with one (Okta's `/v1/keys?client_id=…`).
 */
export function isAllowedKeySetUrl(jwksUri: string, issuer: string): boolean {
  const url = fetchableUrl(jwksUri);
  if (!url) return false;
  return url.protocol === "https:" || new URL(issuer).protocol === "http:";
}
