// The secrets of one environment: search, reveal (audited), copy, create, edit or rename
// with expectedVersion, delete, history with old values and restore, export.
// Values live only in this component's memory: never in storage or the URL.
import { useEffect, useRef, useState } from "preact/hooks";
import {
  del,
  envPath,
  get,
  patch,
  post,
  request,
  type Environment,
  type Permission,
  type Project,
  type SecretMeta,
  type SecretValue,
  type VersionEntry,
  type VersionHistory,
  type VersionValue,
} from "../api.ts";
import { Confirm, CopyButton, DataTable, Dialog, ErrorText, FormActions, Link, LoadState, RowButton, Time, envLabel, messageOf, useAction, useLoad, whoLabel } from "../ui.tsx";

export const KEY_PATTERN = /^[A-Za-z_][A-Za-z0-9_]*$/;
const REVEAL_NOTE = "Reading a value is recorded in the project's audit log under your name.";

export function SecretsPage({ project, env, onChanged }: { project: Project; env: Environment; onChanged(): Promise<void> }) {
  const base = envPath(project.id, env);
  const list = useLoad(() => get<{ secrets: SecretMeta[] }>(`${base}/secrets`).then((r) => r.secrets), [base]);
  const [query, setQuery] = useState("");
  const [revealed, setRevealed] = useState<Record<string, string>>({});
  const [revealing, setRevealing] = useState<string | undefined>(undefined);
  const [rowError, setRowError] = useState<string | undefined>(undefined);
  const [creating, setCreating] = useState(false);
  const [editing, setEditing] = useState<SecretMeta | undefined>(undefined);
  const [deleting, setDeleting] = useState<SecretMeta | undefined>(undefined);
  const [history, setHistory] = useState<SecretMeta | undefined>(undefined);
  const can = (permission: Permission) => project.permissions.includes(permission);

  async function readValue(secret: SecretMeta): Promise<string> {
    const { secret: full } = await get<{ secret: SecretValue }>(`${base}/secrets/${secret.id}`);
    return full.value;
  }

  async function reveal(secret: SecretMeta) {
    setRowError(undefined);
    setRevealing(secret.id);
    try {
      const value = await readValue(secret);
      setRevealed((r) => ({ ...r, [secret.id]: value }));
    } catch (e) {
      setRowError(`${secret.key}: ${messageOf(e)}`);
    } finally {
      setRevealing(undefined);
    }
  }

  // A failed reveal's message is about that click: the next action takes it away.
  function startAction() {
    setRowError(undefined);
  }

  function hide(id: string) {
    setRevealed((r) => {
      const { [id]: _gone, ...rest } = r;
      return rest;
    });
  }

  async function changed() {
    await list.reload();
    await onChanged();
  }

  const needle = query.trim().toLowerCase();
  return (
    <div class="stack">
      <div class="toolbar">
        <h2>{envLabel(env)} secrets</h2>
        <div class="toolbar-actions">
          {can("secrets:create") && (
            <button
              type="button"
              class="primary"
              onClick={() => {
                startAction();
                setCreating(true);
              }}
            >
              New secret
            </button>
          )}
          {can("secrets:create") && (
            <Link class="button" href={`/projects/${project.id}/${env}/import`}>
              Import .env
            </Link>
          )}
          <ExportButtons project={project} env={env} onStart={startAction} />
        </div>
      </div>
      <label class="field search">
        <span>Search keys</span>
        <input type="search" value={query} onInput={(e) => setQuery(e.currentTarget.value)} placeholder="e.g. DATABASE" />
      </label>
      <p class="muted small" id="reveal-note">
        Values stay hidden until you reveal or copy them. {REVEAL_NOTE}
      </p>
      <ErrorText error={rowError} />
      <LoadState loaded={list}>
        {(secrets) => {
          const shown = secrets.filter((s) => s.key.toLowerCase().includes(needle));
          if (secrets.length === 0) return <p class="empty">No secrets in {env} yet.</p>;
          if (shown.length === 0) return <p class="empty">No key matches “{query}”.</p>;
          return (
            <DataTable class="secrets" caption={<>Secrets of {env}, most recently updated first</>} columns={["Key", "Value", "Version", "Updated"]} actions>
              {shown.map((secret) => {
                const value = revealed[secret.id];
                return (
                  <tr key={secret.id}>
                    <th scope="row">
                      <code>{secret.key}</code>
                    </th>
                    <td class="value-cell">
                      {value === undefined ? (
                        <span class="masked">
                          <span aria-hidden="true">••••••••</span>
                          <span class="sr-only">hidden</span>
                        </span>
                      ) : (
                        <code class="value" tabIndex={0}>
                          {value}
                        </code>
                      )}
                    </td>
                    <td>v{secret.version}</td>
                    <td>
                      <Time iso={secret.updatedAt} />
                    </td>
                    <td class="row-actions">
                      {value === undefined ? (
                        <RowButton
                          title={REVEAL_NOTE}
                          aria-describedby="reveal-note"
                          label={`Reveal ${secret.key}`}
                          disabled={revealing === secret.id}
                          onClick={() => void reveal(secret)}
                        >
                          {revealing === secret.id ? "Revealing…" : "Reveal"}
                        </RowButton>
                      ) : (
                        <RowButton
                          label={`Hide ${secret.key}`}
                          onClick={() => {
                            startAction();
                            hide(secret.id);
                          }}
                        >
                          Hide
                        </RowButton>
                      )}
                      <span title={REVEAL_NOTE}>
                        <CopyButton what={secret.key} text={() => value ?? readValue(secret)} onStart={startAction} />
                      </span>
                      {can("secrets:update") && (
                        <RowButton
                          label={`Edit ${secret.key}`}
                          onClick={() => {
                            startAction();
                            setEditing(secret);
                          }}
                        >
                          Edit
                        </RowButton>
                      )}
                      <RowButton
                        label={`History of ${secret.key}`}
                        onClick={() => {
                          startAction();
                          setHistory(secret);
                        }}
                      >
                        History
                      </RowButton>
                      {can("secrets:delete") && (
                        <RowButton
                          danger
                          label={`Delete ${secret.key}`}
                          onClick={() => {
                            startAction();
                            setDeleting(secret);
                          }}
                        >
                          Delete
                        </RowButton>
                      )}
                    </td>
                  </tr>
                );
              })}
            </DataTable>
          );
        }}
      </LoadState>
      {creating && <CreateSecret base={base} env={env} onClose={() => setCreating(false)} onCreated={changed} />}
      {editing && (
        <EditSecret
          base={base}
          secret={editing}
          onClose={() => setEditing(undefined)}
          onSaved={async () => {
            hide(editing.id);
            await changed();
          }}
          onReload={async () => {
            await list.reload();
            const fresh = (await get<{ secrets: SecretMeta[] }>(`${base}/secrets`)).secrets.find((s) => s.id === editing.id);
            hide(editing.id);
            if (fresh) setEditing(fresh);
            else setEditing(undefined);
          }}
        />
      )}
      {deleting && (
        <Confirm
          title={`Delete ${deleting.key}?`}
          confirmLabel="Delete secret"
          danger
          onClose={() => setDeleting(undefined)}
          onConfirm={async () => {
            await del(`${base}/secrets/${deleting.id}`);
            hide(deleting.id);
            await changed();
          }}
        >
          <p>
            This removes <code>{deleting.key}</code> from {env} together with all its earlier versions. It cannot be undone.
          </p>
        </Confirm>
      )}
      {history && (
        <HistoryDrawer
          base={base}
          secret={history}
          canRestore={can("secrets:update")}
          onClose={() => setHistory(undefined)}
          onRestored={async () => {
            hide(history.id);
            await changed();
          }}
        />
      )}
    </div>
  );
}

