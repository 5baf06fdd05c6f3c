// One project: the side navigation of its sections (secrets first, then the others as the
// caller's permissions allow), the environment switcher above the secrets, and the page.
// The project (and so the permissions) is fetched again on every visit: a role may have
// changed since.
import type { ComponentChildren } from "preact";
import { useEffect, useRef, useState } from "preact/hooks";
import { ApiError, del, ENVIRONMENTS, type Environment, get, type Permission, type Project, patch, projectPath } from "../api.ts";
import { navigate } from "../router.ts";
import {
  DangerZone,
  ErrorText,
  envLabel,
  Link,
  LoadState,
  Main,
  messageOf,
  SubmitButton,
  setNextPageNotice,
  useAction,
  useLoad,
} from "../ui.tsx";
import { AskForAccess } from "./access.tsx";
import { AuditPage } from "./audit.tsx";
import { ImportPage } from "./import.tsx";
import { MembersPage } from "./members.tsx";
import { EnvironmentSwitcher, type NavItem, ProjectNav } from "./project-nav.tsx";
import { NameField, useNameCheck } from "./projects.tsx";
import { SecretsPage } from "./secrets.tsx";
import { SecurityPage } from "./security.tsx";
import { ServiceAccountsPage } from "./service-accounts.tsx";
import { VercelPage } from "./vercel.tsx";

const SECTIONS = [
  { slug: "members", label: "Members & access", permission: "members:read" },
  { slug: "service-accounts", label: "Service accounts", permission: "service_accounts:manage" },
  { slug: "audit", label: "Audit log", permission: "audit:read" },
  { slug: "security", label: "Security", permission: "audit:read" },
  { slug: "vercel", label: "Vercel", permission: "integrations:manage" },
  { slug: "settings", label: "Settings", permission: "project:update" },
] as const;

/** Old addresses of sections that were merged into another: bookmarks keep working. */
const ALIASES: Record<string, string> = { access: "members" };

/** The environment last shown per project, so "Secrets" leads back to it from another section. */
const lastEnvironment = new Map<string, Environment>();

export function ProjectPage({ projectId, section, sub, visit }: { projectId: string; section?: string; sub?: string; visit: number }) {
  const project = useLoad(() => get<{ project: Project }>(projectPath(projectId)).then((r) => r.project), [projectId]);
  // Fresh permissions on every page opened, without blanking the page while they load.
  const first = useRef(true);
  useEffect(() => {
    if (first.current) first.current = false;
    else void project.reload();
  }, [visit]);
  const notFound = project.error instanceof ApiError && project.error.status === 404;
  const title = project.data ? projectTitle(project.data, section, sub) : notFound ? "Project not found" : "Project";
  useEffect(() => {
    document.title = `${title} · Secrets`;
  }, [title]);
  // A deleted project, or one the caller left or never joined: no point in "Try again".
  if (notFound) {
    return (
      <Main>
        <h1>Project not found</h1>
        <p>
          It may have been deleted, or you are not a member of it. <Link href="/">Go to your projects</Link>.
        </p>
      </Main>
    );
  }
  if (!project.data) {
    return (
      <Main>
        <LoadState loaded={project}>{() => null}</LoadState>
      </Main>
    );
  }
  return (
    <ProjectView
      project={project.data}
      section={section}
      sub={sub}
      visit={visit}
      reload={project.reload}
      refreshError={project.error === undefined ? undefined : messageOf(project.error)}
    />
  );
}

/** The tab's title: the page, then the project ("Production secrets · ledger"). */
function projectTitle(project: Project, section: string | undefined, sub: string | undefined): string {
  const env = ENVIRONMENTS.find((e) => e === section);
  let page: string | undefined;
  if (env) page = sub === "import" ? `Import into ${envLabel(env)}` : `${envLabel(env)} secrets`;
  else if (section) page = SECTIONS.find((s) => s.slug === (ALIASES[section] ?? section))?.label ?? "Page not found";
  return page ? `${page} · ${project.name}` : project.name;
}

