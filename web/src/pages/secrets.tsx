// The secrets of one environment: a sortable grid (reveal and copy audited), editing in
// place, bulk actions, and the overview across environments (?view=compare).
// Values live only in this page's memory: never in storage or the URL.
import { useEffect, useState } from "preact/hooks";
import {
  ApiError,
  type CopyAnswer,
  del,
  type Environment,
  envPath,
  get,
  type Permission,
  type Project,
  post,
  type SecretMeta,
  type SecretValue,
} from "../api.ts";
import { navigate, useLocation } from "../router.ts";
import { Confirm, ErrorText, envLabel, Link, LoadState, messageOf, useLoad } from "../ui.tsx";
import { BulkBar } from "./secrets-bulk.tsx";
import { hasKeyShape, isSecretGone, REVEAL_NOTE } from "./secrets-common.tsx";
import { CompareView } from "./secrets-compare.tsx";
import { CreateSecret } from "./secrets-create.tsx";
import { EditSecret } from "./secrets-edit.tsx";
import { ExportButtons } from "./secrets-export.tsx";
import { SecretsGrid, type Sort, sortSecrets } from "./secrets-grid.tsx";
import { HistoryDrawer } from "./secrets-history.tsx";
import type { MenuItem } from "./secrets-row-menu.tsx";

interface CopyAsk {
  secret: SecretMeta;
  to: Environment;
}

