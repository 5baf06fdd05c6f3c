// Writes an env file that both of Docker's readers take exactly: `docker run --env-file`
// (and `docker compose run`/`up` with `env_file:`, which uses Compose's own parser). The
// rules are in the README ("Other export formats"); the reasons are here.
//
// docker run --env-file (the docker CLI's opts/file.go): each line, leading whitespace
// trimmed; empty lines and lines starting with `#` are skipped; the name is what comes
// before the first `=`, the value is the rest of the line, taken literally: no quotes, no
// escapes, no trimming. A line ends at LF; a CR before it is dropped.
// Compose's env_file (compose-go's dotenv parser): a value starting with ' or " is quoted
// (the quotes are removed, escapes are read), an unquoted value is cut at ` #` and trimmed
// of whitespace, and `$VAR`, `${VAR}` and `$$` are interpolated (in unquoted and double-quoted
// values).
// The intersection is an unquoted `KEY=value` line whose value has none of what Compose
// reads differently; docker run then reads the same text. A value outside it cannot be
// written at all: there is no quoting both accept, so the export is refused, naming the keys.

import { isAppSettingName } from "../core/env-names.ts";
import type { EnvironmentFile, ExportEntry } from "./shell.ts";

/** What Compose trims after `=` (compose-go's isSpace). */
const LEADING_SPACE = /^[\t\n\v\f\r \u0085\u00a0]/;
/** What Compose trims at the end of an unquoted value: Go's unicode.IsSpace. */
const TRAILING_SPACE = /[\t\n\v\f\r \u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]$/;

/** Why Docker's env-file format cannot carry `value`, or undefined when it can. */
export function dockerEnvProblem(value: string): string | undefined {
  if (/[\n\r]/.test(value)) return "a line break";
  if (value.includes("\0")) return "a NUL character";
  if (value.includes("$")) return "a $, which Compose interpolates";
  if (/^['"]/.test(value)) return "a leading quote, which Compose removes";
  if (LEADING_SPACE.test(value) || TRAILING_SPACE.test(value)) return "leading or trailing whitespace, which Compose trims";
  if (value.includes(" #")) return "a space before a #, where Compose starts a comment";
  return undefined;
}

/** Keys whose line Docker cannot read as written. */
export class DockerEnvRefusal extends Error {
  readonly keys: string[];

  constructor(keys: string[]) {
    super(`These secrets cannot be written in Docker's env-file format: ${listed(keys)}.`);
    this.keys = keys;
  }
}

/** At most 20 names, then a count: the message stays short with 500 keys. */
function listed(keys: string[]): string {
  const shown = keys.slice(0, 20).join(", ");
  return keys.length > 20 ? `${shown} and ${keys.length - 20} more` : shown;
}

/**
 * The file for `entries` (sorted by key), or a DockerEnvRefusal naming every key whose value
 * it cannot carry (never the values). Keys not named like application settings are left out
 * with a comment unless in `allow`, as `run` leaves them out: the container's environment
 * decides which code runs in it.
 */
export function formatDockerEnv(entries: ExportEntry[], allow: ReadonlySet<string> = new Set()): EnvironmentFile {
  const out: string[] = [];
  const leftOut: string[] = [];
  const refused: string[] = [];
  for (const { key, value } of entries) {
    if (!isAppSettingName(key) && !allow.has(key)) {
      leftOut.push(key);
      out.push(
        `# ${key} is left out: not named like an application setting, and a variable like it can choose which code runs in the container. ` +
          `Use the JSON export for it, or the CLI's export --format docker --allow-env ${key}.`,
      );
    } else if (dockerEnvProblem(value) !== undefined || /^export/.test(key)) {
      // Older Compose versions strip a leading "export" from any name (exportFOO became FOO).
      refused.push(key);
    } else {
      out.push(`${key}=${value}`);
    }
  }
  if (refused.length > 0) throw new DockerEnvRefusal(refused);
  return { text: out.length === 0 ? "" : `${out.join("\n")}\n`, leftOut, unsafeNames: [...leftOut] };
}
