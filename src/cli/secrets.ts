import fs from "node:fs";
import path from "node:path";
import { printable } from "../core/text.ts";
import type { Api } from "./api.ts";
import {
  connect,
  CONNECTION_OPTIONS,
  environmentPath,
  JSON_OPTION,
  LINK_FILE,
  locate,
  normalizeEnvironment,
  parseFlags,
  resolveProject,
  resolveTarget,
  TARGET_OPTIONS,
  type LinkFile,
  type ProjectSummary,
  type Target,
} from "./context.ts";
import { isAppSettingName } from "../core/env-names.ts";
import { formatDotenv } from "../secrets/dotenv.ts";
import { formatJson, type SecretPair } from "./dotenv.ts";
import { CliError, EXIT, UnreachableError } from "./errors.ts";
import { writeFileAtomically } from "./files.ts";
import { formatAge, loadFallback, parseDuration, saveFallback } from "./fallback.ts";
import { diffEnvironments } from "./diff.ts";
import { CONFIRM_OPTIONS, isInteractive, pick } from "./prompt.ts";
import { writeSecrets } from "./secrets-write.ts";

interface SecretMeta {
  id: string;
  key: string;
  version: number;
  createdAt: string;
  updatedAt: string;
}

/** Server-sent text is made printable: a project name must not drive the terminal. */
function table(cells: string[][]): string {
  if (cells.length === 0) return "";
  const rows = cells.map((row) => row.map(printable));
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? "").length)));
  return rows.map((r) => r.map((cell, i) => (i === r.length - 1 ? cell : cell.padEnd(widths[i]!))).join("  ")).join("\n") + "\n";
}

export const PROJECTS_USAGE = "Usage: secrets-server projects [--server URL] [--token-file FILE] [--json]";

export async function projects(args: string[]): Promise<number> {
  const { values } = parseFlags(args, { ...CONNECTION_OPTIONS, ...JSON_OPTION }, PROJECTS_USAGE);
  const { api } = connect(values);
  const { projects: list } = await api.expect<{ projects: ProjectSummary[] }>(200, "GET", "/api/projects");
  if (values.json) {
    process.stdout.write(JSON.stringify(list, null, 2) + "\n");
  } else if (list.length === 0) {
    process.stderr.write("You are not a member of any project yet.\n");
  } else {
    process.stdout.write(table([["NAME", "ID", "ROLE", "ENVIRONMENTS"], ...list.map((p) => [p.name, p.id, p.role, p.environments.join(",")])]));
  }
  return EXIT.ok;
}

