import os from "node:os";
import { isAppSettingName, parseNameList } from "../core/env-names.ts";
import { printable } from "../core/text.ts";
import { isRunning, startCommand } from "./child.ts";
import { CONNECTION_OPTIONS, parseFlags, resolveTarget, TARGET_OPTIONS } from "./context.ts";
import type { SecretPair } from "./dotenv.ts";
import { CliError, EXIT } from "./errors.ts";
import { FALLBACK_OPTIONS, fallbackSettings, fetchAll } from "./secrets.ts";
import { parseWatchInterval, runWatching } from "./watch.ts";

const RUN_USAGE = `Usage: secrets-server run [--project P] [--env E] [--fallback [--fallback-max-age 24h]] [--allow-env KEY]...
                          [--watch [--watch-interval 10s]] [--silent] [--server URL] [--token-file FILE] -- COMMAND [ARGS...]

Runs COMMAND with the environment's secrets added to its environment variables (they win
over variables of the same name). stdin, stdout and stderr are the command's own; signals
are passed on, and the command's exit code is this command's exit code.

A secret is added only when its name looks like an application setting:
- upper-case letters and digits in words joined by single underscores, starting with a
  letter (so not http_proxy, npm_config_x or _JAVA_OPTIONS);
- at least two words (PORT and DEBUG are the only one-word names: PATH, HOME, SHELL,
  PAGER, EDITOR, CLASSPATH and most one-word variables belong to shells and tools);
- NODE_ENV aside, not in a namespace of a shell, runtime, linker, VCS, package manager or
  build tool (GIT_, SSH_, LD_, DYLD_, NODE_, NPM_, PYTHON_, JAVA_, DOTNET_, XDG_, LC_,
  DOCKER_, KUBE_, SECRETS_SERVER_ and the others the README lists);
- not ending in a word that says where code, configuration, arguments or trust come from
  (_PATH, _HOME, _ROOT, _OPTIONS, _OPTS, _ARGS, _HOOKS, _ASKPASS, _EDITOR, _PAGER, _SHELL,
  _PRELOAD, _COMMAND, _CONFIG, _CONFIG_FILE, _PROXY and the others the README lists).
Other secrets are left out with one warning naming them: such variables choose which code
runs, and whoever may create a secret must not choose that on this machine. To set one
anyway, name it with --allow-env KEY (repeatable) or in SECRETS_SERVER_ALLOW_ENV=KEY1,KEY2.

SECRETS_SERVER_TOKEN and SECRETS_SERVER_IDENTITY_TOKEN are removed from COMMAND's
environment: it gets the secrets, not the credential that reads them all.

--watch keeps COMMAND running and asks the server every --watch-interval (default and
minimum 10s) whether the environment's secrets changed; an unchanged environment costs
the server no decryption and no audit event. When they changed, COMMAND gets SIGTERM
(SIGKILL 10s later if it is still running) and starts again with the new secrets. When
COMMAND exits by itself, this command exits with its exit code. If the server cannot be
reached, COMMAND keeps running with the secrets it has. --silent leaves out the notes
(restarts, secrets left out); errors are still printed.`;

// Signals a supervisor (systemd, docker, a shell) sends that the command should see.
const FORWARDED: NodeJS.Signals[] = ["SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGWINCH"];

