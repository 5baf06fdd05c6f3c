// Editing a secret: the key and the current value, prefilled. Fetching the value is a
// reveal, audited as one, and the dialog says so. Saving sends expectedVersion; when someone
// else saved in between, the 409 is explained and "Reload and reapply" fetches their version
// while keeping this edit in the editor.
import { useEffect, useState } from "preact/hooks";
import { get, patch, type SecretMeta, type SecretValue } from "../api.ts";
import { Dialog, ErrorText, messageOf, SubmitButton, useAction, whileBusy } from "../ui.tsx";
import { isSecretGone, keyProblem, MAX_KEY_LENGTH } from "./secrets-common.tsx";
import { shapeOf, ValueEditor } from "./secrets-value.tsx";

/** The 409 of a stale expectedVersion; a key clash is a 409 too, with its own message. */
const CHANGED_BY_SOMEONE_ELSE = "This secret was changed by someone else. Reload and try again.";

interface Base {
  key: string;
  value: string;
  version: number;
}

type Field = "key" | "value";

/** Their newer version, and per field whether it came into the editor or clashes with this edit. */
interface Reapplied extends Base {
  taken: Field[];
  clashes: Field[];
}

export function EditSecret(props: {
  base: string;
  secret: SecretMeta;
  onClose(): void;
  onSaved(): Promise<void>;
  /** The secret was deleted elsewhere: the list behind the dialog drops its row. */
  onGone(): void;
}) {
  const { secret } = props;
  const path = `${props.base}/secrets/${secret.id}`;
  const [loaded, setLoaded] = useState<Base | undefined>(undefined);
  const [loadError, setLoadError] = useState<string | undefined>(undefined);
  const [key, setKey] = useState(secret.key);
  const [value, setValue] = useState("");
  const [multiline, setMultiline] = useState(false);
  const [reapplied, setReapplied] = useState<Reapplied | undefined>(undefined);
  const action = useAction();

  async function load(): Promise<Base> {
    const { secret: full } = await get<{ secret: SecretValue }>(path);
    return { key: full.key, value: full.value, version: full.version };
  }

  useEffect(() => {
    load()
      .then((base) => {
        setLoaded(base);
        setKey(base.key);
        setValue(base.value);
        setMultiline(shapeOf(base.value) !== "line");
      })
      .catch((e) => {
        setLoadError(messageOf(e));
        if (isSecretGone(e)) props.onGone();
      });
  }, [path]);

  // Empty is refused too (the field is required), but says nothing until something is typed.
  const keyRefused = key === "" ? undefined : keyProblem(key);
  const keyValid = key !== "" && keyRefused === undefined;
  const changes: { key?: string; value?: string } = {};
  if (loaded && key !== loaded.key) changes.key = key;
  if (loaded && value !== loaded.value) changes.value = value;
  const hasChanges = Object.keys(changes).length > 0;

  async function reloadAndReapply() {
    if (!loaded) return;
    action.clear();
    try {
      const theirs = await load();
      // Their version becomes the base. A field this edit changed keeps the edit; a field it
      // left alone takes theirs, so saving cannot quietly undo their change (a rename alone
      // would otherwise send back the old value over their new one).
      const mine = { key, value };
      const fields: Field[] = ["key", "value"];
      const edited = fields.filter((f) => mine[f] !== loaded[f]);
      const taken = fields.filter((f) => !edited.includes(f) && theirs[f] !== loaded[f]);
      const clashes = edited.filter((f) => theirs[f] !== loaded[f] && theirs[f] !== mine[f]);
      // Against the fields as they are now: what was typed while their version loaded stays.
      if (taken.includes("key")) setKey((current) => (current === loaded.key ? theirs.key : current));
      if (taken.includes("value")) {
        setValue((current) => (current === loaded.value ? theirs.value : current));
        if (shapeOf(theirs.value) !== "line") setMultiline(true);
      }
      setLoaded(theirs);
      setReapplied({ ...theirs, taken, clashes });
    } catch (e) {
      setLoadError(messageOf(e));
    }
  }

  return (
    <Dialog title={`Edit ${secret.key}`} onClose={props.onClose} wide busy={action.busy}>
      {loaded && (
        <p class="notice small" role="note">
          Opening the editor read the current value: this is recorded in the project's audit log as a reveal under your name.
        </p>
      )}
      <ErrorText error={loadError} />
      {!loaded && !loadError && (
        <p class="muted" role="status">
          Reading the current value…
        </p>
      )}
      {loaded && (
        <form
          onSubmit={async (e) => {
            e.preventDefault();
            if (!hasChanges || !keyValid || action.busy) return;
            const result = await action.run(() => patch(path, { ...changes, expectedVersion: loaded.version }));
            if (result) {
              props.onClose();
              await props.onSaved();
            }
          }}
        >
          <p class="muted small">Editing version {loaded.version}. Saving fails if someone else changes the secret in the meantime.</p>
          {reapplied && (
            <p class="notice small" role="status">
              Version {reapplied.version} is loaded as the base, and your edit is kept in the fields below.
              {reapplied.taken.length > 0 && ` Their ${describe(reapplied.taken)}, which you had not changed, is in the editor now.`}
              {reapplied.clashes.length > 0 && ` You both changed the ${describe(reapplied.clashes)}: yours is in the editor.`} Check it
              against their change, then save.{" "}
              <button
                type="button"
                class="link"
                onClick={() => {
                  setKey(reapplied.key);
                  setValue(reapplied.value);
                  setReapplied(undefined);
                }}
              >
                Use their version instead
              </button>
            </p>
          )}
          <label class="field">
            <span>Key</span>
            <input
              class="mono"
              required
              maxLength={MAX_KEY_LENGTH}
              value={key}
              onInput={(e) => setKey(e.currentTarget.value)}
              autoComplete="off"
              spellcheck={false}
              aria-invalid={!keyValid}
              aria-describedby={keyRefused === undefined ? undefined : "edit-key-problem"}
            />
          </label>
          {keyRefused !== undefined && (
            <p id="edit-key-problem" class="small error-text">
              {keyRefused}
            </p>
          )}
          <div class="field">
            <label for="edit-value">Value</label>
            <ValueEditor id="edit-value" value={value} multiline={multiline} onInput={setValue} />
          </div>
          <label class="check">
            <input type="checkbox" checked={multiline} onChange={(e) => setMultiline(e.currentTarget.checked)} /> Multi-line editor with
            line numbers
          </label>
          <ErrorText error={action.error}>
            {action.errorStatus === 409 && action.error === CHANGED_BY_SOMEONE_ELSE && (
              <>
                <span class="small">
                  {" "}
                  Someone saved a new version while you were editing. Your edit is still here: reload their version and apply your edit on
                  top of it.
                </span>
                <button type="button" onClick={() => void reloadAndReapply()}>
                  Reload and reapply
                </button>
              </>
            )}
          </ErrorText>
          <div class="actions">
            <SubmitButton label="Save" busyLabel="Saving…" busy={action.busy} disabled={!keyValid} unavailable={!hasChanges} />
            {/* Nothing to discard: aria-disabled, as it becomes once pressed, so the focus stays on it. */}
            <button
              type="button"
              {...whileBusy(!hasChanges || action.busy, () => {
                setKey(loaded.key);
                setValue(loaded.value);
                action.clear();
              })}
            >
              Discard changes
            </button>
            <button type="button" {...whileBusy(action.busy, props.onClose)}>
              Cancel
            </button>
          </div>
        </form>
      )}
    </Dialog>
  );
}

function describe(fields: Field[]): string {
  return fields.length === 2 ? "key and value" : fields[0]!;
}
