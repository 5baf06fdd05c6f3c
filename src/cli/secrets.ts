import path from "node:path";
import { parseNameList } from "../core/env-names.ts";
import { printable } from "../core/text.ts";
import type { DotenvOnlyReason } from "../secrets/dotenv.ts";
import { CLI_EXPORT_FORMATS, DockerEnvRefusal, dockerRefusalMessage, type ExportFormat, exportFile } from "../secrets/export-formats.ts";
import type { Api } from "./api.ts";
import {
  CONNECTION_OPTIONS,
  connect,
  environmentPath,
  JSON_OPTION,
  LINK_FILE,
  type LinkFile,
  locate,
  normalizeEnvironment,
  type ProjectSummary,
  parseFlags,
  projectNamed,
  readExport,
  resolveProject,
  resolveTarget,
  TARGET_OPTIONS,
  type Target,
} from "./context.ts";
import { diffEnvironments } from "./diff.ts";
import { formatJson, type SecretPair } from "./dotenv.ts";
import { editDistance } from "./edit-distance.ts";
import { CliError, EXIT, UnreachableError } from "./errors.ts";
import { describePlace, type FallbackPlace, formatAge, loadFallback, parseDuration, saveFallback } from "./fallback.ts";
import { writeFileAtomically } from "./files.ts";
import { CONFIRM_OPTIONS, isInteractive, pick } from "./prompt.ts";
import { listSecrets, writeSecrets } from "./secrets-write.ts";

/** Server-sent text is made printable: a project name must not drive the terminal. */
function table(cells: string[][]): string {
  if (cells.length === 0) return "";
  const rows = cells.map((row) => row.map(printable));
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? "").length)));
  return `${rows.map((r) => r.map((cell, i) => (i === r.length - 1 ? cell : cell.padEnd(widths[i]!))).join("  ")).join("\n")}\n`;
}

const PROJECTS_USAGE = "Usage: secrets-server projects [--server URL] [--token-file FILE] [--json]";

export async function projects(args: string[]): Promise<number> {
  const { values } = parseFlags(args, { ...CONNECTION_OPTIONS, ...JSON_OPTION }, PROJECTS_USAGE);
  const { api } = connect(values);
  const { projects: list } = await api.expect<{ projects: ProjectSummary[] }>(200, "GET", "/api/projects");
  if (values.json) {
    process.stdout.write(`${JSON.stringify(list, null, 2)}\n`);
  } else if (list.length === 0) {
    process.stderr.write("You are not a member of any project yet.\n");
  } else {
    process.stdout.write(
      table([["NAME", "ID", "ROLE", "ENVIRONMENTS"], ...list.map((p) => [p.name, p.id, p.role, p.environments.join(",")])]),
    );
  }
  return EXIT.ok;
}

const SECRETS_USAGE = `Usage:
  secrets-server secrets list [--project P] [--env E] [--json]
  secrets-server secrets get KEY [--project P] [--env E] [--json]
  secrets-server secrets set KEY VALUE [--project P] [--env E] [--json]
  secrets-server secrets set KEY --from-stdin [--project P] [--env E] [--json]
  secrets-server secrets set KEY=VALUE [KEY=VALUE...] [--project P] [--env E] [--json]
  secrets-server secrets import FILE [--overwrite] [--project P] [--env E] [--json]
  secrets-server secrets delete KEY [KEY...] [--project P] [--env E]
  secrets-server secrets diff ENV_A ENV_B [--project P] [--show-values] [--json]

Every form also takes --server URL and --token-file FILE (see "secrets-server help").
A value given on the command line is visible to other local users in the process list;
prefer --from-stdin or import for real secrets.

set, import and delete in production ask for confirmation on a terminal; without one
(a script, CI, a pipe) they are refused unless --yes (-y) is given. --silent prints
nothing but errors.

import reads a .env file as the dotenv package does (the web UI's import reads it the
same way) and checks every line first; then it creates each new key and reports it as
created, and an existing key as skipped, or with --overwrite as updated or unchanged.
It sends one request per key: a failure stops it, and the keys before it stay written.

delete removes a secret with its version history. The server lets only a browser
session delete secrets: on a terminal the command opens the web UI on those keys, where
you confirm, and waits until they are gone; without a terminal it names that page (exit 4).

diff compares two environments of one project: keys only in one and keys whose values
differ. It reads both through the export endpoint (each read is audited as
secrets.exported) and compares the values here; they are printed only with
--show-values. Exit code 0 when both hold the same secrets, 1 when they differ, 2 or
more on trouble (as diff does).`;