export async function run(args: string[]): Promise<number> {
  const separator = args.indexOf("--");
  const { values, positionals } = parseFlags(
    separator < 0 ? args : args.slice(0, separator),
    {
      ...CONNECTION_OPTIONS,
      ...TARGET_OPTIONS,
      ...FALLBACK_OPTIONS,
      "allow-env": { type: "string", multiple: true },
      watch: { type: "boolean", default: false },
      "watch-interval": { type: "string" },
      silent: { type: "boolean", default: false },
    },
    RUN_USAGE,
  );
  if (separator < 0 || separator === args.length - 1 || positionals.length > 0)
    throw new CliError(`Put the command after --.\n\n${RUN_USAGE}`, EXIT.usage);
  const [command, ...commandArgs] = args.slice(separator + 1) as [string, ...string[]];
  if (!values.watch && values["watch-interval"] !== undefined)
    throw new CliError(`--watch-interval goes with --watch.\n\n${RUN_USAGE}`, EXIT.usage);
  if (values.watch && (values.fallback || values["fallback-max-age"])) {
    throw new CliError(`--watch restarts the command on the server's changes; it does not take --fallback.\n\n${RUN_USAGE}`, EXIT.usage);
  }
  const intervalMs = values.watch ? parseWatchInterval(values["watch-interval"]) : 0;

  const target = resolveTarget(values);
  // The person running the command owns this machine: only they may let a name through.
  const allowed = new Set([...(values["allow-env"] ?? []), ...parseNameList(process.env.SECRETS_SERVER_ALLOW_ENV)]);
  const environmentFor = (secrets: SecretPair[]): NodeJS.ProcessEnv => {
    // No prototype: a secret named __proto__ (a valid key) would otherwise set the object's
    // prototype instead of a variable, and be lost without a word.
    const env: NodeJS.ProcessEnv = Object.assign(Object.create(null), process.env);
    // An application that logs its environment, or a crash reporter that sends it, would
    // otherwise carry away a credential that reads every secret of the account.
    delete env.SECRETS_SERVER_TOKEN;
    delete env.SECRETS_SERVER_IDENTITY_TOKEN;
    const leftOut: string[] = [];
    const withNul: string[] = [];
    for (const { key, value } of secrets) {
      // An environment string ends at its first NUL; spawn() would refuse the whole
      // environment with an error that quotes the value.
      if (value.includes("\0")) withNul.push(printable(key));
      else if (isAppSettingName(key) || allowed.has(key)) env[key] = value;
      else leftOut.push(printable(key));
    }
    if (leftOut.length > 0 && !values.silent) {
      process.stderr.write(
        `secrets-server: left out ${leftOut.join(", ")}: not named like application settings, and variables like these choose which code runs. ` +
          `If you trust ${leftOut.length === 1 ? "it" : "them"}, add ${leftOut.map((key) => `--allow-env ${key}`).join(" ")} ` +
          `(or SECRETS_SERVER_ALLOW_ENV=${leftOut.join(",")}). See secrets-server run --help.\n`,
      );
    }
    if (withNul.length > 0 && !values.silent) {
      process.stderr.write(
        `secrets-server: left out ${withNul.join(", ")}: ${withNul.length === 1 ? "its value holds" : "their values hold"} a NUL character, which an environment variable cannot carry. ` +
          "Read it with secrets-server secrets get or export --format json.\n",
      );
    }
    return env;
  };
  // On a terminal, Ctrl-C, Ctrl-\ and resizes already reach the command, which shares our
  // process group; sending them again would make a second Ctrl-C out of the first.
  const fromTerminal = process.stdin.isTTY ? new Set<NodeJS.Signals>(["SIGINT", "SIGQUIT", "SIGWINCH"]) : new Set<NodeJS.Signals>();
  if (values.watch) {
    return runWatching({
      target,
      command,
      commandArgs,
      intervalMs,
      environmentFor,
      forwarded: FORWARDED,
      fromTerminal,
      silent: values.silent,
    });
  }
  const env = environmentFor(await fetchAll(target, fallbackSettings(values)));

  return new Promise<number>((resolve) => {
    const forward = (signal: NodeJS.Signals) => {
      if (fromTerminal.has(signal)) return;
      if (child && isRunning(child)) child.kill(signal);
    };
    const cleanup = () => {
      for (const signal of FORWARDED) process.off(signal, forward);
    };
    const child = startCommand(command, commandArgs, env, (code) => {
      cleanup();
      resolve(code);
    });
    if (!child) return;
    for (const signal of FORWARDED) process.on(signal, forward);
    child.on("exit", (code, signal) => {
      cleanup();
      if (signal) {
        // Die of the same signal, so whoever started us sees what happened to the command.
        process.kill(process.pid, signal);
        resolve(128 + (os.constants.signals[signal] ?? 0));
        return;
      }
      resolve(code ?? 1);
    });
  });
}
