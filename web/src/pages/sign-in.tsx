// Sign-in: the form of the configured provider. The dev form exists in development only;
// OIDC is a redirect to the identity provider; local accounts sign in with a password.
import { useEffect, useState } from "preact/hooks";
import { SIGN_IN_ERRORS, type SignInErrorCode } from "../../../src/sign-in/sign-in-errors.ts";
import { get, type ProviderInfo, post, type User } from "../api.ts";
import { ErrorText, messageOf, SubmitButton, useAction } from "../ui.tsx";
import { InvitationSummary } from "./invite.tsx";

/** The token of the invitation link that sent the visitor here, if one did (see rememberReturnTo). */
function invitationToken(): string {
  const target = sessionStorage.getItem("returnTo") ?? "";
  return target.startsWith("/invite#") ? target.slice("/invite#".length) : "";
}

export function SignInPage({ onSignedIn }: { onSignedIn(user: User): void }) {
  const [info, setInfo] = useState<ProviderInfo | undefined>(undefined);
  const [error, setError] = useState<string | undefined>(undefined);
  useEffect(() => {
    get<ProviderInfo>("/api/auth/provider").then(setInfo, (e) => setError(messageOf(e)));
  }, []);
  return (
    <main id="main" class="narrow sign-in">
      <h1>Sign in to Secrets</h1>
      {invitationToken() && (
        <section aria-label="Your invitation">
          <InvitationSummary token={invitationToken()} />
          <p class="muted small">Sign in with the e-mail address the invitation was sent to; you accept it on the next page.</p>
        </section>
      )}
      <ErrorText error={error ?? failedSignIn()} />
      {!info && !error && <p role="status">Loading…</p>}
      {info?.provider === "dev" && <DevSignIn onSignedIn={onSignedIn} />}
      {info?.provider === "oidc" && <OidcSignIn />}
      {info?.provider === "local" && <LocalSignIn onSignedIn={onSignedIn} />}
    </main>
  );
}

/**
 * The sign-in redirect reports failures as /sign-in?error=<code>. Only these fixed
 * sentences are shown, never text from the URL, so a crafted link cannot put words here.
 */
function failedSignIn(): string | undefined {
  const code = new URLSearchParams(window.location.search).get("error");
  if (!code) return undefined;
  return Object.hasOwn(SIGN_IN_ERRORS, code) ? SIGN_IN_ERRORS[code as SignInErrorCode] : "The sign-in did not complete. Try again.";
}

function DevSignIn({ onSignedIn }: { onSignedIn(user: User): void }) {
  const [email, setEmail] = useState("");
  const [name, setName] = useState("");
  const action = useAction();
  return (
    <form
      class="card"
      onSubmit={async (e) => {
        e.preventDefault();
        const result = await action.run(() =>
          post<{ user: User }>("/api/auth/dev/sign-in", { email, ...(name.trim() ? { name: name.trim() } : {}) }),
        );
        if (result) onSignedIn(result.user);
      }}
    >
      <p class="notice">Development sign-in: any e-mail address signs in without a password. It does not exist in production.</p>
      <label class="field">
        <span>E-mail address</span>
        <input type="email" name="email" required autoComplete="email" value={email} onInput={(e) => setEmail(e.currentTarget.value)} />
      </label>
      <label class="field">
        <span>Name (optional)</span>
        <input name="name" autoComplete="name" value={name} onInput={(e) => setName(e.currentTarget.value)} />
      </label>
      <ErrorText error={action.error} />
      <SubmitButton label="Sign in" busyLabel="Signing in…" busy={action.busy} />
    </form>
  );
}

/**
 * The sign-in redirect comes back to /sign-in (the app then goes on to the remembered
 * page): the remembered page may carry an invitation token in its fragment, which must
 * not travel through the identity provider in a query string.
 */
function OidcSignIn() {
  return (
    <div class="card stack">
      <a class="button primary" href="/api/auth/oidc/start?returnTo=%2Fsign-in">
        Sign in with your identity provider
      </a>
    </div>
  );
}

function LocalSignIn({ onSignedIn }: { onSignedIn(user: User): void }) {
  const [email, setEmail] = useState("");
  const [password, setPassword] = useState("");
  const action = useAction();
  return (
    <form
      class="card"
      onSubmit={async (e) => {
        e.preventDefault();
        const result = await action.run(() => post<{ user: User }>("/api/auth/local/sign-in", { email: email.trim(), password }));
        if (result) onSignedIn(result.user);
        else setPassword("");
      }}
    >
      <label class="field">
        <span>E-mail address</span>
        <input type="email" name="email" required autoComplete="username" value={email} onInput={(e) => setEmail(e.currentTarget.value)} />
      </label>
      <label class="field">
        <span>Password</span>
        <input
          type="password"
          name="password"
          required
          autoComplete="current-password"
          value={password}
          onInput={(e) => setPassword(e.currentTarget.value)}
        />
      </label>
      <ErrorText error={action.error} />
      <SubmitButton label="Sign in" busyLabel="Signing in…" busy={action.busy} />
      <p class="muted">Forgot your password, or no account yet? Ask your administrator for a link.</p>
    </form>
  );
}
