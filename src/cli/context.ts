import fs from "node:fs";
import path from "node:path";
import { type ParseArgsConfig, parseArgs } from "node:util";
import { nameKey, printable, UUID } from "../core/text.ts";
import { Api, DEFAULT_SERVER, normalizeServerUrl } from "./api.ts";
import { readCredentials } from "./credentials.ts";
import { checkedSecrets, type SecretPair } from "./dotenv.ts";
import { editDistance } from "./edit-distance.ts";
import { CliError, EXIT, UsageRequested } from "./errors.ts";
import { type MachineAuth, machineAuth, TOKEN_FILE_OPTION } from "./machine.ts";

export const LINK_FILE = ".secrets-server.json";
export const ENVIRONMENTS = ["development", "staging", "production"] as const;
const ENVIRONMENT_ALIASES: Record<string, string> = { dev: "development", stage: "staging", stg: "staging", prod: "production" };

/** What `link` writes into a folder: later commands there need no flags. */
export interface LinkFile {
  server?: string;
  projectId: string;
  projectName?: string;
  environment: string;
}

export const SERVER_OPTION = { server: { type: "string" } } as const;
/** The server and, for machine access, the token file: the options of every command that calls the API with a credential. */
export const CONNECTION_OPTIONS = { ...SERVER_OPTION, ...TOKEN_FILE_OPTION } as const;
export const JSON_OPTION = { json: { type: "boolean", default: false } } as const;
export const TARGET_OPTIONS = { project: { type: "string", short: "p" }, env: { type: "string", short: "e" } } as const;

const HELP_OPTION = { help: { type: "boolean", short: "h" } } as const;

/**
 * Whether -h or --help asks for the usage: it does as an option of its own (not a flag's value,
 * not after `--`) with at most an action before it. After a key or value it is that value,
 * refused as a value starting with -: `secrets set FLAG "$VALUE"` with VALUE=-h must not
 * answer with the usage and exit 0, which a script would take for a write. Read with the
 * command's own options, so `secrets set --from-stdin KEY -h` knows KEY is no flag's value.
 */
function asksForHelp(args: string[], options: NonNullable<ParseArgsConfig["options"]>): boolean {
  const { tokens } = parseArgs({ args, options: { ...options, ...HELP_OPTION }, allowPositionals: true, strict: false, tokens: true });
  let words = 0;
  for (const token of tokens) {
    if (token.kind === "option-terminator") return false;
    if (token.kind === "positional") words++;
    else if (token.kind === "option" && token.name === "help") return words <= 1;
  }
  return false;
}

/**
 * What to say of an argument that starts with - and is no option of the command. Node's own
 * message quotes it, and it may be a value (`secrets set API_KEY "$KEY"` with a key that
 * starts with --), which must stay out of the terminal and CI logs: it is named only when
 * it is one or two typos away from an option the command has.
 */
function unknownOption(args: string[], options: NonNullable<ParseArgsConfig["options"]>): string {
  const { tokens } = parseArgs({ args, options, allowPositionals: true, strict: false, tokens: true });
  const unknown = tokens.find((token) => token.kind === "option" && !Object.hasOwn(options, token.name));
  const written = unknown?.kind === "option" ? unknown.rawName : "";
  if (/^--[a-z][a-z-]{2,30}$/.test(written)) {
    const name = written.slice(2);
    const limit = Math.min(2, Math.floor(name.length / 3));
    const meant = Object.keys(options).find((option) => option.length > 1 && editDistance(name, option) <= limit);
    if (meant) return `Unknown option ${written}: did you mean --${meant}?`;
  }
  return "An argument starts with - but is no option of this command; it is not repeated here, as it may be a value. A value that starts with - goes at the end, after --.";
}

/** util.parseArgs, with its errors turned into a usage message, and -h or --help into the usage. */
export function parseFlags<T extends NonNullable<ParseArgsConfig["options"]>>(args: string[], options: T, usage: string) {
  if (asksForHelp(args, options)) throw new UsageRequested(usage);
  try {
    return parseArgs({ args, options, allowPositionals: true, strict: true });
  } catch (error) {
    const message =
      (error as { code?: string }).code === "ERR_PARSE_ARGS_UNKNOWN_OPTION" ? unknownOption(args, options) : (error as Error).message;
    throw new CliError(`${printable(message)}\n\n${usage}`, EXIT.usage);
  }
}

export interface FoundLink {
  file: string;
  link: LinkFile;
}

/**
 * The nearest link file from the current folder upwards. One another user owns (planted in
 * /tmp, say, above the folder you work in) is refused, as git refuses a repository of
 * another owner: it would choose the project and environment your secrets go to or come
 * from, a project its owner may read. A symbolic link counts with its own owner too. Root
 * follows any: in a container, root works in a checkout another uid owns.
 */
