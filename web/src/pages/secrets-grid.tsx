// The secrets of one environment as a compact grid: one line per secret, sortable columns,
// a checkbox per row for bulk actions, reveal and copy as icon buttons, the rest in a row menu.
import { useEffect, useRef } from "preact/hooks";
import type { SecretMeta } from "../api.ts";
import { Time, useCopy, whileBusy } from "../ui.tsx";
import { CheckIcon, CopyIcon, EyeIcon, EyeOffIcon, KeyName, REVEAL_NOTE } from "./secrets-common.tsx";
import { type MenuItem, RowMenu } from "./secrets-row-menu.tsx";
import { MaskedValue, RevealedValue } from "./secrets-value.tsx";

type SortColumn = "key" | "version" | "updatedAt";
export interface Sort {
  column: SortColumn;
  descending: boolean;
}

export function sortSecrets(secrets: SecretMeta[], sort: Sort): SecretMeta[] {
  const sign = sort.descending ? -1 : 1;
  return [...secrets].sort((a, b) => {
    let order = 0;
    if (sort.column === "version") order = a.version - b.version;
    else if (sort.column === "updatedAt") order = a.updatedAt.localeCompare(b.updatedAt);
    // Keys last, so equal versions or times read alphabetically.
    return sign * order || (sort.column === "key" ? sign : 1) * (a.key < b.key ? -1 : a.key > b.key ? 1 : 0);
  });
}

const COLUMNS: { column: SortColumn; label: string; class: string }[] = [
  { column: "key", label: "Key", class: "col-key" },
  { column: "version", label: "Version", class: "col-version" },
  { column: "updatedAt", label: "Updated", class: "col-updated" },
];

function SortHeader({
  column,
  label,
  sort,
  onSort,
  class: className,
}: {
  column: SortColumn;
  label: string;
  class: string;
  sort: Sort;
  onSort(sort: Sort): void;
}) {
  const active = sort.column === column;
  return (
    <th scope="col" class={className} aria-sort={active ? (sort.descending ? "descending" : "ascending") : undefined}>
      <button type="button" class="sort" onClick={() => onSort({ column, descending: active ? !sort.descending : column === "updatedAt" })}>
        {label}
        <span aria-hidden="true" class="sort-mark">
          {active ? (sort.descending ? "▼" : "▲") : ""}
        </span>
      </button>
    </th>
  );
}

/** Copies a value (read on demand, which is a reveal) and says so in its accessible name. */
function CopyValueButton({
  name,
  read,
  onStart,
  onFailed,
}: {
  name: string;
  read(): Promise<string>;
  onStart(): void;
  onFailed(message: string): void;
}) {
  const [state, copy] = useCopy(read, onStart, onFailed);
  const label = state === "copied" ? `Copied ${name}` : state === "failed" ? `Copy of ${name} failed` : `Copy ${name}`;
  return (
    <button type="button" class="icon-button" aria-label={label} title={`Copy the value. ${REVEAL_NOTE}`} onClick={copy}>
      {state === "copied" ? <CheckIcon /> : <CopyIcon />}
    </button>
  );
}

interface GridProps {
  env: string;
  secrets: SecretMeta[];
  sort: Sort;
  onSort(sort: Sort): void;
  revealed: Record<string, string>;
  revealing: string | undefined;
  selected: Set<string>;
  onSelect(ids: string[], selected: boolean): void;
  onReveal(secret: SecretMeta): void;
  onHide(secret: SecretMeta): void;
  readValue(secret: SecretMeta): Promise<string>;
  onStart(): void;
  /** A copy failed: the page shows why. */
  onCopyFailed(secret: SecretMeta, message: string): void;
  menuFor(secret: SecretMeta): MenuItem[];
}

export function SecretsGrid(props: GridProps) {
  const { secrets, selected } = props;
  const all = useRef<HTMLInputElement>(null);
  const chosen = secrets.filter((s) => selected.has(s.id)).length;
  useEffect(() => {
    // Only a property: there is no HTML attribute for "some but not all".
    if (all.current) all.current.indeterminate = chosen > 0 && chosen < secrets.length;
  }, [chosen, secrets.length]);

  const sortName = COLUMNS.find((c) => c.column === props.sort.column)!.label.toLowerCase();
  return (
    <div class="table-wrap grid-wrap">
      <table class="secrets-grid">
        <caption class="sr-only">
          Secrets of {props.env}, sorted by {sortName} {props.sort.descending ? "descending" : "ascending"}
        </caption>
        <thead>
          <tr>
            <th scope="col" class="col-select">
              <input
                ref={all}
                type="checkbox"
                aria-label="Select all shown secrets"
                checked={chosen > 0 && chosen === secrets.length}
                onChange={(e) =>
                  props.onSelect(
                    secrets.map((s) => s.id),
                    e.currentTarget.checked,
                  )
                }
              />
            </th>
            <SortHeader {...COLUMNS[0]!} sort={props.sort} onSort={props.onSort} />
            <th scope="col" class="col-value">
              Value
            </th>
            <SortHeader {...COLUMNS[1]!} sort={props.sort} onSort={props.onSort} />
            <SortHeader {...COLUMNS[2]!} sort={props.sort} onSort={props.onSort} />
            <th scope="col" class="col-actions">
              <span class="sr-only">Actions</span>
            </th>
          </tr>
        </thead>
        <tbody>
          {secrets.map((secret) => {
            const value = props.revealed[secret.id];
            return (
              <tr key={secret.id} class={selected.has(secret.id) ? "selected" : undefined}>
                <td class="col-select">
                  <input
                    type="checkbox"
                    aria-label={`Select ${secret.key}`}
                    checked={selected.has(secret.id)}
                    onChange={(e) => props.onSelect([secret.id], e.currentTarget.checked)}
                  />
                </td>
                <th scope="row" class="col-key">
                  <KeyName name={secret.key} />
                </th>
                <td class="col-value">{value === undefined ? <MaskedValue /> : <RevealedValue name={secret.key} value={value} />}</td>
                <td class="col-version">v{secret.version}</td>
                <td class="col-updated">
                  <Time iso={secret.updatedAt} />
                </td>
                <td class="col-actions">
                  <div class="row-icons">
                    {value === undefined ? (
                      <button
                        type="button"
                        class="icon-button"
                        aria-label={props.revealing === secret.id ? `Revealing ${secret.key}` : `Reveal ${secret.key}`}
                        title={REVEAL_NOTE}
                        aria-describedby="reveal-note"
                        {...whileBusy(props.revealing === secret.id, () => props.onReveal(secret))}
                      >
                        <EyeIcon />
                      </button>
                    ) : (
                      <button type="button" class="icon-button" aria-label={`Hide ${secret.key}`} onClick={() => props.onHide(secret)}>
                        <EyeOffIcon />
                      </button>
                    )}
                    <CopyValueButton
                      name={secret.key}
                      read={() => (value !== undefined ? Promise.resolve(value) : props.readValue(secret))}
                      onStart={props.onStart}
                      onFailed={(message) => props.onCopyFailed(secret, message)}
                    />
                    <RowMenu label={`More actions for ${secret.key}`} items={props.menuFor(secret)} />
                  </div>
                </td>
              </tr>
            );
          })}
        </tbody>
      </table>
    </div>
  );
}
