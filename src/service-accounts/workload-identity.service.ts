import crypto from "node:crypto";
import { createLocalJWKSet, decodeJwt, type JWTPayload, type JWTVerifyGetKey, type JWTVerifyOptions, jwtVerify } from "jose";
import type { Logger } from "pino";
import type { AuditWriter } from "../audit/audit.writer.ts";
import { dropStale, makeRoom } from "../core/bounded-map.ts";
import type { Clock } from "../core/clock.ts";
import { hashToken, randomToken } from "../core/crypto.ts";
import { HttpError } from "../core/errors.ts";
import { failureReason, httpRequest } from "../core/http-client.ts";
import { isAllowedKeySetUrl } from "../core/service-account-rules.ts";
import { type Store, writeTransaction } from "../core/store.ts";
import { UUID } from "../core/text.ts";
import type { ServiceAccountsRepo, TrustRow } from "./service-accounts.repo.ts";
import { accountCaller, WORKLOAD_TOKEN_PREFIX } from "./service-accounts.service.ts";

export const IDENTITY_TOKEN_REFUSED = "The identity token was not accepted.";

const ACCESS_TOKEN_SECONDS = 15 * 60;
const FETCH_TIMEOUT_MS = 5000;
// An unknown kid refetches the key set, at most once per 30 s, and an issuer whose
// configuration or key set could not be fetched is not asked again for 30 s: a stream of
// made-up kids, or of tokens naming an issuer that is down, must not turn this server into
// a load generator against the issuer.
const JWKS_COOLDOWN_MS = 30_000;
const JWKS_MAX_AGE_MS = 10 * 60 * 1000;
/**
 * Issuers whose key sets (and failures) are held at most. Any signed-in person can name
 * issuers, as the owner of a project of their own, and each key set may weigh up to
 * ISSUER_DOCUMENT_MAX_BYTES: without a bound, made-up issuers would fill the memory.
 */
const MAX_ISSUERS_HELD = 256;
const CLOCK_TOLERANCE_SECONDS = 60;
const AUDIT_INTERVAL_MS = 60 * 1000;
// Asymmetric only: "none" is never accepted by jwtVerify, and an HMAC key would be a
// secret shared with every holder of the public key set.
const ALGORITHMS = ["RS256", "ES256", "EdDSA"];
// A token without a kid, when several keys of the set fit its algorithm (an issuer in the
// middle of a rotation), is tried with each of them, up to this many.
const KEYS_TRIED_WITHOUT_KID = 8;

/** A failure whose reason goes to the log; the client only ever sees IDENTITY_TOKEN_REFUSED. */
class Refused extends Error {}

/**
 * `*` matches any run of characters (none included); everything else literally. Matched
 * without a regular expression: the subject comes from the token, and a pattern of many
 * stars as a regex could backtrack for a long time.
 */
function matchesSubject(pattern: string, subject: string): boolean {
  const parts = pattern.split("*");
  if (parts.length === 1) return pattern === subject;
  const first = parts[0]!;
  const last = parts.at(-1)!;
  if (subject.length < first.length + last.length || !subject.startsWith(first) || !subject.endsWith(last)) return false;
  // Leftmost placement of each middle part is always safe when only `*` is special.
  const end = subject.length - last.length;
  let position = first.length;
  for (const part of parts.slice(1, -1)) {
    const found = subject.indexOf(part, position);
    if (found === -1 || found + part.length > end) return false;
    position = found + part.length;
  }
  return true;
}

function audienceMatches(aud: JWTPayload["aud"], audience: string): boolean {
  return typeof aud === "string" ? aud === audience : Array.isArray(aud) && aud.includes(audience);
}

function trustMatches(trust: TrustRow, payload: JWTPayload): boolean {
  if (!audienceMatches(payload.aud, trust.audience)) return false;
  if (typeof payload.sub !== "string" || !matchesSubject(trust.subject, payload.sub)) return false;
  const claims = JSON.parse(trust.claims) as Record<string, string>;
  return Object.entries(claims).every(([name, value]) => payload[name] === value);
}

