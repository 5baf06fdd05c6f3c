// Shell completion. `completion bash|zsh|fish` prints a script; the script asks the hidden
// `__complete SHELL WORDS...` for the candidates, which knows the commands and flags and,
// from the server, project names, environments and secret keys (names only, never values).

import { httpRequest } from "../core/http-client.ts";
import { hasKeyShape } from "../core/secret-rules.ts";
import { printable } from "../core/text.ts";
import { CLI_EXPORT_FORMATS } from "../secrets/export-formats.ts";
import { isExpired } from "./api.ts";
import { ENVIRONMENTS, findLink, findProject, normalizeEnvironment, type ProjectSummary, parseFlags, resolveServer } from "./context.ts";
import { readCredentials } from "./credentials.ts";
import { CliError, EXIT } from "./errors.ts";

const COMPLETION_USAGE = `Usage: secrets-server completion bash|zsh|fish

Prints a completion script for the shell: commands, flags, and the project names,
environments and secret keys of your server (asked with your login's token while you
type; never refreshed, so an expired token only means fewer suggestions).

  bash:  source <(secrets-server completion bash)          (e.g. in ~/.bashrc)
  zsh:   source <(secrets-server completion zsh)           (after compinit, e.g. in ~/.zshrc)
  fish:  secrets-server completion fish > ~/.config/fish/completions/secrets-server.fish`;

const COMMON = ["--server", "--help"];
const TARGET = ["--project", "--env", "--token-file"];
const FLAGS: Record<string, string[]> = {
  login: ["--server", "--device-name", "--no-browser", "--json", "--help"],
  logout: ["--server", "--help"],
  whoami: [...COMMON, "--token-file", "--json"],
  projects: [...COMMON, "--token-file", "--json"],
  secrets: [...COMMON, ...TARGET, "--json", "--from-stdin", "--overwrite", "--show-values", "--yes", "--silent"],
  export: [...COMMON, ...TARGET, "--format", "--output", "--allow-env", "--fallback", "--fallback-max-age"],
  run: [...COMMON, ...TARGET, "--allow-env", "--fallback", "--fallback-max-age", "--watch", "--watch-interval", "--silent"],
  link: [...COMMON, ...TARGET, "--json", "--silent"],
  setup: [...COMMON, ...TARGET, "--json", "--silent"],
  completion: ["--help"],
};
const COMMANDS = [...Object.keys(FLAGS), "help", "version"];
const SECRETS_ACTIONS = ["list", "get", "set", "import", "delete", "diff"];
/** Flags whose value is a file or free text: the shell's own (file) completion applies. */
const FREE_VALUE = new Set([
  "--output",
  "-o",
  "--token-file",
  "--device-name",
  "--fallback-max-age",
  "--watch-interval",
  "--allow-env",
  "--server",
]);
/** All the server's answers of one completion together (keys take two requests): the shell waits meanwhile. */
const TIMEOUT_MS = 1500;
let deadline = Number.POSITIVE_INFINITY;

export async function completion(args: string[]): Promise<number> {
  const [shell, ...rest] = parseFlags(args, {}, COMPLETION_USAGE).positionals;
  if (rest.length > 0 || !shell || !Object.hasOwn(SCRIPTS, shell)) throw new CliError(COMPLETION_USAGE, EXIT.usage);
  process.stdout.write(SCRIPTS[shell as keyof typeof SCRIPTS]);
  return EXIT.ok;
}

/** `__complete SHELL WORD... CURRENT`: one candidate a line; any failure is no candidates, never a message. */
export async function complete(args: string[]): Promise<number> {
  const [shell, ...words] = args;
  deadline = Date.now() + TIMEOUT_MS;
  try {
    const current = words.at(-1) ?? "";
    const found = (await candidates(joinColons(words.slice(0, -1)), current)).filter((c) => c.startsWith(current));
    const lines = shell === "bash" ? found.map(bashEscape) : found;
    if (lines.length > 0) process.stdout.write(`${lines.join("\n")}\n`);
  } catch {
    // Completion must never print an error into the middle of a command line.
  }
  return EXIT.ok;
}

/** bash splits `http://host:8080` at each colon (COMP_WORDBREAKS); the URL is put back together. */
function joinColons(words: string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < words.length; i++) {
    if (words[i] === ":" && out.length > 0) {
      out[out.length - 1] += `:${words[i + 1] ?? ""}`;
      i++;
    } else {
      out.push(words[i]!);
    }
  }
  return out;
}

/** bash inserts a candidate as it is: spaces and shell characters need their backslash. */
function bashEscape(text: string): string {
  return text.replace(/[^A-Za-z0-9_./:@%+=,-]/g, (c) => `\\${c}`);
}

function flagValue(words: string[], ...names: string[]): string | undefined {
  for (let i = words.length - 1; i >= 0; i--) {
    const word = words[i]!;
    if (names.includes(word)) return words[i + 1];
    for (const name of names) if (name.startsWith("--") && word.startsWith(`${name}=`)) return word.slice(name.length + 1);
  }
  return undefined;
}

