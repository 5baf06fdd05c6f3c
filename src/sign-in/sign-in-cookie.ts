import crypto from "node:crypto";
import type { Config } from "../core/config.ts";
import { type Keyring, open, seal } from "../core/crypto.ts";

/**
 * A key for one purpose, derived from the current master key with HMAC, so no second
 * secret has to be configured and the master key itself never encrypts anything but keys.
 */
function deriveKey(keyring: Keyring, label: string): Buffer {
  return crypto.createHmac("sha256", keyring.key(keyring.currentVersion)).update(`secrets-server ${label}`).digest();
}

/**
 * Short-lived state of a sign-in in progress (OIDC state, nonce, PKCE verifier), kept in
 * an AES-256-GCM sealed cookie: the browser can neither read nor change it, and nothing
 * has to be stored on the server for a sign-in that may never come back.
 */
export function createSealedCookie<T extends object>(keyring: Keyring, config: Pick<Config, "isProduction">, purpose: string) {
  const key = deriveKey(keyring, `${purpose} cookie v1`);
  const aad = `cookie:${purpose}`;
  return {
    // __Host- (production, https): only this origin, path /, Secure; no Domain attribute.
    name: config.isProduction ? `__Host-secrets_${purpose}` : `secrets_${purpose}`,
    options(maxAgeSeconds: number) {
      return { path: "/", httpOnly: true, sameSite: "lax" as const, secure: config.isProduction, maxAge: maxAgeSeconds };
    },
    seal(value: T): string {
      return seal(key, JSON.stringify(value), aad).toString("base64url");
    },
    /** The value, or undefined when the cookie is missing, altered or sealed with another key. */
    open(text: string | undefined): T | undefined {
      if (!text || text.length > 4096) return undefined;
      try {
        return JSON.parse(open(key, Buffer.from(text, "base64url"), aad).toString("utf8")) as T;
      } catch {
        return undefined;
      }
    },
  };
}
