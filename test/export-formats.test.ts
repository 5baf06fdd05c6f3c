// The export formats other than .env (README, "Other export formats"), each read back by a
// real reader on the 1,500 generated values of the .env test and the named hard cases:
// shell sourced by bash, dash and zsh; yaml parsed by the `yaml` package (YAML 1.2 and 1.1)
// and by PyYAML when Debian's python3-yaml is there; docker read by reference readers written
// from Docker's own parsers (docker run --env-file and Compose's env_file). Each check is
// also run once on a deliberately wrong writer, to prove it would catch one.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { test } from "node:test";
import YAML from "yaml";
import { DockerEnvRefusal, dockerEnvProblem, formatDockerEnv } from "../src/secrets/docker-env.ts";
import { type ExportEntry, formatShell } from "../src/secrets/shell.ts";
import { formatYaml, yamlString } from "../src/secrets/yaml.ts";
import { generatedValues, NAMED_VALUES } from "./generated-values.ts";
import { makeTempDir } from "./helpers.ts";
import { envPath, startTeam } from "./secrets-helpers.ts";

/** Values that break YAML and env-file writers in ways the .env cases do not cover. */
const MORE_VALUES = [
  "0123",
  "yes",
  "no",
  "on",
  "off",
  "y",
  "n",
  "true",
  "False",
  "null",
  "NULL",
  "~",
  "1e3",
  "0x1F",
  "0o17",
  ".inf",
  "-.nan",
  "2024-01-01",
  "12:30:00",
  "1_000",
  "- item",
  "key: value",
  "{a: 1}",
  "[1, 2]",
  "&anchor",
  "*alias",
  "!tag",
  "!!str x",
  "%TAG",
  "---",
  "...",
  "|",
  ">",
  "@",
  "? x",
  "\u0085next line",
  "\ufeffbom",
  "del\u007f",
  "c1\u0080\u009f",
  "\ufffe\uffff",
  "\u0001\u001b[31m",
  "a\u2029b",
  "\u00a0nbsp\u00a0",
  "\u3000ideographic",
  "x #y",
  "x\t#y",
  "x#y",
  "a=b=c",
  "$$",
  "\\$HOME",
  "'",
  '"',
  " ",
  "\t",
  "trailing cr\r",
  "mid\rcr",
  "exportFOO=1",
];

function entriesOf(values: string[]): ExportEntry[] {
  return values.map((value, i) => ({ key: `KEY_${i}`, value })).sort((a, b) => (a.key < b.key ? -1 : 1));
}

const ALL_SETS: [string, string[]][] = [
  ["named", [...NAMED_VALUES, ...MORE_VALUES]],
  ...[1, 2, 3].map((seed): [string, string[]] => [`seed ${seed}`, generatedValues(seed, 1500)]),
];

// ---------------------------------------------------------------------------------------
// shell

const SHELLS: { name: string; argv: string[] }[] = [
  { name: "bash", argv: ["bash", "--norc", "--noprofile", "-c"] },
  { name: "dash", argv: ["dash", "-c"] },
  { name: "zsh", argv: ["zsh", "-f", "-c"] },
  // A zsh user's option that gives '' a meaning inside single quotes.
  { name: "zsh with rc_quotes", argv: ["zsh", "-f", "-o", "rcquotes", "-c"] },
];
const available = (cmd: string) => spawnSync(cmd, ["-c", "true"]).status === 0;
// Every shell, not those that happen to be installed: `npm test` installs zsh first
// (test/ensure-test-tools.mjs) and bash and dash come with Debian, so a missing one is a
// broken setup, not a reason to test less.
const shells = SHELLS;
test("every shell the shell export is checked in is installed", () => {
  assert.deepEqual(
    SHELLS.filter((s) => !available(s.argv[0]!)).map((s) => s.name),
    [],
  );
});

interface Sourced {
  /** Variables in the environment of a command started after sourcing, minus the shell's own. */
  exported: Map<string, string>;
  canaryTouched: boolean;
  stderr: string;
  status: number | null;
}

