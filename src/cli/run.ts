import { spawn } from "node:child_process";
import os from "node:os";
import { parseFlags, resolveTarget, SERVER_OPTION, TARGET_OPTIONS } from "./context.ts";
import { CliError, EXIT } from "./errors.ts";
import { fallbackSettings, fetchAll, FALLBACK_OPTIONS } from "./secrets.ts";

export const RUN_USAGE = `Usage: secrets-server run [--project P] [--env E] [--fallback [--fallback-max-age 24h]] [--allow-env KEY]... -- COMMAND [ARGS...]

Runs COMMAND with the environment's secrets added to its environment variables (they win
over variables of the same name). stdin, stdout and stderr are the command's own; signals
are passed on, and the command's exit code is this command's exit code. Secrets named like
variables that choose which code runs (PATH, LD_*, DYLD_*, NODE_OPTIONS, BASH_ENV,
PYTHONPATH, JAVA_TOOL_OPTIONS and the like) are left out with a warning unless named
with --allow-env.`;

// Variables that decide which code runs rather than how it is configured. A secret with
// such a name would hand whoever may create secrets in the environment every host that runs
// this command, so they are left out unless named with --allow-env.
const CODE_LOADING =
  /^(LD_\w*|DYLD_\w*|NODE_OPTIONS|NODE_PATH|PATH|BASH_ENV|ENV|SHELLOPTS|BASHOPTS|PS4|PROMPT_COMMAND|IFS|PYTHONPATH|PYTHONSTARTUP|PYTHONHOME|PERL5LIB|PERL5OPT|PERLLIB|RUBYOPT|RUBYLIB|JAVA_TOOL_OPTIONS|_JAVA_OPTIONS|JDK_JAVA_OPTIONS|GCONV_PATH|GIT_SSH_COMMAND|GIT_EXEC_PATH)$/;

// Signals a supervisor (systemd, docker, a shell) sends that the command should see.
const FORWARDED: NodeJS.Signals[] = ["SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGWINCH"];

export async function run(args: string[]): Promise<number> {
  const separator = args.indexOf("--");
  if (separator < 0 || separator === args.length - 1) throw new CliError(`Put the command after --.\n\n${RUN_USAGE}`, EXIT.usage);
  const { values, positionals } = parseFlags(
    args.slice(0, separator),
    { ...SERVER_OPTION, ...TARGET_OPTIONS, ...FALLBACK_OPTIONS, "allow-env": { type: "string", multiple: true } },
    RUN_USAGE,
  );
  if (positionals.length > 0) throw new CliError(`Put the command after --.\n\n${RUN_USAGE}`, EXIT.usage);
  const [command, ...commandArgs] = args.slice(separator + 1) as [string, ...string[]];

  const target = resolveTarget(values);
  const secrets = await fetchAll(target, fallbackSettings(values));
  const env: NodeJS.ProcessEnv = { ...process.env };
  const allowed = new Set(values["allow-env"] ?? []);
  for (const { key, value } of secrets) {
    if (CODE_LOADING.test(key) && !allowed.has(key)) {
      process.stderr.write(`secrets-server: left out ${key}: it decides which code runs. Add --allow-env ${key} to set it anyway.\n`);
      continue;
    }
    env[key] = value;
  }

  return new Promise<number>((resolve) => {
    const child = spawn(command, commandArgs, { stdio: "inherit", env });
    // On a terminal, Ctrl-C, Ctrl-\ and resizes already reach the command, which shares our
    // process group; sending them again would make a second Ctrl-C out of the first.
    const fromTerminal = process.stdin.isTTY ? new Set<NodeJS.Signals>(["SIGINT", "SIGQUIT", "SIGWINCH"]) : new Set<NodeJS.Signals>();
    const forward = (signal: NodeJS.Signals) => {
      if (fromTerminal.has(signal)) return;
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
    };
    for (const signal of FORWARDED) process.on(signal, forward);
    const cleanup = () => {
      for (const signal of FORWARDED) process.off(signal, forward);
    };
    child.on("error", (error: NodeJS.ErrnoException) => {
      cleanup();
      const code = error.code === "ENOENT" ? 127 : 126;
      process.stderr.write(`secrets-server: cannot run ${command}: ${error.code === "ENOENT" ? "command not found" : error.message}\n`);
      resolve(code);
    });
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
