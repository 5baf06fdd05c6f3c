// The CLI commands of the executable. They talk to a server only over HTTP (fetch), like
// any other client, with the credentials kept in $XDG_CONFIG_HOME/secrets-server.
import { printable, printableLines } from "../core/text.ts";
import { complete, completion } from "./completion.ts";
import { CliError, EXIT, UsageRequested } from "./errors.ts";
import { login, logout, whoami } from "./login.ts";
import { run } from "./run.ts";
import { exportSecrets, link, projects, secrets } from "./secrets.ts";

export const CLI_HELP = `CLI commands (talk to a server over HTTP; --server URL or SECRETS_SERVER_URL picks it):
  login            Sign this machine in through the browser (device flow)
  logout           End this machine's CLI session and delete its credentials
  whoami           Show who the CLI is signed in as
  projects         List your projects
  secrets          list | get KEY | set KEY VALUE | set KEY --from-stdin | set KEY=VALUE...
                   | import FILE | delete KEY | diff ENV_A ENV_B
  export           Print or write the environment's secrets (--format dotenv|shell|docker|json|yaml, --output FILE)
  run              Run a command with the secrets in its environment: run -- COMMAND ARGS...
                   (--watch restarts it when the secrets change)
  link             Remember --project and --env for the current folder (on a terminal, pick them)
  setup            The same as link
  completion       Print a completion script: completion bash|zsh|fish
  Most commands take --project, --env and --json. "secrets-server <command> --help" shows more.

Machine access (CI jobs, servers): no login, and nothing in the config folder is read or
written (except the copy --fallback keeps). The first of these that is set is used:
  SECRETS_SERVER_TOKEN=svc_st_...  or  --token-file FILE   a service token
  SECRETS_SERVER_SERVICE_ACCOUNT=<id> with SECRETS_SERVER_IDENTITY_TOKEN=<JWT>, or in
      GitHub Actions (permissions: id-token: write) alone: an identity token is exchanged
      for a 15-minute access token (audience SECRETS_SERVER_AUDIENCE, default the server URL)
  else the credentials of "login".
  --token-file with SECRETS_SERVER_TOKEN, or a service token with SECRETS_SERVER_IDENTITY_TOKEN,
  is refused. The server must come from --server or SECRETS_SERVER_URL. Project and
  environment default to the service account's when it has exactly one environment.
`;

type Command = (args: string[]) => Promise<number>;

/**
 * The message on stderr and an exit code for every expected failure; never a token, never a
 * stack. A CliError's message keeps its line breaks (usages span lines), but anything else
 * a terminal would act on becomes U+FFFD here, once for every message: text from a server,
 * a link file or the command line can end up in one without each place remembering it.
 */
function guarded(command: Command): Command {
  return async (args) => {
    try {
      return await command(args);
    } catch (error) {
      if (error instanceof UsageRequested) {
        process.stdout.write(`${error.usage}\n`);
        return EXIT.ok;
      }
      if (error instanceof CliError) {
        process.stderr.write(`secrets-server: ${printableLines(error.message)}\n`);
        return error.exitCode;
      }
      process.stderr.write(`secrets-server: unexpected error: ${printable((error as Error)?.message ?? String(error))}\n`);
      return EXIT.failed;
    }
  };
}

export const cliCommands: Record<string, Command> = {
  login: guarded(login),
  logout: guarded(logout),
  whoami: guarded(whoami),
  projects: guarded(projects),
  secrets: guarded(secrets),
  export: guarded(exportSecrets),
  run: guarded(run),
  link: guarded(link),
  setup: guarded(link),
  completion: guarded(completion),
  // Hidden: what the completion scripts call while the user types. Not guarded: it prints
  // no usage and no error, whatever the words are.
  __complete: complete,
};
