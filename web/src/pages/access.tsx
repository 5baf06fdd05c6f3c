// The environment access matrix: owners and admins have implicit access; members and
// viewers get a toggle per environment.
import { useState } from "preact/hooks";
import { del, get, projectPath, put, type AccessMatrix, type Member, type Project } from "../api.ts";
import { DataTable, ErrorText, LoadState, envLabel, useLoad } from "../ui.tsx";

export function AccessPage({ project }: { project: Project }) {
  const base = projectPath(project.id);
  const matrix = useLoad(() => get<AccessMatrix>(`${base}/environment-access`), [base]);
  // The toggle shows the wanted state while the request runs.
  const [pending, setPending] = useState<{ key: string; grant: boolean } | undefined>(undefined);
  const [error, setError] = useState<string | undefined>(undefined);
  const [status, setStatus] = useState("");

  async function toggle(userId: string, who: string, env: string, grant: boolean) {
    setError(undefined);
    setStatus("");
    setPending({ key: `${userId}:${env}`, grant });
    try {
      const path = `${base}/environments/${env}/access/${userId}`;
      if (grant) await put(path);
      else await del(path);
      await matrix.reload();
      setStatus(grant ? `${who} can now use ${env}.` : `${who} no longer has access to ${env}.`);
    } catch (e) {
      setError((e as Error).message);
    } finally {
      setPending(undefined);
    }
  }

  return (
    <div class="stack">
      <h2>Environment access</h2>
      <p class="muted">Owners and admins can use every environment. Members and viewers use only the environments granted here.</p>
      <ErrorText error={error} />
      <p class="status" role="status">
        {status}
      </p>
      <LoadState loaded={matrix}>
        {(m) => (
          <DataTable class="matrix" columns={["Member", "Role", ...m.environments.map(envLabel)]}>
            {m.members.map((member) => {
              const who = member.email ?? member.userId;
              return (
                <tr key={member.userId}>
                  <th scope="row">
                    {who}
                    {member.isYou && <span class="badge">you</span>}
                  </th>
                  <td>{member.role}</td>
                  {m.environments.map((env) => {
                    const access = member.access[env] ?? "none";
                    if (access === "implicit") {
                      return (
                        <td key={env} class="implicit">
                          Implicit <span class="sr-only">access to {env} as {member.role}</span>
                        </td>
                      );
                    }
                    const mine = pending?.key === `${member.userId}:${env}` ? pending : undefined;
                    const on = mine ? mine.grant : access === "granted";
                    return (
                      <td key={env}>
                        <label class="switch">
                          {/* aria-disabled, not disabled: a disabled control loses keyboard focus. */}
                          <input
                            type="checkbox"
                            checked={on}
                            aria-disabled={mine !== undefined}
                            onChange={(e) => {
                              if (mine) e.currentTarget.checked = on;
                              else void toggle(member.userId, who, env, e.currentTarget.checked);
                            }}
                          />
                          <span class="sr-only">
                            {who} can use {env}
                          </span>
                          <span aria-hidden="true">{on ? "Granted" : "No access"}</span>
                        </label>
                      </td>
                    );
                  })}
                </tr>
              );
            })}
          </DataTable>
        )}
      </LoadState>
    </div>
  );
}

/**
 * For a member or viewer without an environment (or without this one): who can grant it,
 * by name, from the members list every role may read.
 */
export function AskForAccess({ project, children }: { project: Project; children: string }) {
  const granters = useLoad(
    () =>
      get<{ members: Member[] }>(`${projectPath(project.id)}/members`).then((r) =>
        r.members.filter((m) => (m.role === "owner" || m.role === "admin") && !m.isYou),
      ),
    [project.id],
  );
  const names = (granters.data ?? []).map((m) => (m.name && m.email ? `${m.name} (${m.email})` : (m.name ?? m.email ?? "an unnamed member")));
  return (
    <div class="notice">
      <p>{children}</p>
      <p>
        {granters.data === undefined && !granters.error
          ? "Finding who can grant access…"
          : names.length > 0
            ? `Owners and admins grant access: ask ${names.length === 1 ? names[0] : `${names.slice(0, -1).join(", ")} or ${names.at(-1)}`}.`
            : "Ask an owner or admin of the project for access."}
      </p>
    </div>
  );
}
