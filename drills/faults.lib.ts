// Shared by disk-full.drill.ts and graceful-stop.drill.ts: the server as its own process.
import { type ChildProcess, spawn } from "node:child_process";
import crypto from "node:crypto";
import net from "node:net";
import path from "node:path";
import { sourceCommand } from "../src/dev/source-command.ts";

const ROOT = path.resolve(import.meta.dirname, "..");

export interface ServerProcess {
  url: string;
  child: ChildProcess;
  /** Everything the process wrote so far (JSON log lines and any stderr). */
  output(): string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null; atMs: number }>;
  kill(): void;
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      server.close(() => resolve(typeof address === "object" && address ? address.port : 0));
    });
  });
}

/** `secrets-server serve` from source on DATA_DIR, resolved once it logs that it is ready. */
export async function startServerProcess(dataDir: string, env: Record<string, string> = {}): Promise<ServerProcess> {
  const port = await freePort();
  const child = spawn(...sourceCommand("serve"), {
    cwd: ROOT,
    env: {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      DATA_DIR: dataDir,
      PORT: String(port),
      APP_URL: `http://127.0.0.1:${port}`,
      MASTER_KEY: env.MASTER_KEY ?? crypto.randomBytes(32).toString("base64"),
      RATE_LIMIT_PER_MINUTE: "1000000",
      ...env,
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  child.stdout!.on("data", (d) => (output += d));
  child.stderr!.on("data", (d) => (output += d));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null; atMs: number }>((resolve) =>
    child.on("close", (code, signal) => resolve({ code, signal, atMs: Date.now() })),
  );
  const kill = () => {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
  };
  const until = Date.now() + 30_000;
  while (!output.includes("secrets-server is ready")) {
    if (child.exitCode !== null || Date.now() > until) {
      kill();
      throw new Error(`the server did not start: ${output.slice(-2000)}`);
    }
    await sleep(50);
  }
  return { url: `http://127.0.0.1:${port}`, child, output: () => output, exited, kill };
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** A browser-like session from the development sign-in: cookie and Origin on every request. */
export async function devSession(url: string, email: string) {
  const signIn = await fetch(`${url}/api/auth/dev/sign-in`, {
    method: "POST",
    headers: { "content-type": "application/json", origin: url },
    body: JSON.stringify({ email }),
  });
  if (signIn.status !== 200) throw new Error(`dev sign-in answered ${signIn.status}`);
  const cookie = signIn.headers
    .getSetCookie()
    .map((line) => line.split(";")[0])
    .join("; ");
  return async (method: string, requestPath: string, body?: unknown) => {
    const res = await fetch(url + requestPath, {
      method,
      headers: { cookie, origin: url, ...(body === undefined ? {} : { "content-type": "application/json" }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    let parsed: any = text;
    try {
      parsed = JSON.parse(text);
    } catch {
      // not JSON: kept as text
    }
    return { status: res.status, body: parsed, headers: res.headers };
  };
}