async function candidates(before: string[], current: string): Promise<string[]> {
  if (before.length === 0) return COMMANDS;
  const command = before[0]!;
  if (before.includes("--") && command === "run") return [];
  const previous = before.at(-1)!;
  if (previous === "--project" || previous === "-p") return (await projectsOf(before)).map((p) => p.name).sort();
  if (previous === "--env" || previous === "-e") return environmentsOf(before);
  if (previous === "--format") return [...CLI_EXPORT_FORMATS];
  if (FREE_VALUE.has(previous)) return [];
  if (current.startsWith("-")) return Object.hasOwn(FLAGS, command) ? FLAGS[command]! : [];
  // Positionals: the words that are neither flags nor a flag's value.
  const positionals = before.slice(1).filter((word, i, all) => !word.startsWith("-") && !(i > 0 && isValueFlag(all[i - 1]!)));
  if (command === "completion") return positionals.length === 0 ? ["bash", "zsh", "fish"] : [];
  if (command !== "secrets") return [];
  if (positionals.length === 0) return SECRETS_ACTIONS;
  const action = positionals[0];
  if (action === "diff" && positionals.length <= 2) return environmentsOf(before);
  if ((action === "get" && positionals.length === 1) || action === "delete" || (action === "set" && positionals.length === 1))
    return keysOf(before);
  return [];
}

function isValueFlag(word: string): boolean {
  return ["--project", "-p", "--env", "-e", "--format", ...FREE_VALUE].includes(word);
}

interface Connection {
  server: string;
  token: string;
}

/** The login's token when it is still valid (no refresh: a refresh cut short by the shell would end the session), or a service token. */
function connection(words: string[]): Connection | undefined {
  const serverFlag = flagValue(words, "--server");
  if (process.env.SECRETS_SERVER_TOKEN) {
    const given = serverFlag ?? process.env.SECRETS_SERVER_URL;
    if (!given) return undefined;
    return { server: resolveServer(given, { link: undefined }), token: process.env.SECRETS_SERVER_TOKEN };
  }
  const server = resolveServer(serverFlag);
  const credentials = readCredentials().servers[server];
  if (!credentials || isExpired(credentials)) return undefined;
  return { server, token: credentials.accessToken };
}

async function get<T>(at: Connection, path: string): Promise<T> {
  const res = await httpRequest(at.server + path, {
    headers: { accept: "application/json", authorization: `Bearer ${at.token}`, "user-agent": "secrets-server-cli" },
    timeoutMs: Math.max(1, Math.min(TIMEOUT_MS, deadline - Date.now())),
  });
  if (res.status !== 200) throw new Error(String(res.status));
  return JSON.parse(res.text) as T;
}

async function projectsOf(words: string[]): Promise<ProjectSummary[]> {
  const at = connection(words);
  if (!at) return [];
  const { projects } = await get<{ projects: ProjectSummary[] }>(at, "/api/projects");
  // Names that could break a command line or a terminal are not offered.
  return projects.filter((p) => printable(p.name) === p.name);
}

/** The project named on the line (or by SECRETS_SERVER_PROJECT, or the link file), if any. */
async function projectOf(words: string[]): Promise<ProjectSummary | undefined> {
  const named = flagValue(words, "--project", "-p") ?? process.env.SECRETS_SERVER_PROJECT ?? findLink()?.link.projectId;
  if (!named) return undefined;
  const projects = await projectsOf(words);
  return findProject(projects, named);
}

async function environmentsOf(words: string[]): Promise<string[]> {
  const project = await projectOf(words).catch(() => undefined);
  return project ? project.environments : [...ENVIRONMENTS];
}

async function keysOf(words: string[]): Promise<string[]> {
  const project = await projectOf(words);
  const named = flagValue(words, "--env", "-e") ?? process.env.SECRETS_SERVER_ENV ?? findLink()?.link.environment;
  const at = connection(words);
  if (!project || !named || !at) return [];
  const environment = normalizeEnvironment(named);
  const path = `/api/projects/${encodeURIComponent(project.id)}/environments/${environment}/secrets`;
  const { secrets } = await get<{ secrets: { key: string }[] }>(at, path);
  // Offered to the shell as words: only what a key can be.
  return secrets
    .map((s) => s.key)
    .filter(hasKeyShape)
    .sort();
}

const SCRIPTS = {
  bash: `# bash completion for secrets-server: source <(secrets-server completion bash)
_secrets_server() {
  local IFS=$'\\n'
  COMPREPLY=($("\${COMP_WORDS[0]}" __complete bash "\${COMP_WORDS[@]:1:COMP_CWORD}" 2>/dev/null))
}
complete -o default -F _secrets_server secrets-server
`,
  zsh: `#compdef secrets-server
# zsh completion for secrets-server: source <(secrets-server completion zsh), after compinit
_secrets_server() {
  local -a found
  found=("\${(@f)$("\${words[1]}" __complete zsh "\${(@)words[2,CURRENT]}" 2>/dev/null)}")
  if (( \${#found} )) && [[ -n "\${found[1]}" ]]; then
    compadd -a found
  else
    _files
  fi
}
compdef _secrets_server secrets-server
`,
  fish: `# fish completion for secrets-server: secrets-server completion fish > ~/.config/fish/completions/secrets-server.fish
function __secrets_server_complete
    set -l tokens (commandline -opc)
    set -l current (commandline -ct)
    set -l found ($tokens[1] __complete fish $tokens[2..-1] $current 2>/dev/null)
    if test (count $found) -gt 0
        printf '%s\\n' $found
    else
        __fish_complete_path $current
    end
end
complete -c secrets-server -f -a '(__secrets_server_complete)'
`,
};
