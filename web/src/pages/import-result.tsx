// What the server did with each key of an import.
import { useEffect, useRef } from "preact/hooks";
import type { ImportResult } from "../api.ts";
import { DataTable, Link } from "../ui.tsx";

export function ImportResultCard({ result, secretsHref, env }: { result: ImportResult; secretsHref: string; env: string }) {
  // The Import button went with the preview: focus comes here, where the outcome is, rather
  // than falling to the page's top. Only the summary is announced, not a table of 500 rows.
  const heading = useRef<HTMLHeadingElement>(null);
  useEffect(() => heading.current?.focus(), [result]);
  return (
    <div class="card stack">
      <h3 ref={heading} tabIndex={-1}>
        Import finished
      </h3>
      <p role="status">
        {result.summary.created} created, {result.summary.updated} updated, {result.summary.unchanged} unchanged, {result.summary.skipped}{" "}
        skipped, {result.summary.failed} failed.
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
      <Link href={secretsHref}>See the secrets of {env}</Link>
    </div>
  );
}
