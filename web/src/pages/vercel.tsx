// The Vercel integration: connect with a token, link a Vercel project, map environments
// to targets, conflict policy, deploy hook, auto-redeploy, sync, status, disconnect.
// The token and the hook URL are sent once and never shown again (the API never returns them).
import { useEffect, useState } from "preact/hooks";
import { del, get, post, projectPath, put, type HostingConnection, type HostingOptions, type Project, type SyncSummary, type Target } from "../api.ts";
import { DangerZone, ErrorText, FormActions, LoadState, Time, envLabel, useAction, useLoad } from "../ui.tsx";

const TARGETS = ["development", "preview", "production"] as const satisfies readonly Target[];

type Connection = HostingConnection;
type Connected = Extract<Connection, { connected: true }>;

/** Why syncing paused (pausedReason), ending "…and no longer manages this project's integrations". */
const PAUSE_TEXT: Record<string, string> = {
  connector_role_changed: "had their role changed",
  connector_removed: "was removed from the project",
  connector_left: "left the project",
  connector_disabled: "had their account disabled",
};

const STATUS_TEXT: Record<Connected["status"], string> = {
  connected: "Token saved; no Vercel project linked yet",
  active: "Active",
  attention: "Needs attention: reconnect with a new token",
};

export function VercelPage({ project }: { project: Project }) {
  const base = `${projectPath(project.id)}/integrations/hosting`;
  const connection = useLoad(() => get<Connection>(base), [base]);
  return (
    <div class="stack">
      <h2>Vercel</h2>
      <LoadState loaded={connection}>
        {(c) =>
          c.connected ? (
            <Connected base={base} connection={c} reload={connection.reload} onChange={(next) => connection.setData(next)} />
          ) : (
            <ConnectForm base={base} onConnected={(next) => connection.setData(next)} />
          )
        }
      </LoadState>
    </div>
  );
}

function ConnectForm({ base, onConnected, reconnect }: { base: string; onConnected(c: Connection): void; reconnect?: boolean }) {
  const [token, setToken] = useState("");
  const [teamId, setTeamId] = useState("");
  const action = useAction();
  return (
    <form
      class="card stack"
      onSubmit={async (e) => {
        e.preventDefault();
        const result = await action.run(() => post<Connection>(base, { token: token.trim(), ...(teamId.trim() ? { teamId: teamId.trim() } : {}) }));
        if (result) {
          setToken("");
          onConnected(result);
        }
      }}
    >
      <h3>{reconnect ? "Reconnect Vercel" : "Connect Vercel"}</h3>
      <p class="muted small">
        Create an access token in your Vercel account settings. It is stored encrypted on this server and is never shown again.
      </p>
      <label class="field">
        <span>Vercel access token</span>
        <input type="password" required autoComplete="off" value={token} onInput={(e) => setToken(e.currentTarget.value)} />
      </label>
      <label class="field">
        <span>Team ID (optional)</span>
        <input placeholder="team_…" value={teamId} onInput={(e) => setTeamId(e.currentTarget.value)} autoComplete="off" spellcheck={false} />
      </label>
      <ErrorText error={action.error} />
      <FormActions label={reconnect ? "Reconnect" : "Connect"} busyLabel="Connecting…" busy={action.busy} />
    </form>
  );
}