interface KeySet {
  jwksUri: string;
  keys: JWTVerifyGetKey;
  /** When the configuration was discovered: after JWKS_MAX_AGE_MS it is discovered again. */
  discoveredAt: number;
  /** When the key set was last fetched: an unknown kid refetches it at most once per cooldown. */
  fetchedAt: number;
}

interface Deps {
  db: Store;
  repo: ServiceAccountsRepo;
  audit: AuditWriter;
  clock: Clock;
  log: Pick<Logger, "warn">;
}

/**
 * The most an issuer's configuration or key set may weigh. Real ones are a few KiB; any
 * signed-in person can name an issuer (as a project's owner), and the exchange needs no
 * credential, so an answer is never read whole into memory past this.
 */
export const ISSUER_DOCUMENT_MAX_BYTES = 256 * 1024;

/** A GET of the issuer's JSON, with no redirect followed, a bounded wait and a bounded size. */
async function fetchJson(url: string): Promise<unknown> {
  const answer = await httpRequest(url, {
    headers: { accept: "application/json" },
    timeoutMs: FETCH_TIMEOUT_MS,
    maxBytes: ISSUER_DOCUMENT_MAX_BYTES,
  });
  if (answer.status !== 200) throw new Error(`answered ${answer.status}`);
  return JSON.parse(answer.text);
}