function CreateSecret({ base, env, onClose, onCreated }: { base: string; env: string; onClose(): void; onCreated(): Promise<void> }) {
  const [key, setKey] = useState("");
  const [value, setValue] = useState("");
  const action = useAction();
  const keyValid = key === "" || KEY_PATTERN.test(key);
  return (
    <Dialog title={`New secret in ${env}`} onClose={onClose}>
      <form
        onSubmit={async (e) => {
          e.preventDefault();
          const result = await action.run(() => post(`${base}/secrets`, { key, value }));
          if (result) {
            onClose();
            await onCreated();
          }
        }}
      >
        <label class="field">
          <span>Key</span>
          <input
            required
            maxLength={128}
            value={key}
            onInput={(e) => setKey(e.currentTarget.value)}
            autoComplete="off"
            spellcheck={false}
            aria-invalid={!keyValid}
            aria-describedby="key-hint"
          />
        </label>
        <p id="key-hint" class={`small ${keyValid ? "muted" : "error-text"}`}>
          Letters, digits and underscores; not starting with a digit.
        </p>
        <label class="field">
          <span>Value</span>
          <textarea required maxLength={10000} rows={4} value={value} onInput={(e) => setValue(e.currentTarget.value)} autoComplete="off" spellcheck={false} />
        </label>
        <ErrorText error={action.error} />
        <FormActions label="Create secret" busyLabel="Saving…" busy={action.busy} disabled={!keyValid} onCancel={onClose} />
      </form>
    </Dialog>
  );
}