/** Every option of the secrets subcommands; each subcommand reads the ones it uses. */
const SECRETS_OPTIONS = {
  ...CONNECTION_OPTIONS,
  ...JSON_OPTION,
  ...TARGET_OPTIONS,
  ...CONFIRM_OPTIONS,
  "from-stdin": { type: "boolean", default: false },
  overwrite: { type: "boolean", default: false },
  "show-values": { type: "boolean", default: false },
} as const;

/** Keys the user may have meant: the same but for case, or one or two typos away. */
function similarKeys(wanted: string, keys: string[]): string[] {
  const lower = wanted.toLowerCase();
  const sameButCase = keys.filter((key) => key.toLowerCase() === lower);
  if (sameButCase.length > 0) return sameButCase;
  const limit = Math.min(2, Math.floor(wanted.length / 4));
  const scored = keys.map((key) => ({ key, distance: editDistance(lower, key.toLowerCase()) })).filter((s) => s.distance <= limit);
  const best = Math.min(...scored.map((s) => s.distance));
  return scored
    .filter((s) => s.distance === best)
    .map((s) => s.key)
    .slice(0, 3);
}

/** "3 minutes ago" for the last week, then the local date and time. */
function readableTime(at: string, now = Date.now()): string {
  const date = new Date(at);
  const seconds = Math.round((now - date.getTime()) / 1000);
  if (Number.isNaN(seconds)) return at;
  const ago = (n: number, unit: string) => `${n} ${unit}${n === 1 ? "" : "s"} ago`;
  if (seconds < 60) return "just now";
  if (seconds < 3600) return ago(Math.floor(seconds / 60), "minute");
  if (seconds < 86_400) return ago(Math.floor(seconds / 3600), "hour");
  if (seconds < 7 * 86_400) return ago(Math.floor(seconds / 86_400), "day");
  const pad = (n: number) => String(n).padStart(2, "0");
  return `${date.getFullYear()}-${pad(date.getMonth() + 1)}-${pad(date.getDate())} ${pad(date.getHours())}:${pad(date.getMinutes())}`;
}

export async function secrets(args: string[]): Promise<number> {
  const { values, positionals } = parseFlags(args, SECRETS_OPTIONS, SECRETS_USAGE);
  const [action, key, value] = positionals;
  if (!action) throw new CliError(SECRETS_USAGE, EXIT.usage);
  if (action === "diff") return diffEnvironments(values, positionals.slice(1), SECRETS_USAGE);
  if (action === "set" || action === "import" || action === "delete")
    return writeSecrets(action, values, positionals.slice(1), SECRETS_USAGE);
  // A wrong action or a missing key is said at once, before the link file, the sign-in and the server.
  // An empty key (an unset "$KEY") is a usage error for both, not a list.
  const isList = action === "list" && key === undefined;
  const isGet = action === "get" && !!key && value === undefined;
  if (!isList && !isGet) throw new CliError(SECRETS_USAGE, EXIT.usage);
  const target = resolveTarget(values);
  const { api } = target;
  const { projectId, projectName, environment } = await locate(target);
  const base = environmentPath(projectId, environment);

  if (isList) {
    // By key, as `env | sort` would: the API lists the most recently changed first.
    const list = (await listSecrets(api, base)).sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
    if (values.json) process.stdout.write(`${JSON.stringify(list, null, 2)}\n`);
    else if (!process.stdout.isTTY) {
      // For scripts: one tab-separated line per secret (key, version, ISO 8601 time in UTC), no header.
      process.stdout.write(list.map((s) => `${printable(s.key)}\t${s.version}\t${printable(s.updatedAt)}\n`).join(""));
      if (list.length === 0) process.stderr.write(`No secrets in ${environment} yet.\n`);
    } else {
      const name =
        projectName ??
        (await api.expect<{ project: ProjectSummary }>(200, "GET", `/api/projects/${encodeURIComponent(projectId)}`)).project.name;
      process.stdout.write(`${printable(name)} / ${environment}\n\n`);
      if (list.length === 0) process.stdout.write("No secrets yet.\n");
      else
        process.stdout.write(
          table([["KEY", "VERSION", "UPDATED"], ...list.map((s) => [s.key, String(s.version), readableTime(s.updatedAt)])]),
        );
    }
    return EXIT.ok;
  }

  if (isGet) {
    const list = await listSecrets(api, base);
    const meta = list.find((s) => s.key === key);
    if (!meta) {
      const similar = similarKeys(
        key,
        list.map((s) => s.key),
      );
      const hint = similar.length > 0 ? ` Did you mean ${similar.join(" or ")}?` : "";
      throw new CliError(printable(`No secret ${key} in ${environment}.${hint}`), EXIT.denied);
    }
    const { secret } = await api.expect<{ secret: { key: string; value: string; version: number; updatedAt: string } }>(
      200,
      "GET",
      `${base}/secrets/${encodeURIComponent(meta.id)}`,
    );
    // A script takes what is printed for the value: never "null" or "undefined".
    if (typeof secret?.value !== "string")
      throw new CliError(`${target.server} sent no value for ${printable(key!)}: nothing was printed.`, EXIT.failed);
    process.stdout.write(values.json ? `${JSON.stringify(secret)}\n` : `${secret.value}\n`);
  }
  return EXIT.ok;
}

