// The Vercel integration: connect with a token, the connection's status and syncing, and
// disconnecting; the link and its settings are in vercel-settings.tsx. The token is sent
// once and never shown again (the API never returns it).
import { useEffect, useState } from "preact/hooks";
import { del, get, type Project, post, projectPath, type SyncSummary } from "../api.ts";
import { DangerZone, ErrorText, envLabel, FormActions, LoadState, Time, useAction, useLoad, whileBusy } from "../ui.tsx";
import { type Connected as ConnectedState, type Connection, SettingsForm } from "./vercel-settings.tsx";

/** Why syncing paused (pausedReason), ending "…and no longer manages this project's integrations". */
const PAUSE_TEXT: Record<string, string> = {
  connector_role_changed: "had their role changed",
  connector_removed: "was removed from the project",
  connector_left: "left the project",
  connector_disabled: "had their account disabled",
};

const STATUS_TEXT: Record<ConnectedState["status"], string> = {
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

/**
 * Connecting, or reconnecting a saved connection (`saved`): its team is filled in, since a
 * new token sent without it looks for the linked project in the personal account, misses
 * it, and the link, the settings and the record of our vars would go.
 */
function ConnectForm({ base, onConnected, saved }: { base: string; onConnected(c: Connection): void; saved?: ConnectedState }) {
  const reconnect = saved !== undefined;
  const [token, setToken] = useState("");
  const [teamId, setTeamId] = useState(saved?.teamId ?? "");
  const action = useAction();
  // The server keeps a link only where the new token reaches the linked project: in another
  // team it cannot, and the settings go. Said before, not found out after.
  const unlinks = saved?.hostProjectId != null && teamId.trim() !== (saved.teamId ?? "");
  return (
    <form
      class="card stack"
      onSubmit={async (e) => {
        e.preventDefault();
        const result = await action.run(() =>
          post<Connection>(base, { token: token.trim(), ...(teamId.trim() ? { teamId: teamId.trim() } : {}) }),
        );
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
        <input
          placeholder="team_…"
          value={teamId}
          onInput={(e) => setTeamId(e.currentTarget.value)}
          autoComplete="off"
          spellcheck={false}
        />
      </label>
      {unlinks && (
        <p class="notice" id="vercel-unlink-warning">
          Another team unlinks {saved.hostProjectName ?? "the linked project"}: its environment mappings, the deploy hook and the record of
          the variables this connection created go with it.
        </p>
      )}
      <ErrorText error={action.error} />
      <FormActions
        label={unlinks ? "Reconnect and unlink" : reconnect ? "Reconnect" : "Connect"}
        busyLabel="Connecting…"
        busy={action.busy}
      />
    </form>
  );
}

/** A saved connection: its status and syncing, a way to reconnect, its settings, disconnecting. */
function Connected({
  base,
  connection: c,
  reload,
  onChange,
}: {
  base: string;
  connection: ConnectedState;
  reload(): Promise<void>;
  onChange(c: Connection): void;
}) {
  useSyncPolling(c, reload);
  const [reconnects, setReconnects] = useState(0);
  return (
    <>
      <StatusCard base={base} connection={c} reload={reload} />
      {(c.status === "attention" || c.paused) && <ConnectForm base={base} onConnected={onChange} saved={c} />}
      {/* A rejected token can list and link nothing: the settings come back, fresh, with the new token. */}
      {!c.paused && c.status !== "attention" && (
        <>
          {/* Keyed by reconnects: what was chosen for the old token or team does not carry over. */}
          <SettingsForm key={reconnects} base={base} connection={c} onSaved={onChange} onConnectionChanged={() => void reload()} />
          {/* Another token (one about to expire, a colleague's), or another team, or none: the personal account. */}
          <details class="reconnect">
            <summary>Use another token or team</summary>
            <ConnectForm
              // The team saved with the settings since (or in another tab) is the one to fill in.
              key={c.teamId ?? ""}
              base={base}
              onConnected={(next) => {
                setReconnects((n) => n + 1);
                onChange(next);
              }}
              saved={c}
            />
          </details>
        </>
      )}
      <Disconnect base={base} onDisconnected={onChange} />
    </>
  );
}

/** While a sync runs in the background, look again every few seconds until it has ended. */
function useSyncPolling(c: ConnectedState, reload: () => Promise<void>): void {
  // One chain of looks for as long as it syncs: a look that fails (a 429, the network) is
  // followed by the next all the same.
  useEffect(() => {
    if (!c.syncing) return;
    let stopped = false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const look = async () => {
      await reload();
      if (!stopped) timer = setTimeout(() => void look(), 3000);
    };
    timer = setTimeout(() => void look(), 3000);
    return () => {
      stopped = true;
      clearTimeout(timer);
    };
  }, [c.syncing]);
}

/** Where the connection stands, and the buttons that sync now. */
function StatusCard({ base, connection: c, reload }: { base: string; connection: ConnectedState; reload(): Promise<void> }) {
  return (
    <section class="card" aria-labelledby="vercel-status">
      <h3 id="vercel-status">Status</h3>
      {c.paused && <PausedNotice connection={c} />}
      <ConnectionDetails connection={c} />
      <SyncControls base={base} connection={c} reload={reload} />
    </section>
  );
}

function PausedNotice({ connection: c }: { connection: ConnectedState }) {
  const who = c.connectedBy?.email ?? "The person who connected Vercel";
  return (
    <div class="notice" role="alert">
      <p>
        <strong>Syncing is paused.</strong> {who}{" "}
        {c.pausedReason ? (PAUSE_TEXT[c.pausedReason] ?? "lost their rights") : "lost their rights"} and no longer manages this project's
        integrations, so the access token they saved is not used. Nothing is sent to Vercel until an admin or the owner reconnects with
        their own token below; changes made meanwhile are sent then.
      </p>
    </div>
  );
}

function ConnectionDetails({ connection: c }: { connection: ConnectedState }) {
  return (
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
            <KeyResults results={c.lastRun.results as SyncSummary["results"] | undefined} />
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
  );
}

/** Sync now (and redeploy), and what the sync did. */
function SyncControls({ base, connection: c, reload }: { base: string; connection: ConnectedState; reload(): Promise<void> }) {
  const [syncResult, setSyncResult] = useState<SyncSummary | undefined>(undefined);
  const sync = useAction();
  // A rejected token syncs nothing (the server answers 400): reconnect first.
  const linked = c.hostProjectId !== null && c.status === "active";

  async function runSync(redeploy: boolean) {
    setSyncResult(undefined);
    const result = await sync.run(() => post<{ summary: SyncSummary }>(`${base}/sync`, { redeploy }));
    if (result) setSyncResult(result.summary);
    await reload();
  }

  return (
    <>
      <div class="actions">
        <button type="button" class="primary" disabled={!linked || c.paused} {...whileBusy(sync.busy, () => void runSync(false))}>
          {sync.busy ? "Syncing…" : "Sync now"}
        </button>
        <button
          type="button"
          disabled={!linked || c.paused || !c.hookConfigured}
          {...whileBusy(sync.busy, () => void runSync(true))}
          title={c.hookConfigured ? undefined : "Add a deploy hook to redeploy"}
        >
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
          <KeyResults results={syncResult.results} />
        </div>
      )}
    </>
  );
}

function Disconnect({ base, onDisconnected }: { base: string; onDisconnected(c: Connection): void }) {
  return (
    <DangerZone
      title="Disconnect"
      text="Removes the saved token and settings. Variables already at Vercel stay there."
      button="Disconnect Vercel"
      confirmTitle="Disconnect Vercel?"
      confirmLabel="Disconnect"
      onConfirm={async () => {
        await del(base);
        onDisconnected({ connected: false });
      }}
    >
      <p>Syncing stops. Variables already at Vercel stay there.</p>
    </DangerZone>
  );
}

const REASONS: Record<SyncSummary["results"][number]["reason"], string> = {
  exists: "a variable someone else made holds another value (the policy is skip)",
  shared: "the variable at Vercel also covers other targets, which a sync never changes",
  unreadable: "Vercel never returns this variable's value (sensitive or system)",
  conflict: "Vercel answered that the variable conflicts with another",
  rejected: "Vercel refused it (a reserved name or an unaccepted value)",
  unanswered: "Vercel's answer did not say whether it was created; the next sync finds out",
  decrypt: "the secrets of this environment could not be decrypted",
};

/** Which keys a run skipped or failed, and why: the counts alone do not say which. */
function KeyResults({ results }: { results?: SyncSummary["results"] }) {
  if (!results || results.length === 0) return null;
  return (
    <ul class="small key-results">
      {results.map((r) => (
        <li key={`${r.environment}:${r.target}:${r.key}`}>
          <code>{r.key === "*" ? "every key" : r.key}</code> ({envLabel(r.environment)} → {r.target}): {r.result}, {REASONS[r.reason]}
        </li>
      ))}
    </ul>
  );
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
