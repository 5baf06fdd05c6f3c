// Members and their environment access on one page: per member the role and the
// environments granted, then invitations (invite with grants, pending list, new link,
// revoke, and the development accept link).
import { useEffect, useRef, useState } from "preact/hooks";
import {
  type AccessMatrix,
  ApiError,
  del,
  type Environment,
  get,
  type Invitation,
  type InvitationCreated,
  type InvitationRenewed,
  type Member,
  type Permission,
  type Project,
  patch,
  post,
  projectPath,
  type Role,
} from "../api.ts";
import { adminLosses, ROLE_HELP, withArticle } from "../roles.ts";
import { navigate } from "../router.ts";
import {
  Confirm,
  CopyButton,
  DataTable,
  ErrorText,
  envLabel,
  FormActions,
  LoadState,
  messageOf,
  RowButton,
  Time,
  useAction,
  useLoad,
  whileBusy,
} from "../ui.tsx";
import { EnvironmentGrants, useGrants } from "./access.tsx";

const ASSIGNABLE: Role[] = ["admin", "member", "viewer"];

export function MembersPage({ project, onChanged }: { project: Project; onChanged(): Promise<void> }) {
  const base = projectPath(project.id);
  const members = useLoad(() => get<{ members: Member[] }>(`${base}/members`).then((r) => r.members), [base]);
  const can = (permission: Permission) => project.permissions.includes(permission);
  const canGrant = can("environments:manage");
  // Grants are readable only by those who may change them; others see roles only.
  const matrix = useLoad(() => (canGrant ? get<AccessMatrix>(`${base}/environment-access`) : Promise.resolve(undefined)), [base, canGrant]);
  const [removing, setRemoving] = useState<Member | undefined>(undefined);
  const [rowError, setRowError] = useState<string | undefined>(undefined);
  const [busyUser, setBusyUser] = useState<string | undefined>(undefined);
  const [status, setStatus] = useState("");
  const grants = useGrants(base, matrix.reload, setStatus, setRowError);

  // A role change or a removal may void invitations the person made (they can no longer
  // back them): the invitations list reloads after those too.
  const [invitationsRefresh, setInvitationsRefresh] = useState(0);
  async function reloadAll() {
    await Promise.all([members.reload(), matrix.reload()]);
    setInvitationsRefresh((n) => n + 1);
  }

  return (
    <div class="stack">
      <h2>Members and environment access</h2>
      <p class="muted">Owners and admins can use every environment. Members and viewers use only the environments granted to them here.</p>
      <ErrorText error={rowError} />
      <p class="status" role="status">
        {status}
      </p>
      <LoadState loaded={members}>
        {(list) => (
          <DataTable class="members" columns={canGrant ? ["Member", "Role", "Environments", "Since"] : ["Member", "Role", "Since"]} actions>
            {list.map((m) => {
              const label = m.email ?? m.name ?? m.userId;
              const editable = can("members:update_role") && m.role !== "owner" && !m.isYou;
              const access = matrix.data?.members.find((row) => row.userId === m.userId)?.access;
              return (
                <tr key={m.userId}>
                  <th scope="row">
                    {m.name && m.email ? (
                      <>
                        {m.name} <span class="member-email">{m.email}</span>
                      </>
                    ) : (
                      label
                    )}
                    {m.isYou && <span class="badge">you</span>}
                  </th>
                  <td>
                    {editable ? (
                      <RoleChoice
                        label={label}
                        member={m}
                        busy={busyUser === m.userId}
                        onChange={async (role) => {
                          setRowError(undefined);
                          setStatus("");
                          setBusyUser(m.userId);
                          try {
                            await patch(`${base}/members/${m.userId}`, { role });
                            await reloadAll();
                            setStatus(`${label} is now ${withArticle(role)}.`);
                            return true;
                          } catch (err) {
                            setRowError(`${label}: ${(err as Error).message}`);
                            await reloadAll();
                            return false;
                          } finally {
                            setBusyUser(undefined);
                          }
                        }}
                      />
                    ) : (
                      <span class={`badge role-${m.role}`}>{m.role}</span>
                    )}
                  </td>
                  {canGrant && (
                    <td>
                      {matrix.data === undefined ? (
                        <span class="muted">…</span>
                      ) : (
                        <EnvironmentGrants
                          who={m.email ?? m.userId}
                          role={m.role}
                          userId={m.userId}
                          environments={matrix.data.environments}
                          access={access ?? {}}
                          grants={grants}
                        />
                      )}
                    </td>
                  )}
                  <td>
                    {/* A phone shows each member as a card, without the column's header. */}
                    <span class="phone-only muted">Member since </span>
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
      {matrix.error !== undefined && <ErrorText error={`Environment access: ${messageOf(matrix.error)}`} />}
      {removing && (
        <Confirm
          title={removing.isYou ? `Leave ${project.name}?` : `Remove ${removing.email ?? "this member"}?`}
          confirmLabel={removing.isYou ? "Leave project" : "Remove member"}
          danger
          onClose={() => setRemoving(undefined)}
          onConfirm={async () => {
            if (removing.isYou) {
              await del(`${base}/members/${removing.userId}`);
              navigate("/");
              return;
            }
            // Removed already by another admin: the lists are refreshed whatever the answer.
            try {
              await del(`${base}/members/${removing.userId}`);
            } finally {
              await reloadAll();
              await onChanged();
            }
          }}
        >
          <p>
            {removing.isYou
              ? "You lose access to every secret of this project until someone invites you again."
              : "They lose access to the project and their environment grants are removed."}
            {removing.role === "admin" && ` ${adminLosses(removing.isYou ? "you" : "they")}`}
          </p>
        </Confirm>
      )}
      {can("invitations:read") && <Invitations project={project} refresh={invitationsRefresh} onInvited={reloadAll} />}
    </div>
  );
}

/**
 * A member's role: picking one in the select only proposes it, and "Change role" makes
 * it so. Browsers on Windows and Linux fire a select's change on every arrow key, so a
 * select that saved on change would make someone an admin while a keyboard user only
 * looked at the options.
 */
function RoleChoice(props: { label: string; member: Member; busy: boolean; onChange(role: Role): Promise<boolean> }) {
  const { label, member, busy } = props;
  const [chosen, setChosen] = useState<Role>(member.role);
  const select = useRef<HTMLSelectElement>(null);
  // A reload that brings another role (from this page or another tab) is the new start.
  useEffect(() => setChosen(member.role), [member.role]);
  const pending = chosen !== member.role;
  const helpId = `role-help-${member.userId}`;
  async function save() {
    if (busy) return;
    const done = await props.onChange(chosen);
    if (!done) setChosen(member.role);
    select.current?.focus();
  }
  return (
    <>
      {/* aria-disabled, not disabled: a disabled control loses keyboard focus. */}
      <select
        ref={select}
        aria-label={`Role of ${label}`}
        aria-describedby={helpId}
        value={chosen}
        aria-disabled={busy}
        onChange={(e) => {
          if (busy) e.currentTarget.value = chosen;
          else setChosen(e.currentTarget.value as Role);
        }}
        onKeyDown={(e) => {
          if (e.key === "Enter" && pending) {
            e.preventDefault();
            void save();
          } else if (e.key === "Escape" && pending) {
            e.preventDefault();
            setChosen(member.role);
          }
        }}
      >
        {ASSIGNABLE.map((r) => (
          <option key={r} value={r}>
            {r}
          </option>
        ))}
      </select>
      {pending && (
        <span class="role-actions">
          <button type="button" class="primary" aria-label={`Change role of ${label} to ${chosen}`} {...whileBusy(busy, save)}>
            Change role
          </button>
          <button
            type="button"
            onClick={() => {
              setChosen(member.role);
              // This button goes with the change it cancels: the focus returns to the select.
              select.current?.focus();
            }}
            aria-label={`Cancel role change of ${label}`}
          >
            Cancel
          </button>
        </span>
      )}
      <p class="muted small role-help" id={helpId}>
        {pending ? `${chosen.charAt(0).toUpperCase() + chosen.slice(1)}: ${ROLE_HELP[chosen]}` : ROLE_HELP[member.role]}
        {pending && member.role === "admin" && ` ${adminLosses("they")}`}
      </p>
    </>
  );
}

function Invitations({ project, refresh, onInvited }: { project: Project; refresh: number; onInvited(): Promise<void> }) {
  const base = projectPath(project.id);
  const invitations = useLoad(() => get<{ invitations: Invitation[] }>(`${base}/invitations`).then((r) => r.invitations), [base]);
  useEffect(() => {
    if (refresh > 0) void invitations.reload();
  }, [refresh]);
  const [email, setEmail] = useState("");
  const [role, setRole] = useState<Role>("member");
  const [environments, setEnvironments] = useState<Environment[]>([]);
  const [acceptUrl, setAcceptUrl] = useState<{ email: string; url: string; sentence: string } | undefined>(undefined);
  const [created, setCreated] = useState<InvitationCreated | undefined>(undefined);
  const [renewed, setRenewed] = useState<InvitationRenewed | undefined>(undefined);
  const [renewing, setRenewing] = useState<Invitation | undefined>(undefined);
  const [revoking, setRevoking] = useState<Invitation | undefined>(undefined);
  const invite = useAction();
  const canInvite = project.permissions.includes("members:invite");
  const canGrant = project.permissions.includes("environments:manage") && role !== "admin";
  /**
   * An invitation's link shown before is dead once it is renewed, revoked or found gone
   * (accepted, revoked elsewhere: a 404): no box may still offer it. Another invitation's
   * link, shown once, stays. A renewal sets its new link after this.
   */
  const forgetLinkOf = (inv: Invitation) => {
    if (acceptUrl?.email === inv.email) setAcceptUrl(undefined);
    if (created?.invitation.id === inv.id) setCreated(undefined);
    if (renewed?.invitation.id === inv.id) setRenewed(undefined);
  };

  return (
    <>
      <h2>Invitations</h2>
      {canInvite && (
        <form
          class="card stack"
          onSubmit={async (e) => {
            e.preventDefault();
            setAcceptUrl(undefined);
            setCreated(undefined);
            const body: Record<string, unknown> = { email: email.trim(), role };
            if (canGrant && environments.length > 0) body.environments = environments;
            const result = await invite.run(() => post<InvitationCreated>(`${base}/invitations`, body));
            if (result) {
              if (result.devAcceptUrl)
                setAcceptUrl({ email: result.invitation.email, url: result.devAcceptUrl, sentence: devLinkSentence(result) });
              else setCreated(result);
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
              <select value={role} aria-describedby="invite-role-help" onChange={(e) => setRole(e.currentTarget.value as Role)}>
                {ASSIGNABLE.map((r) => (
                  <option key={r} value={r}>
                    {r}
                  </option>
                ))}
              </select>
            </label>
          </div>
          <p class="muted small" id="invite-role-help">
            {role.charAt(0).toUpperCase() + role.slice(1)}: {ROLE_HELP[role]}
          </p>
          {canGrant && (
            <fieldset>
              <legend>Environments to grant on acceptance</legend>
              {project.environments.map((env) => (
                <label key={env} class="check">
                  <input
                    type="checkbox"
                    checked={environments.includes(env)}
                    onChange={(e) =>
                      setEnvironments(e.currentTarget.checked ? [...environments, env] : environments.filter((x) => x !== env))
                    }
                  />
                  {envLabel(env)}
                </label>
              ))}
            </fieldset>
          )}
          <ErrorText error={invite.error} />
          <FormActions label="Send invitation" busyLabel="Inviting…" busy={invite.busy} />
          {/* Mounted empty and filled in: a live region inserted with its text is often not announced. */}
          <div role="status">
            {created && (
              <p class="notice">
                Invitation created for {created.invitation.email}. {noLinkSentence(created)}
              </p>
            )}
            {acceptUrl && (
              <div class="notice">
                <p>
                  Invitation created for {acceptUrl.email}. {acceptUrl.sentence}
                </p>
                <LinkBox label="Invitation link" url={acceptUrl.url} />
              </div>
            )}
          </div>
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
                  <th scope="row">
                    {inv.email}
                    {inv.delivery === "failed" && <span class="badge status-invalid">e-mail not delivered</span>}
                  </th>
                  <td>{inv.role}</td>
                  <td>{inv.role === "admin" ? "all" : inv.environments.length ? inv.environments.join(", ") : "none"}</td>
                  <td>
                    {inv.expired ? <span class="badge status-invalid">expired</span> : null} <Time iso={inv.expiresAt} />
                  </td>
                  <td class="row-actions">
                    {canInvite && (
                      <RowButton label={`New link for the invitation of ${inv.email}`} onClick={() => setRenewing(inv)}>
                        New link
                      </RowButton>
                    )}
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
      <div role="status">
        {renewed && (
          <div class="notice">
            <p>
              New link for {renewed.invitation.email}: the previous link no longer works, and this one works until{" "}
              <Time iso={renewed.invitation.expiresAt} />.{" "}
              {renewed.devAcceptUrl ? `${devLinkSentence(renewed)} It is shown only now.` : noLinkSentence(renewed)}
            </p>
            {renewed.devAcceptUrl && <LinkBox label="New invitation link" url={renewed.devAcceptUrl} />}
          </div>
        )}
      </div>
      {renewing && (
        <Confirm
          title={`A new link for ${renewing.email}?`}
          confirmLabel="Make a new link"
          onClose={() => setRenewing(undefined)}
          onConfirm={async () => {
            try {
              const result = await post<InvitationRenewed>(`${base}/invitations/${renewing.id}/renew`);
              forgetLinkOf(renewing);
              setRenewed(result);
            } catch (e) {
              if (e instanceof ApiError && e.status === 404) forgetLinkOf(renewing);
              throw e;
            } finally {
              await invitations.reload();
            }
          }}
        >
          <p>
            Only a fingerprint of each link is stored, so the link they were given cannot be shown again. A new link replaces it: the old
            one stops working, and the invitation runs for 7 more days.
          </p>
        </Confirm>
      )}
      {revoking && (
        <Confirm
          title={`Revoke the invitation of ${revoking.email}?`}
          confirmLabel="Revoke"
          danger
          onClose={() => setRevoking(undefined)}
          onConfirm={async () => {
            try {
              await del(`${base}/invitations/${revoking.id}`);
              forgetLinkOf(revoking);
            } catch (e) {
              if (e instanceof ApiError && e.status === 404) forgetLinkOf(revoking);
              throw e;
            } finally {
              await invitations.reload();
            }
          }}
        >
          <p>The link they received stops working.</p>
        </Confirm>
      )}
    </>
  );
}

/** What the link shown outside production is for, and whether an e-mail carried it too (SMTP_URL). */
function devLinkSentence(answer: InvitationCreated | InvitationRenewed): string {
  const email = answer.invitation.email;
  if (answer.invitation.delivery === "sent") return `The link was e-mailed to ${email}; this development server shows it here too.`;
  if (answer.invitation.delivery === "failed") return "The e-mail could not be sent: give them this link.";
  return "This server is in development mode and sends no e-mail: give them this link.";
}

/** What an invitation answer without a link means (production mode answers no devAcceptUrl). */
function noLinkSentence(answer: InvitationCreated | InvitationRenewed): string {
  const email = answer.invitation.email;
  if (answer.invitation.delivery === "sent") return `The link was e-mailed to ${email}.`;
  const failed = answer.invitation.delivery === "failed" ? "The e-mail could not be sent. " : "";
  return `${failed}A production server never shows invitation links: ${email} finds the invitation in their list after signing in with that address.`;
}

/** A link shown once, to select or copy. */
function LinkBox({ label, url }: { label: string; url: string }) {
  return (
    <div class="copy-row">
      <input readOnly aria-label={label} value={url} class="mono" onFocus={(e) => e.currentTarget.select()} />
      <CopyButton text={url} label="Copy link" />
    </div>
  );
}
