// /set-password#<token>: the page a one-time link of a local account opens (first-run
// setup, `users add`, `users reset-password`). The token stays in the fragment, so it never
// reaches a server log; it is sent only in POST bodies.
import { useEffect, useState } from "preact/hooks";
import { post, type SetPasswordLink, type User } from "../api.ts";
import { ErrorText, messageOf, SubmitButton, Time, useAction } from "../ui.tsx";

const MIN_LENGTH = 12;

const TITLES: Record<SetPasswordLink["purpose"], string> = {
  setup: "Create the first account",
  invite: "Set your password",
  reset: "Choose a new password",
};

export function SetPasswordPage({ token, onSignedIn }: { token: string; onSignedIn(user: User): void }) {
  const [info, setInfo] = useState<SetPasswordLink | undefined>(undefined);
  const [loadError, setLoadError] = useState<string | undefined>(undefined);
  const [email, setEmail] = useState("");
  const [name, setName] = useState("");
  const [password, setPassword] = useState("");
  const [repeat, setRepeat] = useState("");
  const [mismatch, setMismatch] = useState(false);
  const action = useAction();

  useEffect(() => {
    if (!token) return;
    post<{ link: SetPasswordLink }>("/api/auth/local/link", { token }).then(
      (r) => setInfo(r.link),
      (e) => setLoadError(messageOf(e)),
    );
  }, [token]);

  if (!token || loadError) {
    return (
      <main id="main" class="narrow stack">
        <h1>Set a password</h1>
        <p class="error" role="alert">
          {loadError ?? "This link is incomplete. Open the full link you were given."}
        </p>
      </main>
    );
  }
  if (!info) {
    return (
      <main id="main" class="narrow">
        <p role="status">Loading…</p>
      </main>
    );
  }

  return (
    <main id="main" class="narrow stack">
      <h1>{TITLES[info.purpose]}</h1>
      {info.purpose === "setup" ? (
        <p>No account exists on this server yet. The e-mail address you enter here becomes the first account, and counts as verified.</p>
      ) : (
        <p>
          For <strong>{info.email}</strong>. This link works once, until <Time iso={info.expiresAt} />.
        </p>
      )}
      <form
        class="card"
        onSubmit={async (e) => {
          e.preventDefault();
          if (password !== repeat) {
            setMismatch(true);
            return;
          }
          setMismatch(false);
          const result = await action.run(() =>
            post<{ user: User }>("/api/auth/local/set-password", {
              token,
              password,
              ...(name.trim() ? { name: name.trim() } : {}),
              ...(info.purpose === "setup" ? { email: email.trim() } : {}),
            }),
          );
          if (!result) return;
          // The token is used up: drop it from the address bar and history.
          history.replaceState(null, "", "/");
          onSignedIn(result.user);
        }}
      >
        {info.purpose === "setup" && (
          <label class="field">
            <span>E-mail address</span>
            <input
              type="email"
              name="email"
              required
              autoComplete="username"
              value={email}
              onInput={(e) => setEmail(e.currentTarget.value)}
            />
          </label>
        )}
        {info.purpose !== "reset" && (
          <label class="field">
            <span>Name (optional)</span>
            <input name="name" autoComplete="name" maxLength={100} value={name} onInput={(e) => setName(e.currentTarget.value)} />
          </label>
        )}
        <label class="field">
          <span>Password (at least {MIN_LENGTH} characters)</span>
          <input
            type="password"
            name="password"
            required
            minLength={MIN_LENGTH}
            maxLength={256}
            autoComplete="new-password"
            value={password}
            onInput={(e) => setPassword(e.currentTarget.value)}
          />
        </label>
        <label class="field">
          <span>Repeat the password</span>
          <input
            type="password"
            name="repeat"
            required
            autoComplete="new-password"
            value={repeat}
            onInput={(e) => setRepeat(e.currentTarget.value)}
          />
        </label>
        <ErrorText error={mismatch ? "The two passwords differ. Type the same password twice." : action.error} />
        <SubmitButton label="Save and sign in" busyLabel="Saving…" busy={action.busy} />
      </form>
    </main>
  );
}
