/** Who is making a request, resolved once per request from its credential. */
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
