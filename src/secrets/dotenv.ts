// Writes a .env file that the `dotenv` npm package reads back exactly and that `source`
// in bash can never turn into a command or an expansion, whatever the values. The rules
// are in the README ("Export as .env"); the reasons are in the comments below.
//
// What dotenv (v16 to v18, default parser) does with a line `KEY=<value>`:
// - '…', "…" and `…` are quotes; nothing inside is unescaped, except `\n` and `\r` inside
//   double quotes. A quote character can appear inside its own quotes only as `\'`, `\"`
//   or "\`" (the backslash stays part of the value). Newlines may appear inside quotes.
// - Before parsing, every CR (and CRLF) in the file becomes LF.
// - Unquoted values end at `#` or the end of the line and are trimmed.
// - Its pattern lets `\<quote>` run past the closing quote when a value ends with a
//   backslash; a guard line holding that quote character stops it (see guardLine).
// What bash does: single quotes are literal; double quotes expand `$`, backticks and
// backslashes; backticks run commands. So a line is left for bash to read only when both
// read the same value; every other line goes inside a quoted here-document (`: <<'END'`),
// which bash skips without expanding anything and dotenv reads like any other line.

import { isAppSettingName, isShellTypedName } from "../core/env-names.ts";

export interface DotenvEntry {
  key: string;
  value: string;
}

export type DotenvOnlyReason = "name" | "shell-typed" | "value";

export interface DotenvFile {
  text: string;
  /**
   * Keys whose value no dotenv syntax can carry, named in a comment instead: ', a backtick
   * and " (or the text `\n`/`\r`, which double quotes unescape) plus something that needs
   * quoting; a CR plus a " or the text `\n`/`\r`; or a NUL character. And `__proto__`,
   * a name the dotenv package cannot read.
   */
  omitted: string[];
  /**
   * Keys written in the dotenv-only block, which a shell that sources the file skips, and
   * why: a name that is not an application setting, one zsh types itself, or a value only
   * dotenv's quoting can carry.
   */
  dotenvOnly: { key: string; why: DotenvOnlyReason }[];
}

const QUOTES = ["'", '"', "`"] as const;
type Quote = (typeof QUOTES)[number];

/** A line bash and dotenv both read as exactly `value`, or undefined. */
function sharedForm(value: string): string | undefined {
  // Single quotes: literal in both. dotenv turns CR into LF.
  if (!/['\r]/.test(value)) return `'${value}'`;
  // Double quotes without anything either side would treat specially.
  if (!/["$`\\\r]/.test(value)) return `"${value}"`;
  return undefined;
}

/** Whether `quote` never appears inside `text` except right after a backslash. */
function onlyEscaped(text: string, quote: Quote): boolean {
  for (let i = text.indexOf(quote); i !== -1; i = text.indexOf(quote, i + 1)) {
    if (i === 0 || text[i - 1] !== "\\") return false;
  }
  return true;
}

/** A form dotenv alone reads back exactly (for lines inside the here-document), or undefined. */
function dotenvForm(value: string): string | undefined {
  // Double quotes can carry CR as `\r`, as long as the value has no `\n` or `\r` text of its own.
  if (onlyEscaped(value, '"') && !/\\[nr]/.test(value)) return `"${value.replace(/\r/g, "\\r")}"`;
  if (value.includes("\r")) return undefined;
  if (onlyEscaped(value, "`")) return `\`${value}\``;
  if (onlyEscaped(value, "'")) return `'${value}'`;
  // Unquoted: one line, no comment sign, nothing trim() would remove, not opening with a quote.
  if (!/[#\n\u2028\u2029]/.test(value) && value.trim() === value && !/^['"`]/.test(value)) return value;
  return undefined;
}

/**
 * Placed after a line whose quoted value ends with a backslash: dotenv's pattern treats
 * that backslash and the closing quote as an escaped quote and looks for the next one,
 * which this comment provides, followed by text that cannot end a value.
 */
function guardLine(quote: string): string {
  return `#${quote} (keeps the value above intact: it ends with a backslash)`;
}

function lines(key: string, written: string): string[] {
  const quote = written[0];
  const out = [`${key}=${written}`];
  if (written.length >= 2 && QUOTES.includes(quote as Quote) && written.at(-1) === quote && written.at(-2) === "\\") {
    out.push(guardLine(quote!));
  }
  return out;
}

/** The file for `entries` (already in the order wanted, sorted by key). */
export function formatDotenv(entries: DotenvEntry[]): DotenvFile {
  type Block = { shared: boolean; lines: string[] };
  const blocks: Block[] = [];
  const omitted: string[] = [];
  const dotenvOnly: DotenvFile["dotenvOnly"] = [];
  /** A comment at the key's place instead of its line. */
  const omit = (key: string, reason: string) => {
    omitted.push(key);
    blocks.push({ shared: true, lines: [`# ${key} is left out: ${reason}. Use the JSON export for it.`] });
  };
  for (const { key, value } of entries) {
    if (key === "__proto__") {
      // A valid key, but the dotenv package reads the file into a plain object, where this
      // name sets the object's prototype (a string is ignored): the value would vanish unsaid.
      omit(key, "the dotenv package cannot read a variable of this name");
      continue;
    }
    if (value.includes("\0")) {
      // No environment can hold it (they are C strings), and bash stops reading a file at NULs.
      omit(key, "its value holds a NUL character, which no environment variable can");
      continue;
    }
    // A name that is not an application setting (PATH, LD_PRELOAD, PROMPT_COMMAND, PS1,
    // GIT_CONFIG_KEY_0...) would let the file choose which code later runs in a shell that
    // sources it (with `set -a`, in every command it starts): dotenv-only, like `run` leaves it
    // out. So is a name zsh evaluates as arithmetic when assigned (TRY_BLOCK_ERROR).
    const why: DotenvOnlyReason = !isAppSettingName(key) ? "name" : isShellTypedName(key) ? "shell-typed" : "value";
    const shared = why === "value" ? sharedForm(value) : undefined;
    if (shared !== undefined) {
      blocks.push({ shared: true, lines: lines(key, shared) });
      continue;
    }
    const own = dotenvForm(value);
    if (own !== undefined) {
      blocks.push({ shared: false, lines: lines(key, own) });
      dotenvOnly.push({ key, why });
    } else {
      omit(
        key,
        value.includes("\r")
          ? 'its value holds a carriage return, which only double quotes carry, and also a " or the text \\n or \\r'
          : "its value holds ', a backtick and \" (or the text \\n or \\r) as well as a character that needs quoting",
      );
    }
  }

  // The here-document ends at a line equal to its delimiter: pick one no value line equals.
  const bodyLines = new Set(blocks.filter((b) => !b.shared).flatMap((b) => b.lines.join("\n").split("\n")));
  let delimiter = "END_OF_DOTENV_ONLY_LINES";
  for (let n = 1; bodyLines.has(delimiter); n++) delimiter = `END_OF_DOTENV_ONLY_LINES_${n}`;

  const out: string[] = [];
  for (const block of blocks) {
    if (block.shared) {
      out.push(...block.lines);
    } else {
      // Quoted delimiter: bash reads the body as inert text and expands nothing in it.
      out.push(`: <<'${delimiter}'`, ...block.lines, delimiter);
    }
  }
  return { text: out.length === 0 ? "" : `${out.join("\n")}\n`, omitted, dotenvOnly };
}
