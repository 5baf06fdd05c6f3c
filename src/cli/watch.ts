// `run --watch`: runs the command, asks the server every interval whether the environment
// changed (If-None-Match on the export: an unchanged environment answers 304, which the
// server neither decrypts nor audits), and restarts the command with the new secrets.
import type { ChildProcess } from "node:child_process";
import os from "node:os";
import { retryAfterMs } from "../core/http-client.ts";
import { printable } from "../core/text.ts";
import { apiBody, errorFor } from "./api.ts";
import { isRunning, startCommand } from "./child.ts";
import { environmentPath, locate, type Target } from "./context.ts";
import { checkedSecrets, type SecretPair } from "./dotenv.ts";
import { CliError, EXIT } from "./errors.ts";

/** The server is asked at most this often, whatever --watch-interval says. */
const MIN_WATCH_INTERVAL_SECONDS = 10;
/** And at least once a day: a timer past 2^31 - 1 ms fires after 1 ms, which would ask without pause. */
const MAX_WATCH_INTERVAL_HOURS = 24;
/** At the start, how long in all a rate-limited export is waited for before the run fails. */
const MAX_START_WAIT_MS = 10 * 60_000;
/** After SIGTERM, the time a command gets to stop before SIGKILL (docker stop's default). */
const STOP_GRACE_MS = 10_000;

/** --watch-interval: seconds, or 30s / 5m / 1h; from 10 s to 24 h. */
export function parseWatchInterval(text: string | undefined): number {
  if (text === undefined) return MIN_WATCH_INTERVAL_SECONDS * 1000;
  const match = text.trim().match(/^(\d+)(s|m|h)?$/);
  if (!match)
    throw new CliError(`--watch-interval takes seconds, or a duration such as 30s, 5m or 1h (got "${printable(text)}").`, EXIT.usage);
  const ms = Number(match[1]) * { s: 1000, m: 60_000, h: 3_600_000 }[(match[2] ?? "s") as "s" | "m" | "h"];
  if (ms < MIN_WATCH_INTERVAL_SECONDS * 1000) {
    throw new CliError(`--watch-interval is at least ${MIN_WATCH_INTERVAL_SECONDS}s: the server is not asked more often.`, EXIT.usage);
  }
  if (!(ms <= MAX_WATCH_INTERVAL_HOURS * 3_600_000)) {
    throw new CliError(`--watch-interval is at most ${MAX_WATCH_INTERVAL_HOURS}h.`, EXIT.usage);
  }
  return ms;
}

export interface WatchOptions {
  target: Target;
  command: string;
  commandArgs: string[];
  intervalMs: number;
  /** The command's environment for these secrets (warns about the ones left out). */
  environmentFor(secrets: SecretPair[]): NodeJS.ProcessEnv;
  /** Signals to pass on to the command. */
  forwarded: NodeJS.Signals[];
  /** Signals the command already gets from the terminal. */
  fromTerminal: Set<NodeJS.Signals>;
  silent: boolean;
}

/** Signals that ask a command to stop (SIGHUP often asks it to reload instead). */
const STOPS: ReadonlySet<NodeJS.Signals> = new Set(["SIGINT", "SIGTERM", "SIGQUIT"]);

function sameEnvironment(a: NodeJS.ProcessEnv, b: NodeJS.ProcessEnv): boolean {
  const keys = new Set([...Object.keys(a), ...Object.keys(b)]);
  for (const key of keys) if (a[key] !== b[key]) return false;
  return true;
}

