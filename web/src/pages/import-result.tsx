// What the server did with each key of an import.
import type { ImportResult } from "../api.ts";
import { DataTable, Link } from "../ui.tsx";

export function ImportResultCard({ result, secretsHref, env }: { result: ImportResult; secretsHref: string; env: string }) {
  return (
    <div class="card stack" role="status">
      <h3>Import finished</h3>
      <p>
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
