// What the parser set aside before the preview: lines that are not KEY=VALUE, keys without
// a value (never a reason to refuse the rest of the file), keys given twice.
import { Fragment } from "preact";
import type { ParseResult } from "../dotenv.ts";

export function ImportNotes({ parsed, empty }: { parsed: ParseResult; empty: string[] }) {
  return (
    <>
      {parsed.problems.length > 0 && (
        <div class="notice" role="note">
          <p>
            These lines are not KEY=VALUE. Fix or remove them before importing: such a line is often the rest of a value over several lines,
            which needs quotes (<code>KEY="…"</code>), and the value would be saved cut.
          </p>
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
          Given more than once (the last one is used):{" "}
          {parsed.duplicates.map((k) => (
            <code key={k}>{k} </code>
          ))}
        </p>
      )}
    </>
  );
}
