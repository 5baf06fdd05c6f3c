// Import: paste .env text or pick a file; it is parsed here in the browser and previewed
// against the environment's keys before anything is sent. This page holds the state; the
// source, the notes, the preview and the result are parts of their own.
import { useMemo, useRef, useState } from "preact/hooks";
import { type Environment, type ExportedSecret, envPath, get, type ImportResult, type Project, post, type SecretMeta } from "../api.ts";
import { parseDotenv } from "../dotenv.ts";
import { envLabel, Link, LoadState, useAction, useLoad } from "../ui.tsx";
import { ImportNotes } from "./import-notes.tsx";
import { ImportPreview, previewRows } from "./import-preview.tsx";
import { ImportResultCard } from "./import-result.tsx";
import { ImportSource } from "./import-source.tsx";

export function ImportPage({ project, env }: { project: Project; env: Environment }) {
  const base = envPath(project.id, env);
  const secretsHref = `/projects/${project.id}/${env}`;
  const existing = useLoad(
    () => get<{ secrets: SecretMeta[] }>(`${base}/secrets`).then((r) => new Set(r.secrets.map((s) => s.key))),
    [base],
  );
  const [text, setText] = useState("");
  const [current, setCurrent] = useState<Map<string, string> | undefined>(undefined);
  const [overwriteAll, setOverwriteAll] = useState(false);
  // A Map: keys are the user's (a key named constructor or __proto__ is valid), never an object's own properties.
  const [overwrite, setOverwrite] = useState<ReadonlyMap<string, boolean>>(new Map());
  const [result, setResult] = useState<ImportResult | undefined>(undefined);
  const fileInput = useRef<HTMLInputElement>(null);
  const compare = useAction();
  const submit = useAction();
  const canOverwrite = project.permissions.includes("secrets:update");
  const parsed = useMemo(() => parseDotenv(text), [text]);

  // An empty value is not a secret (the API takes 1 to 10,000 characters): such keys are
  // listed apart and left out, so one blank line in a file never blocks the rest of it.
  const empty = parsed.entries.filter((entry) => entry.value.length === 0).map((entry) => entry.key);
  const rows = previewRows(
    parsed.entries.filter((entry) => entry.value.length > 0),
    existing.data ?? new Set(),
    current,
    (key) => canOverwrite && (overwrite.get(key) ?? overwriteAll),
  );

  async function runImport() {
    const importable = rows.filter((r) => r.status !== "invalid");
    const res = await submit.run(() =>
      post<ImportResult>(`${base}/import`, { entries: importable.map((r) => ({ key: r.key, value: r.value, overwrite: r.overwrite })) }),
    );
    if (res) {
      setResult(res);
      setText("");
      // Emptied, so choosing the same file again is a change and is read again.
      if (fileInput.current) fileInput.current.value = "";
      setCurrent(undefined);
      setOverwrite(new Map());
      await existing.reload();
    }
  }

  return (
    <div class="stack">
      <div class="toolbar">
        <h2>Import into {envLabel(env)}</h2>
        <Link class="button" href={secretsHref}>
          Back to secrets
        </Link>
      </div>
      <ImportSource
        text={text}
        fileInput={fileInput}
        onText={(value) => {
          setText(value);
          setResult(undefined);
        }}
      />
      <ImportNotes parsed={parsed} empty={empty} />
      {rows.length > 0 && (
        <LoadState loaded={existing}>
          {() => (
            <ImportPreview
              rows={rows}
              compared={current !== undefined}
              canOverwrite={canOverwrite}
              overwriteAll={overwriteAll}
              onOverwriteAll={(on) => {
                setOverwriteAll(on);
                setOverwrite(new Map());
              }}
              onOverwrite={(key, on) => setOverwrite(new Map(overwrite).set(key, on))}
              compare={compare}
              onCompare={() =>
                void compare.run(async () => {
                  const { secrets } = await get<{ secrets: ExportedSecret[] }>(`${base}/export`);
                  setCurrent(new Map(secrets.map((s) => [s.key, s.value])));
                })
              }
              submit={submit}
              onSubmit={() => void runImport()}
              blocked={parsed.problems.length > 0}
            />
          )}
        </LoadState>
      )}
      {result && <ImportResultCard result={result} secretsHref={secretsHref} env={env} />}
    </div>
  );
}
