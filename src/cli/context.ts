import fs from "node:fs";
import path from "node:path";
import { parseArgs, type ParseArgsConfig } from "node:util";
import { Api, DEFAULT_SERVER, normalizeServerUrl } from "./api.ts";
import { readCredentials } from "./credentials.ts";
import { CliError, EXIT } from "./errors.ts";

export const LINK_FILE = ".secrets-server.json";
export const ENVIRONMENTS = ["development", "staging", "production"] as const;
const ENVIRONMENT_ALIASES: Record<string, string> = { dev: "development", stage: "staging", stg: "staging", prod: "production" };
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** What `link` writes into a folder: later commands there need no flags. */
export interface LinkFile {
  server?: string;
  projectId: string;
  projectName?: string;
  environment: string;
}

export const SERVER_OPTION = { server: { type: "string" } } as const;
export const JSON_OPTION = { json: { type: "boolean", default: false } } as const;
export const TARGET_OPTIONS = { project: { type: "string", short: "p" }, env: { type: "string", short: "e" } } as const;

/** util.parseArgs, with its errors turned into a usage message. */
export function parseFlags<T extends NonNullable<ParseArgsConfig["options"]>>(args: string[], options: T, usage: string) {
  try {
    return parseArgs({ args, options, allowPositionals: true, strict: true });
  } catch (error) {
    throw new CliError(`${(error as Error).message}\n\n${usage}`, EXIT.usage);
  }
}

export interface FoundLink {
  file: string;
  link: LinkFile;
}

/** The nearest link file from the current folder upwards. */
export function findLink(from = process.cwd()): FoundLink | undefined {
  let dir = path.resolve(from);
  for (;;) {
    const file = path.join(dir, LINK_FILE);
    if (fs.existsSync(file)) {
      try {
        const link = JSON.parse(fs.readFileSync(file, "utf8")) as LinkFile;
        if (typeof link.projectId === "string" && typeof link.environment === "string") return { file, link };
      } catch {
        // fall through: a damaged file is reported below
      }
      throw new CliError(`${file} is not a valid link file. Run "secrets-server link" again.`, EXIT.usage);
    }
    const parent = path.dirname(dir);
    if (parent === dir) return undefined;
    dir = parent;
  }
}

/**
 * --server, then SECRETS_SERVER_URL, then the link file, then the last login, then localhost.
 * `known` is the link file the caller has looked for already (undefined: none, or none to use).
 */
export function resolveServer(flag: string | undefined, known?: { link: FoundLink | undefined }): string {
  if (flag) return normalizeServerUrl(flag);
  if (process.env.SECRETS_SERVER_URL) return normalizeServerUrl(process.env.SECRETS_SERVER_URL);
  // A link file can arrive with a cloned repository. It may only choose among servers this
  // machine has signed in to; it must never lead a login, and so a session, elsewhere.
  const found = known ? known.link : findLink();
  if (found?.link.server) {
    const server = normalizeServerUrl(found.link.server);
    if (!readCredentials().servers[server]) {
      throw new CliError(
        `${found.file} names the server ${server}, where this machine is not signed in. ` +
          `If you trust that server, sign in to it first: secrets-server login --server ${server}`,
        EXIT.auth,
      );
    }
    return server;
  }
  return readCredentials().defaultServer ?? DEFAULT_SERVER;
}

export function normalizeEnvironment(input: string): string {
  const name = ENVIRONMENT_ALIASES[input.toLowerCase()] ?? input.toLowerCase();
  if (!(ENVIRONMENTS as readonly string[]).includes(name)) {
    throw new CliError(`Unknown environment "${input}". Use development, staging or production.`, EXIT.usage);
  }
  return name;
}

export interface Target {
  api: Api;
  server: string;
  /** As the user gave it (id or name): names the fallback copy. */
  project: string;
  environment: string;
}

/** Project and environment from flags, then SECRETS_SERVER_PROJECT / SECRETS_SERVER_ENV, then the link file. */
export function resolveTarget(values: { server?: string; project?: string; env?: string }): Target {
  const found = findLink();
  const linked = found?.link;
  const project = values.project ?? process.env.SECRETS_SERVER_PROJECT ?? linked?.projectId;
  const environment = values.env ?? process.env.SECRETS_SERVER_ENV ?? linked?.environment;
  if (!project || !environment) {
    throw new CliError(
      `Name the ${!project ? "project" : "environment"}: --project <id or name> --env <environment>, or run "secrets-server link" in this folder.`,
      EXIT.usage,
    );
  }
  const server = resolveServer(values.server, { link: found });
  return { api: new Api(server), server, project, environment: normalizeEnvironment(environment) };
}

export interface ProjectSummary {
  id: string;
  name: string;
  role: string;
  environments: string[];
}

/** An id is used as it is (the server answers 404 when wrong); a name is looked up among the caller's projects. */
export async function resolveProject(api: Api, project: string): Promise<{ id: string; name?: string }> {
  if (UUID.test(project)) return { id: project };
  const { projects } = await api.expect<{ projects: ProjectSummary[] }>(200, "GET", "/api/projects");
  const found = projects.find((p) => p.id === project) ?? projects.find((p) => p.name.toLowerCase() === project.toLowerCase());
  if (!found) throw new CliError(`Project "${project}" not found among your projects.`, EXIT.denied);
  return { id: found.id, name: found.name };
}

export function environmentPath(projectId: string, environment: string): string {
  return `/api/projects/${encodeURIComponent(projectId)}/environments/${environment}`;
}
