// The project list and the create form.
import { useRef, useState } from "preact/hooks";
import { ENVIRONMENTS, get, post, type Environment, type Project } from "../api.ts";
import { navigate } from "../router.ts";
import { Dialog, ErrorText, FormActions, Link, LoadState, Time, envLabel, useAction, useLoad, useNextPageNotice } from "../ui.tsx";

export const NAME_MAX = 60;

/** What is wrong with a project name, in the API's rules (trimmed, 1 to 60 characters). */
export function nameProblem(name: string): string | undefined {
  const trimmed = name.trim();
  if (trimmed.length === 0) return "Enter a name: it cannot be empty or only spaces.";
  if (trimmed.length > NAME_MAX) return `Use at most ${NAME_MAX} characters: this name has ${trimmed.length}.`;
  return undefined;
}

export function ProjectsPage() {
  const projects = useLoad(() => get<{ projects: Project[] }>("/api/projects").then((r) => r.projects), []);
  const [creating, setCreating] = useState(false);
  // Set by the project that was deleted on its way here.
  const notice = useNextPageNotice();
  return (
    <section>
      <div class="page-head">
        <h1>Projects</h1>
        <button type="button" class="primary" onClick={() => setCreating(true)}>
          New project
        </button>
      </div>
      <p class="status" role="status">
        {notice}
      </p>
      <LoadState loaded={projects}>
        {(list) =>
          list.length === 0 ? (
            <p class="empty">No projects yet. Create one to start storing secrets.</p>
          ) : (
            <ul class="project-list">
              {list.map((project) => (
                <li key={project.id} class="card project-card">
                  <h2>
                    <Link href={`/projects/${project.id}`}>{project.name}</Link>
                  </h2>
                  {project.description && <p>{project.description}</p>}
                  <p class="meta">
                    <span class={`badge role-${project.role}`}>{project.role}</span>
                    <span>
                      updated <Time iso={project.updatedAt} />
                    </span>
                  </p>
                  <ul class="counts" aria-label={`Secrets in ${project.name}`}>
                    {project.environments.map((env) => (
                      <li key={env}>
                        <Link href={`/projects/${project.id}/${env}`}>
                          {envLabel(env)}: {project.secretCounts[env] ?? 0} {(project.secretCounts[env] ?? 0) === 1 ? "secret" : "secrets"}
                        </Link>
                      </li>
                    ))}
                  </ul>
                </li>
              ))}
            </ul>
          )
        }
      </LoadState>
      {creating && <CreateProject onClose={() => setCreating(false)} />}
    </section>
  );
}

function CreateProject({ onClose }: { onClose(): void }) {
  const [name, setName] = useState("");
  const [description, setDescription] = useState("");
  const [environments, setEnvironments] = useState<Environment[]>([...ENVIRONMENTS]);
  const action = useAction();
  // Checked here first, so the field says what is wrong instead of the API's "invalid fields";
  // shown once a submit was tried, or as soon as the name is too long.
  const [tried, setTried] = useState(false);
  const problem = nameProblem(name);
  const showProblem = problem !== undefined && (tried || name.trim().length > NAME_MAX);
  const nameInput = useRef<HTMLInputElement>(null);
  return (
    <Dialog title="New project" onClose={onClose}>
      <form
        noValidate
        onSubmit={async (e) => {
          e.preventDefault();
          setTried(true);
          if (problem) {
            nameInput.current?.focus();
            return;
          }
          const result = await action.run(() =>
            post<{ project: Project }>("/api/projects", {
              name: name.trim(),
              ...(description.trim() ? { description: description.trim() } : {}),
              environments: ENVIRONMENTS.filter((env) => environments.includes(env)),
            }),
          );
          if (result) {
            onClose();
            navigate(`/projects/${result.project.id}`);
          }
        }}
      >
        <label class="field">
          <span>Name</span>
          <input
            ref={nameInput}
            required
            value={name}
            onInput={(e) => setName(e.currentTarget.value)}
            aria-invalid={showProblem}
            aria-describedby={showProblem ? "project-name-problem" : undefined}
          />
        </label>
        {showProblem && (
          <p id="project-name-problem" class="small error-text">
            {problem}
          </p>
        )}
        <label class="field">
          <span>Description (optional)</span>
          <textarea maxLength={280} rows={2} value={description} onInput={(e) => setDescription(e.currentTarget.value)} />
        </label>
        <fieldset>
          <legend>Environments</legend>
          {ENVIRONMENTS.map((env) => (
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
        <ErrorText error={action.error} />
        <FormActions label="Create project" busyLabel="Creating…" busy={action.busy} disabled={environments.length === 0} onCancel={onClose} />
      </form>
    </Dialog>
  );
}