export const SECRETS_USAGE = `Usage:
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
session delete secrets, so with a CLI token this command names the web UI page instead.

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

async function listSecrets(api: Api, base: string): Promise<SecretMeta[]> {
  const { secrets } = await api.expect<{ secrets: SecretMeta[] }>(200, "GET", `${base}/secrets`);
  return secrets;
}

async function findSecret(api: Api, base: string, key: string): Promise<SecretMeta | undefined> {
  return (await listSecrets(api, base)).find((s) => s.key === key);
}

export async function secrets(args: string[]): Promise<number> {
  const { values, positionals } = parseFlags(args, SECRETS_OPTIONS, SECRETS_USAGE);
  const [action, key, value] = positionals;
  if (!action) throw new CliError(SECRETS_USAGE, EXIT.usage);
  if (action === "diff") return diffEnvironments(values, positionals.slice(1), SECRETS_USAGE);
  if (action === "set" || action === "import" || action === "delete") return writeSecrets(action, values, positionals.slice(1), SECRETS_USAGE);
  const target = resolveTarget(values);
  const { api } = target;
  const { projectId, environment } = await locate(target);
  const base = environmentPath(projectId, environment);

  if (action === "list" && !key) {
    // By key, as `env | sort` would: the API lists the most recently changed first.
    const list = (await listSecrets(api, base)).sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
    if (values.json) process.stdout.write(JSON.stringify(list, null, 2) + "\n");
    else if (list.length === 0) process.stderr.write(`No secrets in ${environment} yet.\n`);
    else process.stdout.write(table([["KEY", "VERSION", "UPDATED"], ...list.map((s) => [s.key, String(s.version), s.updatedAt])]));
    return EXIT.ok;
  }

  if (action === "get" && key && value === undefined) {
    const meta = await findSecret(api, base, key);
    if (!meta) throw new CliError(`No secret ${key} in ${environment}.`, EXIT.denied);
    const { secret } = await api.expect<{ secret: { key: string; value: string; version: number; updatedAt: string } }>(
      200,
      "GET",
      `${base}/secrets/${encodeURIComponent(meta.id)}`,
    );
    process.stdout.write(values.json ? JSON.stringify(secret) + "\n" : secret.value + "\n");
    return EXIT.ok;
  }

  throw new CliError(SECRETS_USAGE, EXIT.usage);
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
  const place = { server: target.server, project: target.project ?? "", environment: target.environment ?? "", serviceToken };
  try {
    const at = await locate(target);
    const { secrets } = await target.api.expect<{ secrets: SecretPair[] }>(200, "GET", `${environmentPath(at.projectId, at.environment)}/export`);
    if (fallback.enabled) {
      try {
        await saveFallback(place, secrets);
      } catch (error) {
        process.stderr.write(`Warning: could not save the fallback copy: ${(error as Error).message}\n`);
      }
    }
    return secrets;
  } catch (error) {
    if (!fallback.enabled || !(error instanceof UnreachableError)) throw error;
    const copy = loadFallback(place, fallback.maxAgeMs);
    process.stderr.write(`Warning: ${error.message}\nUsing the fallback copy saved ${formatAge(copy.ageMs)} ago.\n`);
    return copy.secrets;
  }
}

export const FALLBACK_OPTIONS = { fallback: { type: "boolean", default: false }, "fallback-max-age": { type: "string" } } as const;

export function fallbackSettings(values: { fallback?: boolean; "fallback-max-age"?: string }) {
  const maxAge = values["fallback-max-age"];
  return { enabled: Boolean(values.fallback || maxAge), maxAgeMs: maxAge === undefined ? undefined : parseDuration(maxAge) };
}

export const EXPORT_USAGE = `Usage: secrets-server export [--project P] [--env E] [--format dotenv|json] [--output FILE]
                             [--fallback [--fallback-max-age 24h]] [--server URL] [--token-file FILE]`;

export async function exportSecrets(args: string[]): Promise<number> {
  const { values, positionals } = parseFlags(
    args,
    { ...CONNECTION_OPTIONS, ...TARGET_OPTIONS, ...FALLBACK_OPTIONS, format: { type: "string", default: "dotenv" }, output: { type: "string", short: "o" } },
    EXPORT_USAGE,
  );
  if (positionals.length > 0) throw new CliError(EXPORT_USAGE, EXIT.usage);
  if (values.format !== "dotenv" && values.format !== "json") throw new CliError(`--format is dotenv or json.\n\n${EXPORT_USAGE}`, EXIT.usage);
  const target = resolveTarget(values);
  const list = await fetchAll(target, fallbackSettings(values));
  let text: string;
  if (values.format === "json") {
    text = formatJson(list);
  } else {
    // The server's own .env writer: dotenv reads every value back exactly, and a shell that
    // sources the file never runs or expands a value, nor sets a name `run` would leave out.
    const formatted = formatDotenv(list);
    if (formatted.omitted.length > 0) {
      process.stderr.write(`Warning: dotenv cannot hold these values: ${formatted.omitted.map(printable).join(", ")}. Use --format json.\n`);
    }
    const dotenvOnly = list.map((s) => s.key).filter((key) => !isAppSettingName(key) && !formatted.omitted.includes(key));
    if (dotenvOnly.length > 0) {
      process.stderr.write(
        `Warning: a shell that sources this file does not set ${dotenvOnly.map(printable).join(", ")}: not named like application settings, ` +
          `and variables like these choose which code runs (see secrets-server run --help). dotenv still reads them.\n`,
      );
    }
    text = formatted.text;
  }
  if (values.output) {
    // Secrets on disk: readable by the owner only, written in one step.
    writeFileAtomically(path.resolve(values.output), text, 0o600);
    process.stderr.write(`Wrote ${list.length} secret${list.length === 1 ? "" : "s"} to ${values.output}.\n`);
  } else {
    process.stdout.write(text);
  }
  return EXIT.ok;
}

export const LINK_USAGE = `Usage: secrets-server link [--project P] [--env E] [--server URL] [--token-file FILE] [--json] [--silent]
       secrets-server setup   (the same command)

