// Writes a file of `export KEY='value'` lines that sh, dash, bash and zsh, sourcing it,
// read back exactly, whatever the values. The rules are in the README ("Other export
// formats"); the reasons are in the comments below.
//
// Inside single quotes every POSIX shell (and zsh) takes every character literally up to
// the next single quote: newlines, carriage returns, `$`, backticks, backslashes, `"`, `#`
// and any Unicode text. A single quote itself is written as `'\''` (close the quotes, an
// escaped quote, reopen). Nothing else is ever unescaped, expanded or run. Two things
// cannot be written: a NUL character (environment variables are C strings, and shells drop
// or stop at NULs) and a name a shell would act on (see below).

import { isAppSettingName, isShellTypedName } from "../core/env-names.ts";

export interface ExportEntry {
  key: string;
  value: string;
}

export interface EnvironmentFile {
  text: string;
  /** Keys of the entries not in the file, each with a comment line at its place. */
  leftOut: string[];
  /** The part of `leftOut` left out for their name alone (`--allow-env` lets them through). */
  unsafeNames: string[];
}

/** `value` in single quotes, each `'` written as `'\''`. */
function singleQuoted(value: string): string {
  return `'${value.replaceAll("'", "'\\''")}'`;
}

/**
 * The file for `entries` (already in the order wanted, sorted by key). A key that is not
 * named like an application setting (the rule of `run`: PATH, LD_PRELOAD, GIT_ASKPASS,
 * PROMPT_COMMAND...) is left out unless it is in `allow`: sourcing is the point of this
 * file, and a member who may create secrets must not choose which code runs on the machine
 * that sources it.
 */
export function formatShell(entries: ExportEntry[], allow: ReadonlySet<string> = new Set()): EnvironmentFile {
  const out: string[] = [];
  const leftOut: string[] = [];
  const unsafeNames: string[] = [];
  for (const { key, value } of entries) {
    if (value.includes("\0")) {
      leftOut.push(key);
      out.push(`# ${key} is left out: its value holds a NUL character, which no environment variable can. Use the JSON export for it.`);
    } else if (isShellTypedName(key)) {
      leftOut.push(key);
      out.push(
        `# ${key} is left out: zsh gives this name a type of its own (a number or one character), so it would not hold the value. Use the JSON export for it.`,
      );
    } else if (!isAppSettingName(key) && !allow.has(key)) {
      leftOut.push(key);
      unsafeNames.push(key);
      out.push(
        `# ${key} is left out: not named like an application setting, and a variable like it can choose which code runs in the shell that sources this file. ` +
          `Use the JSON export for it, or the CLI's export --format shell --allow-env ${key}.`,
      );
    } else {
      // Keys are letters, digits and underscores, not starting with a digit: a valid name in every shell.
      out.push(`export ${key}=${singleQuoted(value)}`);
    }
  }
  return { text: out.length === 0 ? "" : `${out.join("\n")}\n`, leftOut, unsafeNames };
}