function ProjectView(props: {
  project: Project;
  section?: string;
  sub?: string;
  visit: number;
  reload(): Promise<void>;
  /** The project (and so your role and permissions) could not be read again: what is shown may be stale. */
  refreshError?: string;
}) {
  const { project, section: asked, sub, visit, reload } = props;
  const can = (permission: Permission) => project.permissions.includes(permission);
  const base = `/projects/${project.id}`;
  const section = asked && ALIASES[asked] ? ALIASES[asked] : asked;
  const env = ENVIRONMENTS.find((e) => e === section);
  if (env && project.environments.includes(env)) lastEnvironment.set(project.id, env);
  const remembered = lastEnvironment.get(project.id);
  const secretsEnv = remembered && project.environments.includes(remembered) ? remembered : project.environments[0];

  useEffect(() => {
    if (!section && secretsEnv) navigate(`${base}/${secretsEnv}`, { replace: true });
  }, [section, secretsEnv, base]);

  let body: ComponentChildren;
  if (env) {
    if (!project.environments.includes(env)) {
      body = (
        <>
          <h2>{envLabel(env)} secrets</h2>
          <AskForAccess project={project}>{`You do not have access to the ${env} environment of this project.`}</AskForAccess>
        </>
      );
    } else if (sub === "import") {
      body = <ImportPage key={env} project={project} env={env} />;
    } else {
      body = <SecretsPage key={env} project={project} env={env} onChanged={reload} />;
    }
  } else if (!section) {
    body = secretsEnv ? null : (
      <>
        <h2>Secrets</h2>
        <AskForAccess project={project}>You have no access to any environment of this project yet.</AskForAccess>
      </>
    );
  } else if (section === "members") body = <MembersPage project={project} onChanged={reload} />;
  else if (section === "service-accounts") body = <ServiceAccountsPage project={project} accountId={sub} />;
  else if (section === "audit") body = <AuditPage project={project} />;
  else if (section === "security") body = <SecurityPage project={project} />;
  else if (section === "vercel") body = <VercelPage project={project} />;
  else if (section === "settings") body = <SettingsPage project={project} onChanged={reload} />;
  else body = <p>There is no such page in this project.</p>;

  const items: NavItem[] = [
    { href: secretsEnv ? `${base}/${secretsEnv}` : base, label: "Secrets", current: !section || env !== undefined },
    ...SECTIONS.filter((s) => can(s.permission) || (s.slug === "settings" && can("project:delete"))).map((s) => ({
      href: `${base}/${s.slug}`,
      label: s.label,
      current: section === s.slug,
    })),
  ];

  return (
    <div class="project-shell">
      <ProjectNav items={items} />
      <Main>
        <div class="page-head">
          <div>
            <p class="crumbs">
              <Link href="/">Projects</Link> /
            </p>
            <h1>{project.name}</h1>
            {project.description && (
              <p class="muted description" title={project.description}>
                {project.description}
              </p>
            )}
          </div>
          <span class={`badge role-${project.role}`} title="Your role in this project">
            {project.role}
          </span>
        </div>
        {props.refreshError !== undefined && (
          <ErrorText error={`Could not refresh the project, so your role and access may have changed: ${props.refreshError}`}>
            <button type="button" class="link" onClick={() => void reload()}>
              Try again
            </button>
          </ErrorText>
        )}
        {env && sub !== "import" && project.environments.includes(env) && (
          <EnvironmentSwitcher base={base} environments={project.environments} current={env} />
        )}
        {/* A page opened again (its link followed while on it) starts afresh with fresh data. */}
        <div class="project-body" key={visit}>
          {body}
        </div>
      </Main>
    </div>
  );
}

function SettingsPage({ project, onChanged }: { project: Project; onChanged(): Promise<void> }) {
  // Undefined until edited: an untouched field shows the project as last loaded (the page
  // opens with the data already in memory, and fresh data follows), and is never sent, so
  // a save cannot put back a name or description someone else has changed meanwhile.
  const [editedName, setName] = useState<string | undefined>(undefined);
  const [editedDescription, setDescription] = useState<string | undefined>(undefined);
  const name = editedName ?? project.name;
  const description = editedDescription ?? project.description ?? "";
  const [saved, setSaved] = useState(false);
  const action = useAction();
  const canUpdate = project.permissions.includes("project:update");
  // The same check as the New project dialog.
  const nameCheck = useNameCheck(name);
  const changes: { name?: string; description?: string | null } = {};
  if (editedName !== undefined && name.trim() !== project.name) changes.name = name.trim();
  if (editedDescription !== undefined && description.trim() !== (project.description ?? "")) {
    changes.description = description.trim() || null;
  }
  // The API answers an empty change with an error ("Nothing to update."): Save waits for one.
  const changed = Object.keys(changes).length > 0;
  return (
    <div class="stack">
      <h2>Settings</h2>
      {canUpdate && (
        <form
          class="card"
          noValidate
          onSubmit={async (e) => {
            e.preventDefault();
            if (!changed) return;
            if (!nameCheck.passes()) return;
            setSaved(false);
            const result = await action.run(() => patch(projectPath(project.id), changes));
            if (result) {
              setSaved(true);
              await onChanged();
              setName(undefined);
              setDescription(undefined);
            }
          }}
        >
          <NameField
            id="settings-name"
            value={name}
            check={nameCheck}
            onInput={(value) => {
              setName(value);
              setSaved(false);
            }}
          />
          <label class="field">
            <span>Description</span>
            <textarea
              maxLength={280}
              rows={3}
              value={description}
              onInput={(e) => {
                setDescription(e.currentTarget.value);
                setSaved(false);
              }}
            />
          </label>
          <ErrorText error={action.error} />
          <p class="status" role="status">
            {saved ? "Saved." : ""}
          </p>
          <SubmitButton label="Save" busyLabel="Saving…" busy={action.busy} unavailable={!changed} />
        </form>
      )}
      {project.permissions.includes("project:delete") && (
        <DangerZone
          title="Delete this project"
          text="Deleting removes every secret, version, member, invitation, environment grant and integration of the project. The audit log is kept. This cannot be undone."
          button="Delete project"
          confirmTitle={`Delete ${project.name}?`}
          confirmLabel="Delete project"
          typed={project.name}
          onConfirm={async () => {
            await del(projectPath(project.id));
            setNextPageNotice(`Project “${project.name}” was deleted.`);
            navigate("/");
          }}
        >
          <p>All secrets of this project will be gone for everyone.</p>
        </DangerZone>
      )}
    </div>
  );
}
