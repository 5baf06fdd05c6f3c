// Import: paste .env text or pick a file; it is parsed here in the browser and previewed
// against the environment's keys before anything is sent.
import { Fragment } from "preact";
import { useMemo, useRef, useState } from "preact/hooks";
import { envPath, get, post, type Environment, type ExportedSecret, type ImportResult, type Project, type SecretMeta } from "../api.ts";
import { parseDotenv } from "../dotenv.ts";
import { DataTable, ErrorText, Link, LoadState, envLabel, useAction, useLoad } from "../ui.tsx";
import { KEY_PATTERN } from "./secrets.tsx";

type PreviewStatus = "new" | "existing" | "changed" | "unchanged" | "invalid";

const MAX_ENTRIES = 500;

export function ImportPage({ project, env }: { project: Project; env: Environment }) {
  const base = envPath(project.id, env);
  const existing = useLoad(() => get<{ secrets: SecretMeta[] }>(`${base}/secrets`).then((r) => new Map(r.secrets.map((s) => [s.key, s]))), [base]);
  const [text, setText] = useState("");
  const [fileError, setFileError] = useState<string | undefined>(undefined);
  const [current, setCurrent] = useState<Map<string, string> | undefined>(undefined);
  const [overwriteAll, setOverwriteAll] = useState(false);
  const [overwrite, setOverwrite] = useState<Record<string, boolean>>({});
  const [result, setResult] = useState<ImportResult | undefined>(undefined);
  const fileInput = useRef<HTMLInputElement>(null);
  const compare = useAction();
  const submit = useAction();
  const canOverwrite = project.permissions.includes("secrets:update");
  const parsed = useMemo(() => parseDotenv(text), [text]);

  // An empty value is not a secret (the API takes 1 to 10,000 characters): such keys are
  // listed apart and left out, so one blank line in a file never blocks the rest of it.
  const empty = parsed.entries.filter((entry) => entry.value.length === 0).map((entry) => entry.key);
  const rows = parsed.entries.filter((entry) => entry.value.length > 0).map((entry) => {
    let status: PreviewStatus;
    let reason = "";
    if (!KEY_PATTERN.test(entry.key) || entry.key.length > 128) {
      status = "invalid";
      reason = "Keys use letters, digits and underscores and do not start with a digit.";
    } else if (entry.value.length > 10_000) {
      status = "invalid";
      reason = "Values can be at most 10,000 characters.";
    } else if (!existing.data?.has(entry.key)) status = "new";
    else if (!current) status = "existing";
    else status = current.get(entry.key) === entry.value ? "unchanged" : "changed";
    const wantsOverwrite = (status === "existing" || status === "changed") && canOverwrite && (overwrite[entry.key] ?? overwriteAll);
    return { ...entry, status, reason, overwrite: wantsOverwrite };
  });
  const importable = rows.filter((r) => r.status !== "invalid");
  const counts = rows.reduce<Record<string, number>>((c, r) => ({ ...c, [r.status]: (c[r.status] ?? 0) + 1 }), {});

  return (
    <div class="stack">
      <div class="toolbar">
        <h2>Import into {envLabel(env)}</h2>
        <Link class="button" href={`/projects/${project.id}/${env}`}>
          Back to secrets
        </Link>
      </div>
      <div class="card stack">
        <label class="field">
          <span>Paste the contents of a .env file</span>
          <textarea
            rows={8}
            class="mono"
            value={text}
            spellcheck={false}
            autoComplete="off"
            onInput={(e) => {
              setText(e.currentTarget.value);
              setResult(undefined);
            }}
          />
        </label>
        <label class="field">
          <span>Or choose a file</span>
          <input
            ref={fileInput}
            type="file"
            accept=".env,text/plain,*"
            onChange={async (e) => {
              setFileError(undefined);
              const file = e.currentTarget.files?.[0];
              if (!file) return;
              if (file.size > 2_000_000) {
                setFileError("That file is larger than 2 MB, the most one import takes.");
                return;
              }
              setText(await file.text());
              setResult(undefined);
            }}
          />
        </label>
        <ErrorText error={fileError} />
        <p class="muted small">The file is read in this browser; nothing is sent until you press Import.</p>
      </div>

      {parsed.problems.length > 0 && (
        <div class="notice" role="note">
          <p>These lines are not KEY=VALUE and will be ignored:</p>
          <ul>
            {parsed.problems.map((p) => (
              <li key={p.line}>
                line {p.line}: <code>{p.text}</code>
              </li>
            ))}
          </ul>
        </div>
      )}
      {empty.length > 0 && (
        <div class="notice" role="note">
          <p>
            {empty.length === 1 ? "1 key has" : `${empty.length} keys have`} no value and will not be imported:{" "}
            {empty.map((k, i) => (
              <Fragment key={k}>
                {i > 0 && ", "}
                <code>{k}</code>
              </Fragment>
            ))}
          </p>
        </div>
      )}
      {parsed.duplicates.length > 0 && (
        <p class="notice">
          Given more than once (the last one is used): {parsed.duplicates.map((k) => <code key={k}>{k} </code>)}
        </p>
      )}

      {rows.length > 0 && (
        <LoadState loaded={existing}>
          {() => (
            <div class="card stack">
              <h3>Preview</h3>
              <p aria-live="polite">
                {rows.length} {rows.length === 1 ? "key" : "keys"}: {counts.new ?? 0} new, {counts.existing ?? 0} existing
                {current ? `, ${counts.changed ?? 0} changed, ${counts.unchanged ?? 0} unchanged` : ""}
                {counts.invalid ? `, ${counts.invalid} invalid (not sent)` : ""}.
              </p>
              {rows.length > MAX_ENTRIES && <p class="error">One import takes at most {MAX_ENTRIES} keys. Split the file.</p>}
              {!current && (counts.existing ?? 0) > 0 && (
                <div class="row-actions">
                  <button
                    type="button"
                    disabled={compare.busy}
                    onClick={() =>
                      void compare.run(async () => {
                        const { secrets } = await get<{ secrets: ExportedSecret[] }>(`${base}/export`);
                        setCurrent(new Map(secrets.map((s) => [s.key, s.value])));
                      })
                    }
                  >
                    {compare.busy ? "Comparing…" : "Compare values with the current ones"}
                  </button>
                  <span class="muted small">Reads the current values (recorded in the audit log as an export) to tell changed from unchanged keys.</span>
                </div>
              )}
              <ErrorText error={compare.error} />
              {canOverwrite ? (
                <label class="check">
                  <input
                    type="checkbox"
                    checked={overwriteAll}
                    onChange={(e) => {
                      setOverwriteAll(e.currentTarget.checked);
                      setOverwrite({});
                    }}
                  />
                  Overwrite existing keys
                </label>
              ) : (
                <p class="muted small">Your role cannot change existing secrets: existing keys are skipped.</p>
              )}
              <DataTable columns={["Key", "Status", "Overwrite"]}>
                {rows.map((row) => (
                  <tr key={row.key}>
                    <th scope="row">
                      <code>{row.key}</code>
                    </th>
                    <td>
                      <span class={`badge status-${row.status}`}>{row.status}</span>
                      {row.reason && <span class="small muted"> {row.reason}</span>}
                    </td>
                    <td>
                      {(row.status === "existing" || row.status === "changed") && canOverwrite ? (
                        <label class="check">
                          <input
                            type="checkbox"
                            checked={row.overwrite}
                            onChange={(e) => setOverwrite({ ...overwrite, [row.key]: e.currentTarget.checked })}
                          />
                          <span class="sr-only">Overwrite {row.key}</span>
                        </label>
                      ) : (
                        <span class="muted">—</span>
                      )}
                    </td>
                  </tr>
                ))}
              </DataTable>
              <ErrorText error={submit.error} />
              <div class="actions">
                <button
                  type="button"
                  class="primary"
                  disabled={submit.busy || importable.length === 0 || importable.length > MAX_ENTRIES}
                  onClick={async () => {
                    const res = await submit.run(() =>
                      post<ImportResult>(`${base}/import`, {
                        entries: importable.map((r) => ({ key: r.key, value: r.value, overwrite: r.overwrite })),
                      }),
                    );
                    if (res) {
                      setResult(res);
                      setText("");
                      // Emptied, so choosing the same file again is a change and is read again.
                      if (fileInput.current) fileInput.current.value = "";
                      setCurrent(undefined);
                      setOverwrite({});
                      await existing.reload();
                    }
                  }}
                >
                  {submit.busy ? "Importing…" : `Import ${importable.length} ${importable.length === 1 ? "key" : "keys"}`}
                </button>
              </div>
            </div>
          )}
        </LoadState>
      )}

      {result && (
        <div class="card stack" role="status">
          <h3>Import finished</h3>
          <p>
            {result.summary.created} created, {result.summary.updated} updated, {result.summary.unchanged} unchanged, {result.summary.skipped} skipped,{" "}
            {result.summary.failed} failed.
          </p>
          <DataTable columns={["Key", "Result"]}>
            {result.results.map((r) => (
              <tr key={r.key}>
                <th scope="row">
                  <code>{r.key}</code>
                </th>
                <td>
                  <span class={`badge status-${r.status}`}>{r.status}</span>
                </td>
              </tr>
            ))}
          </DataTable>
          <Link href={`/projects/${project.id}/${env}`}>See the secrets of {env}</Link>
        </div>
      )}
    </div>
  );
}
