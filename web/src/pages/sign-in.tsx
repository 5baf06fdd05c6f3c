// Sign-in: the form of the configured provider. The dev form exists in development only;
// the OIDC button and the local-account form belong to their own issue (places marked).
import { useEffect, useState } from "preact/hooks";
import { get, post, type User } from "../api.ts";
import { ErrorText, messageOf, useAction } from "../ui.tsx";

interface ProviderInfo {
  provider: "dev" | "oidc" | "local";
  production: boolean;
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
      <ErrorText error={error} />
      {!info && !error && <p role="status">Loading…</p>}
      {info?.provider === "dev" && <DevSignIn onSignedIn={onSignedIn} />}
      {info?.provider === "oidc" && <OidcSignIn />}
      {info?.provider === "local" && <LocalSignIn onSignedIn={onSignedIn} />}
    </main>
  );
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
        const result = await action.run(() => post<{ user: User }>("/api/auth/dev/sign-in", { email, ...(name.trim() ? { name: name.trim() } : {}) }));
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
      <button type="submit" class="primary" disabled={action.busy}>
        {action.busy ? "Signing in…" : "Sign in"}
      </button>
    </form>
  );
}

/** Place for the OIDC sign-in (its own issue): the provider's redirect flow. */
function OidcSignIn() {
  return (
    <div class="card">
      <a class="button primary" href="/api/auth/oidc/start">
        Sign in with your identity provider
      </a>
    </div>
  );
}

/** Place for the local-account form (its own issue). */
function LocalSignIn(_props: { onSignedIn(user: User): void }) {
  return (
    <div class="card">
      <p>Local accounts are configured on this server. Their sign-in form is not available in this version of the interface.</p>
    </div>
  );
}