export function SecretsPage({ project, env, onChanged }: { project: Project; env: Environment; onChanged(): Promise<void> }) {
  const base = envPath(project.id, env);
  const location = useLocation();
  const view = location.search.get("view") === "compare" ? "compare" : "grid";
  // `?delete=KEY1,KEY2`: the CLI's `secrets delete` hands over here, because only a browser
  // session may delete. The keys are selected and the confirmation opens; nothing is deleted
  // without the click.
  const deleteRequest = location.search.get("delete");
  const list = useLoad(() => get<{ secrets: SecretMeta[] }>(`${base}/secrets`).then((r) => r.secrets), [base]);
  const [query, setQuery] = useState("");
  const [sort, setSort] = useState<Sort>({ column: "key", descending: false });
  // With the version read: a value the list shows at another version (saved elsewhere since)
  // is not shown or copied as if it were the current one.
  const [revealedAt, setRevealed] = useState<Record<string, { value: string; version: number }>>({});
  const [revealing, setRevealing] = useState<string | undefined>(undefined);
  const [selected, setSelected] = useState<Set<string>>(new Set());
  const [rowError, setRowError] = useState<string | undefined>(undefined);
  const [notice, setNotice] = useState("");
  const [creating, setCreating] = useState(false);
  const [editing, setEditing] = useState<SecretMeta | undefined>(undefined);
  const [deleting, setDeleting] = useState<SecretMeta | undefined>(undefined);
  const [history, setHistory] = useState<SecretMeta | undefined>(undefined);
  const [overwriting, setOverwriting] = useState<CopyAsk | undefined>(undefined);
  const can = (permission: Permission) => project.permissions.includes(permission);
  const pagePath = `/projects/${project.id}/${env}`;
  const [confirmBulkDelete, setConfirmBulkDelete] = useState(false);

  useEffect(() => {
    if (!deleteRequest || !list.data) return;
    const wanted = new Set(deleteRequest.split(",").map((key) => key.trim()));
    const found = list.data.filter((s) => wanted.has(s.key));
    // Only keys are named back: the link is anyone's text, and the page must not say it.
    const missing = [...wanted].filter((key) => !found.some((s) => s.key === key) && hasKeyShape(key));
    navigate(pagePath, { replace: true, keepScroll: true });
    if (missing.length > 0) setRowError(`Not in ${env}: ${missing.join(", ")}.`);
    if (found.length === 0 || !can("secrets:delete")) return;
    setSelected(new Set(found.map((s) => s.id)));
    setConfirmBulkDelete(true);
  }, [deleteRequest, list.data]);

  async function readSecret(secret: SecretMeta): Promise<SecretValue> {
    try {
      return (await get<{ secret: SecretValue }>(`${base}/secrets/${secret.id}`)).secret;
    } catch (e) {
      throw await goneElsewhere(secret, e);
    }
  }

  async function readValue(secret: SecretMeta): Promise<string> {
    return (await readSecret(secret)).value;
  }

  /**
   * A secret deleted elsewhere (another tab, a teammate, the CLI) answers 404 to everything:
   * the list is read again so its row goes, and the message says what happened.
   */
  async function goneElsewhere(secret: SecretMeta, e: unknown): Promise<unknown> {
    if (!isSecretGone(e)) return e;
    hide(secret.id);
    await list.reload();
    return new Error(`it was deleted meanwhile (by someone else, or in another tab).`);
  }

  // A failed action's message is about that click: the next action takes it away.
  function startAction() {
    setRowError(undefined);
    setNotice("");
  }

  async function reveal(secret: SecretMeta) {
    startAction();
    setRevealing(secret.id);
    try {
      const { value, version } = await readSecret(secret);
      setRevealed((r) => ({ ...r, [secret.id]: { value, version } }));
      // Saved elsewhere since the list was read: the list catches up, so the value shows
      // beside its own version rather than not at all.
      if (version !== secret.version) await list.reload();
    } catch (e) {
      setRowError(`${secret.key}: ${messageOf(e)}`);
    } finally {
      setRevealing(undefined);
    }
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

  async function copyTo(secret: SecretMeta, to: Environment, overwrite: boolean): Promise<void> {
    const answer = await post<CopyAnswer>(`${base}/secrets/${secret.id}/copy`, { to, overwrite });
    const what = answer.result === "unchanged" ? `${secret.key} in ${to} already had this value.` : `Copied ${secret.key} to ${to}.`;
    setNotice(what);
    await onChanged();
  }

  function menuFor(secret: SecretMeta): MenuItem[] {
    const items: MenuItem[] = [];
    const open = (set: (s: SecretMeta) => void) => () => {
      startAction();
      set(secret);
    };
    if (can("secrets:update")) items.push({ label: "Edit", onSelect: open(setEditing) });
    items.push({ label: "History", onSelect: open(setHistory) });
    if (can("secrets:create")) {
      for (const to of project.environments.filter((e) => e !== env)) {
        items.push({
          label: `Copy to ${to}`,
          onSelect: () => {
            startAction();
            copyTo(secret, to, false).catch((e) => {
              // The key is there already: replacing it is a second, confirmed step.
              if (e instanceof ApiError && e.status === 409 && can("secrets:update")) setOverwriting({ secret, to });
              else setRowError(`${secret.key}: ${messageOf(e)}`);
            });
          },
        });
      }
    }
    if (can("secrets:delete")) items.push({ label: "Delete", danger: true, onSelect: open(setDeleting) });
    return items;
  }

  const needle = query.trim().toLowerCase();
  const revealed: Record<string, string> = {};
  for (const secret of list.data ?? []) {
    const read = revealedAt[secret.id];
    if (read?.version === secret.version) revealed[secret.id] = read.value;
  }
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
            <Link class="button" href={`${pagePath}/import`}>
              Import .env
            </Link>
          )}
          <ExportButtons project={project} env={env} onStart={startAction} />
        </div>
      </div>
      {project.environments.length > 1 && (
        <nav class="view-switch" aria-label="Secrets view">
          <Link href={pagePath} aria-current={view === "grid" ? "page" : undefined}>
            {envLabel(env)} only
          </Link>
          <Link href={`${pagePath}?view=compare`} aria-current={view === "compare" ? "page" : undefined}>
            Across environments
          </Link>
        </nav>
      )}
      {view === "compare" ? (
        <CompareView project={project} env={env} onChanged={onChanged} />
      ) : (
        <>
          <label class="field search">
            <span>Search keys</span>
            <input type="search" value={query} onInput={(e) => setQuery(e.currentTarget.value)} placeholder="e.g. DATABASE" />
          </label>
          <p class="muted small" id="reveal-note">
            Values stay hidden until you reveal or copy them. {REVEAL_NOTE}
          </p>
          <ErrorText error={rowError} />
          <p class="status" role="status">
            {notice}
          </p>
          <LoadState loaded={list}>
            {(secrets) => {
              const shown = sortSecrets(
                secrets.filter((s) => s.key.toLowerCase().includes(needle)),
                sort,
              );
              const chosen = sortSecrets(
                secrets.filter((s) => selected.has(s.id)),
                { column: "key", descending: false },
              );
              return (
                <>
                  {chosen.length > 0 && (
                    <BulkBar
                      selected={chosen}
                      base={base}
                      env={env}
                      canDelete={can("secrets:delete")}
                      confirmDelete={confirmBulkDelete}
                      onConfirmClosed={() => setConfirmBulkDelete(false)}
                      onClear={() => setSelected(new Set())}
                      onDeleted={async (message) => {
                        setSelected(new Set());
                        for (const s of chosen) hide(s.id);
                        setNotice(message);
                        await changed();
                      }}
                    />
                  )}
                  {secrets.length === 0 ? (
                    <p class="empty">No secrets in {env} yet.</p>
                  ) : shown.length === 0 ? (
                    <p class="empty">No key matches “{query}”.</p>
                  ) : (
                    <SecretsGrid
                      env={env}
                      secrets={shown}
                      sort={sort}
                      onSort={setSort}
                      revealed={revealed}
                      revealing={revealing}
                      selected={selected}
                      onSelect={(ids, on) =>
                        setSelected((before) => {
                          const next = new Set(before);
                          for (const id of ids) {
                            if (on) next.add(id);
                            else next.delete(id);
                          }
                          return next;
                        })
                      }
                      onReveal={(secret) => void reveal(secret)}
                      onHide={(secret) => {
                        startAction();
                        hide(secret.id);
                      }}
                      readValue={readValue}
                      onStart={startAction}
                      onCopyFailed={(secret, message) => setRowError(`Could not copy ${secret.key}: ${message}`)}
                      menuFor={menuFor}
                    />
                  )}
                </>
              );
            }}
          </LoadState>
        </>
      )}
      {creating && (
        <CreateSecret
          base={base}
          env={env}
          existingKeys={new Set((list.data ?? []).map((s) => s.key))}
          onClose={() => setCreating(false)}
          onCreated={async (message) => {
            if (message) setNotice(message);
            await changed();
          }}
        />
      )}
      {editing && (
        <EditSecret
          base={base}
          secret={editing}
          onClose={() => setEditing(undefined)}
          onGone={() => {
            hide(editing.id);
            void list.reload();
          }}
          onSaved={async () => {
            hide(editing.id);
            setNotice(`Saved ${editing.key}.`);
            await changed();
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
            let gone = false;
            try {
              await del(`${base}/secrets/${deleting.id}`);
            } catch (e) {
              // Deleted elsewhere meanwhile: what was asked is done.
              if (!isSecretGone(e)) throw e;
              gone = true;
            }
            setNotice(gone ? `${deleting.key} was already deleted (by someone else, or in another tab).` : `Deleted ${deleting.key}.`);
            hide(deleting.id);
            setSelected((before) => {
              const next = new Set(before);
              next.delete(deleting.id);
              return next;
            });
            await changed();
          }}
        >
          <p>
            This removes <code>{deleting.key}</code> from {env} together with all its earlier versions. It cannot be undone.
          </p>
        </Confirm>
      )}
      {overwriting && (
        <Confirm
          title={`Replace ${overwriting.secret.key} in ${overwriting.to}?`}
          confirmLabel={`Replace in ${overwriting.to}`}
          onClose={() => setOverwriting(undefined)}
          onConfirm={() => copyTo(overwriting.secret, overwriting.to, true)}
        >
          <p>
            <code>{overwriting.secret.key}</code> already exists in {overwriting.to}. Its value becomes the one in {env}, as a new version
            (the old one stays in its history).
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
