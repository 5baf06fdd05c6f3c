// Service accounts of a project (owners and admins): the list, one account's page with its
// service tokens and trusts, and their forms. A new token is shown once, in the dialog that
// created it, and lives only in that dialog's state: closing the dialog or leaving the page
// drops it, and nothing else (no list, no cache, no URL) ever holds it.
import { useEffect, useRef, useState } from "preact/hooks";
import { isAllowedIssuerUrl, SERVICE_ACCOUNT_NOT_FOUND, TRUST_TEXT_MAX } from "../../../src/core/service-account-rules.ts";
import {
  ApiError,
  del,
  ENVIRONMENTS,
  type Environment,
  get,
  type Project,
  patch,
  post,
  projectPath,
  type ServiceAccount,
  type ServiceAccountRole,
  type ServiceToken,
  type ServiceTokenCreated,
  type Trust,
} from "../api.ts";
import { navigate } from "../router.ts";
import {
  Confirm,
  CopyButton,
  DangerZone,
  DataTable,
  Dialog,
  ErrorText,
  envLabel,
  FormActions,
  Link,
  LoadState,
  RowButton,
  setNextPageNotice,
  Time,
  useAction,
  useLoad,
  useNextPageNotice,
} from "../ui.tsx";
import { NameField, useNameCheck } from "./projects.tsx";

const ROLES: { role: ServiceAccountRole; text: string }[] = [
  { role: "viewer", text: "Viewer: reads secrets" },
  { role: "member", text: "Member: reads, creates, changes and deletes secrets" },
];

const GITHUB_ISSUER = "https://token.actions.githubusercontent.com";
const GITHUB_SUBJECT = "repo:OWNER/REPO:ref:refs/heads/main";

const apiBase = (projectId: string) => `${projectPath(projectId)}/service-accounts`;
const pageBase = (projectId: string) => `/projects/${projectId}/service-accounts`;

export function ServiceAccountsPage({ project, accountId }: { project: Project; accountId?: string }) {
  if (!project.permissions.includes("service_accounts:manage")) {
    return <p class="notice">Only owners and admins of this project manage its service accounts.</p>;
  }
  return accountId ? <AccountPage key={accountId} project={project} accountId={accountId} /> : <AccountList project={project} />;
}

/** The newest use of any of the account's tokens, or null when none was ever used. */
function lastUsed(tokens: ServiceToken[]): string | null {
  return tokens.reduce<string | null>((latest, t) => (t.lastUsedAt && (!latest || t.lastUsedAt > latest) ? t.lastUsedAt : latest), null);
}

function AccountList({ project }: { project: Project }) {
  const base = apiBase(project.id);
  const accounts = useLoad(() => get<{ serviceAccounts: ServiceAccount[] }>(base).then((r) => r.serviceAccounts), [base]);
  const [creating, setCreating] = useState(false);
  // Set by the account that was deleted on its way here.
  const notice = useNextPageNotice();
  return (
    <div class="stack">
      <div class="toolbar">
        <h2>Service accounts</h2>
        <button type="button" class="primary" onClick={() => setCreating(true)}>
          New service account
        </button>
      </div>
      <p class="muted small">
        A service account lets a CI job or a server use this project's secrets without a person signing in: with a service token, or by
        exchanging the identity token its platform already gives it (a trust). It is not a member: it cannot sign in to this web interface
        or manage anything.
      </p>
      <p class="status" role="status">
        {notice}
      </p>
      <LoadState loaded={accounts}>
        {(list) =>
          list.length === 0 ? (
            <p class="empty">No service accounts yet.</p>
          ) : (
            <DataTable columns={["Name", "Role", "Environments", "Tokens", "Trusts", "Last used"]} caption="Service accounts">
              {list.map((a) => {
                const used = lastUsed(a.tokens);
                return (
                  <tr key={a.id}>
                    <th scope="row">
                      <Link href={`${pageBase(project.id)}/${a.id}`}>{a.name}</Link>
                      {a.description && <div class="muted small">{a.description}</div>}
                    </th>
                    <td>
                      <span class="badge">{a.role}</span>
                    </td>
                    <td>{a.environments.map(envLabel).join(", ")}</td>
                    <td>{a.tokens.length}</td>
                    <td>{a.trusts.length}</td>
                    <td>{used ? <Time iso={used} /> : <span class="muted">never</span>}</td>
                  </tr>
                );
              })}
            </DataTable>
          )
        }
      </LoadState>
      {creating && (
        <AccountForm
          project={project}
          onClose={() => setCreating(false)}
          onSaved={(account) => {
            setCreating(false);
            navigate(`${pageBase(project.id)}/${account.id}`);
          }}
        />
      )}
    </div>
  );
}