function envOf(stdout: string): Map<string, string> {
  const map = new Map<string, string>();
  for (const line of stdout.split("\0")) {
    if (!line) continue;
    const at = line.indexOf("=");
    map.set(line.slice(0, at), line.slice(at + 1));
  }
  return map;
}

/** Sources `text` in `shell` and lists, NUL-separated, the environment a command then gets. */
function source(shell: (typeof SHELLS)[number], text: string): Sourced {
  const dir = makeTempDir("export-shell-");
  try {
    const run = (file: string) =>
      spawnSync(shell.argv[0]!, [...shell.argv.slice(1), `cd "$WORK" || exit 9; . ./${file}; exec env -0`], {
        env: { PATH: process.env.PATH, WORK: dir, CANARY_VAR: "EXPANDED", HOME: dir, LANG: "C.UTF-8" },
        encoding: "utf8",
        maxBuffer: 256 * 1024 * 1024,
      });
    fs.writeFileSync(path.join(dir, "empty.sh"), "");
    fs.writeFileSync(path.join(dir, "exported.sh"), text);
    const baseline = envOf(run("empty.sh").stdout);
    const result = run("exported.sh");
    const exported = envOf(result.stdout);
    for (const key of baseline.keys()) if (key !== "_" && exported.get(key) === baseline.get(key)) exported.delete(key);
    exported.delete("_");
    return { exported, canaryTouched: fs.existsSync(path.join(dir, "CANARY")), stderr: result.stderr, status: result.status };
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/** What a shell should set: every entry but those with a NUL (left out, with a comment). */
function checkShell(entries: ExportEntry[], text: string, shell: (typeof SHELLS)[number]): void {
  const expected = new Map(entries.filter((e) => !e.value.includes("\0")).map((e) => [e.key, e.value]));
  const sourced = source(shell, text);
  assert.equal(sourced.canaryTouched, false, `${shell.name}: sourcing ran a command`);
  assert.equal(sourced.status, 0, `${shell.name}: ${sourced.stderr}`);
  assert.equal(sourced.stderr, "", shell.name);
  for (const [key, value] of expected) assert.equal(sourced.exported.get(key), value, `${shell.name} read ${key} differently`);
  assert.deepEqual(sourced.exported, expected, `${shell.name} set something else`);
}

for (const [name, values] of ALL_SETS) {
  test(`shell: ${name} values, sourced by ${shells.map((s) => s.name).join(", ")}, are exported exactly`, () => {
    const entries = entriesOf(values);
    const { text, leftOut, unsafeNames } = formatShell(entries);
    assert.deepEqual(unsafeNames, []);
    assert.deepEqual(
      leftOut,
      entries.filter((e) => e.value.includes("\0")).map((e) => e.key),
    );
    for (const key of leftOut) assert.ok(text.includes(`# ${key} is left out: its value holds a NUL character`));
    for (const shell of shells) checkShell(entries, text, shell);
  });
}

test("shell: every shell catches a wrong writer (double quotes, or \\' inside single quotes)", () => {
  const entries = entriesOf([...NAMED_VALUES, ...MORE_VALUES]).filter((e) => !e.value.includes("\0"));
  const wrong = [
    `${entries.map((e) => `export ${e.key}="${e.value.replaceAll('"', '\\"')}"`).join("\n")}\n`,
    `${entries.map((e) => `export ${e.key}='${e.value.replaceAll("'", "\\'")}'`).join("\n")}\n`,
  ];
  for (const shell of shells)
    for (const text of wrong) assert.throws(() => checkShell(entries, text, shell), assert.AssertionError, shell.name);
});

test("shell: names a shell would act on are left out with a comment, unless allowed; zsh's typed names always", () => {
  const entries = [
    { key: "API_KEY", value: "fine" },
    { key: "GIT_ASKPASS", value: "/tmp/evil" },
    { key: "KEYBOARD_HACK", value: "ab" },
    { key: "LD_PRELOAD", value: "/tmp/evil.so" },
    { key: "PATH", value: "/tmp/evil:/usr/bin" },
    { key: "PROMPT_COMMAND", value: "touch CANARY" },
    { key: "PS1", value: "$(touch CANARY)" },
    { key: "TRY_BLOCK_ERROR", value: "not a number" },
    { key: "ZLE_RPROMPT_INDENT", value: "x" },
  ];
  const { text, leftOut, unsafeNames } = formatShell(entries);
  assert.deepEqual(unsafeNames, ["GIT_ASKPASS", "LD_PRELOAD", "PATH", "PROMPT_COMMAND", "PS1"]);
  assert.deepEqual(leftOut, [
    "GIT_ASKPASS",
    "KEYBOARD_HACK",
    "LD_PRELOAD",
    "PATH",
    "PROMPT_COMMAND",
    "PS1",
    "TRY_BLOCK_ERROR",
    "ZLE_RPROMPT_INDENT",
  ]);
  assert.match(text, /^# PATH is left out: not named like an application setting, .*--allow-env PATH\.$/m);
  assert.match(text, /^# TRY_BLOCK_ERROR is left out: zsh gives this name a type of its own/m);
  for (const shell of shells) {
    const sourced = source(shell, text);
    assert.equal(sourced.status, 0, sourced.stderr);
    assert.deepEqual(sourced.exported, new Map([["API_KEY", "fine"]]), shell.name);
  }
  const allowed = formatShell(entries, new Set(["PATH", "TRY_BLOCK_ERROR"]));
  assert.match(allowed.text, /^export PATH='\/tmp\/evil:\/usr\/bin'$/m);
  assert.ok(allowed.leftOut.includes("TRY_BLOCK_ERROR"));
  // zsh's one-word integers too, even when --allow-env names them: an assignment to LINES is
  // evaluated as arithmetic, which runs a $(…) inside a subscript.
  const oneWord = formatShell(
    [
      { key: "FUNCNEST", value: "a[$(touch CANARY)]" },
      { key: "LINES", value: "a[$(touch CANARY)]" },
    ],
    new Set(["FUNCNEST", "LINES"]),
  );
  assert.deepEqual(oneWord.leftOut, ["FUNCNEST", "LINES"]);
  assert.doesNotMatch(oneWord.text, /^export LINES/m);
  assert.deepEqual(formatShell([]).text, "");
});

// ---------------------------------------------------------------------------------------
// yaml

const pyyaml = spawnSync("/usr/bin/python3", ["-c", "import yaml"]).status === 0;

function readYaml(text: string): { v12: unknown; v11: unknown; py?: unknown } {
  const py = pyyaml
    ? JSON.parse(
        spawnSync("/usr/bin/python3", ["-c", "import json, sys, yaml; json.dump(yaml.safe_load(sys.stdin.buffer), sys.stdout)"], {
          input: text,
          encoding: "utf8",
          maxBuffer: 256 * 1024 * 1024,
        }).stdout,
      )
    : undefined;
  return { v12: YAML.parse(text), v11: YAML.parse(text, { version: "1.1" }), py };
}

function checkYaml(entries: ExportEntry[], text: string): void {
  const expected = Object.fromEntries(entries.map((e) => [e.key, e.value]));
  const read = readYaml(text);
  for (const [version, parsed] of Object.entries(read)) {
    if (parsed === undefined && version === "py") continue;
    const got = parsed as Record<string, unknown>;
    for (const { key, value } of entries) assert.equal(got[key], value, `${version} read ${key} differently`);
    assert.deepEqual(got, expected, version);
  }
}

for (const [name, values] of ALL_SETS) {
  test(`yaml: ${name} values are strings, read back exactly by yaml (1.2 and 1.1)${pyyaml ? " and PyYAML" : ""}`, () => {
    const entries = entriesOf(values);
    checkYaml(entries, formatYaml(entries));
  });
}

test("yaml: keys YAML would retype stay strings; an empty export is an empty mapping; a wrong writer is caught", () => {
  const entries = ["null", "true", "yes", "on", "y", "n", "Y", "NULL", "_", "no_"].map((key) => ({ key, value: key }));
  checkYaml(entries, formatYaml(entries));
  assert.deepEqual(readYaml(formatYaml([])).v12, {});
  assert.equal(yamlString('a"b\\c\n\u0085'), '"a\\"b\\\\c\\n\\u0085"');
  // JSON.stringify as the writer: raw U+0085 and U+2028 fold in YAML 1.1; plain scalars retype.
  const some = entriesOf([...MORE_VALUES, ...NAMED_VALUES]);
  assert.throws(() => checkYaml(some, some.map((e) => `${e.key}: ${JSON.stringify(e.value)}\n`).join("")));
  assert.throws(() => checkYaml(some, some.map((e) => `${e.key}: ${e.value}\n`).join("")));
});

// ---------------------------------------------------------------------------------------
// docker

const GO_SPACE = /[\s\u0085]/u;
const isGoSpace = (c: string) => GO_SPACE.test(c) && c !== "\ufeff";
const COMPOSE_IS_SPACE = new Set(["\t", "\v", "\f", "\r", " ", "\u0085", "\u00a0"]);

/** docker run --env-file, after the docker CLI's opts/file.go (parseKeyValueFile). */
function readDockerRun(text: string): Map<string, string> {
  const out = new Map<string, string>();
  // bufio.ScanLines: lines end at LF, a CR before it is dropped; no final empty line.
  const lines = text.split("\n");
  if (lines.at(-1) === "") lines.pop();
  for (let raw of lines) {
    if (raw.endsWith("\r")) raw = raw.slice(0, -1);
    let i = 0;
    while (i < raw.length && isGoSpace(raw[i]!)) i++;
    const line = raw.slice(i);
    if (line.length === 0 || line.startsWith("#")) continue;
    const at = line.indexOf("=");
    if (at < 0) throw new Error(`no value on line ${line}`);
    const variable = line.slice(0, at).replace(/^[ \t]+/, "");
    if (/[ \t]/.test(variable) || variable === "") throw new Error(`poorly formatted environment: ${variable}`);
    out.set(variable, line.slice(at + 1));
  }
  return out;
}

/**
 * Compose's ${VAR}, $VAR and $$ (nothing is set in this test, so a variable reads as empty);
 * any other $ is an invalid template, an error.
 */
function interpolate(value: string): string {
  return value.replace(/\$(\$|\{[^}]*\}|[A-Za-z_][A-Za-z0-9_]*|)/g, (_, name: string) => {
    if (name === "") throw new Error("invalid interpolation format");
    return name === "$" ? "$" : "";
  });
}

/** Compose's env_file, after compose-go's dotenv parser (parser.go). */
function readCompose(text: string): Map<string, string> {
  const out = new Map<string, string>();
  let src = text;
  for (;;) {
    // getStatementStart: skip whitespace (unicode.IsSpace) and comment lines.
    let i = 0;
    while (i < src.length && isGoSpace(src[i]!)) i++;
    src = src.slice(i);
    if (src === "") break;
    if (src[0] === "#") {
      const nl = src.indexOf("\n");
      if (nl < 0) break;
      src = src.slice(nl);
      continue;
    }
    if (/^export\s+/.test(src)) src = src.replace(/^export[\t\v\f\r \u0085\u00a0]*/, "");
    const keyEnd = src.search(/[=:\n]/);
    if (keyEnd < 0) throw new Error("zero length string");
    if (src[keyEnd] === "\n") throw new Error("inherited variable");
    const key = src.slice(0, keyEnd).trimEnd();
    if (!/^[\p{L}\p{N}_.\-[\]]+$/u.test(key)) throw new Error(`unexpected character in variable name ${key}`);
    src = src.slice(keyEnd + 1);
    let j = 0;
    while (j < src.length && COMPOSE_IS_SPACE.has(src[j]!)) j++;
    src = src.slice(j);
    const quote = src[0];
    if (quote !== "'" && quote !== '"') {
      const nl = src.indexOf("\n");
      let value = nl < 0 ? src : src.slice(0, nl);
      src = nl < 0 ? "" : src.slice(nl);
      const comment = value.indexOf(" #");
      if (comment >= 0) value = value.slice(0, comment);
      while (value.length > 0 && isGoSpace(value.at(-1)!)) value = value.slice(0, -1);
      out.set(key, interpolate(value));
      continue;
    }
    let chars = "";
    let escaped = false;
    let end = -1;
    for (let k = 1; k < src.length; k++) {
      const c = src[k]!;
      if (c !== quote) {
        if (!escaped && c === "\\") {
          escaped = true;
          continue;
        }
        if (escaped) chars += "\\";
        escaped = false;
        chars += c;
        continue;
      }
      if (escaped) {
        escaped = false;
        chars += c;
        continue;
      }
      end = k;
      break;
    }
    if (end < 0) throw new Error("unterminated quoted value");
    const escapes: Record<string, string> = {
      a: "\x07",
      b: "\b",
      f: "\f",
      n: "\n",
      r: "\r",
      t: "\t",
      v: "\v",
      '"': '"',
      "\\": "\\",
      $: "$$",
    };
    out.set(key, quote === '"' ? interpolate(chars.replace(/\\([abfnrtv"\\$])/g, (_, c: string) => escapes[c]!)) : chars);
    src = src.slice(end + 1);
  }
  return out;
}

function checkDocker(entries: ExportEntry[], text: string): void {
  const expected = new Map(entries.map((e) => [e.key, e.value]));
  for (const [reader, read] of [
    ["docker run", readDockerRun],
    ["compose", readCompose],
  ] as const) {
    const got = read(text);
    for (const [key, value] of expected) assert.equal(got.get(key), value, `${reader} read ${key} differently`);
    assert.deepEqual(got, expected, reader);
  }
}

for (const [name, values] of ALL_SETS) {
  test(`docker: ${name} values are written for both readers exactly, or refused naming their keys`, () => {
    const entries = entriesOf(values);
    const writable = entries.filter((e) => dockerEnvProblem(e.value) === undefined);
    const refused = entries.filter((e) => dockerEnvProblem(e.value) !== undefined);
    assert.ok(writable.length > 0 && refused.length > 0, `${writable.length} writable, ${refused.length} refused`);
    checkDocker(writable, formatDockerEnv(writable).text);
    // Every refusal is needed: written as KEY=value, one of the readers would read another
    // value, or the value holds a CR or NUL (kept out of a text file on principle).
    for (const e of refused) {
      const line = `${e.key}=${e.value}\n`;
      let misread: boolean;
      try {
        misread = readDockerRun(line).get(e.key) !== e.value || readCompose(line).get(e.key) !== e.value;
      } catch {
        misread = true;
      }
      assert.ok(misread || /[\r\0]/.test(e.value), `${e.key} was refused needlessly: ${JSON.stringify(e.value)}`);
    }
    const error = (() => {
      try {
        formatDockerEnv(entries);
      } catch (caught) {
        return caught;
      }
      assert.fail("no refusal");
    })();
    assert.ok(error instanceof DockerEnvRefusal);
    assert.deepEqual(
      error.keys,
      refused.map((e) => e.key),
    );
  });
}

test("docker: a wrong writer (quoted values) is caught; names are left out as comments; the refusal names keys, not values", () => {
  const entries = entriesOf(["plain", "with space inside", "quote ' inside", "url?a=b&c=d#frag", "ünï 🔑"]);
  checkDocker(entries, formatDockerEnv(entries).text);
  assert.throws(() => checkDocker(entries, entries.map((e) => `${e.key}="${e.value}"\n`).join("")), assert.AssertionError);
  assert.throws(() => checkDocker(entries, entries.map((e) => `${e.key}='${e.value}'\n`).join("")), assert.AssertionError);

  const named = [
    { key: "API_KEY", value: "fine" },
    { key: "LD_PRELOAD", value: "/tmp/evil.so" },
    { key: "PATH", value: "has a $ and\na line break" },
  ];
  const file = formatDockerEnv(named);
  assert.deepEqual(file.leftOut, ["LD_PRELOAD", "PATH"]);
  assert.deepEqual(readDockerRun(file.text), new Map([["API_KEY", "fine"]]));
  assert.deepEqual(readCompose(file.text), new Map([["API_KEY", "fine"]]));
  assert.throws(
    () => formatDockerEnv(named, new Set(["PATH"])),
    (e: unknown) => e instanceof DockerEnvRefusal && e.message === "These secrets cannot be written in Docker's env-file format: PATH.",
  );

  const many = Array.from({ length: 25 }, (_, i) => ({ key: `SECRET_${String(i).padStart(2, "0")}`, value: `$ecret ${i}` }));
  assert.throws(
    () => formatDockerEnv(many),
    (e: unknown) =>
      e instanceof DockerEnvRefusal && /: SECRET_00, .*, SECRET_19 and 5 more\.$/.test(e.message) && !e.message.includes("$ecret"),
  );
  assert.equal(formatDockerEnv([]).text, "");
});

// ---------------------------------------------------------------------------------------
// over HTTP

test("over HTTP: 500 generated values exported as shell, yaml and docker read back exactly; docker refuses with the keys", async (t) => {
  const { projectId, owner } = await startTeam(t);
  const base = envPath(projectId, "staging");
  const values = generatedValues(200, 500);
  const entries = values.map((value, i) => ({ key: `KEY_${i}`, value, overwrite: false }));
  const imported = await owner.json("POST", `${base}/import`, { entries });
  assert.equal(imported.status, 200, JSON.stringify(imported.body));
  const sorted = entriesOf(values);

  const shell = await owner.get(`${base}/export?format=shell`);
  assert.equal(shell.status, 200);
  assert.equal(shell.headers.get("content-type"), "text/x-shellscript; charset=utf-8");
  assert.equal(shell.headers.get("content-disposition"), 'attachment; filename="staging.sh"');
  const shellText = await shell.text();
  assert.equal(shell.headers.get("x-secrets-left-out"), String(sorted.filter((e) => e.value.includes("\0")).length));
  for (const sh of shells.slice(0, 1)) checkShell(sorted, shellText, sh);

  const yaml = await owner.get(`${base}/export?format=yaml`);
  assert.equal(yaml.status, 200);
  assert.equal(yaml.headers.get("content-type"), "application/yaml; charset=utf-8");
  assert.equal(yaml.headers.get("content-disposition"), 'attachment; filename="staging.yaml"');
  assert.equal(yaml.headers.get("x-secrets-left-out"), "0");
  checkYaml(sorted, await yaml.text());

  const refused = await owner.json("GET", `${base}/export?format=docker`);
  assert.equal(refused.status, 400);
  // No tag on the refusal: kept, it would earn a 304 for a file never received.
  assert.equal((await owner.get(`${base}/export?format=docker`)).headers.get("etag"), null);
  assert.ok(yaml.headers.get("etag"), "a file that is sent has its tag");
  const refusedKeys = sorted.filter((e) => dockerEnvProblem(e.value) !== undefined).map((e) => e.key);
  assert.equal(
    refused.body.error,
    `These secrets cannot be written in Docker's env-file format: ${refusedKeys.slice(0, 20).join(", ")} and ${refusedKeys.length - 20} more. Use format=json or format=shell.`,
  );

  const clean = envPath(projectId, "development");
  const writable = sorted.filter((e) => dockerEnvProblem(e.value) === undefined);
  assert.equal((await owner.json("POST", `${clean}/import`, { entries: writable })).status, 200);
  const docker = await owner.get(`${clean}/export?format=docker`);
  assert.equal(docker.status, 200);
  assert.equal(docker.headers.get("content-type"), "text/plain; charset=utf-8");
  assert.equal(docker.headers.get("content-disposition"), 'attachment; filename="development.env"');
  checkDocker(writable, await docker.text());
});
