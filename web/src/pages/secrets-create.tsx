// A new secret. Pasting several KEY=VALUE lines into the key field (as in Vercel's
// dashboard) turns the dialog into a preview of all of them, created together through the
// import endpoint; a single KEY=VALUE line fills both fields.
import { useState } from "preact/hooks";
import { type ImportResult, post } from "../api.ts";
import { type ParsedLine, parseDotenv } from "../dotenv.ts";
import { Dialog, ErrorText, FormActions, useAction, whileBusy } from "../ui.tsx";
import { entryProblem, KEY_LOOKS_LIKE_TOKEN, KeyName, keyProblem, MAX_KEY_LENGTH } from "./secrets-common.tsx";
import { shapeOf, ValueEditor } from "./secrets-value.tsx";

const MAX_ENTRIES = 500;

type PastedStatus = "new" | "exists" | "invalid" | "empty";

interface PastedRow extends ParsedLine {
  status: PastedStatus;
}

const STATUS_TEXT: Record<PastedStatus, string> = {
  new: "will be created",
  exists: "already exists: left as it is",
  invalid: "not a valid key or value: left out",
  empty: "no value: left out",
};

function classify(entries: ParsedLine[], existing: Set<string>): PastedRow[] {
  return entries.map((entry) => {
    let status: PastedStatus = "new";
    if (entry.value.length === 0) status = "empty";
    else if (entryProblem(entry)) status = "invalid";
    else if (existing.has(entry.key)) status = "exists";
    return { ...entry, status };
  });
}

export function CreateSecret(props: {
  base: string;
  env: string;
  existingKeys: Set<string>;
  onClose(): void;
  onCreated(message?: string): Promise<void>;
}) {
  const [key, setKey] = useState("");
  const [value, setValue] = useState("");
  const [pasted, setPasted] = useState<PastedRow[] | undefined>(undefined);
  // What the parser set aside: a line that is not KEY=VALUE is often the rest of an unquoted
  // value over several lines (a PEM key), whose first line alone would be saved.
  const [pasteNotes, setPasteNotes] = useState<{ lines: number[]; duplicates: string[] }>({ lines: [], duplicates: [] });
  const action = useAction();
  const keyRefused = key === "" ? undefined : keyProblem(key);
  const keyValid = keyRefused === undefined;

  function onPaste(e: ClipboardEvent) {
    const text = e.clipboardData?.getData("text/plain") ?? "";
    if (!text.includes("=")) return;
    const { entries, problems, duplicates } = parseDotenv(text);
    if (entries.length === 0) return;
    e.preventDefault();
    if (entries.length === 1 && !text.trim().includes("\n")) {
      setKey(entries[0]!.key);
      setValue(entries[0]!.value);
      return;
    }
    setPasteNotes({ lines: problems.map((p) => p.line), duplicates });
    setPasted(classify(entries, props.existingKeys));
  }

  if (pasted) {
    const creatable = pasted.filter((row) => row.status === "new");
    const tooMany = creatable.length > MAX_ENTRIES;
    const unread = pasteNotes.lines;
    return (
      <Dialog title={`New secrets in ${props.env}`} onClose={props.onClose} wide busy={action.busy}>
        <p>
          You pasted {pasted.length} lines of KEY=VALUE. {creatable.length} {creatable.length === 1 ? "secret" : "secrets"} will be created;
          nothing is sent until you confirm.
        </p>
        <ul class="plain pasted" aria-label="Pasted keys">
          {pasted.map((row) => (
            <li key={row.key} class={`pasted-${row.status}`}>
              <KeyName name={row.key} /> <span class={`badge status-${row.status}`}>{STATUS_TEXT[row.status]}</span>
            </li>
          ))}
        </ul>
        {tooMany && <p class="error">One paste creates at most {MAX_ENTRIES} secrets. Use Import .env for larger files.</p>}
        {unread.length > 0 && (
          <p class="error" role="alert">
            {unread.length === 1 ? "Line" : "Lines"} {unread.join(", ")} of the paste {unread.length === 1 ? "is" : "are"} not KEY=VALUE, so
            nothing is created: a value over several lines (a PEM key) needs quotes, or else only its first line would be saved. Fix the
            text and paste it again, or use Import .env.
          </p>
        )}
        {pasteNotes.duplicates.length > 0 && (
          <p class="notice">Given more than once, the last line counts: {pasteNotes.duplicates.join(", ")}.</p>
        )}
        <ErrorText error={action.error} />
        <div class="actions">
          <button
            type="button"
            class="primary"
            disabled={creatable.length === 0 || tooMany || unread.length > 0}
            {...whileBusy(action.busy, async () => {
              const result = await action.run(() =>
                post<ImportResult>(`${props.base}/import`, {
                  entries: creatable.map((row) => ({ key: row.key, value: row.value, overwrite: false })),
                }),
              );
              if (result) {
                props.onClose();
                const skipped = result.summary.skipped;
                await props.onCreated(
                  `Created ${result.summary.created} ${result.summary.created === 1 ? "secret" : "secrets"}${skipped ? `; ${skipped} already existed and were left as they are` : ""}.`,
                );
              }
            })}
          >
            {action.busy ? "Creating…" : `Create ${creatable.length} ${creatable.length === 1 ? "secret" : "secrets"}`}
          </button>
          <button type="button" onClick={() => setPasted(undefined)}>
            Back to one secret
          </button>
          <button type="button" {...whileBusy(action.busy, props.onClose)}>
            Cancel
          </button>
        </div>
      </Dialog>
    );
  }

  return (
    <Dialog title={`New secret in ${props.env}`} onClose={props.onClose} wide busy={action.busy}>
      <form
        onSubmit={async (e) => {
          e.preventDefault();
          const result = await action.run(() => post(`${props.base}/secrets`, { key, value }));
          if (result) {
            props.onClose();
            await props.onCreated(`Created ${key}.`);
          }
        }}
      >
        <label class="field">
          <span>Key</span>
          <input
            class="mono"
            required
            maxLength={MAX_KEY_LENGTH}
            value={key}
            onInput={(e) => setKey(e.currentTarget.value)}
            onPaste={onPaste}
            autoComplete="off"
            spellcheck={false}
            aria-invalid={!keyValid}
            aria-describedby="key-hint"
          />
        </label>
        <p id="key-hint" class={`small ${keyValid ? "muted" : "error-text"}`}>
          {keyRefused === KEY_LOOKS_LIKE_TOKEN
            ? KEY_LOOKS_LIKE_TOKEN
            : "Letters, digits and underscores; not starting with a digit. Paste several KEY=VALUE lines here to create them all at once."}
        </p>
        <div class="field">
          <label for="new-value">Value</label>
          <ValueEditor id="new-value" value={value} multiline={shapeOf(value) !== "line"} onInput={setValue} />
        </div>
        <ErrorText error={action.error} />
        <FormActions label="Create secret" busyLabel="Saving…" busy={action.busy} disabled={!keyValid} onCancel={props.onClose} />
      </form>
    </Dialog>
  );
}
