// Writes a YAML mapping of key to value that every YAML parser reads back as strings,
// exactly: keys and values are double-quoted scalars on one line each, so no parser retypes
// a value ("0123", yes, no, on, null, ~, 1e3, 2024-01-01 stay strings, in YAML 1.1 and 1.2
// alike) and no line folding applies. The rules are in the README ("Other export formats").

import type { ExportEntry } from "./shell.ts";

const NAMED_ESCAPES: Record<string, string> = {
  "\0": "\\0",
  "\t": "\\t",
  "\n": "\\n",
  "\r": "\\r",
  '"': '\\"',
  "\\": "\\\\",
};

/**
 * Characters written as an escape: `"` and `\`; C0 controls, DEL and C1 controls (YAML
 * forbids most of them raw); U+0085, U+2028 and U+2029 (line breaks in YAML 1.1, so a 1.1
 * parser would fold them); U+FEFF (a byte order mark); U+FFFE and U+FFFF (not printable).
 */
const ESCAPED = /["\\\u0000-\u001f\u007f-\u009f\u2028\u2029\ufeff\ufffe\uffff]/g;

/** `text` as a YAML double-quoted scalar on one line. */
export function yamlString(text: string): string {
  const body = text.replace(ESCAPED, (c) => NAMED_ESCAPES[c] ?? `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`);
  return `"${body}"`;
}

/** The document for `entries` (sorted by key): `"KEY": "value"` lines, or `{}` when empty. */
export function formatYaml(entries: ExportEntry[]): string {
  // An empty document would read as null, not as an empty mapping.
  if (entries.length === 0) return "{}\n";
  return entries.map(({ key, value }) => `${yamlString(key)}: ${yamlString(value)}\n`).join("");
}