/**
 * The environment's secrets, from the server, or with --fallback from the last copy when
 * the server cannot be reached. Never falls back on 401/403/404: a revoked session or a
 * removed grant must not be bypassed by a copy.
 */
export async function fetchAll(target: Target, fallback: { enabled: boolean; maxAgeMs?: number }): Promise<SecretPair[]> {
  const serviceToken = target.machine?.fallbackSecret();
  if (fallback.enabled && target.machine && !serviceToken) {
    throw new CliError(
      "--fallback needs a service token (SECRETS_SERVER_TOKEN or --token-file) or login: an identity token changes with every job, so no later run could open a copy keyed by it.",
      EXIT.usage,
    );
  }
  // As given, not as the server resolves them: the copy must be found while the server is down.
  const place: FallbackPlace = {
    server: target.server,
    project: target.project ?? "",
    environment: target.environment ?? "",
    serviceToken,
    projectName: target.linkedName,
  };
  try {
    const at = await locate(target);
    place.projectName = at.projectName ?? place.projectName;
    place.resolvedEnvironment = at.environment;
    const secrets = await readExport(target, at);
    if (fallback.enabled) {
      try {
        // Given by id: the copy keeps the name, so a later warning names the project.
        place.projectName ??= (
          await target.api.expect<{ project: ProjectSummary }>(200, "GET", `/api/projects/${encodeURIComponent(at.projectId)}`)
        ).project.name;
        await saveFallback(place, secrets);
      } catch (error) {
        process.stderr.write(`Warning: could not save the fallback copy: ${(error as Error).message}\n`);
      }
    }
    return secrets;
  } catch (error) {
    if (!fallback.enabled || !(error instanceof UnreachableError)) throw error;
    let copy: ReturnType<typeof loadFallback>;
    try {
      copy = loadFallback(place, fallback.maxAgeMs);
    } catch (unusable) {
      // Both reasons: why the server was not asked, and why no copy stands in for it.
      if (unusable instanceof CliError) throw new CliError(`${error.message}\n${unusable.message}`, unusable.exitCode);
      throw unusable;
    }
    const of = describePlace(
      { ...place, projectName: place.projectName ?? copy.projectName, environment: place.environment || (copy.environment ?? "") },
      false,
    );
    process.stderr.write(`Warning: ${error.message}\nUsing the fallback copy of ${of} saved ${formatAge(copy.ageMs)} ago.\n`);
    return copy.secrets;
  }
}

export const FALLBACK_OPTIONS = { fallback: { type: "boolean", default: false }, "fallback-max-age": { type: "string" } } as const;

export function fallbackSettings(values: { fallback?: boolean; "fallback-max-age"?: string }) {
  const maxAge = values["fallback-max-age"];
  return { enabled: Boolean(values.fallback || maxAge), maxAgeMs: maxAge === undefined ? undefined : parseDuration(maxAge) };
}

/** Why a key of a dotenv export is in the block a sourcing shell skips, as the CLI says it. */
const DOTENV_ONLY_WARNINGS: [DotenvOnlyReason, (count: number) => string][] = [
  ["name", () => "not named like application settings, and variables like these choose which code runs (see secrets-server run --help)"],
  ["shell-typed", (count) => `zsh gives ${count === 1 ? "this name" : "these names"} a type of its own and would evaluate the value`],
  [
    "value",
    (count) =>
      `${count === 1 ? "its value needs" : "their values need"} quoting that only dotenv reads (a ' with a $, a backtick or a backslash)`,
  ],
];

