/** Exit codes of the CLI commands (documented in the README). */
export const EXIT = {
  ok: 0,
  failed: 1,
  usage: 2,
  /** Not signed in, or the CLI session expired or was revoked. */
  auth: 3,
  /** Not a member, not permitted, or no such project, environment or secret. */
  denied: 4,
  /** The server could not be reached or is unavailable. */
  unreachable: 5,
} as const;

/** A failure the CLI reports as one clear line on stderr and an exit code; never a stack trace. */
export class CliError extends Error {
  readonly exitCode: number;

  constructor(message: string, exitCode: number = EXIT.failed) {
    super(message);
    this.exitCode = exitCode;
  }
}

/** -h or --help where the command takes it as that: the usage goes to stdout, and the exit code is 0. */
export class UsageRequested extends Error {
  readonly usage: string;

  constructor(usage: string) {
    super("usage requested");
    this.usage = usage;
  }
}

/** The server could not be reached or answered 5xx: the case a fallback copy exists for. */
export class UnreachableError extends CliError {
  constructor(message: string) {
    super(message, EXIT.unreachable);
  }
}