function Connected({ base, connection: c, reload, onChange }: { base: string; connection: Connected; reload(): Promise<void>; onChange(c: Connection): void }) {
  const [teamId, setTeamId] = useState(c.teamId ?? "");
  // A paused connection's token is not used, not even to list projects, until someone reconnects.
  const options = useLoad(
    () => (c.paused ? Promise.resolve({ teams: [], projects: [] }) : get<HostingOptions>(`${base}/options${teamId ? `?teamId=${encodeURIComponent(teamId)}` : ""}`)),
    [base, teamId, c.paused],
  );
  const [hostProjectId, setHostProjectId] = useState(c.hostProjectId ?? "");
  const [mappings, setMappings] = useState<Record<string, string>>(c.mappings ?? {});
  const [conflictPolicy, setConflictPolicy] = useState(c.conflictPolicy);
  const [autoRedeploy, setAutoRedeploy] = useState(c.autoRedeploy);
  const [hookUrl, setHookUrl] = useState("");
  const [removeHook, setRemoveHook] = useState(false);
  const [saved, setSaved] = useState(false);
  const [syncResult, setSyncResult] = useState<SyncSummary | undefined>(undefined);
  const save = useAction();
  const sync = useAction();

  // While a sync runs in the background, look again now and then.
  useEffect(() => {
    if (!c.syncing) return;
    const timer = setTimeout(() => void reload(), 3000);
    return () => clearTimeout(timer);
  }, [c.syncing, c.lastSyncAt]);

  const hookWillExist = removeHook ? false : hookUrl.trim() !== "" || c.hookConfigured;
  const linked = c.hostProjectId !== null && c.status !== "connected";
  const who = c.connectedBy?.email ?? "The person who connected Vercel";

  return (
    <>
      <section class="card" aria-labelledby="vercel-status">
        <h3 id="vercel-status">Status</h3>
        {c.paused && (
          <div class="notice" role="alert">
            <p>
              <strong>Syncing is paused.</strong> {who} {c.pausedReason ? (PAUSE_TEXT[c.pausedReason] ?? "lost their rights") : "lost their rights"} and no
              longer manages this project's integrations, so the access token they saved is not used. Nothing is sent to Vercel until an admin or the owner
              reconnects with their own token below; changes made meanwhile are sent then.
            </p>
          </div>
        )}
        <dl class="kv">
          <dt>Connection</dt>
          <dd>
            <span class={`badge status-${c.status}`}>{c.status}</span> <span>{STATUS_TEXT[c.status]}</span>
            {c.paused && (
              <>
                {" "}
                <span class="badge status-attention">paused</span>
                {c.pausedAt && (
                  <span class="small">
                    {" "}
                    since <Time iso={c.pausedAt} />
                  </span>
                )}
              </>
            )}
          </dd>
          <dt>Vercel project</dt>
          <dd>{c.hostProjectName ?? c.hostProjectId ?? "none linked"}</dd>
          <dt>Team</dt>
          <dd>{c.teamId ?? "personal account"}</dd>
          <dt>Connected by</dt>
          <dd>{c.connectedBy ? (c.connectedBy.email ?? "a former user") : "not recorded"}</dd>
          <dt>Last sync</dt>
          <dd>
            {c.lastSyncAt ? (
              <>
                <Time iso={c.lastSyncAt} /> {c.lastSyncStatus ?? ""}
              </>
            ) : (
              "never"
            )}
            {c.syncing && <span class="badge">syncing…</span>}
          </dd>
          <dt>Changes waiting to sync</dt>
          <dd>{c.pending}</dd>
          {c.lastError && (
            <>
              <dt>Last error</dt>
              <dd class="error-text">{c.lastError}</dd>
            </>
          )}
          {c.lastRun && (
            <>
              <dt>Last run</dt>
              <dd>
                <Summary value={c.lastRun} />
              </dd>
            </>
          )}
          {c.lastDeployment && (
            <>
              <dt>Last deployment</dt>
              <dd>
                <Summary value={c.lastDeployment} />
              </dd>
            </>
          )}
        </dl>
        <div class="actions">
          <button type="button" class="primary" disabled={sync.busy || !linked || c.paused} onClick={() => void runSync(false)}>
            {sync.busy ? "Syncing…" : "Sync now"}
          </button>
          <button type="button" disabled={sync.busy || !linked || c.paused || !c.hookConfigured} onClick={() => void runSync(true)} title={c.hookConfigured ? undefined : "Add a deploy hook to redeploy"}>
            Sync and redeploy
          </button>
          <button type="button" onClick={() => void reload()}>
            Refresh status
          </button>
        </div>
        <ErrorText error={sync.error} />
        {syncResult && (
          <div class="notice" role="status">
            <p>Sync finished.</p>
            <Summary value={syncResult} />
          </div>
        )}
      </section>

      {(c.status === "attention" || c.paused) && <ConnectForm base={base} onConnected={onChange} reconnect />}

      {!c.paused && (
        <form
          class="card stack"
          onSubmit={async (e) => {
            e.preventDefault();
            setSaved(false);
            const body: Record<string, unknown> = {
              hostProjectId,
              mappings: Object.fromEntries(Object.entries(mappings).filter(([, target]) => target)),
              conflictPolicy,
              autoRedeploy: hookWillExist && autoRedeploy,
            };
            if (teamId) body.teamId = teamId;
            if (removeHook) body.deployHookUrl = null;
            else if (hookUrl.trim()) body.deployHookUrl = hookUrl.trim();
            const result = await save.run(() => put<Connection>(base, body));
            if (result) {
              setSaved(true);
              setHookUrl("");
              setRemoveHook(false);
              onChange(result);
            }
          }}
        >
          <h3>Link and settings</h3>
          <LoadState loaded={options}>
            {(o) => (
              <div class="inline-fields">
                {o.teams.length > 0 && (
                  <label class="field">
                    <span>Team</span>
                    <select
                      value={teamId}
                      onChange={(e) => {
                        setTeamId(e.currentTarget.value);
                        setHostProjectId("");
                      }}
                    >
                      <option value="">Personal account</option>
                      {o.teams.map((t) => (
                        <option key={t.id} value={t.id}>
                          {t.name}
                        </option>
                      ))}
                    </select>
                  </label>
                )}
                <label class="field">
                  <span>Vercel project</span>
                  <select required value={hostProjectId} onChange={(e) => setHostProjectId(e.currentTarget.value)}>
                    <option value="">Choose a project…</option>
                    {o.projects.map((p) => (
                      <option key={p.id} value={p.id}>
                        {p.name}
                      </option>
                    ))}
                  </select>
                </label>
              </div>
            )}
          </LoadState>
          <fieldset>
            <legend>Environments to Vercel targets</legend>
            <p class="muted small">Each environment syncs to at most one target; two environments cannot share a target.</p>
            <div class="inline-fields">
              {c.environments.map((env) => (
                <label key={env} class="field">
                  <span>{envLabel(env)}</span>
                  <select value={mappings[env] ?? ""} onChange={(e) => setMappings({ ...mappings, [env]: e.currentTarget.value })}>
                    <option value="">Not synced</option>
                    {TARGETS.map((t) => (
                      <option key={t} value={t}>
                        {t}
                      </option>
                    ))}
                  </select>
                </label>
              ))}
            </div>
          </fieldset>
          <fieldset>
            <legend>When a variable already exists at Vercel</legend>
            <label class="check">
              <input type="radio" name="conflictPolicy" value="skip" checked={conflictPolicy === "skip"} onChange={() => setConflictPolicy("skip")} />
              Keep Vercel's value (skip)
            </label>
            <label class="check">
              <input type="radio" name="conflictPolicy" value="overwrite" checked={conflictPolicy === "overwrite"} onChange={() => setConflictPolicy("overwrite")} />
              Replace it with ours (overwrite)
            </label>
          </fieldset>
          <label class="field">
            <span>Deploy hook URL {c.hookConfigured ? "(one is saved; enter a new one to replace it)" : "(optional)"}</span>
            <input
              type="password"
              autoComplete="off"
              value={hookUrl}
              disabled={removeHook}
              onInput={(e) => setHookUrl(e.currentTarget.value)}
              placeholder="https://api.vercel.com/v1/integrations/deploy/…"
            />
          </label>
          {c.hookConfigured && (
            <label class="check">
              <input type="checkbox" checked={removeHook} onChange={(e) => setRemoveHook(e.currentTarget.checked)} />
              Remove the saved deploy hook
            </label>
          )}
          <label class="check">
            <input type="checkbox" checked={autoRedeploy && hookWillExist} disabled={!hookWillExist} onChange={(e) => setAutoRedeploy(e.currentTarget.checked)} />
            Redeploy automatically after each sync {hookWillExist ? "" : "(needs a deploy hook)"}
          </label>
          <ErrorText error={save.error} />
          <p class="status" role="status">
            {saved ? "Saved." : ""}
          </p>
          <FormActions label="Save" busyLabel="Saving…" busy={save.busy} />
        </form>
      )}

      <DangerZone
        title="Disconnect"
        text="Removes the saved token and settings. Variables already at Vercel stay there."
        button="Disconnect Vercel"
        confirmTitle="Disconnect Vercel?"
        confirmLabel="Disconnect"
        onConfirm={async () => {
          await del(base);
          onChange({ connected: false });
        }}
      >
        <p>Syncing stops. Variables already at Vercel stay there.</p>
      </DangerZone>
    </>
  );

  async function runSync(redeploy: boolean) {
    setSyncResult(undefined);
    const result = await sync.run(() => post<{ summary: SyncSummary }>(`${base}/sync`, { redeploy }));
    if (result) setSyncResult(result.summary);
    await reload();
  }
}

/** A run or deployment summary of fields the API leaves open, as short readable text. */
function Summary({ value }: { value: object }) {
  const parts = Object.entries(value)
    .filter(([, v]) => v !== null && v !== undefined && typeof v !== "object")
    .map(([k, v]) => {
      const text = typeof v === "string" && /^\d{4}-\d\d-\d\dT/.test(v) ? new Date(v).toLocaleString() : String(v);
      return `${k.replace(/([a-z])([A-Z])/g, "$1 $2").toLowerCase()}: ${text}`;
    });
  return <span class="small">{parts.join(" · ")}</span>;
}
