import { spawn } from "node:child_process";
import os from "node:os";
import { parseFlags, resolveTarget, SERVER_OPTION, TARGET_OPTIONS } from "./context.ts";
import { CliError, EXIT } from "./errors.ts";
import { fallbackSettings, fetchAll, FALLBACK_OPTIONS } from "./secrets.ts";

export const RUN_USAGE = `Usage: secrets-server run [--project P] [--env E] [--fallback [--fallback-max-age 24h]] -- COMMAND [ARGS...]

Runs COMMAND with the environment's secrets added to its environment variables (they win
over variables of the same name). stdin, stdout and stderr are the command's own; signals
are passed on, and the command's exit code is this command's exit code.`;

// Signals a supervisor (systemd, docker, a shell) sends that the command should see.
const FORWARDED: NodeJS.Signals[] = ["SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGWINCH"];

export async function run(args: string[]): Promise<number> {
  const separator = args.indexOf("--");
  if (separator < 0 || separator === args.length - 1) throw new CliError(`Put the command after --.\n\n${RUN_USAGE}`, EXIT.usage);
  const { values, positionals } = parseFlags(args.slice(0, separator), { ...SERVER_OPTION, ...TARGET_OPTIONS, ...FALLBACK_OPTIONS }, RUN_USAGE);
  if (positionals.length > 0) throw new CliError(`Put the command after --.\n\n${RUN_USAGE}`, EXIT.usage);
  const [command, ...commandArgs] = args.slice(separator + 1) as [string, ...string[]];

  const target = resolveTarget(values);
  const secrets = await fetchAll(target, fallbackSettings(values));
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const { key, value } of secrets) env[key] = value;

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
