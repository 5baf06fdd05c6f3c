// Keys × environments: present, missing, same or different, from keyed digests the server
// computes (GET …/secrets/compare, audited as a comparison), so no value reaches this page.
// A missing key is copied in one click; a different value is replaced after a confirmation.
import { useState } from "preact/hooks";
import {
  type ComparedEntry,
  type Comparison,
  type CopyAnswer,
  type Environment,
  envPath,
  get,
  type Project,
  post,
  projectPath,
} from "../api.ts";
import { Confirm, ErrorText, envLabel, LoadState, useAction, useLoad, whileBusy } from "../ui.tsx";
import { KeyName } from "./secrets-common.tsx";

type Row = Comparison["keys"][number];

/** Letters name the distinct values of a row, so equal cells read alike ("Value A"). */
function valueLetters(row: Row, environments: Environment[]): Map<string, string> {
  const letters = new Map<string, string>();
  for (const env of environments) {
    const digest = row.environments[env]?.digest;
    if (digest && !letters.has(digest)) letters.set(digest, String.fromCharCode(65 + letters.size));
  }
  return letters;
}

/** Where a missing key is copied from: the page's environment when it has it, else the nearest one before the target. */
function sourceFor(row: Row, target: Environment, environments: Environment[], preferred: Environment): Environment | undefined {
  if (preferred !== target && row.environments[preferred]) return preferred;
  const before = environments.slice(0, environments.indexOf(target)).reverse();
  return [...before, ...environments].find((env) => env !== target && row.environments[env]);
}

interface CopyRequest {
  key: string;
  from: Environment;
  to: Environment;
  entry: ComparedEntry;
  overwrite: boolean;
}

