// The .env export: the `dotenv` package reads every value back exactly, and sourcing the
// file in bash never runs a command or expands anything, over many generated values.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { test } from "node:test";
import dotenv from "dotenv";
import { formatDotenv } from "../src/secrets/dotenv.ts";
import { generatedValues, NAMED_VALUES } from "./generated-values.ts";
import { makeTempDir } from "./helpers.ts";
import { envPath, startTeam } from "./secrets-helpers.ts";

// bash comes with Debian: a missing one is a broken setup, not a reason to test less.
assert.equal(spawnSync("bash", ["-c", "true"]).status, 0, "bash runs");
const hasZsh = spawnSync("zsh", ["-c", "true"]).status === 0;

function keyFor(i: number): string {
  return `KEY_${i}`;
}

/** What bash sets when the file is sourced: a map of the keys it set. */
function sourceInBash(
  text: string,
  keys: string[],
): { set: Map<string, string>; canaryTouched: boolean; stderr: string; status: number | null } {
  const dir = makeTempDir("dotenv-bash-");
  try {
    const file = path.join(dir, "exported.env");
    fs.writeFileSync(file, text);
    const script = `
      cd "$WORK" || exit 9
      source ./exported.env
      for k in ${keys.join(" ")}; do
        if [ "\${!k+set}" = set ]; then printf '%s\\0%s\\0' "$k" "\${!k}"; fi
      done`;
    const result = spawnSync("bash", ["--norc", "--noprofile", "-c", script], {
      env: { PATH: process.env.PATH, WORK: dir, CANARY_VAR: "EXPANDED", HOME: dir },
      encoding: "utf8",
      maxBuffer: 64 * 1024 * 1024,
    });
    // Key and value separated by NULs: no value in the file holds one.
    const set = new Map<string, string>();
    const fields = result.stdout.split("\0");
    for (let i = 0; i + 1 < fields.length; i += 2) set.set(fields[i]!, fields[i + 1]!);
    return { set, canaryTouched: fs.existsSync(path.join(dir, "CANARY")), stderr: result.stderr, status: result.status };
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

function checkRoundTrip(values: string[]): void {
  const entries = values.map((value, i) => ({ key: keyFor(i), value })).sort((a, b) => (a.key < b.key ? -1 : 1));
  const { text, omitted } = formatDotenv(entries);
  const expected = Object.fromEntries(entries.filter((e) => !omitted.includes(e.key)).map((e) => [e.key, e.value]));
  const parsed = dotenv.parse(text);
  for (const [key, value] of Object.entries(expected)) {
    assert.equal(
      parsed[key],
      value,
      `${key}: ${JSON.stringify(value)} was written as ${JSON.stringify(text.slice(text.indexOf(`${key}=`) - 40, text.indexOf(`${key}=`) + value.length + 60))}`,
    );
  }
  assert.deepEqual(parsed, expected);
  // Only three kinds of value can be left out: one holding ', a backtick and " (or the text
  // \n or \r, which double quotes would unescape) with something that needs quoting; one
  // holding a CR (which only double quotes carry, as \r) with a " or \n or \r text; and one
  // holding a NUL (no environment variable can).
  for (const key of omitted) {
    const value = entries.find((e) => e.key === key)!.value;
    const allQuotes = value.includes("'") && value.includes("`") && /"|\\[nr]/.test(value);
    const carriageReturn = value.includes("\r") && /"|\\[nr]/.test(value);
    assert.ok(allQuotes || carriageReturn || value.includes("\0"), `${key} was left out: ${JSON.stringify(value)}`);
    assert.ok(text.includes(`# ${key} is left out`));
  }

  const bash = sourceInBash(
    text,
    entries.map((e) => e.key),
  );
  assert.equal(bash.canaryTouched, false, "sourcing ran a command");
  assert.equal(bash.status, 0, bash.stderr);
  assert.equal(bash.stderr, "");
  for (const [key, value] of bash.set) {
    // Whatever bash set, it set to the exact value: nothing was expanded.
    assert.equal(value, expected[key], `bash read ${key} differently: ${JSON.stringify(value)}`);
  }
  // Every value without a single quote, CR or NUL is read by bash as well.
  for (const { key, value } of entries) {
    if (!/['\r\0]/.test(value)) assert.ok(bash.set.has(key), `bash skipped ${key}: ${JSON.stringify(value)}`);
  }
}

test("the named hard cases round-trip through dotenv, and bash neither runs nor expands them", () => {
  checkRoundTrip(NAMED_VALUES);
  const { text, omitted } = formatDotenv([{ key: "ALL_THREE", value: "a'b\"c`d #e" }]);
  assert.deepEqual(omitted, ["ALL_THREE"]);
  assert.equal(dotenv.parse(text).ALL_THREE, undefined);
});

test("a secret named __proto__, which the dotenv package cannot read, is left out with a comment rather than lost unsaid", () => {
  const { text, omitted, dotenvOnly } = formatDotenv([
    { key: "A_KEY", value: "a" },
    { key: "__proto__", value: "b" },
  ]);
  assert.deepEqual([omitted, dotenvOnly], [["__proto__"], []]);
  assert.equal(
    text,
    "A_KEY='a'\n# __proto__ is left out: the dotenv package cannot read a variable of this name. Use the JSON export for it.\n",
  );
  assert.deepEqual(dotenv.parse(text), { A_KEY: "a" });
});

test("thousands of generated values round-trip through dotenv; bash never runs or expands anything", () => {
  for (let seed = 1; seed <= 8; seed++) checkRoundTrip(generatedValues(seed, 1500));
});

test("keys that an interactive bash would act on are kept away from bash", () => {
  const entries = [
    { key: "PROMPT_COMMAND", value: "touch CANARY" },
    { key: "PS1", value: "$(touch CANARY)" },
  ];
  const { text } = formatDotenv(entries);
  assert.deepEqual(dotenv.parse(text), { PROMPT_COMMAND: "touch CANARY", PS1: "$(touch CANARY)" });
  const bash = sourceInBash(text, ["PROMPT_COMMAND", "PS1"]);
  assert.deepEqual([...bash.set.keys()], []);
});

test("names zsh evaluates as arithmetic are kept away from every shell that sources the file", {
  skip: !hasZsh && "zsh is not installed",
}, () => {
  const dir = makeTempDir("dotenv-zsh-");
  try {
    const entries = [
      { key: "TRY_BLOCK_ERROR", value: `path[$(touch ${path.join(dir, "CANARY")})1]` },
      { key: "TRY_BLOCK_INTERRUPT", value: "7" },
      { key: "API_URL", value: "https://api.example.test" },
    ];
    const { text, omitted } = formatDotenv(entries);
    assert.deepEqual(omitted, []);
    assert.deepEqual(dotenv.parse(text), Object.fromEntries(entries.map(({ key, value }) => [key, value])));
    fs.writeFileSync(path.join(dir, "exported.env"), text);
    const result = spawnSync("zsh", ["-f", "-c", `set -a; . ${path.join(dir, "exported.env")}; print -r -- "$API_URL"`], {
      env: { PATH: process.env.PATH, HOME: dir },
      encoding: "utf8",
    });
    assert.deepEqual([result.status, result.stdout, result.stderr], [0, "https://api.example.test\n", ""]);
    assert.equal(fs.existsSync(path.join(dir, "CANARY")), false, "sourcing ran a command");
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test("over HTTP: 1,500 generated values imported and exported as .env read back exactly", async (t) => {
  const { projectId, owner } = await startTeam(t);
  for (const [n, env] of ["development", "staging", "production"].entries()) {
    const values = generatedValues(100 + n, 500).map((v) => v.replace(/^$/, "x"));
    const entries = values.map((value, i) => ({ key: keyFor(i), value, overwrite: false }));
    const imported = await owner.json("POST", `${envPath(projectId, env)}/import`, { entries });
    assert.equal(imported.status, 200, JSON.stringify(imported.body));
    assert.equal(imported.body.summary.created, 500);
    const res = await owner.get(`${envPath(projectId, env)}/export?format=dotenv`);
    assert.equal(res.status, 200);
    const text = await res.text();
    const { omitted } = formatDotenv(entries.map(({ key, value }) => ({ key, value })).sort((a, b) => (a.key < b.key ? -1 : 1)));
    const expected = Object.fromEntries(entries.filter((e) => !omitted.includes(e.key)).map((e) => [e.key, e.value]));
    assert.deepEqual(dotenv.parse(text), expected);
  }
});
