export interface SecretPair {
  key: string;
  value: string;
}

/**
 * One `KEY='value'` line per secret, quoted so the `dotenv` package reads back exactly the
 * value: single quotes are literal, backticks when the value holds a single quote, double
 * quotes (which only touch \n and \r sequences) when it holds both or a carriage return.
 * Returns the keys whose value no dotenv quoting can carry exactly (rare mixes of all three
 * quote characters and literal backslash sequences).
 */
export function formatDotenv(secrets: SecretPair[]): { text: string; inexact: string[] } {
  const inexact: string[] = [];
  const lines = secrets.map(({ key, value }) => {
    const canDoubleQuote = !value.includes('"') && !/\\[nr]/.test(value);
    // dotenv turns CR LF into LF before parsing: only an escaped \r inside double quotes survives.
    if (value.includes("\r")) {
      if (canDoubleQuote) return `${key}="${value.replace(/\r/g, "\\r")}"`;
    } else {
      if (!value.includes("'")) return `${key}='${value}'`;
      if (!value.includes("`")) return `${key}=\`${value}\``;
      if (canDoubleQuote) return `${key}="${value}"`;
    }
    inexact.push(key);
    return `${key}="${value.replace(/"/g, '\\"').replace(/\r/g, "\\r")}"`;
  });
  return { text: lines.length ? lines.join("\n") + "\n" : "", inexact };
}

export function formatJson(secrets: SecretPair[]): string {
  return JSON.stringify(Object.fromEntries(secrets.map((s) => [s.key, s.value])), null, 2) + "\n";
}