function EditSecret(props: { base: string; secret: SecretMeta; onClose(): void; onSaved(): Promise<void>; onReload(): Promise<void> }) {
  const { secret } = props;
  const [key, setKey] = useState(secret.key);
  const [value, setValue] = useState("");
  const action = useAction();
  const keyValid = KEY_PATTERN.test(key);
  return (
    <Dialog title={`Edit ${secret.key}`} onClose={props.onClose}>
      <form
        onSubmit={async (e) => {
          e.preventDefault();
          const body: Record<string, unknown> = { expectedVersion: secret.version };
          if (key !== secret.key) body.key = key;
          if (value !== "") body.value = value;
          const result = await action.run(() => patch(`${props.base}/secrets/${secret.id}`, body));
          if (result) {
            props.onClose();
            await props.onSaved();
          }
        }}
      >
        <p class="muted small">Editing version {secret.version}. Saving fails if someone else changes the secret in the meantime.</p>
        <label class="field">
          <span>Key</span>
          <input required maxLength={128} value={key} onInput={(e) => setKey(e.currentTarget.value)} autoComplete="off" spellcheck={false} aria-invalid={!keyValid} />
        </label>
        <label class="field">
          <span>New value</span>
          <textarea
            maxLength={10000}
            rows={4}
            value={value}
            onInput={(e) => setValue(e.currentTarget.value)}
            placeholder="Leave empty to keep the current value"
            autoComplete="off"
            spellcheck={false}
          />
        </label>
        <ErrorText error={action.error}>
          {action.errorStatus === 409 && (
            <button
              type="button"
              onClick={async () => {
                action.clear();
                await props.onReload();
              }}
            >
              Reload
            </button>
          )}
        </ErrorText>
        <FormActions label="Save" busyLabel="Saving…" busy={action.busy} disabled={!keyValid} onCancel={props.onClose} />
      </form>
    </Dialog>
  );
}

const CHANGE_LABELS: Record<VersionEntry["changeType"], string> = {
  CREATED: "Created",
  UPDATED: "Updated",
  ROLLED_BACK: "Restored",
  BASELINE: "Baseline",
};

