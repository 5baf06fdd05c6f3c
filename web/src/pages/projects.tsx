// The project list and the create form.
import type { RefObject } from "preact";
import { useRef, useState } from "preact/hooks";
import { ENVIRONMENTS, type Environment, get, type Project, post } from "../api.ts";
import { navigate } from "../router.ts";
import { Dialog, ErrorText, envLabel, FormActions, Link, LoadState, Time, useAction, useLoad, useNextPageNotice } from "../ui.tsx";

const NAME_MAX = 60;

/** What is wrong with a project name, in the API's rules (trimmed, 1 to 60 characters). */
function nameProblem(name: string): string | undefined {
  const trimmed = name.trim();
  if (trimmed.length === 0) return "Enter a name: it cannot be empty or only spaces.";
  if (trimmed.length > NAME_MAX) return `Use at most ${NAME_MAX} characters: this name has ${trimmed.length}.`;
  return undefined;
}

export interface NameCheck {
  /** The problem to show at the field, if any. */
  shown: string | undefined;
  input: RefObject<HTMLInputElement | null>;
  /** On submit: true when the name may be sent; otherwise the problem shows and the field takes focus. */
  passes(): boolean;
}

/**
 * The project name checked here first, so the field says what is wrong instead of the API's
 * "invalid fields"; the problem shows once a submit was tried, or as soon as the name is too long.
 */
export function useNameCheck(name: string): NameCheck {
  const [tried, setTried] = useState(false);
  const problem = nameProblem(name);
  const input = useRef<HTMLInputElement>(null);
  return {
    shown: problem !== undefined && (tried || name.trim().length > NAME_MAX) ? problem : undefined,
    input,
    passes() {
      setTried(true);
      if (problem) input.current?.focus();
      return problem === undefined;
    },
  };
}

/** A project's Name field, with its problem (from useNameCheck) tied to it. */
export function NameField({ id, value, check, onInput }: { id: string; value: string; check: NameCheck; onInput(value: string): void }) {
  const problemId = `${id}-problem`;
  return (
    <>
      <label class="field">
        <span>Name</span>
        <input
          ref={check.input}
          required
          value={value}
          onInput={(e) => onInput(e.currentTarget.value)}
          aria-invalid={check.shown !== undefined}
          aria-describedby={check.shown ? problemId : undefined}
        />
      </label>
      {check.shown && (
        <p id={problemId} class="small error-text">
          {check.shown}
        </p>
      )}
    </>
  );
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
  const nameCheck = useNameCheck(name);
  return (
    <Dialog title="New project" onClose={onClose} busy={action.busy}>
      <form
        noValidate
        onSubmit={async (e) => {
          e.preventDefault();
          if (!nameCheck.passes()) return;
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
        <NameField id="project-name" value={name} check={nameCheck} onInput={setName} />
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
                onChange={(e) => setEnvironments(e.currentTarget.checked ? [...environments, env] : environments.filter((x) => x !== env))}
              />
              {envLabel(env)}
            </label>
          ))}
        </fieldset>
        <ErrorText error={action.error} />
        <FormActions
          label="Create project"
          busyLabel="Creating…"
          busy={action.busy}
          disabled={environments.length === 0}
          onCancel={onClose}
        />
      </form>
    </Dialog>
  );
}
