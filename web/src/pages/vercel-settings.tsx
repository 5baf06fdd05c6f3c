// The Vercel link and its settings: which Vercel project, which environment goes to which
// target, what wins when a variable exists at Vercel, and the deploy hook. The hook URL is
// sent once and never shown again (the API never returns it).
import { useEffect, useState } from "preact/hooks";
import { ApiError, get, type HostingConnection, type HostingOptions, put, type Target } from "../api.ts";
import { ErrorText, envLabel, FormActions, LoadState, useAction, useLoad } from "../ui.tsx";

const TARGETS = ["development", "preview", "production"] as const satisfies readonly Target[];

export type Connection = HostingConnection;
export type Connected = Extract<Connection, { connected: true }>;
type ConflictPolicy = Connected["conflictPolicy"];

export function SettingsForm({
  base,
  connection: c,
  onSaved,
  onConnectionChanged,
}: {
  base: string;
  connection: Connected;
  onSaved(c: Connection): void;
  /** Listing projects found the connection changed (its token rejected, disconnected elsewhere): load it again. */
  onConnectionChanged(): void;
}) {
  const [teamId, setTeamId] = useState(c.teamId ?? "");
  const [hostProjectId, setHostProjectId] = useState(c.hostProjectId ?? "");
  const [mappings, setMappings] = useState<Record<string, string>>(c.mappings ?? {});
  const [conflictPolicy, setConflictPolicy] = useState(c.conflictPolicy);
  const [hook, setHook] = useState<Hook>({ url: "", remove: false, autoRedeploy: c.autoRedeploy });
  const [saved, setSaved] = useState(false);
  const save = useAction();
  const hookWillExist = willHookExist(hook, c.hookConfigured);

  return (
    <form
      class="card stack"
      onSubmit={async (e) => {
        e.preventDefault();
        setSaved(false);
        const body: Record<string, unknown> = {
          hostProjectId,
          mappings: Object.fromEntries(Object.entries(mappings).filter(([, target]) => target)),
          conflictPolicy,
          autoRedeploy: hookWillExist && hook.autoRedeploy,
        };
        if (teamId) body.teamId = teamId;
        if (hook.remove) body.deployHookUrl = null;
        else if (hook.url.trim()) body.deployHookUrl = hook.url.trim();
        const result = await save.run(() => put<Connection>(base, body));
        if (result) {
          setSaved(true);
          setHook({ ...hook, url: "", remove: false });
          onSaved(result);
        }
      }}
    >
      <h3>Link and settings</h3>
      <ProjectPicker
        base={base}
        paused={c.paused}
        connectedTeamId={c.teamId}
        teamId={teamId}
        hostProjectId={hostProjectId}
        onTeam={(id) => {
          setTeamId(id);
          setHostProjectId("");
        }}
        onProject={setHostProjectId}
        onConnectionChanged={onConnectionChanged}
      />
      <TargetMappings environments={c.environments} mappings={mappings} onChange={setMappings} />
      <ConflictPolicyChoice value={conflictPolicy} onChange={setConflictPolicy} />
      <DeployHookFields hook={hook} hookConfigured={c.hookConfigured} onChange={setHook} />
      <ErrorText error={save.error} />
      <p class="status" role="status">
        {saved ? "Saved." : ""}
      </p>
      <FormActions label="Save" busyLabel="Saving…" busy={save.busy} />
    </form>
  );
}

