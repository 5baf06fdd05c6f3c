// The import page's .env parser (web/src/dotenv.ts) reads files as the dotenv package does,
// so the server's own export reads back value for value, with no line reported as skipped.
import assert from "node:assert/strict";
import { test } from "node:test";
import dotenv from "dotenv";
import { formatDotenv } from "../src/secrets/dotenv.ts";
import { parseDotenv } from "../web/src/dotenv.ts";

const PIECES = [
  "'",
  '"',
  "`",
  "\\",
  "$",
  "#",
  " ",
  "\t",
  "\n",
  "\r",
  "=",
  "a",
  "Z",
  "0",
  "é",
  "🔑",
  "\\n",
  "\\r",
  "\\t",
  "\\'",
  '\\"',
  "\\`",
  "\\\\",
  "C:\\temp",
  "$(x)",
];

/** Deterministic values built from the pieces dotenv and bash treat specially. */
function values(count: number): string[] {
  let state = 12345;
  const next = () => (state = (Math.imul(state, 1664525) + 1013904223) >>> 0) / 2 ** 32;
  return Array.from({ length: count }, () =>
    Array.from({ length: 1 + Math.floor(next() * 8) }, () => PIECES[Math.floor(next() * PIECES.length)]!).join(""),
  );
}

test("an export of this server reads back exactly, and as dotenv reads it", () => {
  const fixed = ["plain", "it's C:\\temp", "a\\\"b 'c'", "ends with \\\" and 's", "it's\\", "tab\\there 'q'", "line1\nline2 it's"];
  const entries = [...fixed, ...values(400)].map((value, i) => ({ key: `K${String(i).padStart(3, "0")}`, value }));
  const { text, omitted } = formatDotenv(entries);
  const parsed = parseDotenv(text);
  const kept = entries.filter((e) => !omitted.includes(e.key));
  assert.ok(kept.length > 300);
  assert.deepEqual(Object.fromEntries(parsed.entries.map((e) => [e.key, e.value])), Object.fromEntries(kept.map((e) => [e.key, e.value])));
  assert.deepEqual(Object.fromEntries(parsed.entries.map((e) => [e.key, e.value])), dotenv.parse(text));
  // Its here-document lines and the comments for left-out keys are not reported as skipped.
  assert.deepEqual(parsed.problems, []);
  assert.deepEqual(parsed.duplicates, []);
});

test("hand-written files: the values dotenv reads, line numbers, skipped lines, repeated keys", () => {
  const text = [
    "# comment",
    "export NEW_ONE=hello",
    'QUOTED="a b\\nc \\t \\" end"',
    "SINGLE='C:\\new' # note",
    'MULTI="one',
    'two"',
    "not a pair",
    "NEW_ONE=again",
    "COLON: value",
    "EMPTY=",
    "",
  ].join("\r\n");
  const parsed = parseDotenv(text);
  const values = Object.fromEntries(parsed.entries.map((e) => [e.key, e.value]));
  assert.deepEqual(values, dotenv.parse(text));
  assert.deepEqual(values, {
    QUOTED: 'a b\nc \\t \\" end',
    SINGLE: "C:\\new",
    MULTI: "one\ntwo",
    NEW_ONE: "again",
    COLON: "value",
    EMPTY: "",
  });
  assert.deepEqual(
    parsed.entries.map((e) => [e.key, e.line]),
    [
      ["QUOTED", 3],
      ["SINGLE", 4],
      ["MULTI", 5],
      ["NEW_ONE", 8],
      ["COLON", 9],
      ["EMPTY", 10],
    ],
  );
  assert.deepEqual(parsed.problems, [{ line: 7, text: "not a pair" }]);
  assert.deepEqual(parsed.duplicates, ["NEW_ONE"]);
});