function HistoryDrawer(props: { base: string; secret: SecretMeta; canRestore: boolean; onClose(): void; onRestored(): Promise<void> }) {
  const path = `${props.base}/secrets/${props.secret.id}/versions`;
  const history = useLoad(() => get<VersionHistory>(path), [path]);
  const [values, setValues] = useState<Record<number, string>>({});
  const [restoring, setRestoring] = useState<VersionEntry | undefined>(undefined);
  const reveal = useAction();
  return (
    <Dialog title={`History of ${props.secret.key}`} onClose={props.onClose} drawer>
      <p class="muted small">{REVEAL_NOTE}</p>
      <ErrorText error={reveal.error} />
      <LoadState loaded={history}>
        {(h) => (
          <ol class="versions">
            {h.versions.map((v) => (
              <li key={v.versionNumber} class={v.isCurrent ? "current" : undefined}>
                <div class="version-head">
                  <strong>v{v.versionNumber}</strong>
                  <span class={`badge change-${v.changeType.toLowerCase()}`}>{CHANGE_LABELS[v.changeType] ?? v.changeType}</span>
                  {v.isCurrent && <span class="badge">current</span>}
                </div>
                <p class="small">
                  {v.changeType === "ROLLED_BACK" && v.restoredFromVersion !== undefined && <>From v{v.restoredFromVersion}, </>}
                  by {v.changedByServiceAccount ? `service account ${v.changedByServiceAccount.name}` : whoLabel(v.changedBy)}, <Time iso={v.createdAt} />
                  {v.key !== props.secret.key && (
                    <>
                      {" "}
                      as <code>{v.key}</code>
                    </>
                  )}
                </p>
                {values[v.versionNumber] !== undefined && (
                  <code class="value block" tabIndex={0}>
                    {values[v.versionNumber]}
                  </code>
                )}
                <div class="row-actions">
                  {values[v.versionNumber] === undefined ? (
                    <RowButton
                      title={REVEAL_NOTE}
                      label={`Reveal version ${v.versionNumber}`}
                      onClick={() =>
                        void reveal.run(async () => {
                          const { version } = await get<{ version: VersionValue }>(`${path}/${v.versionNumber}`);
                          setValues((all) => ({ ...all, [v.versionNumber]: version.value }));
                        })
                      }
                    >
                      Reveal
                    </RowButton>
                  ) : (
                    <RowButton
                      label={`Hide version ${v.versionNumber}`}
                      onClick={() => {
                        reveal.clear();
                        setValues((all) => {
                          const { [v.versionNumber]: _gone, ...rest } = all;
                          return rest;
                        });
                      }}
                    >
                      Hide
                    </RowButton>
                  )}
                  {props.canRestore && !v.isCurrent && (
                    <RowButton
                      label={`Restore version ${v.versionNumber}`}
                      onClick={() => {
                        reveal.clear();
                        setRestoring(v);
                      }}
                    >
                      Restore
                    </RowButton>
                  )}
                </div>
              </li>
            ))}
          </ol>
        )}
      </LoadState>
      {restoring && history.data && (
        <Confirm
          title={`Restore version ${restoring.versionNumber}?`}
          confirmLabel="Restore"
          onClose={() => setRestoring(undefined)}
          onConfirm={async () => {
            await post(`${path}/${restoring.versionNumber}/restore`, { expectedVersion: history.data!.currentVersion });
            await history.reload();
            await props.onRestored();
          }}
        >
          <p>
            The value of version {restoring.versionNumber} becomes the current value as a new version (v{history.data.currentVersion + 1}). Nothing is
            deleted.
          </p>
        </Confirm>
      )}
    </Dialog>
  );
}

type ExportChoice = "dotenv" | "shell" | "docker" | "json" | "yaml";

/** The download menu's entries: the API's format, the label and the file's extension. */
const EXPORT_CHOICES: { format: ExportChoice; label: string; extension: string; type: string }[] = [
  { format: "dotenv", label: "Download .env", extension: "", type: "text/plain" },
  { format: "shell", label: "Download shell script", extension: "sh", type: "text/x-shellscript" },
  { format: "docker", label: "Download Docker env file", extension: "env", type: "text/plain" },
  { format: "json", label: "Download JSON", extension: "json", type: "application/json" },
  { format: "yaml", label: "Download YAML", extension: "yaml", type: "application/yaml" },
];

/**
 * "Export" opens a short list of downloads (a disclosure: Tab and the arrow keys move through
 * it, Escape closes it and returns to the button, focus or a click elsewhere closes it).
 */
