// Parses .env text in the browser, the way dotenv does: KEY=VALUE lines, optional
// `export `, # comments, single quotes literal, double quotes with \n escapes and
// multi-line values, backticks. Later lines win over earlier ones.

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

const LINE = /^\s*(?:export\s+)?([^\s=#]+)\s*=\s*(.*)$/;

export function parseDotenv(text: string): ParseResult {
  const lines = text.replace(/\r\n?/g, "\n").split("\n");
  const byKey = new Map<string, ParsedLine>();
  const problems: ParseResult["problems"] = [];
  const duplicates = new Set<string>();
  for (let i = 0; i < lines.length; i++) {
    const raw = lines[i]!;
    if (/^\s*(#.*)?$/.test(raw)) continue;
    const match = LINE.exec(raw);
    if (!match) {
      problems.push({ line: i + 1, text: raw.trim().slice(0, 80) });
      continue;
    }
    const key = match[1]!;
    let rest = match[2]!;
    const start = i + 1;
    let value: string;
    const quote = rest[0];
    if (quote === '"' || quote === "'" || quote === "`") {
      // Find the closing quote, possibly on a later line.
      let body = rest.slice(1);
      let end = findClosing(body, quote);
      while (end < 0 && i + 1 < lines.length) {
        i++;
        body += "\n" + lines[i]!;
        end = findClosing(body, quote);
      }
      if (end < 0) {
        problems.push({ line: start, text: `${key}: the ${quote} quote is never closed` });
        continue;
      }
      value = body.slice(0, end);
      if (quote === '"') value = value.replace(/\\([nrt"\\$])/g, (_m, c: string) => ({ n: "\n", r: "\r", t: "\t" })[c] ?? c);
    } else {
      const hash = rest.search(/\s#/);
      if (hash >= 0) rest = rest.slice(0, hash);
      value = rest.trim();
    }
    if (byKey.has(key)) duplicates.add(key);
    byKey.delete(key);
    byKey.set(key, { key, value, line: start });
  }
  return { entries: [...byKey.values()], problems, duplicates: [...duplicates] };
}

function findClosing(body: string, quote: string): number {
  for (let i = 0; i < body.length; i++) {
    if (quote === '"' && body[i] === "\\") {
      i++;
      continue;
    }
    if (body[i] === quote) return i;
  }
  return -1;
}