export function CompareView({ project, env, onChanged }: { project: Project; env: Environment; onChanged(): Promise<void> }) {
  const comparison = useLoad(() => get<Comparison>(`${projectPath(project.id)}/secrets/compare`), [project.id]);
  const [confirming, setConfirming] = useState<CopyRequest | undefined>(undefined);
  const [notice, setNotice] = useState("");
  const copy = useAction();
  const canCopy = project.permissions.includes("secrets:create");
  const canOverwrite = canCopy && project.permissions.includes("secrets:update");

  /** Throws when the copy fails: a confirmation dialog stays open on its error. */
  async function copyValue(request: CopyRequest): Promise<void> {
    setNotice("");
    copy.clear();
    await post<CopyAnswer>(`${envPath(project.id, request.from)}/secrets/${request.entry.secretId}/copy`, {
      to: request.to,
      overwrite: request.overwrite,
    });
    // Announced once the grid shows the copy, not before.
    await comparison.reload();
    setNotice(`Copied ${request.key} from ${request.from} to ${request.to}.`);
    await onChanged();
  }

  /** A copy started from the grid: its error is shown above the grid. */
  function runCopy(request: CopyRequest) {
    void copy.run(() => copyValue(request));
  }

  return (
    <div class="stack">
      <p class="muted small">
        Values are compared on the server by keyed fingerprints: no value is shown or sent to this page. Each comparison is recorded in the
        audit log.
      </p>
      <p class="status" role="status">
        {notice}
      </p>
      <ErrorText error={copy.error} />
      <LoadState loaded={comparison}>
        {({ environments, keys }) => {
          if (keys.length === 0) return <p class="empty">No secrets in any environment you can read.</p>;
          // Production first: a key missing there is the gap that breaks a deploy.
          const missing = [...environments].reverse().map((e) => ({ env: e, keys: keys.filter((row) => row.environments[e] === null) }));
          return (
            <>
              <ul class="gaps" aria-label="Missing keys per environment">
                {missing.map(({ env: e, keys: gone }) => (
                  <li key={e} class={gone.length ? "has-gaps" : undefined}>
                    {gone.length === 0 ? (
                      <>
                        <strong>{envLabel(e)}</strong>: every key present
                      </>
                    ) : (
                      <>
                        <strong>
                          Missing in {e}: {gone.length} {gone.length === 1 ? "key" : "keys"}
                        </strong>{" "}
                        ({gone.map((row) => row.key).join(", ")})
                      </>
                    )}
                  </li>
                ))}
              </ul>
              {/* Focusable: on a narrow screen the grid scrolls sideways, and the keyboard must reach it. */}
              <div class="table-wrap" role="region" aria-label="Keys across environments" tabIndex={0}>
                <table class="compare-grid">
                  <caption class="sr-only">Keys across environments</caption>
                  <thead>
                    <tr>
                      <th scope="col">Key</th>
                      {environments.map((e) => (
                        <th scope="col" key={e} aria-current={e === env ? "true" : undefined}>
                          {envLabel(e)}
                        </th>
                      ))}
                      <th scope="col" class="col-status">
                        Status
                      </th>
                    </tr>
                  </thead>
                  <tbody>
                    {keys.map((row) => {
                      const letters = valueLetters(row, environments);
                      const presentCount = environments.filter((e) => row.environments[e]).length;
                      const gaps = environments.filter((e) => row.environments[e] === null);
                      const status =
                        gaps.length > 0
                          ? `Missing in ${gaps.join(", ")}`
                          : letters.size > 1
                            ? "Different values"
                            : presentCount > 1
                              ? "Same everywhere"
                              : "Present";
                      return (
                        <tr key={row.key}>
                          <th scope="row">
                            <KeyName name={row.key} />
                          </th>
                          {environments.map((e) => {
                            const entry = row.environments[e];
                            if (!entry) {
                              const from = sourceFor(row, e, environments, env);
                              const source = from ? row.environments[from] : undefined;
                              return (
                                <td key={e} class="cell-missing">
                                  <span>Missing</span>{" "}
                                  {canCopy && from && source && (
                                    <button
                                      type="button"
                                      class="small"
                                      {...whileBusy(copy.busy, () =>
                                        runCopy({ key: row.key, from, to: e, entry: source, overwrite: false }),
                                      )}
                                    >
                                      Copy<span class="sr-only"> {row.key}</span> from {from}
                                      <span class="sr-only"> to {e}</span>
                                    </button>
                                  )}
                                </td>
                              );
                            }
                            const same = letters.size === 1 && presentCount > 1;
                            const label =
                              entry.digest === null
                                ? "Cannot be read"
                                : same
                                  ? "Same"
                                  : letters.size > 1
                                    ? `Different (value ${letters.get(entry.digest)})`
                                    : "Present";
                            const from = e === env ? undefined : row.environments[env] ? env : undefined;
                            const source = from ? row.environments[from] : undefined;
                            const differs = source && source.digest !== entry.digest;
                            return (
                              <td key={e} class={same ? "cell-same" : letters.size > 1 ? "cell-different" : undefined}>
                                <span>{label}</span> <span class="muted small version">v{entry.version}</span>{" "}
                                {canOverwrite && from && source && differs && (
                                  <button
                                    type="button"
                                    class="small"
                                    {...whileBusy(copy.busy, () =>
                                      setConfirming({ key: row.key, from, to: e, entry: source, overwrite: true }),
                                    )}
                                  >
                                    Replace
                                    <span class="sr-only">
                                      {" "}
                                      {row.key} in {e} with the value
                                    </span>{" "}
                                    from {from}
                                  </button>
                                )}
                              </td>
                            );
                          })}
                          <td class="col-status">{status}</td>
                        </tr>
                      );
                    })}
                  </tbody>
                </table>
              </div>
            </>
          );
        }}
      </LoadState>
      {confirming && (
        <Confirm
          title={`Replace ${confirming.key} in ${confirming.to}?`}
          confirmLabel={`Replace in ${confirming.to}`}
          onClose={() => setConfirming(undefined)}
          onConfirm={() => copyValue(confirming)}
        >
          <p>
            The value of <code>{confirming.key}</code> in {confirming.to} becomes the one in {confirming.from}, as a new version (the old
            one stays in its history).
          </p>
        </Confirm>
      )}
    </div>
  );
}