export function createWorkloadIdentityService({ db, repo, audit, clock, log }: Deps) {
  // Per issuer: its discovered key set. The times are the injected clock's, so the cache
  // age and the cooldown follow the same time as every other rule of the server.
  const keySets = new Map<string, KeySet>();
  // Per issuer: when fetching its configuration or key set last failed.
  const failedAt = new Map<string, number>();
  const now = () => clock.now().getTime();

  function isCoolingDown(issuer: string): boolean {
    const at = failedAt.get(issuer);
    return at !== undefined && now() - at < JWKS_COOLDOWN_MS;
  }

  function fetchFailed(issuer: string, reason: string): Refused {
    failedAt.delete(issuer);
    // A cooldown under way is never evicted: made-up issuers failing in turn would otherwise
    // end a real one's early. Full of them, a new failure is not remembered.
    dropStale(failedAt, (at) => now() - at >= JWKS_COOLDOWN_MS);
    if (failedAt.size < MAX_ISSUERS_HELD) failedAt.set(issuer, now());
    return new Refused(reason);
  }

  async function fetchKeys(issuer: string, jwksUri: string): Promise<JWTVerifyGetKey> {
    let body: unknown;
    try {
      body = await fetchJson(jwksUri);
    } catch (error) {
      throw fetchFailed(issuer, `the issuer's key set could not be fetched (${failureReason(error)})`);
    }
    try {
      return createLocalJWKSet(body as Parameters<typeof createLocalJWKSet>[0]);
    } catch {
      throw fetchFailed(issuer, "the issuer's key set is not a JSON Web Key Set");
    }
  }

  async function discover(issuer: string): Promise<KeySet> {
    let document: { issuer?: unknown; jwks_uri?: unknown };
    try {
      document = (await fetchJson(`${issuer.replace(/\/+$/, "")}/.well-known/openid-configuration`)) as typeof document;
    } catch (error) {
      throw fetchFailed(issuer, `the issuer's OpenID configuration could not be fetched (${failureReason(error)})`);
    }
    if (document?.issuer !== issuer) throw fetchFailed(issuer, "the issuer's OpenID configuration names another issuer");
    if (typeof document.jwks_uri !== "string" || !isAllowedKeySetUrl(document.jwks_uri, issuer)) {
      throw fetchFailed(issuer, "the issuer's jwks_uri is not https (or http on a loopback host, for an issuer there)");
    }
    const keys = await fetchKeys(issuer, document.jwks_uri);
    failedAt.delete(issuer);
    const keySet = { jwksUri: document.jwks_uri, keys, discoveredAt: now(), fetchedAt: now() };
    keySets.delete(issuer);
    makeRoom(keySets, MAX_ISSUERS_HELD, (held) => now() - held.discoveredAt >= JWKS_MAX_AGE_MS);
    keySets.set(issuer, keySet);
    return keySet;
  }

  // Per issuer: the discovery under way, which exchanges arriving meanwhile (a fleet of CI
  // jobs at once) wait for instead of each fetching the issuer's documents again.
  const discovering = new Map<string, Promise<KeySet>>();

  function discoverOnce(issuer: string): Promise<KeySet> {
    let pending = discovering.get(issuer);
    if (!pending) {
      pending = discover(issuer).finally(() => discovering.delete(issuer));
      discovering.set(issuer, pending);
    }
    return pending;
  }

  /** The key lookup for a token: held keys first; an unknown kid refetches once per cooldown (a rotation at the issuer). */
  async function keySetOf(issuer: string): Promise<JWTVerifyGetKey> {
    const cached = keySets.get(issuer);
    const isFresh = cached !== undefined && now() - cached.discoveredAt < JWKS_MAX_AGE_MS;
    if (isCoolingDown(issuer)) {
      // Keys already held still verify; nothing is fetched until the cooldown ends.
      if (isFresh) return cached.keys;
      throw new Refused("fetching from the issuer failed less than the cooldown ago; not tried again yet");
    }
    const keySet = isFresh ? cached : await discoverOnce(issuer);
    return async (header, token) => {
      try {
        return await keySet.keys(header, token);
      } catch (error) {
        const unknownKey = (error as { code?: string }).code === "ERR_JWKS_NO_MATCHING_KEY";
        if (!unknownKey || now() - keySet.fetchedAt < JWKS_COOLDOWN_MS || isCoolingDown(issuer)) throw error;
        keySet.fetchedAt = now();
        keySet.keys = await fetchKeys(issuer, keySet.jwksUri);
        return keySet.keys(header, token);
      }
    };
  }

  /**
   * jwtVerify against the issuer's keys. jose refuses a token without a kid that more than
   * one key fits (ERR_JWKS_MULTIPLE_MATCHING_KEYS) and hands the candidates with the error,
   * for the caller to try: the first whose signature verifies decides, claims included.
   */
  async function verifyWithKeySet(jwt: string, keys: JWTVerifyGetKey, options: JWTVerifyOptions) {
    try {
      return await jwtVerify(jwt, keys, options);
    } catch (error) {
      if ((error as { code?: string }).code !== "ERR_JWKS_MULTIPLE_MATCHING_KEYS") throw error;
      let failure: unknown = error;
      let tried = 0;
      for await (const key of error as unknown as AsyncIterable<CryptoKey>) {
        if (++tried > KEYS_TRIED_WITHOUT_KID) break;
        try {
          return await jwtVerify(jwt, key, options);
        } catch (next) {
          if ((next as { code?: string }).code !== "ERR_JWS_SIGNATURE_VERIFICATION_FAILED") throw next;
          failure = next;
        }
      }
      throw failure;
    }
  }

  async function verify(serviceAccountId: string, jwt: string): Promise<{ payload: JWTPayload; trust: TrustRow }> {
    const account = await repo.findAccountById(serviceAccountId);
    if (!account) throw new Refused("no such service account");
    let unverified: JWTPayload;
    try {
      unverified = decodeJwt(jwt);
    } catch {
      throw new Refused("not a JWT");
    }
    // The issuer picks the trusts to try; nothing else of the unverified token is believed.
    const trusts = (await repo.listTrusts(account.id)).filter((t) => t.issuer === unverified.iss);
    if (trusts.length === 0) throw new Refused("no trust of the account names the token's issuer");
    const issuer = trusts[0]!.issuer;
    let payload: JWTPayload;
    try {
      ({ payload } = await verifyWithKeySet(jwt, await keySetOf(issuer), {
        issuer,
        algorithms: ALGORITHMS,
        clockTolerance: CLOCK_TOLERANCE_SECONDS,
        requiredClaims: ["exp", "aud", "sub"],
        currentDate: clock.now(),
      }));
    } catch (error) {
      if (error instanceof Refused) throw error;
      const code = (error as { code?: string }).code ?? (error as Error).name;
      throw new Refused(`verification failed: ${code}: ${(error as Error).message}`);
    }
    // jose checks iat only against a maximum age; the exchange gives iat the same 60 s
    // leeway as nbf, so a token issued in the future is refused.
    if (typeof payload.iat === "number" && payload.iat > clock.now().getTime() / 1000 + CLOCK_TOLERANCE_SECONDS) {
      throw new Refused("the token's iat is in the future");
    }
    const trust = trusts.find((t) => trustMatches(t, payload));
    if (!trust) throw new Refused("the token's audience, subject or claims match no trust of the account");
    return { payload, trust };
  }

  return {
    async exchange(input: {
      serviceAccountId: unknown;
      token: unknown;
    }): Promise<{ accessToken: string; tokenType: "Bearer"; expiresIn: number }> {
      const { serviceAccountId, token } = input;
      // Only an id's shape goes to the database (PostgreSQL would fail on a NUL) or the log.
      const accountId = typeof serviceAccountId === "string" && UUID.test(serviceAccountId) ? serviceAccountId : undefined;
      let verified: { payload: JWTPayload; trust: TrustRow };
      try {
        if (accountId === undefined) throw new Refused("no service account id");
        if (typeof token !== "string" || token.length > 16_384) throw new Refused("no token");
        verified = await verify(accountId, token);
      } catch (error) {
        if (!(error instanceof Refused)) throw error;
        // The reason, never the token: the log must not become a store of identity tokens.
        log.warn(
          {
            serviceAccountId: accountId ?? null,
            reason: error.message,
          },
          "workload identity exchange refused",
        );
        throw new HttpError(401, IDENTITY_TOKEN_REFUSED);
      }
      const { payload, trust } = verified;
      const now = clock.now();
      // 15 minutes, never past the identity token's own expiry.
      const expiresAtMs = Math.min(now.getTime() + ACCESS_TOKEN_SECONDS * 1000, payload.exp! * 1000);
      const expiresIn = Math.floor((expiresAtMs - now.getTime()) / 1000);
      if (expiresIn <= 0) {
        log.warn(
          { serviceAccountId, reason: "the identity token expires within the clock tolerance" },
          "workload identity exchange refused",
        );
        throw new HttpError(401, IDENTITY_TOKEN_REFUSED);
      }
      const accessToken = `${WORKLOAD_TOKEN_PREFIX}${randomToken(32)}`;
      const tokenId = crypto.randomUUID();
      const expiresAt = new Date(expiresAtMs).toISOString();
      await writeTransaction(db, async () => {
        // The account or the trust may have gone while the keys were fetched.
        const account = await repo.findAccountById(trust.serviceAccountId);
        const current = account && (await repo.listTrusts(account.id)).find((t) => t.id === trust.id);
        if (!account || !current) {
          log.warn(
            { serviceAccountId, reason: "the account or its trust was deleted during the exchange" },
            "workload identity exchange refused",
          );
          throw new HttpError(401, IDENTITY_TOKEN_REFUSED);
        }
        const nowIso = now.toISOString();
        await repo.deleteExpiredTokens(account.id, nowIso);
        await repo.insertToken({
          id: tokenId,
          serviceAccountId: account.id,
          kind: "workload",
          tokenHash: hashToken(accessToken),
          name: `workload ${trust.issuer}`,
          trustId: trust.id,
          createdAt: nowIso,
          expiresAt,
        });
        // One event a minute per trust: a busy pipeline must not drown the log.
        if (current.lastAuditedAt === null || now.getTime() - Date.parse(current.lastAuditedAt) >= AUDIT_INTERVAL_MS) {
          await repo.markTrustAudited(trust.id, nowIso);
          await audit.record(accountCaller(account, "workload", tokenId, expiresAt), {
            projectId: account.projectId,
            action: "service_account.token_exchanged",
            targetType: "service_account",
            targetId: account.id,
            metadata: { trustId: trust.id, issuer: trust.issuer, subject: payload.sub, expiresAt },
          });
        }
      });
      return { accessToken, tokenType: "Bearer", expiresIn };
    },
  };
}

export type WorkloadIdentityService = ReturnType<typeof createWorkloadIdentityService>;