function ExportButtons({ project, env, onStart }: { project: Project; env: Environment; onStart(): void }) {
  const action = useAction();
  const [open, setOpen] = useState(false);
  const [which, setWhich] = useState<ExportChoice | undefined>(undefined);
  const [notice, setNotice] = useState("");
  const toggle = useRef<HTMLButtonElement>(null);
  const menu = useRef<HTMLUListElement>(null);
  const menuId = "export-menu";
  useEffect(() => {
    if (!open) return;
    menu.current?.querySelector("button")?.focus();
    const away = (e: Event) => {
      const target = e.target as Node | null;
      if (target && !menu.current?.contains(target) && !toggle.current?.contains(target)) setOpen(false);
    };
    document.addEventListener("pointerdown", away);
    document.addEventListener("focusin", away);
    return () => {
      document.removeEventListener("pointerdown", away);
      document.removeEventListener("focusin", away);
    };
  }, [open]);
  if (!project.permissions.includes("secrets:read")) return null;

  function onMenuKey(e: KeyboardEvent) {
    const items = [...(menu.current?.querySelectorAll("button") ?? [])];
    const at = items.indexOf(document.activeElement as HTMLButtonElement);
    if (e.key === "Escape") {
      e.preventDefault();
      setOpen(false);
      toggle.current?.focus();
    } else if (e.key === "ArrowDown" || e.key === "ArrowUp") {
      e.preventDefault();
      items[(at + (e.key === "ArrowDown" ? 1 : items.length - 1)) % items.length]?.focus();
    } else if (e.key === "Home" || e.key === "End") {
      e.preventDefault();
      items[e.key === "Home" ? 0 : items.length - 1]?.focus();
    }
  }

  async function download(choice: (typeof EXPORT_CHOICES)[number]) {
    onStart();
    setOpen(false);
    toggle.current?.focus();
    setWhich(choice.format);
    setNotice("");
    await action.run(async () => {
      const res = await request("GET", `${envPath(project.id, env)}/export${choice.format === "json" ? "" : `?format=${choice.format}`}`);
      const blob = new Blob([await res.text()], { type: choice.type });
      const name = choice.format === "dotenv" ? `.env.${env}` : `${project.name.replace(/[^A-Za-z0-9._-]+/g, "-")}.${env}.${choice.extension}`;
      const url = URL.createObjectURL(blob);
      const anchor = document.createElement("a");
      anchor.href = url;
      anchor.download = name;
      document.body.append(anchor);
      anchor.click();
      anchor.remove();
      setTimeout(() => URL.revokeObjectURL(url), 10_000);
      const leftOut = Number(res.headers.get("x-secrets-left-out") ?? "0");
      if (leftOut > 0) setNotice(`${leftOut} secret${leftOut === 1 ? " is" : "s are"} left out of ${name}: a comment in the file says why. The JSON export has every value.`);
    });
    setWhich(undefined);
  }
  const note = "Exports contain every value of this environment in plain text; each export is recorded in the audit log.";
  return (
    <>
      <span class="menu-wrap">
        <button
          type="button"
          ref={toggle}
          title={note}
          disabled={action.busy}
          aria-expanded={open ? "true" : "false"}
          aria-controls={menuId}
          onClick={() => setOpen(!open)}
          onKeyDown={(e) => {
            if (e.key === "ArrowDown" && !open) {
              e.preventDefault();
              setOpen(true);
            }
          }}
        >
          {action.busy && which ? "Exporting…" : "Export"} <span aria-hidden="true">▾</span>
        </button>
        <ul id={menuId} ref={menu} class="menu" hidden={!open} onKeyDown={onMenuKey}>
          {EXPORT_CHOICES.map((choice) => (
            <li key={choice.format}>
              <button type="button" title={note} onClick={() => void download(choice)}>
                {choice.label}
              </button>
            </li>
          ))}
        </ul>
      </span>
      {notice && (
        <span class="muted small" role="status">
          {notice}
        </span>
      )}
      {action.error && (
        <span class="error-text" role="alert">
          {action.error}
        </span>
      )}
    </>
  );
}