Writes ${LINK_FILE} in the current folder so later commands here need no flags.
On a terminal, a project or environment left out is picked from a numbered list of
yours; without a terminal both flags are needed.`;

export async function link(args: string[]): Promise<number> {
  const { values, positionals } = parseFlags(args, { ...CONNECTION_OPTIONS, ...JSON_OPTION, ...TARGET_OPTIONS, silent: CONFIRM_OPTIONS.silent }, LINK_USAGE);
  if (positionals.length > 0) throw new CliError(LINK_USAGE, EXIT.usage);
  const complete = Boolean(values.project && values.env);
  if (!complete && !isInteractive()) {
    throw new CliError(`Name the project and the environment with --project and --env (no terminal to pick them on).\n\n${LINK_USAGE}`, EXIT.usage);
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
      throw new CliError(`Project ${project.name} has no ${environment} environment you can use (it has: ${project.environments.join(", ") || "none"}).`, EXIT.denied);
    }
  } else {
    ({ project, environment } = await pickTarget(api, values.project, values.env));
  }
  const content: LinkFile = { server, projectId: project.id, projectName: project.name, environment };
  const file = path.join(process.cwd(), LINK_FILE);
  writeFileAtomically(file, JSON.stringify(content, null, 2) + "\n", 0o644);
  if (values.silent) return EXIT.ok;
  if (values.json) process.stdout.write(JSON.stringify(content) + "\n");
  else process.stdout.write(`Linked ${process.cwd()} to ${printable(project.name)} / ${environment} on ${server}.\n`);
  return EXIT.ok;
}

/** The pickers of an interactive link: the projects, then the project's environments. */
async function pickTarget(api: Api, projectFlag: string | undefined, envFlag: string | undefined): Promise<{ project: ProjectSummary; environment: string }> {
  const { projects: list } = await api.expect<{ projects: ProjectSummary[] }>(200, "GET", "/api/projects");
  let project: ProjectSummary | undefined;
  if (projectFlag) {
    project = list.find((p) => p.id === projectFlag) ?? list.find((p) => p.name.toLowerCase() === projectFlag.toLowerCase());
    if (!project) throw new CliError(`Project "${projectFlag}" not found among your projects.`, EXIT.denied);
  } else {
    if (list.length === 0) throw new CliError("You are not a member of any project yet. Create one in the web UI, or ask to be invited.", EXIT.denied);
    project = list[await pick("Which project?", list.map((p) => `${p.name}  (${p.role})`))]!;
  }
  if (project.environments.length === 0) throw new CliError(`Project ${printable(project.name)} has no environment you can use: ask an admin for access.`, EXIT.denied);
  if (envFlag) {
    const environment = normalizeEnvironment(envFlag);
    if (!project.environments.includes(environment)) {
      throw new CliError(`Project ${project.name} has no ${environment} environment you can use (it has: ${project.environments.join(", ")}).`, EXIT.denied);
    }
    return { project, environment };
  }
  const environment = project.environments[await pick(`Which environment of ${project.name}?`, project.environments)]!;
  return { project, environment };
}
