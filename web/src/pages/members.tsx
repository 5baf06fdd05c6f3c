// Members (roles, remove, leave) and invitations (invite, pending list, revoke, and the
// development accept link).
import { useState } from "preact/hooks";
import { del, get, patch, post, projectPath, type Environment, type Invitation, type InvitationCreated, type Member, type Permission, type Project, type Role } from "../api.ts";
import { navigate } from "../router.ts";
import { Confirm, CopyButton, DataTable, ErrorText, FormActions, LoadState, RowButton, Time, envLabel, useAction, useLoad } from "../ui.tsx";

const ASSIGNABLE: Role[] = ["admin", "member", "viewer"];

export function MembersPage({ project, onChanged }: { project: Project; onChanged(): Promise<void> }) {
  const base = projectPath(project.id);
  const members = useLoad(() => get<{ members: Member[] }>(`${base}/members`).then((r) => r.members), [base]);
  const can = (permission: Permission) => project.permissions.includes(permission);
  const [removing, setRemoving] = useState<Member | undefined>(undefined);
  const [rowError, setRowError] = useState<string | undefined>(undefined);
  const [busyUser, setBusyUser] = useState<string | undefined>(undefined);
  const [status, setStatus] = useState("");

  return (
    <div class="stack">
      <h2>Members</h2>
      <ErrorText error={rowError} />
      <p class="status" role="status">
        {status}
      </p>
      <LoadState loaded={members}>
        {(list) => (
          <DataTable columns={["Member", "Role", "Since"]} actions>
            {list.map((m) => {
              const label = m.email ?? m.name ?? m.userId;
              const editable = can("members:update_role") && m.role !== "owner" && !m.isYou;
              return (
                <tr key={m.userId}>
                  <th scope="row">
                    {m.name && m.email ? `${m.name} <${m.email}>` : label}
                    {m.isYou && <span class="badge">you</span>}
                  </th>
                  <td>
                    {editable ? (
                      // aria-disabled, not disabled: a disabled control loses keyboard focus.
                      <select
                        aria-label={`Role of ${label}`}
                        value={m.role}
                        aria-disabled={busyUser === m.userId}
                        onChange={async (e) => {
                          const role = e.currentTarget.value;
                          if (busyUser === m.userId) {
                            e.currentTarget.value = m.role;
                            return;
                          }
                          setRowError(undefined);
                          setStatus("");
                          setBusyUser(m.userId);
                          try {
                            await patch(`${base}/members/${m.userId}`, { role });
                            await members.reload();
                            setStatus(`${label} is now ${role === "admin" ? "an" : "a"} ${role}.`);
                          } catch (err) {
                            setRowError(`${label}: ${(err as Error).message}`);
                            await members.reload();
                          } finally {
                            setBusyUser(undefined);
                          }
                        }}
                      >
                        {ASSIGNABLE.map((r) => (
                          <option key={r} value={r}>
                            {r}
                          </option>
                        ))}
                      </select>
                    ) : (
                      <span class={`badge role-${m.role}`}>{m.role}</span>
                    )}
                  </td>
                  <td>
                    <Time iso={m.createdAt} />
                  </td>
                  <td class="row-actions">
                    {m.isYou && m.role !== "owner" && (
                      <RowButton danger onClick={() => setRemoving(m)}>
                        Leave project
                      </RowButton>
                    )}
                    {!m.isYou && m.role !== "owner" && can("members:remove") && (
                      <RowButton danger label={`Remove ${label}`} onClick={() => setRemoving(m)}>
                        Remove
                      </RowButton>
                    )}
                  </td>
                </tr>
              );
            })}
          </DataTable>
        )}
      </LoadState>
      {removing && (
        <Confirm
          title={removing.isYou ? `Leave ${project.name}?` : `Remove ${removing.email ?? "this member"}?`}
          confirmLabel={removing.isYou ? "Leave project" : "Remove member"}
          danger
          onClose={() => setRemoving(undefined)}
          onConfirm={async () => {
            await del(`${base}/members/${removing.userId}`);
            if (removing.isYou) navigate("/");
            else {
              await members.reload();
              await onChanged();
            }
          }}
        >
          <p>
            {removing.isYou
              ? "You lose access to every secret of this project until someone invites you again."
              : "They lose access to the project and their environment grants are removed."}
          </p>
        </Confirm>
      )}
      {can("invitations:read") && <Invitations project={project} onInvited={members.reload} />}
    </div>
  );
}

