// The CLI under test: a home folder of its own for each test, and drivers for the real
// process (run to the end, or read while it runs), login through the device flow included.
// A home folder of its own for each CLI test: the CLI keeps credentials, link indexes and
// fallback copies under $XDG_CONFIG_HOME, so tests never share or touch the real ones.
import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import fs from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import path from "node:path";
import type { TestContext } from "node:test";
import { sourceCommand } from "../src/dev/source-command.ts";
import { type Client, makeTempDir, ROOT, runMain, type TestServer } from "./helpers.ts";

export interface CliHome {
  dir: string;
  env: Record<string, string>;
  credentialsFile: string;
}

/** An empty HOME and XDG_CONFIG_HOME, removed when the test ends. */
export function cliHome(t: TestContext): CliHome {
  const dir = makeTempDir("secrets-cli-");
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  return {
    dir,
    env: { XDG_CONFIG_HOME: path.join(dir, "config"), HOME: dir },
    credentialsFile: path.join(dir, "config", "secrets-server", "credentials.json"),
  };
}

export interface Running {
  child: ChildProcess;
  stdout(): string;
  stderr(): string;
  /** stdout and stderr interleaved as they arrived. */
  output(): string;
  /** Resolves with the first match of `pattern` in the interleaved output after `from` characters. */
  waitFor(pattern: RegExp, from?: number): Promise<RegExpMatchArray>;
  done: Promise<{ code: number | null; signal: NodeJS.Signals | null; stdout: string; stderr: string; output: string }>;
}

/** Any command as a process the test can read while it runs, answer and signal (runMain waits for the end). */
export function start(
  command: string,
  args: string[],
  env: Record<string, string>,
  options: { cwd?: string; input?: string; timeoutMs?: number } = {},
): Running {
  const child = spawn(command, args, {
    cwd: options.cwd ?? ROOT,
    env: { PATH: process.env.PATH, ...env } as NodeJS.ProcessEnv,
    stdio: ["pipe", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  let output = "";
  const waiters: { pattern: RegExp; from: number; resolve: (m: RegExpMatchArray) => void }[] = [];
  const check = () => {
    for (const waiter of [...waiters]) {
      const match = output.slice(waiter.from).match(waiter.pattern);
      if (match) {
        waiters.splice(waiters.indexOf(waiter), 1);
        waiter.resolve(match);
      }
    }
  };
  child.stdout!.on("data", (d) => {
    stdout += d;
    output += d;
    check();
  });
  child.stderr!.on("data", (d) => {
    stderr += d;
    output += d;
    check();
  });
  if (options.input !== undefined) child.stdin!.end(options.input);
  const timer = setTimeout(() => child.kill("SIGKILL"), options.timeoutMs ?? 90_000);
  const done = new Promise<{ code: number | null; signal: NodeJS.Signals | null; stdout: string; stderr: string; output: string }>(
    (resolve) => {
      child.on("close", (code, signal) => {
        clearTimeout(timer);
        resolve({ code, signal, stdout, stderr, output });
      });
    },
  );
  return {
    child,
    stdout: () => stdout,
    stderr: () => stderr,
    output: () => output,
    waitFor(pattern, from = 0) {
      return new Promise((resolve, reject) => {
        waiters.push({ pattern, from, resolve });
        check();
        void done.then(() => reject(new Error(`process ended before ${pattern}: ${output}`)));
      });
    },
    done,
  };
}

/** The CLI as a running process (see start). */
export function startCli(
  args: string[],
  env: Record<string, string>,
  options: { cwd?: string; input?: string; timeoutMs?: number } = {},
): Running {
  return start(...sourceCommand(...args), env, options);
}

/** The CLI run to its end with the home's configuration folder. */
export function cli(home: CliHome, args: string[], options: { cwd?: string; input?: string | Buffer; env?: Record<string, string> } = {}) {
  return runMain(args, { ...home.env, ...options.env }, { timeoutMs: 60_000, cwd: options.cwd, input: options.input });
}

/**
 * `secrets-server login` as a process, approved through the API by `approver`'s browser
 * session; `args` are the login's own flags (default --no-browser).
 */
export async function login(server: TestServer, home: CliHome, approver: Client, args: string[] = ["--no-browser"]) {
  const proc = startCli(["login", "--server", server.url, ...args], home.env);
  const [, userCode] = await proc.waitFor(/\b([BCDFGHJKLMNPQRSTVWXZ]{4}-[BCDFGHJKLMNPQRSTVWXZ]{4})\b/);
  assert.ok(proc.stderr().includes(`/cli/authorize?code=${userCode}`), proc.output());
  const approved = await approver.json("POST", "/api/cli/auth/approve", { userCode });
  assert.equal(approved.status, 200, JSON.stringify(approved.body));
  const result = await proc.done;
  assert.equal(result.code, 0, result.output);
  return result;
}

/**
 * A reverse proxy in front of a test server, as one in front of a real deployment: it passes
 * every request on, unless `intercept` answers it itself (returns true); `intercept` may also
 * wait before letting a request through (a slow network). Closed when the test ends.
 */
export async function startProxy(
  t: TestContext,
  targetUrl: string,
  intercept: (req: http.IncomingMessage, res: http.ServerResponse) => boolean | Promise<boolean> = () => false,
): Promise<string> {
  const target = new URL(targetUrl);
  const proxy = http.createServer(async (req, res) => {
    if (await intercept(req, res)) return;
    const upstream = http.request(
      { host: target.hostname, port: target.port, method: req.method, path: req.url, headers: req.headers },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      },
    );
    upstream.on("error", () => res.destroy());
    req.pipe(upstream);
  });
  await new Promise<void>((resolve) => proxy.listen(0, "127.0.0.1", resolve));
  t.after(() => {
    proxy.closeAllConnections();
    return new Promise<void>((resolve) => proxy.close(() => resolve()));
  });
  return `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`;
}
