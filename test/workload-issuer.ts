// A workload identity issuer for tests (as GitHub Actions or GitLab CI would be): a small
// HTTP server on 127.0.0.1 publishing its OpenID configuration and key set, and a signer
// for its JWTs (jose). The keys can be rotated and the endpoints made to fail.
import http from "node:http";
import type { AddressInfo } from "node:net";
import type { TestContext } from "node:test";
import { type CryptoKey, exportJWK, generateKeyPair, type JWK, SignJWT } from "jose";

export const AUDIENCE = "https://secrets.example.test";
export const SUBJECT = "repo:acme/api:ref:refs/heads/main";

export interface SigningKey {
  kid: string;
  alg: "RS256" | "ES256" | "EdDSA";
  privateKey: CryptoKey;
  jwk: JWK;
}

export async function signingKey(kid: string, alg: "RS256" | "ES256" | "EdDSA"): Promise<SigningKey> {
  const { privateKey, publicKey } = await generateKeyPair(alg);
  return { kid, alg, privateKey, jwk: { ...(await exportJWK(publicKey)), kid, alg, use: "sig" } };
}

/** An OpenID issuer: /.well-known/openid-configuration and /jwks, with keys the test can rotate. */
export async function startIssuer(t: TestContext) {
  const published: SigningKey[] = [];
  let jwksFetches = 0;
  let discoveryFetches = 0;
  let redirectDiscovery = false;
  let failing: "discovery" | "jwks" | "hang" | "huge" | "huge-chunked" | null = null;
  const server = http.createServer((req, res) => {
    const send = (status: number, body: unknown, headers: Record<string, string> = {}) => {
      res.writeHead(status, { "content-type": "application/json", ...headers });
      res.end(JSON.stringify(body));
    };
    if (req.url === "/.well-known/openid-configuration") {
      discoveryFetches += 1;
      if (failing === "discovery") return send(503, {});
      // To a copy of the real configuration: a client that followed it would be served.
      if (redirectDiscovery) return send(302, {}, { location: `${issuer.url}/moved/openid-configuration` });
      return send(200, { issuer: issuer.url, jwks_uri: `${issuer.url}/jwks` });
    }
    if (req.url === "/moved/openid-configuration") return send(200, { issuer: issuer.url, jwks_uri: `${issuer.url}/jwks` });
    if (req.url === "/jwks") {
      jwksFetches += 1;
      if (failing === "jwks") return send(503, {});
      // Accepts the request and never answers: the server must give up on its own.
      if (failing === "hang") return;
      // A key set of 1 MiB, with its length announced, or in chunks without one.
      if (failing === "huge" || failing === "huge-chunked") {
        const body = JSON.stringify({ keys: published.map((k) => k.jwk), padding: "x".repeat(1024 * 1024) });
        if (failing === "huge")
          res.writeHead(200, { "content-type": "application/json", "content-length": String(Buffer.byteLength(body)) });
        else res.writeHead(200, { "content-type": "application/json" });
        for (let at = 0; at < body.length; at += 64 * 1024) res.write(body.slice(at, at + 64 * 1024));
        return res.end();
      }
      return send(200, { keys: published.map((k) => k.jwk) });
    }
    send(404, {});
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  t.after(() => {
    server.closeAllConnections();
    return new Promise<void>((resolve) => server.close(() => resolve()));
  });
  const issuer = {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    publish(key: SigningKey) {
      published.push(key);
    },
    get jwksFetches() {
      return jwksFetches;
    },
    get discoveryFetches() {
      return discoveryFetches;
    },
    /** Answers 503 to the configuration or the key set (never answers it: "hang"; 1 MiB of it: "huge", "huge-chunked") until set back to null. */
    set failing(value: "discovery" | "jwks" | "hang" | "huge" | "huge-chunked" | null) {
      failing = value;
    },
    set redirectDiscovery(value: boolean) {
      redirectDiscovery = value;
    },
    /** A JWT from this issuer; `claims` override the defaults (null removes one); `kid: null` leaves the header without one. */
    async sign(key: SigningKey, claims: Record<string, unknown> = {}, options: { expiresInSeconds?: number; kid?: string | null } = {}) {
      const now = Math.floor(Date.now() / 1000);
      const payload: Record<string, unknown> = {
        iss: issuer.url,
        aud: AUDIENCE,
        sub: SUBJECT,
        iat: now,
        exp: now + (options.expiresInSeconds ?? 3600),
        repository: "acme/api",
        ref: "refs/heads/main",
        ...claims,
      };
      for (const [name, value] of Object.entries(payload)) if (value === null) delete payload[name];
      const kid = options.kid === null ? {} : { kid: options.kid ?? key.kid };
      return new SignJWT(payload).setProtectedHeader({ alg: key.alg, ...kid }).sign(key.privateKey);
    },
  };
  return issuer;
}

export type Issuer = Awaited<ReturnType<typeof startIssuer>>;