export async function runWatching(options: WatchOptions): Promise<number> {
  const { target, command, commandArgs } = options;
  const { api, server } = target;
  const at = await locate(target);
  const exportPath = `${environmentPath(at.projectId, at.environment)}/export`;
  let etag: string | undefined;
  /**
   * How long the last answer asked us to wait (a 429's Retry-After): the export's limit is
   * the account's, shared with every other watcher, `run` and export of it, and a poll that
   * kept its pace would keep them all refused.
   */
  let waitAskedMs = 0;
  /** The secrets when they changed since the last answer, undefined on 304. */
  const fetchChanged = async (): Promise<SecretPair[] | undefined> => {
    waitAskedMs = 0;
    const res = await api.request("GET", exportPath, undefined, etag ? { "if-none-match": etag } : undefined);
    waitAskedMs = res.status === 429 ? Math.min(retryAfterMs(res.header("retry-after")) ?? 0, MAX_WATCH_INTERVAL_HOURS * 3_600_000) : 0;
    if (res.status === 304) return undefined;
    if (res.status !== 200) throw errorFor(res, server);
    etag = res.header("etag") ?? undefined;
    return checkedSecrets(apiBody(res, server, exportPath).secrets as SecretPair[], server);
  };
  const note = (text: string) => {
    if (!options.silent) process.stderr.write(`secrets-server: ${text}\n`);
  };
  // A supervisor restarting a watcher refused at start would spend more of the limit it
  // shares with the account's other watchers: wait as asked instead, for a while.
  const fetchFirst = async (): Promise<SecretPair[] | undefined> => {
    for (let waited = 0; ; ) {
      try {
        return await fetchChanged();
      } catch (error) {
        if (waitAskedMs === 0 || waited + waitAskedMs > MAX_START_WAIT_MS) throw error;
        note(`the export is rate limited; trying again in ${Math.ceil(waitAskedMs / 1000)} s.`);
        await new Promise((resolve) => setTimeout(resolve, waitAskedMs));
        waited += waitAskedMs;
      }
    }
  };
  let env = options.environmentFor((await fetchFirst()) ?? []);

  return new Promise<number>((resolve) => {
    let child: ChildProcess | undefined;
    let restarting = false;
    let finished = false;
    let pollTimer: NodeJS.Timeout | undefined;
    let killTimer: NodeJS.Timeout | undefined;
    let lastProblem: string | undefined;

    /** A supervisor or the person at the terminal asked the command to stop: no restart after that. */
    let stopAsked = false;
    const forward = (signal: NodeJS.Signals) => {
      if (STOPS.has(signal)) {
        stopAsked = true;
        // A restart under way would start a new command once the old one exits: its exit ends the run instead.
        restarting = false;
      }
      if (options.fromTerminal.has(signal)) return;
      if (child && isRunning(child)) child.kill(signal);
    };
    for (const signal of options.forwarded) process.on(signal, forward);

    const finish = (code: number, signal?: NodeJS.Signals) => {
      finished = true;
      clearTimeout(pollTimer);
      clearTimeout(killTimer);
      for (const s of options.forwarded) process.off(s, forward);
      if (signal) {
        // Die of the same signal, so whoever started us sees what happened to the command.
        process.kill(process.pid, signal);
        resolve(128 + (os.constants.signals[signal] ?? 0));
        return;
      }
      resolve(code);
    };

    const start = () => {
      const started = startCommand(command, commandArgs, env, (code) => finish(code));
      if (!started) return;
      child = started;
      child.on("exit", (code, signal) => {
        clearTimeout(killTimer);
        if (finished) return;
        if (restarting) {
          restarting = false;
          start();
          return;
        }
        // The command ended by itself (or of a signal passed on): its code is ours.
        finish(code ?? 1, signal ?? undefined);
      });
    };

    const restart = () => {
      const running = child;
      if (restarting || stopAsked || !running) return;
      restarting = true;
      note(`the secrets of ${at.environment} changed: restarting ${command}`);
      running.kill("SIGTERM");
      killTimer = setTimeout(() => {
        if (isRunning(running)) {
          note(`${command} did not stop within ${STOP_GRACE_MS / 1000}s of SIGTERM: sending SIGKILL`);
          running.kill("SIGKILL");
        }
      }, STOP_GRACE_MS);
    };

    const poll = async () => {
      try {
        const secrets = await fetchChanged();
        lastProblem = undefined;
        if (secrets && !finished) {
          const next = options.environmentFor(secrets);
          // A change the command cannot see (a secret left out, a rename back) restarts nothing.
          if (!sameEnvironment(next, env)) {
            env = next;
            restart();
          }
        }
      } catch (error) {
        // The command keeps running with what it has; one line per new problem, not per poll.
        const message = error instanceof CliError ? error.message : String((error as Error)?.message ?? error);
        if (message !== lastProblem) {
          process.stderr.write(
            `secrets-server: could not check for changes: ${printable(message)} (${command} keeps running; trying again)\n`,
          );
          lastProblem = message;
        }
      }
      if (!finished) pollTimer = setTimeout(poll, Math.max(options.intervalMs, waitAskedMs));
    };

    start();
    pollTimer = setTimeout(poll, options.intervalMs);
  });
}