/** The team (when the token sees several) and the Vercel project, listed through the saved token. */
function ProjectPicker(props: {
  base: string;
  paused: boolean;
  /** The team the token was saved with: without a teamId the API lists and links in it. */
  connectedTeamId: string | null;
  teamId: string;
  hostProjectId: string;
  onTeam(id: string): void;
  onProject(id: string): void;
  onConnectionChanged(): void;
}) {
  const { base, paused, teamId, onConnectionChanged } = props;
  // A paused connection's token is not used, not even to list projects, until someone reconnects.
  const options = useLoad(
    () =>
      paused
        ? Promise.resolve({ teams: [], projects: [] })
        : get<HostingOptions>(`${base}/options${teamId ? `?teamId=${encodeURIComponent(teamId)}` : ""}`),
    [base, teamId, paused],
    // Another team chosen: the team select stays (with the focus, and a way back should the
    // team's list fail) while its projects load.
    { keepWhileLoading: true },
  );
  // The projects shown are another team's while the chosen team's load, or failed to.
  const stale = options.loading || options.error !== undefined;
  // A 400 here is the connection's state, not the list's: the saved token was rejected (the
  // server now says attention) or the connection is gone. The page shows what to do then.
  useEffect(() => {
    if (options.error instanceof ApiError && options.error.status === 400) onConnectionChanged();
  }, [options.error]);
  return (
    <LoadState loaded={options}>
      {(o) => (
        <div class="inline-fields">
          {o.teams.length > 0 && (
            <label class="field">
              <span>Team</span>
              <select
                value={teamId}
                aria-describedby={props.connectedTeamId ? "vercel-team-help" : undefined}
                onChange={(e) => props.onTeam(e.currentTarget.value)}
              >
                {/* With a team saved, no teamId means that team: the personal account is reached by connecting without one. */}
                {!props.connectedTeamId && <option value="">Personal account</option>}
                {o.teams.map((t) => (
                  <option key={t.id} value={t.id}>
                    {t.name}
                  </option>
                ))}
              </select>
            </label>
          )}
          {o.teams.length > 0 && props.connectedTeamId && (
            <p class="muted small" id="vercel-team-help">
              Connected with a team: to link a project of your personal account, use another token or team (below) with no team ID.
            </p>
          )}
          <label class="field">
            <span>Vercel project</span>
            <select
              required
              value={props.hostProjectId}
              disabled={stale}
              aria-busy={options.loading}
              onChange={(e) => props.onProject(e.currentTarget.value)}
            >
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
  );
}

function TargetMappings({
  environments,
  mappings,
  onChange,
}: {
  environments: string[];
  mappings: Record<string, string>;
  onChange(m: Record<string, string>): void;
}) {
  return (
    <fieldset>
      <legend>Environments to Vercel targets</legend>
      <p class="muted small">Each environment syncs to at most one target; two environments cannot share a target.</p>
      <div class="inline-fields">
        {environments.map((env) => (
          <label key={env} class="field">
            <span>{envLabel(env)}</span>
            <select value={mappings[env] ?? ""} onChange={(e) => onChange({ ...mappings, [env]: e.currentTarget.value })}>
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
  );
}

function ConflictPolicyChoice({ value, onChange }: { value: ConflictPolicy; onChange(v: ConflictPolicy): void }) {
  return (
    <fieldset>
      <legend>When a variable already exists at Vercel</legend>
      <label class="check">
        <input type="radio" name="conflictPolicy" value="skip" checked={value === "skip"} onChange={() => onChange("skip")} />
        Keep Vercel's value (skip)
      </label>
      <label class="check">
        <input
          type="radio"
          name="conflictPolicy"
          value="overwrite"
          checked={value === "overwrite"}
          onChange={() => onChange("overwrite")}
        />
        Replace it with ours (overwrite)
      </label>
    </fieldset>
  );
}

/** A new hook URL to send, or the saved one to remove, and redeploying after each sync. */
interface Hook {
  url: string;
  remove: boolean;
  autoRedeploy: boolean;
}

/** Automatic redeploys need a hook: the saved one (unless being removed) or the one typed. */
function willHookExist(hook: Hook, hookConfigured: boolean): boolean {
  return hook.remove ? false : hook.url.trim() !== "" || hookConfigured;
}

function DeployHookFields({ hook, hookConfigured, onChange }: { hook: Hook; hookConfigured: boolean; onChange(h: Hook): void }) {
  const hookWillExist = willHookExist(hook, hookConfigured);
  return (
    <>
      <label class="field">
        <span>Deploy hook URL {hookConfigured ? "(one is saved; enter a new one to replace it)" : "(optional)"}</span>
        <input
          type="password"
          autoComplete="off"
          value={hook.url}
          disabled={hook.remove}
          onInput={(e) => onChange({ ...hook, url: e.currentTarget.value })}
          placeholder="https://api.vercel.com/v1/integrations/deploy/…"
        />
      </label>
      {hookConfigured && (
        <label class="check">
          <input type="checkbox" checked={hook.remove} onChange={(e) => onChange({ ...hook, remove: e.currentTarget.checked })} />
          Remove the saved deploy hook
        </label>
      )}
      <label class="check">
        <input
          type="checkbox"
          checked={hook.autoRedeploy && hookWillExist}
          disabled={!hookWillExist}
          onChange={(e) => onChange({ ...hook, autoRedeploy: e.currentTarget.checked })}
        />
        Redeploy automatically after each sync {hookWillExist ? "" : "(needs a deploy hook)"}
      </label>
    </>
  );
}
