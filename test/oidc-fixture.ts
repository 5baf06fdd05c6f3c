// A real OpenID Provider (the oidc-provider package) on loopback, with one test client and
// a few accounts, plus a tiny browser (one cookie jar, manual redirects) to walk the dance.
import http from "node:http";
import type { AddressInfo } from "node:net";
import type { TestContext } from "node:test";
import { Provider } from "oidc-provider";
import { storeCookies } from "./helpers.ts";

export interface TestAccount {
  email?: string;
  email_verified?: boolean;
  name?: string;
}

export interface TestProvider {
  issuer: string;
  clientId: string;
  clientSecret: string;
  accounts: Record<string, TestAccount>;
  /** The account the next login interaction signs in as. */
  loginAs: string;
  /** Answer the next login interaction by denying access instead. */
  deny: boolean;
  stop(): Promise<void>;
}

export async function startProvider(t: TestContext, redirectUri: string, accounts: Record<string, TestAccount>): Promise<TestProvider> {
  const server = http.createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const fixture: TestProvider = {
    issuer,
    clientId: "secrets-server-test",
    clientSecret: "test-client-secret-that-is-long-enough-0123456789",
    accounts,
    loginAs: Object.keys(accounts)[0]!,
    deny: false,
    async stop() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  const provider = new Provider(issuer, {
    clients: [
      {
        client_id: fixture.clientId,
        client_secret: fixture.clientSecret,
        redirect_uris: [redirectUri],
        grant_types: ["authorization_code"],
        response_types: ["code"],
      },
    ],
    claims: { openid: ["sub"], email: ["email", "email_verified"], profile: ["name"] },
    features: { devInteractions: { enabled: false } },
    pkce: { required: () => true },
    async findAccount(_ctx: unknown, sub: string) {
      const account = fixture.accounts[sub];
      if (!account) return undefined;
      return { accountId: sub, claims: async () => ({ sub, ...account }) };
    },
  });
  // Keep the test output clean of its development-only warnings.
  provider.on("server_error", () => {});
  const callback = provider.callback();
  server.on("request", async (req, res) => {
    try {
      if (!req.url?.startsWith("/interaction/")) return callback(req, res);
      const details = await provider.interactionDetails(req, res);
      if (fixture.deny) {
        return await provider.interactionFinished(
          req,
          res,
          { error: "access_denied", error_description: "The user said no." },
          { mergeWithLastSubmission: false },
        );
      }
      if (details.prompt.name === "login") {
        return await provider.interactionFinished(req, res, { login: { accountId: fixture.loginAs } }, { mergeWithLastSubmission: false });
      }
      const grant = new provider.Grant({ accountId: details.session.accountId, clientId: details.params.client_id });
      grant.addOIDCScope("openid email profile");
      const grantId = await grant.save();
      return await provider.interactionFinished(req, res, { consent: { grantId } }, { mergeWithLastSubmission: true });
    } catch (error) {
      res.statusCode = 500;
      res.end(String(error));
    }
  });
  t.after(() => fixture.stop());
  return fixture;
}

/**
 * What a browser says of a navigation from `from` to `url`: the provider's redirect back to
 * the callback is same-site here (another port of 127.0.0.1) and cross-site in real life;
 * the server refuses both on the API, except on the OpenID Connect routes.
 */
function fetchSite(url: string, from: string | undefined): string {
  if (from === undefined) return "none";
  const [to, at] = [new URL(url), new URL(from)];
  if (to.origin === at.origin) return "same-origin";
  return to.hostname === at.hostname ? "same-site" : "cross-site";
}

/** One cookie jar for every origin (as a browser does on one host name), redirects by hand. */
export class Browser {
  cookies = new Map<string, string>();

  /** `from`: the page that redirected here, which decides Sec-Fetch-Site as a browser would; none is a typed URL. */
  async get(url: string, from?: string): Promise<Response> {
    const headers: Record<string, string> = { "sec-fetch-site": fetchSite(url, from), "sec-fetch-mode": "navigate" };
    if (this.cookies.size > 0) headers.cookie = [...this.cookies].map(([k, v]) => `${k}=${v}`).join("; ");
    const res = await fetch(url, { headers, redirect: "manual" });
    storeCookies(this.cookies, res);
    return res;
  }

  /**
   * Follows redirects from `url` and returns the first response that is not a redirect, or
   * the redirect whose target matches `stopAt` (the URL is returned too).
   */
  async follow(url: string, stopAt?: (next: URL) => boolean): Promise<{ url: string; res: Response; location?: string }> {
    let current = url;
    let from: string | undefined;
    for (let hops = 0; hops < 20; hops++) {
      const res = await this.get(current, from);
      const location = res.headers.get("location");
      if (res.status < 300 || res.status >= 400 || !location) return { url: current, res };
      const next = new URL(location, current);
      if (stopAt?.(next)) return { url: current, res, location: next.href };
      await res.arrayBuffer();
      from = current;
      current = next.href;
    }
    throw new Error("too many redirects");
  }
}
