// What the server did with each key of an import.
import type { ImportResult } from "../api.ts";
import { DataTable, Link, OutcomeHeading } from "../ui.tsx";

export function ImportResultCard({ result, secretsHref, env }: { result: ImportResult; secretsHref: string; env: string }) {
  // The Import button went with the preview: focus comes to the outcome's heading, rather
  // than falling to the page's top. Only the summary is announced, not a table of 500 rows.
  return (
    <div class="card stack">
      <OutcomeHeading level={3}>Import finished</OutcomeHeading>
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