export function findLink(from = process.cwd()): FoundLink | undefined {
  let dir = path.resolve(from);
  for (;;) {
    const file = path.join(dir, LINK_FILE);
    if (fs.existsSync(file)) {
      const me = process.getuid?.();
      const stranger = [fs.lstatSync(file).uid, fs.statSync(file).uid].find((owner) => owner !== me && owner !== 0);
      if (me !== undefined && me !== 0 && stranger !== undefined) {
        throw new CliError(
          `${file} belongs to another user (uid ${stranger}): it is not used. Name the project, the environment and the server (--project, --env, --server), or work in a folder of your own outside ${dir}.`,
          EXIT.usage,
        );
      }
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
 * `toForget`: the caller (logout) sends nothing to a server it holds no tokens for, so any
 * link file's server will do.
 */
export function resolveServer(flag: string | undefined, known?: { link: FoundLink | undefined }, toForget = false): string {
  if (flag) return normalizeServerUrl(flag);
  if (process.env.SECRETS_SERVER_URL) return normalizeServerUrl(process.env.SECRETS_SERVER_URL);
  // A link file can arrive with a cloned repository. It may only choose among servers this
  // machine has signed in to; it must never lead a login, and so a session, elsewhere.
  const found = known ? known.link : findLink();
  if (found?.link.server) {
    const server = normalizeServerUrl(found.link.server);
    if (!toForget && !hasSignedInTo(server)) {
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

/**
 * Whether this machine has signed in to `server`, now or before a logout. After a logout the
 * link file's server is still the one the person chose: commands there say "not signed in",
 * not the warning about a server named by someone else.
 */
function hasSignedInTo(server: string): boolean {
  const data = readCredentials();
  return Boolean(data.servers[server]) || (data.knownServers ?? []).includes(server);
}

export interface Connection {
  api: Api;
  server: string;
  /** Set when the process was given a service token or an identity token: login's credentials are not used. */
  machine?: MachineAuth;
}

/**
 * The server and the credential of a command. With a machine credential the server comes
 * from --server or SECRETS_SERVER_URL only: a link file (which arrives with a cloned
 * repository) or the last login must never decide where a token is sent, and no file of
 * the config folder is read.
 */
export function connect(values: { server?: string; "token-file"?: string }, known?: { link: FoundLink | undefined }): Connection {
  return connectWith(machineAuth(values["token-file"]), values.server, known);
}

function connectWith(
  machine: MachineAuth | undefined,
  serverFlag: string | undefined,
  known?: { link: FoundLink | undefined },
): Connection {
  if (!machine) {
    const server = resolveServer(serverFlag, known);
    return { api: new Api(server), server };
  }
  const given = serverFlag ?? (process.env.SECRETS_SERVER_URL || undefined);
  if (!given) {
    throw new CliError(
      `With ${machine.source}, name the server with --server URL or SECRETS_SERVER_URL: a token is only sent to a server named there, never to a link file's or the last login's.`,
      EXIT.usage,
    );
  }
  const server = normalizeServerUrl(given);
  return { api: new Api(server, machine), server, machine };
}

/** Whether a link file's server is `server` (or it names none); a malformed URL is another server. */
function linkIsFor(link: LinkFile, server: string): boolean {
  if (!link.server) return true;
  try {
    return normalizeServerUrl(link.server) === server;
  } catch {
    return false;
  }
}

export function normalizeEnvironment(input: string): string {
  const lower = input.toLowerCase();
  const name = Object.hasOwn(ENVIRONMENT_ALIASES, lower) ? ENVIRONMENT_ALIASES[lower]! : lower;
  if (!(ENVIRONMENTS as readonly string[]).includes(name)) {
    throw new CliError(`Unknown environment "${printable(input)}". Use development, staging or production.`, EXIT.usage);
  }
  return name;
}

export interface Target extends Connection {
  /** As the user gave it (id or name): names the fallback copy. Undefined only with a machine credential: the account's project. */
  project?: string;
  /** Undefined only with a machine credential: the account's one environment. */
  environment?: string;
  /** Where project and environment came from, for messages. */
  from: { project?: string; environment?: string };
  /** The project's name as the link file recorded it, when the project came from there: messages name it while the server is down. */
  linkedName?: string;
}

/**
 * Project and environment from flags, then SECRETS_SERVER_PROJECT / SECRETS_SERVER_ENV, then
 * the link file; with a machine credential, then the service account's own (see locate).
 */
export function resolveTarget(values: { server?: string; "token-file"?: string; project?: string; env?: string }): Target {
  const machine = machineAuth(values["token-file"]);
  const fromEnv = (name: string) => process.env[name] || undefined;
  let project = values.project ?? fromEnv("SECRETS_SERVER_PROJECT");
  let environment = values.env ?? fromEnv("SECRETS_SERVER_ENV");
  // Everything named already: no link file is read, so none (damaged, another user's) can stand in the way.
  const isAllNamed = project !== undefined && environment !== undefined && (values.server || process.env.SECRETS_SERVER_URL);
  const found = isAllNamed ? undefined : findLink();
  const from = {
    project: values.project !== undefined ? "--project" : project !== undefined ? "SECRETS_SERVER_PROJECT" : undefined,
    environment: values.env !== undefined ? "--env" : environment !== undefined ? "SECRETS_SERVER_ENV" : undefined,
  };
  if (!machine) {
    project ??= found?.link.projectId;
    environment ??= found?.link.environment;
    if (!project || !environment) {
      throw new CliError(
        `Name the ${!project ? "project" : "environment"}: --project <id or name> --env <environment>, or run "secrets-server link" in this folder.`,
        EXIT.usage,
      );
    }
    const connection = connectWith(undefined, values.server, { link: found });
    return { ...connection, project, environment: normalizeEnvironment(environment), from, linkedName: linkedName(found, project) };
  }
  const connection = connectWith(machine, values.server);
  // A link file of another server names a project there; only one for this server applies.
  if (found && linkIsFor(found.link, connection.server)) {
    if (project === undefined) [project, from.project] = [found.link.projectId, found.file];
    if (environment === undefined) [environment, from.environment] = [found.link.environment, found.file];
  }
  const environmentName = environment === undefined ? undefined : normalizeEnvironment(environment);
  return { ...connection, project, environment: environmentName, from, linkedName: linkedName(found, project) };
}

function linkedName(found: FoundLink | undefined, project: string | undefined): string | undefined {
  return found && project === found.link.projectId && typeof found.link.projectName === "string" ? found.link.projectName : undefined;
}

/**
 * The project id and environment a command works in; with a machine credential, checked against the account first.
 * The project's name when it was learnt on the way (a name looked up, the service account's project).
 */
export async function locate(target: Target): Promise<{ projectId: string; projectName?: string; environment: string }> {
  if (!target.machine) {
    const { id, name } = await resolveProject(target.api, target.project!);
    return { projectId: id, projectName: name, environment: target.environment! };
  }
  const { serviceAccount: account } = await target.machine.me((method, path) => target.api.request(method, path), target.server);
  const project = target.project;
  if (project !== undefined && !findProject([{ id: account.projectId, name: account.projectName }], project)) {
    throw new CliError(
      printable(
        `The service account ${account.name} belongs to project ${account.projectName} (${account.projectId}), not "${project}" (from ${target.from.project}).`,
      ),
      EXIT.denied,
    );
  }
  const choices = account.environments.join(", ");
  if (target.environment === undefined) {
    if (account.environments.length !== 1) {
      throw new CliError(
        printable(`The service account ${account.name} may use ${choices}: name one with --env (or SECRETS_SERVER_ENV).`),
        EXIT.usage,
      );
    }
    return { projectId: account.projectId, projectName: account.projectName, environment: account.environments[0]! };
  }
  if (!account.environments.includes(target.environment)) {
    throw new CliError(
      printable(`The service account ${account.name} may use ${choices}, not ${target.environment} (from ${target.from.environment}).`),
      EXIT.denied,
    );
  }
  return { projectId: account.projectId, projectName: account.projectName, environment: target.environment };
}

export interface ProjectSummary {
  id: string;
  name: string;
  role: string;
  environments: string[];
}

/** The project of this id, else of this name as the server compares names (case, accents, invisible characters). */
export function findProject<T extends { id: string; name: string }>(projects: T[], named: string): T | undefined {
  const key = nameKey(named);
  return projects.find((p) => p.id === named) ?? projects.find((p) => nameKey(p.name) === key);
}

/** An id is used as it is (the server answers 404 when wrong); a name is looked up among the caller's projects. */
export async function resolveProject(api: Api, project: string): Promise<{ id: string; name?: string }> {
  if (UUID.test(project)) return { id: project };
  const { projects } = await api.expect<{ projects: ProjectSummary[] }>(200, "GET", "/api/projects");
  const found = projectNamed(projects, project);
  return { id: found.id, name: found.name };
}

/**
 * One of the caller's projects by id or name. Names are unique among the projects one
 * creates or renames, but joining one can bring a second of the same name: such a name is
 * refused with both ids, never one of them picked at random.
 */
export function projectNamed<T extends { id: string; name: string }>(projects: T[], named: string): T {
  const same = projects.filter((p) => nameKey(p.name) === nameKey(named));
  if (same.length > 1 && !projects.some((p) => p.id === named)) {
    throw new CliError(
      printable(
        `${same.length} of your projects are named "${named}": name one by its id with --project (${same.map((p) => p.id).join(", ")}).`,
      ),
      EXIT.usage,
    );
  }
  const found = findProject(projects, named);
  if (!found) throw new CliError(`Project "${printable(named)}" not found among your projects.`, EXIT.denied);
  return found;
}

export function environmentPath(projectId: string, environment: string): string {
  return `/api/projects/${encodeURIComponent(projectId)}/environments/${environment}`;
}

/** An environment's secrets through the export endpoint (audited as secrets.exported), their keys checked (see checkedSecrets). */
export async function readExport(target: Target, at: { projectId: string; environment: string }): Promise<SecretPair[]> {
  const { secrets } = await target.api.expect<{ secrets: SecretPair[] }>(
    200,
    "GET",
    `${environmentPath(at.projectId, at.environment)}/export`,
  );
  return checkedSecrets(secrets, target.server);
}
