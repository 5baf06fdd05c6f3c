// The import preview: each parsed key against the environment's keys (new, existing,
// changed, unchanged, invalid), per-key overwrite, and the Import button.
import type { ParsedLine } from "../dotenv.ts";
import { type Action, DataTable, ErrorText, whileBusy } from "../ui.tsx";
import { entryProblem } from "./secrets-common.tsx";

type PreviewStatus = "new" | "existing" | "changed" | "unchanged" | "invalid";
const MAX_ENTRIES = 500;

interface PreviewRow extends ParsedLine {
  status: PreviewStatus;
  reason: string;
  overwrite: boolean;
}

/**
 * Classifies entries that have a value. `current` holds the environment's values once the
 * user asked to compare them; until then existing keys are only "existing".
 */
export function previewRows(
  entries: ParsedLine[],
  existingKeys: Set<string>,
  current: Map<string, string> | undefined,
  overwriteOf: (key: string) => boolean,
): PreviewRow[] {
  return entries.map((entry) => {
    let status: PreviewStatus;
    // The server's rules, all of them: one entry it refuses fails the whole import.
    const reason = entryProblem(entry) ?? "";
    if (reason) status = "invalid";
    else if (!existingKeys.has(entry.key)) status = "new";
    else if (!current) status = "existing";
    else status = current.get(entry.key) === entry.value ? "unchanged" : "changed";
    const overwrite = (status === "existing" || status === "changed") && overwriteOf(entry.key);
    return { ...entry, status, reason, overwrite };
  });
}

interface PreviewProps {
  rows: PreviewRow[];
  compared: boolean;
  canOverwrite: boolean;
  overwriteAll: boolean;
  onOverwriteAll(on: boolean): void;
  onOverwrite(key: string, on: boolean): void;
  compare: Action;
  onCompare(): void;
  submit: Action;
  onSubmit(): void;
  /** Lines that are not KEY=VALUE: often the rest of an unquoted value over several lines, which would be saved cut. */
  blocked: boolean;
}

export function ImportPreview(props: PreviewProps) {
  const { rows, compared } = props;
  const counts: Record<string, number> = {};
  for (const r of rows) counts[r.status] = (counts[r.status] ?? 0) + 1;
  const importable = rows.filter((r) => r.status !== "invalid");
  return (
    <div class="card stack">
      <h3>Preview</h3>
      <p aria-live="polite">
        {rows.length} {rows.length === 1 ? "key" : "keys"}: {counts.new ?? 0} new, {counts.existing ?? 0} existing
        {compared ? `, ${counts.changed ?? 0} changed, ${counts.unchanged ?? 0} unchanged` : ""}
        {counts.invalid ? `, ${counts.invalid} invalid (not sent)` : ""}.
      </p>
      {rows.length > MAX_ENTRIES && <p class="error">One import takes at most {MAX_ENTRIES} keys. Split the file.</p>}
      {!compared && (counts.existing ?? 0) > 0 && (
        <div class="row-actions">
          <button type="button" {...whileBusy(props.compare.busy, props.onCompare)}>
            {props.compare.busy ? "Comparing…" : "Compare values with the current ones"}
          </button>
          <span class="muted small">
            Reads the current values (recorded in the audit log as an export) to tell changed from unchanged keys.
          </span>
        </div>
      )}
      <ErrorText error={props.compare.error} />
      {props.canOverwrite ? (
        <label class="check">
          <input type="checkbox" checked={props.overwriteAll} onChange={(e) => props.onOverwriteAll(e.currentTarget.checked)} />
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
              {(row.status === "existing" || row.status === "changed") && props.canOverwrite ? (
                <label class="check">
                  <input type="checkbox" checked={row.overwrite} onChange={(e) => props.onOverwrite(row.key, e.currentTarget.checked)} />
                  <span class="sr-only">Overwrite {row.key}</span>
                </label>
              ) : (
                <span class="muted">—</span>
              )}
            </td>
          </tr>
        ))}
      </DataTable>
      <ErrorText error={props.submit.error} />
      <div class="actions">
        <button
          type="button"
          class="primary"
          disabled={props.blocked || importable.length === 0 || importable.length > MAX_ENTRIES}
          {...whileBusy(props.submit.busy, props.onSubmit)}
        >
          {props.submit.busy ? "Importing…" : `Import ${importable.length} ${importable.length === 1 ? "key" : "keys"}`}
        </button>
      </div>
    </div>
  );
}