function Invitations({ project, onInvited }: { project: Project; onInvited(): Promise<void> }) {
  const base = projectPath(project.id);
  const invitations = useLoad(() => get<{ invitations: Invitation[] }>(`${base}/invitations`).then((r) => r.invitations), [base]);
  const [email, setEmail] = useState("");
  const [role, setRole] = useState<Role>("member");
  const [environments, setEnvironments] = useState<Environment[]>([]);
  const [acceptUrl, setAcceptUrl] = useState<{ email: string; url: string } | undefined>(undefined);
  const [revoking, setRevoking] = useState<Invitation | undefined>(undefined);
  const invite = useAction();
  const canInvite = project.permissions.includes("members:invite");
  const canGrant = project.permissions.includes("environments:manage") && role !== "admin";

  return (
    <>
      <h2>Invitations</h2>
      {canInvite && (
        <form
          class="card stack"
          onSubmit={async (e) => {
            e.preventDefault();
            setAcceptUrl(undefined);
            const body: Record<string, unknown> = { email: email.trim(), role };
            if (canGrant && environments.length > 0) body.environments = environments;
            const result = await invite.run(() => post<InvitationCreated>(`${base}/invitations`, body));
            if (result) {
              if (result.devAcceptUrl) setAcceptUrl({ email: result.invitation.email, url: result.devAcceptUrl });
              setEmail("");
              setEnvironments([]);
              await invitations.reload();
              await onInvited();
            }
          }}
        >
          <h3>Invite someone</h3>
          <div class="inline-fields">
            <label class="field">
              <span>E-mail address</span>
              <input type="email" required maxLength={254} value={email} onInput={(e) => setEmail(e.currentTarget.value)} />
            </label>
            <label class="field">
              <span>Role</span>
              <select value={role} onChange={(e) => setRole(e.currentTarget.value as Role)}>
                {ASSIGNABLE.map((r) => (
                  <option key={r} value={r}>
                    {r}
                  </option>
                ))}
              </select>
            </label>
          </div>
          {canGrant && (
            <fieldset>
              <legend>Environments to grant on acceptance</legend>
              {project.environments.map((env) => (
                <label key={env} class="check">
                  <input
                    type="checkbox"
                    checked={environments.includes(env)}
                    onChange={(e) => setEnvironments(e.currentTarget.checked ? [...environments, env] : environments.filter((x) => x !== env))}
                  />
                  {envLabel(env)}
                </label>
              ))}
            </fieldset>
          )}
          {role === "admin" && <p class="muted small">Admins have access to every environment.</p>}
          <ErrorText error={invite.error} />
          <FormActions label="Send invitation" busyLabel="Inviting…" busy={invite.busy} />
          {acceptUrl && (
            <div class="notice" role="status">
              <p>
                Invitation created for {acceptUrl.email}. This server is in development mode and sends no e-mail: give them this link.
              </p>
              <div class="copy-row">
                <input readOnly aria-label="Invitation link" value={acceptUrl.url} class="mono" onFocus={(e) => e.currentTarget.select()} />
                <CopyButton text={acceptUrl.url} label="Copy link" />
              </div>
            </div>
          )}
        </form>
      )}
      <LoadState loaded={invitations}>
        {(list) =>
          list.length === 0 ? (
            <p class="empty">No pending invitations.</p>
          ) : (
            <DataTable columns={["E-mail", "Role", "Environments", "Expires"]} actions>
              {list.map((inv) => (
                <tr key={inv.id}>
                  <th scope="row">{inv.email}</th>
                  <td>{inv.role}</td>
                  <td>{inv.role === "admin" ? "all" : inv.environments.length ? inv.environments.join(", ") : "none"}</td>
                  <td>
                    {inv.expired ? <span class="badge status-invalid">expired</span> : null} <Time iso={inv.expiresAt} />
                  </td>
                  <td class="row-actions">
                    {project.permissions.includes("invitations:revoke") && (
                      <RowButton danger label={`Revoke the invitation of ${inv.email}`} onClick={() => setRevoking(inv)}>
                        Revoke
                      </RowButton>
                    )}
                  </td>
                </tr>
              ))}
            </DataTable>
          )
        }
      </LoadState>
      {revoking && (
        <Confirm
          title={`Revoke the invitation of ${revoking.email}?`}
          confirmLabel="Revoke"
          danger
          onClose={() => setRevoking(undefined)}
          onConfirm={async () => {
            await del(`${base}/invitations/${revoking.id}`);
            await invitations.reload();
          }}
        >
          <p>The link they received stops working.</p>
        </Confirm>
      )}
    </>
  );
}
