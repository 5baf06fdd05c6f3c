// Parses .env text in the browser exactly as the dotenv package's default parser does (its
// line pattern and unquoting, copied below), so that a file this server exported, which is
// written for dotenv's rules (src/secrets/dotenv.ts), reads back value for value. On top of
// dotenv: line numbers, the lines it skips, and keys given more than once.

export interface ParsedLine {
  key: string;
  value: string;
  line: number;
}

export interface ParseResult {
  entries: ParsedLine[];
  /** Lines that are neither blank, comment nor KEY=VALUE. */
  problems: { line: number; text: string }[];
  /** Keys given more than once (the last one is kept). */
  duplicates: string[];
}

/** dotenv's pattern (lib/main.js, v16 to v18). A quoted value may span lines. */
const LINE =
  /^\s*(?:export\s+)?([\w.-]+)(?:\s*=\s*?|:\s+?)(\s*'(?:\\'|[^'])*'|\s*"(?:\\"|[^"])*"|\s*`(?:\\`|[^`])*`|[^#\r\n]+)?\s*(?:#.*)?$/gm;

/** The opening of the export's here-document (`: <<'END…'`), which bash skips and dotenv ignores. */
const HERE_DOC = /^: <<'([^']+)'$/;

export function parseDotenv(text: string): ParseResult {
  const src = text.replace(/\r\n?/g, "\n");
  const lines = src.split("\n");
  // Line number of an index; matches come in order, so the count only moves forward.
  let counted = 0;
  let line = 1;
  const lineAt = (index: number) => {
    for (; counted < index; counted++) if (src[counted] === "\n") line++;
    return line;
  };
  const byKey = new Map<string, ParsedLine>();
  const duplicates = new Set<string>();
  const read = new Set<number>();
  for (const match of src.matchAll(LINE)) {
    const key = match[1]!;
    let value = (match[2] ?? "").trim();
    const quote = value[0];
    value = value.replace(/^(['"`])([\s\S]*)\1$/gm, "$2");
    if (quote === '"') value = value.replace(/\\n/g, "\n").replace(/\\r/g, "\r");
    const start = match.index + match[0].length - match[0].trimStart().length;
    const first = lineAt(start);
    for (let n = first; n <= lineAt(match.index + match[0].length); n++) read.add(n);
    if (byKey.has(key)) duplicates.add(key);
    byKey.delete(key);
    byKey.set(key, { key, value, line: first });
  }
  const problems: ParseResult["problems"] = [];
  let delimiter: string | undefined;
  lines.forEach((raw, i) => {
    if (read.has(i + 1) || /^\s*(#.*)?$/.test(raw)) return;
    if (delimiter === undefined && HERE_DOC.test(raw)) delimiter = HERE_DOC.exec(raw)![1];
    else if (raw === delimiter) delimiter = undefined;
    else problems.push({ line: i + 1, text: raw.trim().slice(0, 80) });
  });
  return { entries: [...byKey.values()], problems, duplicates: [...duplicates] };
}