/** Create (no `account`) or edit a service account; an edit sends only what changed. */
function AccountForm({
  project,
  account,
  onClose,
  onSaved,
}: {
  project: Project;
  account?: ServiceAccount;
  onClose(): void;
  onSaved(account: ServiceAccount): void;
}) {
  const [name, setName] = useState(account?.name ?? "");
  const [description, setDescription] = useState(account?.description ?? "");
  const [role, setRole] = useState<ServiceAccountRole>(account?.role ?? "viewer");
  const [environments, setEnvironments] = useState<Environment[]>(account?.environments ?? []);
  const action = useAction();
  const nameCheck = useNameCheck(name);
  const chosen = ENVIRONMENTS.filter((env) => environments.includes(env));
  // Saving with none chosen says so (announced) and takes the focus to the choices.
  const [noEnvironment, setNoEnvironment] = useState(false);
  const environmentChoices = useRef<HTMLFieldSetElement>(null);

  let body: Record<string, unknown>;
  if (!account) {
    body = { name: name.trim(), role, environments: chosen, ...(description.trim() ? { description: description.trim() } : {}) };
  } else {
    body = {};
    if (name.trim() !== account.name) body.name = name.trim();
    if (description.trim() !== (account.description ?? "")) body.description = description.trim() || null;
    if (role !== account.role) body.role = role;
    if (chosen.join(",") !== account.environments.join(",")) body.environments = chosen;
  }
  // The API answers an empty change with "Nothing to update.": Save waits for one.
  const changed = !account || Object.keys(body).length > 0;

  return (
    <Dialog title={account ? `Edit ${account.name}` : "New service account"} onClose={onClose} busy={action.busy}>
      <form
        noValidate
        onSubmit={async (e) => {
          e.preventDefault();
          if (!changed) return;
          if (!nameCheck.passes()) return;
          if (chosen.length === 0) {
            setNoEnvironment(true);
            environmentChoices.current?.querySelector("input")?.focus();
            return;
          }
          const result = await action.run(() =>
            account
              ? patch<{ serviceAccount: ServiceAccount }>(`${apiBase(project.id)}/${account.id}`, body)
              : post<{ serviceAccount: ServiceAccount }>(apiBase(project.id), body),
          );
          if (result) onSaved(result.serviceAccount);
        }}
      >
        <NameField id="service-account-name" value={name} check={nameCheck} onInput={setName} />
        <label class="field">
          <span>Description (optional)</span>
          <textarea maxLength={280} rows={2} value={description} onInput={(e) => setDescription(e.currentTarget.value)} />
        </label>
        <fieldset>
          <legend>Role</legend>
          {ROLES.map((r) => (
            <label key={r.role} class="check">
              <input type="radio" name="service-account-role" value={r.role} checked={role === r.role} onChange={() => setRole(r.role)} />
              {r.text}
            </label>
          ))}
        </fieldset>
        <fieldset ref={environmentChoices} aria-describedby="service-account-envs-hint">
          <legend>Environments it may use</legend>
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
          <p id="service-account-envs-hint" class={`small ${chosen.length === 0 ? "error-text" : "muted"}`}>
            Choose at least one. Give it only the environments its job needs.
          </p>
          <ErrorText error={noEnvironment && chosen.length === 0 ? "Choose at least one environment." : undefined} />
        </fieldset>
        {account && <p class="muted small">Changes apply from the account's next request.</p>}
        <ErrorText error={action.error} />
        <FormActions
          label={account ? "Save" : "Create service account"}
          busyLabel={account ? "Saving…" : "Creating…"}
          busy={action.busy}
          unavailable={!changed}
          onCancel={onClose}
        />
      </form>
    </Dialog>
  );
}

function AccountPage({ project, accountId }: { project: Project; accountId: string }) {
  const url = `${apiBase(project.id)}/${encodeURIComponent(accountId)}`;
  const account = useLoad(() => get<{ serviceAccount: ServiceAccount }>(url).then((r) => r.serviceAccount), [url]);
  // Only the account's own 404: a "Project not found." (removed from the project meanwhile) is said as such.
  if (account.error instanceof ApiError && account.error.status === 404 && account.error.message === SERVICE_ACCOUNT_NOT_FOUND) {
    return (
      <div class="stack">
        <h2>Service account not found</h2>
        <p>
          It may have been deleted. <Link href={pageBase(project.id)}>Go to the service accounts</Link>.
        </p>
      </div>
    );
  }
  return <LoadState loaded={account}>{(a) => <AccountView project={project} account={a} url={url} reload={account.reload} />}</LoadState>;
}

type Removing = { kind: "token"; token: ServiceToken } | { kind: "trust"; trust: Trust };

function AccountView({
  project,
  account: a,
  url,
  reload,
}: {
  project: Project;
  account: ServiceAccount;
  url: string;
  reload(): Promise<void>;
}) {
  const [editing, setEditing] = useState(false);
  const [creatingToken, setCreatingToken] = useState(false);
  const [addingTrust, setAddingTrust] = useState(false);
  const [removing, setRemoving] = useState<Removing | undefined>(undefined);
  const [status, setStatus] = useState("");
  const heading = useRef<HTMLHeadingElement>(null);

  // Opened from the list or the create dialog, what had focus is gone with it (focus is on
  // nothing, or on the main region a closing dialog hands it to): the page's heading takes it,
  // so the keyboard and screen reader carry on from here, not from the top of the page.
  useEffect(() => {
    const active = document.activeElement;
    if (!active || active === document.body || active.id === "main") heading.current?.focus();
  }, []);

  const list = pageBase(project.id);
  return (
    <div class="stack">
      <div>
        <p class="crumbs">
          <Link href={list}>Service accounts</Link> /
        </p>
        <h2 ref={heading} tabIndex={-1}>
          {a.name}
        </h2>
        {a.description && <p class="muted">{a.description}</p>}
      </div>
      <p class="status" role="status">
        {status}
      </p>

      <section class="card" aria-labelledby="sa-details">
        <h3 id="sa-details">Details</h3>
        <dl class="kv">
          <dt>Role</dt>
          <dd>
            <span class="badge">{a.role}</span> {ROLES.find((r) => r.role === a.role)?.text.replace(/^\w+: /, "")}
          </dd>
          <dt>Environments</dt>
          <dd>{a.environments.map(envLabel).join(", ")}</dd>
          <dt>Account ID</dt>
          <dd>
            <code>{a.id}</code> <CopyButton text={a.id} what="account ID" />
          </dd>
          <dt>Created</dt>
          <dd>
            <Time iso={a.createdAt} />
            {a.createdBy && ` by ${a.createdBy.email ?? "a former user"}`}
          </dd>
        </dl>
        <div class="actions">
          <button type="button" onClick={() => setEditing(true)}>
            Edit
          </button>
        </div>
      </section>

      <section class="card stack" aria-labelledby="sa-tokens">
        <div class="toolbar">
          <h3 id="sa-tokens">Service tokens</h3>
          <button type="button" class="primary" onClick={() => setCreatingToken(true)}>
            New token
          </button>
        </div>
        <p class="muted small">
          A service token is a password for a machine: store it in your CI system's or server's secrets and send it as{" "}
          <code>Authorization: Bearer</code>. To rotate one, create a new token, switch over, then revoke the old one.
        </p>
        {a.tokens.length === 0 ? (
          <p class="empty">No tokens.</p>
        ) : (
          <DataTable columns={["Name", "Expires", "Networks", "Created", "Last used"]} actions caption={`Service tokens of ${a.name}`}>
            {a.tokens.map((t) => (
              <tr key={t.id}>
                <th scope="row">{t.name}</th>
                <td>{t.expiresAt ? <Time iso={t.expiresAt} /> : <span class="badge status-attention">never</span>}</td>
                <td>{t.allowedCidrs.length ? t.allowedCidrs.join(", ") : <span class="muted">any address</span>}</td>
                <td>
                  <Time iso={t.createdAt} />
                  {t.createdBy && <div class="muted small">by {t.createdBy.email ?? "a former user"}</div>}
                </td>
                <td>
                  {t.lastUsedAt ? (
                    <>
                      <Time iso={t.lastUsedAt} />
                      {t.lastUsedIp && <div class="muted small">from {t.lastUsedIp}</div>}
                    </>
                  ) : (
                    <span class="muted">never</span>
                  )}
                </td>
                <td class="row-actions">
                  <RowButton danger label={`Revoke token ${t.name}`} onClick={() => setRemoving({ kind: "token", token: t })}>
                    Revoke
                  </RowButton>
                </td>
              </tr>
            ))}
          </DataTable>
        )}
      </section>

      <section class="card stack" aria-labelledby="sa-trusts">
        <div class="toolbar">
          <h3 id="sa-trusts">Trusts (workload identity)</h3>
          <button type="button" class="primary" onClick={() => setAddingTrust(true)}>
            Add trust
          </button>
        </div>
        <p class="muted small">
          A trust lets a workload that already has an identity token (GitHub Actions, GitLab CI, Kubernetes, any OpenID Connect issuer)
          exchange it for an access token of this account valid at most 15 minutes, so no long-lived token is stored in the CI system. The
          workload sends this account's ID with its identity token.
        </p>
        {a.trusts.length === 0 ? (
          <p class="empty">No trusts.</p>
        ) : (
          <DataTable columns={["Issuer", "Audience", "Subject", "Claims", "Added"]} actions class="trusts" caption={`Trusts of ${a.name}`}>
            {a.trusts.map((t) => (
              <tr key={t.id}>
                <th scope="row" class="mono">
                  {t.issuer}
                </th>
                <td class="mono">{t.audience}</td>
                <td class="mono">{t.subject}</td>
                <td class="mono">
                  {Object.keys(t.claims).length ? (
                    Object.entries(t.claims).map(([k, v]) => <div key={k}>{`${k}=${v}`}</div>)
                  ) : (
                    <span class="muted">none</span>
                  )}
                </td>
                <td>
                  <Time iso={t.createdAt} />
                </td>
                <td class="row-actions">
                  <RowButton danger label={`Remove the trust for ${t.subject}`} onClick={() => setRemoving({ kind: "trust", trust: t })}>
                    Remove
                  </RowButton>
                </td>
              </tr>
            ))}
          </DataTable>
        )}
      </section>

      <DangerZone
        title="Delete this service account"
        text="Deletes its tokens and trusts: anything using them is refused from its next request. Its audit events stay. This cannot be undone."
        button="Delete service account"
        confirmTitle={`Delete ${a.name}?`}
        confirmLabel="Delete service account"
        onConfirm={async () => {
          await del(url);
          setNextPageNotice(`Service account “${a.name}” was deleted.`);
          navigate(list);
        }}
      >
        <p>Every token of {a.name}, and every access token it got through a trust, stops working at once.</p>
      </DangerZone>

      {editing && (
        <AccountForm
          project={project}
          account={a}
          onClose={() => setEditing(false)}
          onSaved={async () => {
            setEditing(false);
            await reload();
            setStatus("Saved.");
          }}
        />
      )}
      {creatingToken && (
        <NewToken
          url={url}
          accountName={a.name}
          onClose={() => setCreatingToken(false)}
          onCreated={async (name) => {
            setStatus(`Token ${name} created.`);
            await reload();
          }}
        />
      )}
      {addingTrust && (
        <NewTrust
          url={url}
          onClose={() => setAddingTrust(false)}
          onAdded={async (trust) => {
            setAddingTrust(false);
            await reload();
            setStatus(`Trust added for ${trust.subject}.`);
          }}
        />
      )}
      {removing?.kind === "token" && (
        <Confirm
          title={`Revoke token ${removing.token.name}?`}
          confirmLabel="Revoke token"
          danger
          onClose={() => setRemoving(undefined)}
          onConfirm={async () => {
            // Gone already (revoked elsewhere, expired): the list is refreshed whatever the answer.
            try {
              await del(`${url}/tokens/${removing.token.id}`);
            } finally {
              await reload();
            }
            setStatus(`Token ${removing.token.name} revoked.`);
          }}
        >
          <p>Anything still using it is refused from its next request. This cannot be undone.</p>
        </Confirm>
      )}
      {removing?.kind === "trust" && (
        <Confirm
          title="Remove this trust?"
          confirmLabel="Remove trust"
          danger
          onClose={() => setRemoving(undefined)}
          onConfirm={async () => {
            try {
              await del(`${url}/trusts/${removing.trust.id}`);
            } finally {
              await reload();
            }
            setStatus(`Trust removed for ${removing.trust.subject}.`);
          }}
        >
          <p>
            Workloads matching <code>{removing.trust.subject}</code> from <code>{removing.trust.issuer}</code> can no longer exchange their
            identity tokens, and access tokens they already got through it stop working at once.
          </p>
        </Confirm>
      )}
    </div>
  );
}

/**
 * An address or network in CIDR form, checked here so the field can say which line is wrong,
 * by the API's rule (service-accounts.service.ts parseCidr): no leading zeros, an
 * IPv4-mapped network only from /96.
 */
function isNetwork(text: string): boolean {
  const [address = "", prefix, ...rest] = text.split("/");
  if (rest.length > 0 || (prefix !== undefined && !/^(0|[1-9]\d{0,2})$/.test(prefix))) return false;
  const v4 = /^(0|[1-9]\d{0,2})\.(0|[1-9]\d{0,2})\.(0|[1-9]\d{0,2})\.(0|[1-9]\d{0,2})$/.exec(address);
  if (v4) return v4.slice(1).every((n) => Number(n) <= 255) && (prefix === undefined || Number(prefix) <= 32);
  if (!address.includes(":") || !/^[0-9a-f:.]+$/i.test(address)) return false;
  let hostname: string;
  try {
    hostname = new URL(`http://[${address}]/`).hostname;
  } catch {
    return false;
  }
  if (prefix === undefined) return true;
  return Number(prefix) <= 128 && !(isMappedIpv4(hostname) && Number(prefix) < 96);
}

/** `[::ffff:a00:1]`: an IPv4 address written as IPv6 (the URL parser's normal form). */
function isMappedIpv4(hostname: string): boolean {
  return /^\[::ffff:[0-9a-f]{1,4}:[0-9a-f]{1,4}\]$/.test(hostname);
}

/** Networks a token may be limited to at most (the API's). */
const MAX_NETWORKS = 20;

const EXPIRY_CHOICES = [
  { value: "30", label: "30 days" },
  { value: "90", label: "90 days" },
  { value: "365", label: "365 days" },
  { value: "custom", label: "Another number of days" },
  { value: "never", label: "No expiry" },
];

function NewToken({
  url,
  accountName,
  onClose,
  onCreated,
}: {
  url: string;
  accountName: string;
  onClose(): void;
  onCreated(name: string): Promise<void>;
}) {
  const [name, setName] = useState("");
  const [expiry, setExpiry] = useState("90");
  const [days, setDays] = useState("");
  const [networks, setNetworks] = useState("");
  const [problem, setProblem] = useState<string | undefined>(undefined);
  // The field the problem is about: marked invalid, and given the focus.
  const [problemAt, setProblemAt] = useState<"name" | "networks" | undefined>(undefined);
  const nameField = useRef<HTMLInputElement>(null);
  const networksField = useRef<HTMLTextAreaElement>(null);
  const refuse = (at: "name" | "networks", text: string) => {
    setProblem(text);
    setProblemAt(at);
    (at === "name" ? nameField : networksField).current?.focus();
  };
  // The token itself: only here, gone with this dialog.
  const [created, setCreated] = useState<ServiceTokenCreated | undefined>(undefined);
  const action = useAction();

  if (created) {
    return (
      <Dialog title={`Token ${created.tokenInfo.name} created`} onClose={onClose} wide>
        <ShownOnce created={created} onDone={onClose} />
      </Dialog>
    );
  }

  return (
    <Dialog title={`New token for ${accountName}`} onClose={onClose} busy={action.busy}>
      <form
        onSubmit={async (e) => {
          e.preventDefault();
          setProblem(undefined);
          setProblemAt(undefined);
          action.clear();
          const cidrs = networks
            .split("\n")
            .map((line) => line.trim())
            .filter(Boolean);
          if (!name.trim()) {
            refuse("name", "Give the token a name.");
            return;
          }
          const wrong = cidrs.find((line) => !isNetwork(line));
          if (wrong) {
            refuse("networks", `“${wrong}” is not a network: write one per line like 203.0.113.0/24, 2001:db8::/32 or a single address.`);
            return;
          }
          if (cidrs.length > MAX_NETWORKS) {
            refuse("networks", `At most ${MAX_NETWORKS} networks: ${cidrs.length} are listed.`);
            return;
          }
          const expiresInDays = expiry === "never" ? null : Number(expiry === "custom" ? days : expiry);
          const result = await action.run(() =>
            post<ServiceTokenCreated>(`${url}/tokens`, {
              name: name.trim(),
              expiresInDays,
              ...(cidrs.length ? { allowedCidrs: cidrs } : {}),
            }),
          );
          if (result) {
            setCreated(result);
            await onCreated(result.tokenInfo.name);
          }
        }}
      >
        <label class="field">
          <span>Name</span>
          <input
            ref={nameField}
            required
            maxLength={60}
            value={name}
            onInput={(e) => setName(e.currentTarget.value)}
            autoComplete="off"
            spellcheck={false}
            aria-describedby="token-name-hint"
            aria-invalid={problemAt === "name"}
          />
        </label>
        <p id="token-name-hint" class="muted small">
          Where it is used, so you know which one to revoke later: github-deploy, web-1.
        </p>
        <div class="inline-fields">
          <label class="field">
            <span>Expires after</span>
            <select value={expiry} onChange={(e) => setExpiry(e.currentTarget.value)}>
              {EXPIRY_CHOICES.map((c) => (
                <option key={c.value} value={c.value}>
                  {c.label}
                </option>
              ))}
            </select>
          </label>
          {expiry === "custom" && (
            <label class="field">
              <span>Days (1 to 365)</span>
              <input
                type="number"
                required
                min={1}
                max={365}
                step={1}
                inputMode="numeric"
                value={days}
                onInput={(e) => setDays(e.currentTarget.value)}
              />
            </label>
          )}
        </div>
        {expiry === "never" && (
          <p class="muted small">A token without expiry works until it is revoked. The security overview counts these as a warning.</p>
        )}
        <label class="field">
          <span>Allowed networks (optional)</span>
          <textarea
            ref={networksField}
            rows={3}
            class="mono"
            value={networks}
            onInput={(e) => setNetworks(e.currentTarget.value)}
            autoComplete="off"
            spellcheck={false}
            aria-describedby="token-networks-hint"
            aria-invalid={problemAt === "networks"}
          />
        </label>
        <p id="token-networks-hint" class="muted small">
          One network per line, such as 203.0.113.0/24 or 2001:db8::/32, or a single address. Requests from anywhere else are refused.
          Empty: any address.
        </p>
        <ErrorText error={problem ?? action.error} />
        <FormActions label="Create token" busyLabel="Creating…" busy={action.busy} onCancel={onClose} />
      </form>
    </Dialog>
  );
}

/** The new token, once: a read-only field to select or copy, and the warning tied to it. */
function ShownOnce({ created, onDone }: { created: ServiceTokenCreated; onDone(): void }) {
  const field = useRef<HTMLInputElement>(null);
  // The form and its focused button are gone: focus goes to the token, which reads the warning.
  useEffect(() => {
    field.current?.focus();
    field.current?.select();
  }, []);
  const info = created.tokenInfo;
  return (
    <div class="stack">
      <p id="token-once" class="notice">
        <strong>You will not see this token again.</strong> Copy it now and store it where it will be used, such as your CI system's
        secrets. If it is lost, create a new token and revoke this one.
      </p>
      <div class="field">
        <span id="token-label">Service token</span>
        <div class="copy-row">
          <input
            ref={field}
            aria-labelledby="token-label"
            readOnly
            class="mono"
            value={created.token}
            aria-describedby="token-once"
            autoComplete="off"
            spellcheck={false}
            onFocus={(e) => e.currentTarget.select()}
          />
          <CopyButton text={created.token} what="token" />
        </div>
      </div>
      <p class="muted small">
        {info.expiresAt ? (
          <>
            Expires <Time iso={info.expiresAt} />.
          </>
        ) : (
          "Never expires."
        )}{" "}
        {info.allowedCidrs.length ? `Accepted only from ${info.allowedCidrs.join(", ")}.` : "Accepted from any address."}
      </p>
      <div class="actions">
        <button type="button" class="primary" onClick={onDone}>
          Done
        </button>
      </div>
    </div>
  );
}

function NewTrust({ url, onClose, onAdded }: { url: string; onClose(): void; onAdded(trust: Trust): Promise<void> }) {
  const [issuer, setIssuer] = useState("");
  const [audience, setAudience] = useState("");
  const [subject, setSubject] = useState("");
  const [claims, setClaims] = useState("");
  const [filled, setFilled] = useState("");
  const [problem, setProblem] = useState<string | undefined>(undefined);
  const action = useAction();
  const serverUrl = window.location.origin;

  return (
    <Dialog title="Add a trust" onClose={onClose} wide busy={action.busy}>
      <form
        onSubmit={async (e) => {
          e.preventDefault();
          setProblem(undefined);
          action.clear();
          if (!isAllowedIssuerUrl(issuer.trim())) {
            setProblem("The issuer must be the identity provider's https address, such as https://token.actions.githubusercontent.com.");
            return;
          }
          const parsed: Record<string, string> = {};
          for (const line of claims
            .split("\n")
            .map((l) => l.trim())
            .filter(Boolean)) {
            const eq = line.indexOf("=");
            if (eq < 1) {
              setProblem(`Write each claim as name=value on its own line: “${line}” is not.`);
              return;
            }
            const claimName = line.slice(0, eq).trim();
            if (claimName.length > 100) {
              setProblem(`A claim name has at most 100 characters: “${claimName.slice(0, 20)}…” has more.`);
              return;
            }
            // The server's JSON reader refuses that name outright (prototype poisoning).
            if (claimName === "__proto__") {
              setProblem("A claim cannot be named __proto__.");
              return;
            }
            if (Object.hasOwn(parsed, claimName)) {
              setProblem(`The claim ${claimName} is given twice: a claim has one value.`);
              return;
            }
            parsed[claimName] = line.slice(eq + 1).trim();
          }
          if (Object.keys(parsed).length > 20) {
            setProblem("At most 20 claims.");
            return;
          }
          if (!audience.trim() || !subject.trim()) {
            setProblem("The audience and the subject cannot be blank.");
            return;
          }
          // Checked, not cut by maxLength: a pasted subject cut short would be saved, and every exchange refused.
          const tooLong = (
            [
              ["issuer", issuer.trim()],
              ["audience", audience.trim()],
              ["subject", subject.trim()],
              ...Object.entries(parsed).map(([claimName, value]) => [`value of the claim ${claimName}`, value]),
            ] as const
          ).find(([, text]) => text.length > TRUST_TEXT_MAX);
          if (tooLong) {
            setProblem(`The ${tooLong[0]} has at most ${TRUST_TEXT_MAX} characters: it has ${tooLong[1].length}.`);
            return;
          }
          const body = {
            issuer: issuer.trim(),
            audience: audience.trim(),
            subject: subject.trim(),
            ...(Object.keys(parsed).length ? { claims: parsed } : {}),
          };
          const result = await action.run(() => post<{ trust: Trust }>(`${url}/trusts`, body));
          if (result) await onAdded(result.trust);
        }}
      >
        <div class="actions">
          <button
            type="button"
            onClick={() => {
              setIssuer(GITHUB_ISSUER);
              setAudience(serverUrl);
              setSubject(GITHUB_SUBJECT);
              setFilled("Filled in for GitHub Actions: replace OWNER/REPO with your repository, and the branch if it is not main.");
            }}
          >
            Fill in the GitHub Actions example
          </button>
        </div>
        <p class="status" role="status">
          {filled}
        </p>
        <label class="field">
          <span>Issuer</span>
          <input
            required
            type="url"
            class="mono"
            value={issuer}
            onInput={(e) => setIssuer(e.currentTarget.value)}
            autoComplete="off"
            spellcheck={false}
            aria-describedby="trust-issuer-hint"
          />
        </label>
        <p id="trust-issuer-hint" class="muted small">
          The https address of the identity provider that signs the workload's token. GitHub Actions: {GITHUB_ISSUER}.
        </p>
        <label class="field">
          <span>Audience</span>
          <input
            required
            class="mono"
            value={audience}
            onInput={(e) => setAudience(e.currentTarget.value)}
            autoComplete="off"
            spellcheck={false}
            aria-describedby="trust-audience-hint"
          />
        </label>
        <p id="trust-audience-hint" class="muted small">
          The value the workload requests its token for (the token's <code>aud</code>). The secrets CLI asks for this server's address:{" "}
          {serverUrl}.
        </p>
        <label class="field">
          <span>Subject</span>
          <input
            required
            class="mono"
            value={subject}
            onInput={(e) => setSubject(e.currentTarget.value)}
            autoComplete="off"
            spellcheck={false}
            aria-describedby="trust-subject-hint"
          />
        </label>
        <p id="trust-subject-hint" class="muted small">
          Which workload (the token's <code>sub</code>): exact, or with <code>*</code> matching any run of characters, as in{" "}
          <code>repo:acme/api:*</code>. Keep it as narrow as you can.
        </p>
        <label class="field">
          <span>Claims (optional)</span>
          <textarea
            rows={3}
            class="mono"
            value={claims}
            onInput={(e) => setClaims(e.currentTarget.value)}
            autoComplete="off"
            spellcheck={false}
            aria-describedby="trust-claims-hint"
          />
        </label>
        <p id="trust-claims-hint" class="muted small">
          Other claims that must match exactly, one <code>name=value</code> per line, such as <code>environment=production</code>.
        </p>
        <p class="muted small">
          In GitHub Actions the job needs <code>permissions: id-token: write</code> to get an identity token.
        </p>
        <ErrorText error={problem ?? action.error} />
        <FormActions label="Add trust" busyLabel="Adding…" busy={action.busy} onCancel={onClose} />
      </form>
    </Dialog>
  );
}