const EXPORT_USAGE = `Usage: secrets-server export [--project P] [--env E] [--format dotenv|shell|docker|json|yaml] [--output FILE]
                             [--allow-env KEY]... [--fallback [--fallback-max-age 24h]] [--server URL] [--token-file FILE]

Formats (README, "Export as .env" and "Other export formats"):
  dotenv  KEY=value lines for the dotenv package and other .env readers (the default)
  shell   export KEY='value' lines to source in sh, dash, bash or zsh
  docker  KEY=value lines for docker run --env-file and Compose's env_file; refused,
          naming the keys, when a value cannot be written in that format
  json    one JSON object of key to value
  yaml    a YAML mapping of key to value, every value a quoted string
shell and docker leave out secrets not named like application settings, as run does;
--allow-env KEY (repeatable) or SECRETS_SERVER_ALLOW_ENV=KEY1,KEY2 writes them anyway.`;

function isExportFormat(format: string): format is ExportFormat {
  return (CLI_EXPORT_FORMATS as readonly string[]).includes(format);
}

function names(keys: string[]): string {
  return keys.map(printable).join(", ");
}

export async function exportSecrets(args: string[]): Promise<number> {
  const { values, positionals } = parseFlags(
    args,
    {
      ...CONNECTION_OPTIONS,
      ...TARGET_OPTIONS,
      ...FALLBACK_OPTIONS,
      format: { type: "string", default: "dotenv" },
      output: { type: "string", short: "o" },
      "allow-env": { type: "string", multiple: true },
    },
    EXPORT_USAGE,
  );
  if (positionals.length > 0) throw new CliError(EXPORT_USAGE, EXIT.usage);
  const format = values.format;
  if (!isExportFormat(format)) throw new CliError(`--format is one of ${CLI_EXPORT_FORMATS.join(", ")}.\n\n${EXPORT_USAGE}`, EXIT.usage);
  const allowFlags = values["allow-env"] ?? [];
  if (allowFlags.length > 0 && format !== "shell" && format !== "docker") {
    throw new CliError(`--allow-env applies to --format shell and docker, which set environment variables.\n\n${EXPORT_USAGE}`, EXIT.usage);
  }
  // The person running the command owns this machine: only they may let a name through.
  const allow = new Set([...allowFlags, ...parseNameList(process.env.SECRETS_SERVER_ALLOW_ENV)]);
  const target = resolveTarget(values);
  const list = await fetchAll(target, fallbackSettings(values));
  let text: string;
  // What the file holds: the format may leave some out (each named in a warning).
  let written = list.length;
  if (format === "json") {
    text = formatJson(list);
  } else {
    // The server's own writers, so a file is the same whether the CLI or the web UI wrote it.
    let file: ReturnType<typeof exportFile>;
    try {
      file = exportFile(format, list, target.environment ?? "", allow);
    } catch (error) {
      if (error instanceof DockerEnvRefusal) {
        throw new CliError(
          `${dockerRefusalMessage(error, { json: "--format json", shell: "--format shell" })} Nothing was written.`,
          EXIT.failed,
        );
      }
      throw error;
    }
    const unwritable = file.leftOut.filter((key) => !file.unsafeNames.includes(key));
    if (unwritable.length > 0) {
      process.stderr.write(`Warning: the ${format} format cannot hold these values: ${names(unwritable)}. Use --format json.\n`);
    }
    if (file.unsafeNames.length > 0) {
      process.stderr.write(
        `Warning: left out ${names(file.unsafeNames)}: not named like application settings, and variables like these choose which code runs ` +
          `(see secrets-server run --help). If you trust ${file.unsafeNames.length === 1 ? "it" : "them"}, add ` +
          `${file.unsafeNames.map((key) => `--allow-env ${printable(key)}`).join(" ")}.\n`,
      );
    }
    // dotenv reads every line; a shell that sources the file skips the dotenv-only block.
    const dotenvOnly = (why: DotenvOnlyReason) => (file.dotenvOnly ?? []).filter((entry) => entry.why === why).map((entry) => entry.key);
    for (const [why, because] of DOTENV_ONLY_WARNINGS) {
      const keys = dotenvOnly(why);
      if (keys.length > 0) {
        process.stderr.write(
          `Warning: a shell that sources this file does not set ${names(keys)}: ${because(keys.length)}. dotenv still reads them.\n`,
        );
      }
    }
    text = file.text;
    written -= file.leftOut.length;
  }
  if (values.output) {
    // Secrets on disk: readable by the owner only, written in one step.
    try {
      writeFileAtomically(path.resolve(values.output), text, 0o600);
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code ?? (error as Error).message;
      throw new CliError(`Cannot write ${printable(values.output)}: ${code}. Nothing was written.`, EXIT.failed);
    }
    process.stderr.write(`Wrote ${written} secret${written === 1 ? "" : "s"} to ${values.output}.\n`);
  } else {
    process.stdout.write(text);
  }
  return EXIT.ok;
}

