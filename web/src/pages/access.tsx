// Environment access: the grants of one member (a switch per environment, shown in the
// member's row of the members page), and what a member without access is told.
import { useState } from "preact/hooks";
import { del, get, type Member, type Project, projectPath, put, type Role } from "../api.ts";
import { envLabel, useLoad } from "../ui.tsx";

export interface Grants {
  /** The switches whose requests run ("<userId>:<env>"), with the state each asks for (shown meanwhile). */
  pending: ReadonlyMap<string, boolean>;
  toggle(userId: string, who: string, env: string, grant: boolean): Promise<void>;
}

/** Grants and revokes one environment at a time, saying what changed or the API's message. */
export function useGrants(
  base: string,
  reload: () => Promise<void>,
  setStatus: (s: string) => void,
  setError: (e: string | undefined) => void,
): Grants {
  // One entry per switch under way: two switched quickly each keep theirs until their own answer.
  const [pending, setPending] = useState<ReadonlyMap<string, boolean>>(new Map());
  async function toggle(userId: string, who: string, env: string, grant: boolean) {
    const key = `${userId}:${env}`;
    setError(undefined);
    setStatus("");
    setPending((now) => new Map(now).set(key, grant));
    try {
      const path = `${base}/environments/${env}/access/${userId}`;
      if (grant) await put(path);
      else await del(path);
      await reload();
      setStatus(grant ? `${who} can now use ${env}.` : `${who} no longer has access to ${env}.`);
    } catch (e) {
      setError((e as Error).message);
    } finally {
      setPending((now) => {
        const next = new Map(now);
        next.delete(key);
        return next;
      });
    }
  }
  return { pending, toggle };
}

/** One member's environments: implicit for owners and admins, a switch each for the others. */
export function EnvironmentGrants(props: {
  who: string;
  role: Role;
  userId: string;
  environments: string[];
  access: Record<string, string>;
  grants: Grants;
}) {
  const { who, role, userId, environments, access, grants } = props;
  if (role === "owner" || role === "admin" || environments.every((env) => access[env] === "implicit")) {
    return (
      <span class="implicit">
        Implicit: every environment <span class="sr-only">as {role}</span>
      </span>
    );
  }
  return (
    <div class="grants">
      {environments.map((env) => {
        const mine = grants.pending.get(`${userId}:${env}`);
        const on = mine ?? access[env] === "granted";
        return (
          <label key={env} class="switch">
            {/* aria-disabled, not disabled: a disabled control loses keyboard focus. */}
            <input
              type="checkbox"
              checked={on}
              aria-disabled={mine !== undefined}
              aria-label={`${who} can use ${env}`}
              onChange={(e) => {
                if (mine !== undefined) e.currentTarget.checked = on;
                else void grants.toggle(userId, who, env, e.currentTarget.checked);
              }}
            />
            <span aria-hidden="true">{envLabel(env)}</span>
          </label>
        );
      })}
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
  const names = (granters.data ?? []).map((m) =>
    m.name && m.email ? `${m.name} (${m.email})` : (m.name ?? m.email ?? "an unnamed member"),
  );
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
