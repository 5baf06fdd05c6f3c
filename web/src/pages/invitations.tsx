// The signed-in person's pending invitations (GET /api/invitations), shown above the
// project list: invitations reach people even when no e-mail could be sent.
import { get, type InboxAccepted, type InboxList, post } from "../api.ts";
import { navigate } from "../router.ts";
import { ErrorText, Time, useAction, useLoad, whileBusy } from "../ui.tsx";

export function PendingInvitations() {
  const loaded = useLoad(() => get<InboxList>("/api/invitations"), []);
  const action = useAction();
  const list = loaded.data?.invitations ?? [];
  // Quiet when there is nothing (or the list could not load): the project list matters more.
  // Not after a failed accept, though: the invitation may have gone (revoked, expired), and
  // the server's answer says so.
  if (list.length === 0 && action.error === undefined) return null;
  return (
    <section class="card stack" aria-labelledby="invitations-title">
      <h2 id="invitations-title">Invitations for you</h2>
      <ErrorText error={action.error} />
      <ul class="stack">
        {list.map((invitation) => (
          <li key={invitation.id}>
            <p>
              <strong>{invitation.invitedBy?.name || invitation.invitedBy?.email || "Someone"}</strong> invited you to{" "}
              <strong>{invitation.project.name}</strong> as {invitation.role}
              {invitation.environments.length > 0 ? ` (${invitation.environments.join(", ")})` : ""}. Expires{" "}
              <Time iso={invitation.expiresAt} />.
            </p>
            <div class="actions">
              <button
                type="button"
                class="primary"
                {...whileBusy(action.busy, async () => {
                  const result = await action.run(() => post<InboxAccepted>(`/api/invitations/${invitation.id}/accept`));
                  if (result) navigate(`/projects/${result.projectId}`);
                  else void loaded.reload();
                })}
              >
                Accept and open {invitation.project.name}
              </button>
            </div>
          </li>
        ))}
      </ul>
    </section>
  );
}
