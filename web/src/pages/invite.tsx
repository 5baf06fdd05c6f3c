// /invite#<token>: the token sits in the fragment, so it never reaches a server log.
// The app has already made the visitor sign in (and come back here) before this renders.
import { useState } from "preact/hooks";
import {
  ApiError,
  get,
  type InboxInvitation,
  type InvitationAccepted,
  type InvitationPreview,
  type Project,
  post,
  projectPath,
  signOut,
  type User,
} from "../api.ts";
import { ROLE_HELP, withArticle } from "../roles.ts";
import { navigate } from "../router.ts";
import { ErrorText, Link, messageOf, OutcomeHeading, Time, useAction, useLoad, whileBusy } from "../ui.tsx";

/**
 * Who invited the link's holder to which project, as what: POST /api/invitations/preview
 * needs no session (the token is the credential), so this shows before sign-in too.
 */
export function InvitationSummary({ token }: { token: string }) {
  const preview = useLoad(() => post<InvitationPreview>("/api/invitations/preview", { token }), [token]);
  if (preview.data) {
    const p = preview.data;
    const inviter = p.invitedBy ? (p.invitedBy.name ? `${p.invitedBy.name} (${p.invitedBy.email})` : p.invitedBy.email) : "Someone";
    return (
      <div class="card stack invitation-summary">
        <p>
          <strong>{inviter}</strong> invited you to <strong>{p.projectName}</strong> as {p.role}.
        </p>
        <p class="muted small">
          {withArticle(p.role).replace(/^./, (c) => c.toUpperCase())}: {ROLE_HELP[p.role]}
          {p.role !== "admin" &&
            (p.environments.length > 0 ? ` Granted on acceptance: ${p.environments.join(", ")}.` : " No environment is granted yet.")}{" "}
          The link works once, until <Time iso={p.expiresAt} />.
        </p>
      </div>
    );
  }
  if (preview.error) {
    // Not an alert: acceptance reports its own answer, and this link may still be tried.
    const gone = preview.error instanceof ApiError && preview.error.status === 410;
    return (
      <p class="notice">
        {gone
          ? "This invitation is invalid, expired, or already used. Ask the person who invited you for a new link."
          : messageOf(preview.error)}
      </p>
    );
  }
  return <p class="muted">Reading the invitation…</p>;
}

/** `joinedProject`: the project of an invitation this tab accepted (Back to its page after joining). */
export function InvitePage({ token, user, joinedProject }: { token: string; user: User; joinedProject?: string }) {
  const [joined, setJoined] = useState<{ projectId: string; role: string; name?: string } | undefined>(undefined);
  const [status, setStatus] = useState<number | undefined>(undefined);
  const action = useAction();
  const [signOutError, setSignOutError] = useState<string>();
  // What the link is for: the link's token names no project, but the invitations addressed
  // to the signed-in user do (GET /api/invitations); an empty list hints at another address.
  const waiting = useLoad(
    () =>
      get<{ invitations: InboxInvitation[] }>("/api/invitations").then(
        (r) => r.invitations,
        () => undefined,
      ),
    [user.id],
  );

  if (!token && joinedProject) {
    return (
      <section class="narrow stack">
        <h1>Invitation accepted</h1>
        <p>You joined this project with this invitation; its link works only once.</p>
        <p>
          <Link class="button primary" href={`/projects/${encodeURIComponent(joinedProject)}`}>
            Open the project
          </Link>
        </p>
      </section>
    );
  }

  if (!token) {
    return (
      <section class="narrow stack">
        <h1>Invitation</h1>
        <p class="error" role="alert">
          This invitation link is incomplete. Open the full link you were given.
        </p>
      </section>
    );
  }

  if (joined) {
    return (
      <section class="narrow stack">
        <OutcomeHeading>Welcome{joined.name ? ` to ${joined.name}` : ""}</OutcomeHeading>
        <p role="status">You joined the project as {joined.role}.</p>
        <p>
          <Link class="button primary" href={`/projects/${joined.projectId}`}>
            Open the project
          </Link>
        </p>
      </section>
    );
  }

  return (
    <section class="narrow stack">
      <h1>You have been invited to a project</h1>
      <InvitationSummary token={token} />
      <p>
        This link invites an e-mail address to join a project on this server with a role and access to some of its environments. You are
        signed in as <strong>{user.email}</strong>; the invitation works only for the address it was sent to.
      </p>
      {waiting.data && waiting.data.length > 0 && (
        <div class="card">
          <p>Invitations waiting for {user.email}:</p>
          <ul>
            {waiting.data.map((w) => (
              <li key={w.id}>
                <strong>{w.project.name}</strong> as {w.role}
                {w.environments.length > 0 ? ` with ${w.environments.join(", ")}` : ""}
                {w.invitedBy?.email ? `, from ${w.invitedBy.email}` : ""}
              </li>
            ))}
          </ul>
        </div>
      )}
      {waiting.data && waiting.data.length === 0 && !status && (
        <p class="notice">
          No invitation is waiting for {user.email}. If this link was sent to another address, sign in with that address.
        </p>
      )}
      <ErrorText error={action.error}>
        {status === 403 && (
          <button
            type="button"
            onClick={async () => {
              // Still signed in, the sign-in page would send this account straight back.
              const problem = await signOut();
              setSignOutError(problem);
              if (problem) return;
              sessionStorage.setItem("returnTo", window.location.pathname + window.location.hash);
              window.location.assign("/sign-in");
            }}
          >
            Sign in with another account
          </button>
        )}
      </ErrorText>
      <ErrorText error={signOutError} />
      {status === 410 && <p>Ask the person who invited you for a new invitation.</p>}
      <div class="actions">
        <button
          type="button"
          class="primary"
          disabled={status === 410}
          {...whileBusy(action.busy, async () => {
            setStatus(undefined);
            const result = await action.run(async () => {
              try {
                return await post<InvitationAccepted>("/api/invitations/accept", { token });
              } catch (e) {
                if (e instanceof ApiError) setStatus(e.status);
                throw e;
              }
            });
            if (!result) return;
            // The fragment holds a now-used token: drop it from the address bar and history. Back
            // to this entry later says the invitation was accepted, not that a link is incomplete.
            history.replaceState(null, "", `/invite?joined=${encodeURIComponent(result.projectId)}`);
            // The name is a nicety: the join already succeeded when this lookup fails.
            const name = await get<{ project: Project }>(projectPath(result.projectId)).then(
              (r) => r.project.name,
              () => undefined,
            );
            setJoined({ ...result, name });
          })}
        >
          {action.busy ? "Accepting…" : "Accept invitation"}
        </button>
        <button type="button" onClick={() => navigate("/")}>
          Not now
        </button>
      </div>
    </section>
  );
}
