// The command `run` starts, with or without --watch.
import type { ChildProcess } from "node:child_process";

/** Whether the command has neither exited nor been ended by a signal: one that has gets no more signals. */
export function isRunning(child: ChildProcess): boolean {
  return child.exitCode === null && child.signalCode === null;
}

/**
 * Starts `command` with the terminal's stdio and `env`. A command that cannot start (not
 * found, not executable, an environment past the system's limit) is reported on stderr and
 * `failed` gets the shell's exit code for it (127 not found, 126 otherwise); nothing is
 * thrown, whether spawn throws (E2BIG) or reports it as an event.
 */
export function startCommand(
  command: string,
  args: string[],
  env: NodeJS.ProcessEnv,
  failed: (exitCode: number) => void,
): ChildProcess | undefined {
  const report = (error: NodeJS.ErrnoException) => {
    const notFound = error.code === "ENOENT";
    process.stderr.write(`secrets-server: cannot run ${command}: ${notFound ? "command not found" : error.message}\n`);
    failed(notFound ? 127 : 126);
  };
  let child: ChildProcess;
  try {
    // Loaded here, not with the CLI: every command would pay for it (see core/http-client.ts).
    child = process.getBuiltinModule("node:child_process").spawn(command, args, { stdio: "inherit", env });
  } catch (error) {
    report(error as NodeJS.ErrnoException);
    return undefined;
  }
  child.on("error", (error: NodeJS.ErrnoException) => {
    // Node also says `error` when a signal could not be sent to a running command (EPERM:
    // a setuid one): it still runs, and its exit is still ours to wait for.
    if (child.pid === undefined) report(error);
    else process.stderr.write(`secrets-server: could not pass a signal on to ${command}: ${error.message}\n`);
  });
  return child;
}
