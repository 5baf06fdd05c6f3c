// Actions on the selected secrets: delete them (a confirmation lists every key) and export
// them. The export reads each selected value through the single-secret read, so the audit
// log names exactly the keys that left the server (one secret.revealed each) and no other
// value reaches the browser; the environment export would send every value. The .env text
// comes from the server's writer (src/secrets/dotenv.ts), bundled into the UI.
import { useEffect, useState } from "preact/hooks";
import { formatDotenv } from "../../../src/secrets/dotenv.ts";
import { del, get, type SecretMeta, type SecretValue } from "../api.ts";
import { Confirm, messageOf, useAction, whileBusy } from "../ui.tsx";
import { KeyName } from "./secrets-common.tsx";
import { saveFile } from "./secrets-export.tsx";

export function BulkBar(props: {
  selected: SecretMeta[];
  base: string;
  env: string;
  canDelete: boolean;
  /** Opens the delete confirmation at once (the CLI's hand-over link). */
  confirmDelete?: boolean;
  onConfirmClosed?(): void;
  onClear(): void;
  onDeleted(message: string): Promise<void>;
}) {
  const { selected } = props;
  const [deleting, setDeleting] = useState(props.confirmDelete === true && props.canDelete);
  useEffect(() => {
    if (props.confirmDelete && props.canDelete) setDeleting(true);
  }, [props.confirmDelete]);
  const [notice, setNotice] = useState("");
  const exporting = useAction();
  const count = `${selected.length} ${selected.length === 1 ? "secret" : "secrets"}`;

  async function exportSelected(format: "dotenv" | "json") {
    setNotice("");
    await exporting.run(async () => {
      const values: { key: string; value: string }[] = [];
      for (const secret of [...selected].sort((a, b) => a.key.localeCompare(b.key))) {
        const { secret: full } = await get<{ secret: SecretValue }>(`${props.base}/secrets/${secret.id}`);
        values.push({ key: full.key, value: full.value });
      }
      if (format === "json") {
        saveFile(`selected.${props.env}.json`, `${JSON.stringify({ secrets: values }, null, 2)}\n`, "application/json");
        setNotice(`Downloaded ${count} as JSON.`);
      } else {
        // The server's own writer: the same file as Export would give for these keys.
        const { text, omitted } = formatDotenv(values);
        saveFile(`selected.env.${props.env}`, text, "text/plain");
        setNotice(
          `Downloaded ${count} as .env${omitted.length ? `; ${omitted.join(", ")} left out (a comment in the file says why)` : ""}.`,
        );
      }
    });
  }

  return (
    <div class="bulk-bar" role="group" aria-label="Selected secrets">
      <strong>{count} selected</strong>
      <button
        type="button"
        title="Each value is read and recorded in the audit log as a reveal"
        {...whileBusy(exporting.busy, () => void exportSelected("dotenv"))}
      >
        Download selected as .env
      </button>
      <button
        type="button"
        title="Each value is read and recorded in the audit log as a reveal"
        {...whileBusy(exporting.busy, () => void exportSelected("json"))}
      >
        Download selected as JSON
      </button>
      {props.canDelete && (
        <button type="button" class="danger" onClick={() => setDeleting(true)}>
          Delete selected
        </button>
      )}
      <button type="button" onClick={props.onClear}>
        Clear selection
      </button>
      <span class="muted small">Downloads read each selected value: one audit log entry per key.</span>
      <span class="muted small" role="status">
        {exporting.busy ? "Reading the selected values…" : notice}
      </span>
      {exporting.error && (
        <span class="error-text" role="alert">
          {exporting.error}
        </span>
      )}
      {deleting && (
        <Confirm
          title={`Delete ${count}?`}
          confirmLabel={`Delete ${count}`}
          danger
          onClose={() => {
            setDeleting(false);
            props.onConfirmClosed?.();
          }}
          onConfirm={async () => {
            const failed: string[] = [];
            for (const secret of selected) {
              try {
                await del(`${props.base}/secrets/${secret.id}`);
              } catch (e) {
                failed.push(`${secret.key} (${messageOf(e)})`);
              }
            }
            const done = selected.length - failed.length;
            await props.onDeleted(
              `Deleted ${done} ${done === 1 ? "secret" : "secrets"}.${failed.length ? ` Not deleted: ${failed.join(", ")}.` : ""}`,
            );
          }}
        >
          <p>These secrets are removed from {props.env} together with all their earlier versions. It cannot be undone.</p>
          <ul class="key-list" aria-label="Secrets to delete">
            {selected.map((secret) => (
              <li key={secret.id}>
                <KeyName name={secret.key} />
              </li>
            ))}
          </ul>
        </Confirm>
      )}
    </div>
  );
}
