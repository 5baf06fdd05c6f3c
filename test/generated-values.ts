// Values for the export format tests: the hard cases the issues named, and a deterministic
// generator of many more built from the pieces that break writers (quotes, backslashes, $,
// line breaks, NULs, shell syntax, here-document delimiters, Unicode). Shared by the .env
// test and the other formats' tests, so every format is proved on the same values.
import crypto from "node:crypto";

/** Deterministic generator, so a failure can be replayed. */
export function generator(seed: number) {
  let state = seed >>> 0;
  const next = () => {
    state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
    return state / 2 ** 32;
  };
  const pick = <T>(list: readonly T[]): T => list[Math.floor(next() * list.length)]!;
  return { next, pick };
}

export const PIECES = [
  "'",
  '"',
  "`",
  "\\",
  "$",
  "#",
  " ",
  "  ",
  "\t",
  "\n",
  "\r",
  "\r\n",
  "=",
  ";",
  "&",
  "|",
  "!",
  "*",
  "?",
  "~",
  "(",
  ")",
  "{",
  "}",
  "[",
  "]",
  "<",
  ">",
  "n",
  "r",
  "a",
  "Z",
  "0",
  "_",
  "é",
  "ß",
  "日本",
  "🔑",
  "\u2028",
  "\u00a0",
  "\u0000",
  "\\n",
  "\\r",
  "\\'",
  '\\"',
  "\\`",
  "\\\\",
  "$(touch CANARY)",
  "`touch CANARY`",
  "${CANARY_VAR}",
  "$CANARY_VAR",
  "$((6*7))",
  "${CANARY_VAR:-x}",
  "\\$(touch CANARY)",
  "'$(touch CANARY)'",
  '"$(touch CANARY)"',
  "# not a comment",
  " #",
  "export X=1",
  "KEY=value",
  "END_OF_DOTENV_ONLY_LINES",
  "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END PRIVATE KEY-----",
];

export function generatedValues(seed: number, n: number): string[] {
  const { next, pick } = generator(seed);
  const values: string[] = [];
  while (values.length < n) {
    const parts = Math.floor(next() * 8) + 1;
    let value = "";
    for (let i = 0; i < parts; i++) value += next() < 0.3 ? crypto.randomBytes(3).toString("base64") : pick(PIECES);
    if (value.length > 0) values.push(value.slice(0, 10_000));
  }
  return values;
}

/** Values the issue names, one per line of thought. */
export const NAMED_VALUES = [
  "plain",
  "-----BEGIN RSA PRIVATE KEY-----\nMIIBOgIBAAJBAKj34GkxFhD90vcNLYLInFEX6Ppy1tPf9Cnzj4p4WGeKLs1Pt8Qu\nKUpRKfFLfRYC9AIKjbJTWit+CqvjWYzvQwECAwEAAQ==\n-----END RSA PRIVATE KEY-----\n",
  "it's",
  'say "hi"',
  "both ' and \"",
  "back\\slash",
  "ends with a backslash\\",
  "\\n is two characters",
  "\\r\\n as text",
  "# starts like a comment",
  "has # inside",
  "$HOME and ${HOME} and $(whoami) and `whoami`",
  "it's $HOME",
  "  leading and trailing spaces  ",
  "\ttab\t",
  "ünïcödé 日本語 🔑",
  "carriage\rreturn",
  "windows\r\nline",
  "`backticks` only",
  "all three ' \" ` quotes",
  "=starts with equals",
  "trailing newline\n",
  "\n",
  " ",
  "'",
  '"',
  "`",
  "\\",
  "'quoted'",
  '"quoted"',
  "END_OF_DOTENV_ONLY_LINES",
  "line\nEND_OF_DOTENV_ONLY_LINES\nKEY=injected",
  "\u2028line separator",
  "nul\u0000byte",
];