const LINK_USAGE = `Usage: secrets-server link [--project P] [--env E] [--server URL] [--token-file FILE] [--json] [--silent]
       secrets-server setup   (the same command)

Writes ${LINK_FILE} in the current folder so later commands here need no flags.
On a terminal, a project or environment left out is picked from a numbered list of
yours; without a terminal both flags are needed.`;

export async function link(args: string[]): Promise<number> {
  const { values, positionals } = parseFlags(
    args,
    { ...CONNECTION_OPTIONS, ...JSON_OPTION, ...TARGET_OPTIONS, silent: CONFIRM_OPTIONS.silent },
    LINK_USAGE,
  );
  if (positionals.length > 0) throw new CliError(LINK_USAGE, EXIT.usage);
  const complete = Boolean(values.project && values.env);
  if (!complete && !isInteractive()) {
    throw new CliError(
      `Name the project and the environment with --project and --env (no terminal to pick them on).\n\n${LINK_USAGE}`,
      EXIT.usage,
    );
  }
  const { api, server } = connect(values);
  let project: ProjectSummary;
  let environment: string;
  if (complete) {
    environment = normalizeEnvironment(values.env!);
    const { id } = await resolveProject(api, values.project!);
    // Checks membership and the environment now, so a typo fails here rather than in a deploy.
    ({ project } = await api.expect<{ project: ProjectSummary }>(200, "GET", `/api/projects/${encodeURIComponent(id)}`));
    if (!project.environments.includes(environment)) {
      throw new CliError(
        printable(
          `Project ${project.name} has no ${environment} environment you can use (it has: ${project.environments.join(", ") || "none"}).`,
        ),
        EXIT.denied,
      );
    }
  } else {
    ({ project, environment } = await pickTarget(api, values.project, values.env));
  }
  const content: LinkFile = { server, projectId: project.id, projectName: project.name, environment };
  const file = path.join(process.cwd(), LINK_FILE);
  writeFileAtomically(file, `${JSON.stringify(content, null, 2)}\n`, 0o644);
  if (values.silent) return EXIT.ok;
  if (values.json) process.stdout.write(`${JSON.stringify(content)}\n`);
  else process.stdout.write(`Linked ${process.cwd()} to ${printable(project.name)} / ${environment} on ${server}.\n`);
  return EXIT.ok;
}

/** The pickers of an interactive link: the projects, then the project's environments. */
async function pickTarget(
  api: Api,
  projectFlag: string | undefined,
  envFlag: string | undefined,
): Promise<{ project: ProjectSummary; environment: string }> {
  const { projects: list } = await api.expect<{ projects: ProjectSummary[] }>(200, "GET", "/api/projects");
  let project: ProjectSummary | undefined;
  if (projectFlag) {
    project = projectNamed(list, projectFlag);
  } else {
    if (list.length === 0)
      throw new CliError("You are not a member of any project yet. Create one in the web UI, or ask to be invited.", EXIT.denied);
    project =
      list[
        await pick(
          "Which project?",
          list.map((p) => `${p.name}  (${p.role})`),
        )
      ]!;
  }
  if (project.environments.length === 0)
    throw new CliError(`Project ${printable(project.name)} has no environment you can use: ask an admin for access.`, EXIT.denied);
  if (envFlag) {
    const environment = normalizeEnvironment(envFlag);
    if (!project.environments.includes(environment)) {
      throw new CliError(
        printable(`Project ${project.name} has no ${environment} environment you can use (it has: ${project.environments.join(", ")}).`),
        EXIT.denied,
      );
    }
    return { project, environment };
  }
  const environment = project.environments[await pick(`Which environment of ${project.name}?`, project.environments)]!;
  return { project, environment };
}
