// Drill: the server is stopped (SIGTERM) again and again while keep-alive clients keep
// sending requests. Every request must get an answer (200, or 503 with Retry-After and
// Connection: close once the stop began): no connection reset, ever, and exit code 0
// within the drain period.
import fs from "node:fs";
import http from "node:http";
import os from "node:os";
import path from "node:path";
import { sleep, startServerProcess } from "./faults.lib.ts";

const CLIENTS = 8;
const DRAIN_SECONDS = 10;

export async function drill(options: {
  short: boolean;
  log: (line: string) => void;
}): Promise<{ ok: boolean; line: string; skipped?: string }> {
  const stops = options.short ? 2 : 10;
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "drill-graceful-stop-"));
  const masterKey = (await import("node:crypto")).randomBytes(32).toString("base64");
  const totals = { requests: 0, ok200: 0, refused503: 0, resets: 0, otherErrors: 0, badAnswers: 0, nonZeroExits: 0, slowExits: 0 };
  const stopTimesMs: number[] = [];
  try {
    for (let stop = 1; stop <= stops; stop++) {
      const server = await startServerProcess(dataDir, { MASTER_KEY: masterKey, SHUTDOWN_DRAIN_SECONDS: String(DRAIN_SECONDS) });
      const agent = new http.Agent({ keepAlive: true, maxSockets: CLIENTS });
      let signalled = false;
      const errors: string[] = [];
      const get = () =>
        new Promise<{ status: number; connection?: string; retryAfter?: string }>((resolve, reject) => {
          const req = http.get(`${server.url}/healthz`, { agent }, (res) => {
            res.resume();
            res.on("end", () =>
              resolve({
                status: res.statusCode!,
                connection: res.headers.connection,
                retryAfter: res.headers["retry-after"] as string | undefined,
              }),
            );
          });
          req.on("error", reject);
        });
      const clients = Array.from({ length: CLIENTS }, async () => {
        for (;;) {
          totals.requests++;
          try {
            const answer = await get();
            if (answer.status === 200) totals.ok200++;
            else if (answer.status === 503 && answer.retryAfter && answer.connection === "close" && signalled) {
              totals.refused503++;
              // A well-behaved client now waits Retry-After; the drill's client is done.
              return;
            } else {
              totals.badAnswers++;
              errors.push(`answer ${answer.status} connection=${answer.connection} retry-after=${answer.retryAfter}`);
              return;
            }
          } catch (error) {
            const code = (error as NodeJS.ErrnoException).code ?? String(error);
            if (code === "ECONNRESET" || code === "EPIPE") totals.resets++;
            else totals.otherErrors++;
            errors.push(code);
            return;
          }
        }
      });
      try {
        await sleep(options.short ? 300 : 500 + Math.floor(Math.random() * 500));
        const signalledAt = Date.now();
        signalled = true;
        server.child.kill("SIGTERM");
        await Promise.all(clients);
        const exit = await Promise.race([server.exited, sleep((DRAIN_SECONDS + 5) * 1000).then(() => undefined)]);
        const tookMs = (exit?.atMs ?? Date.now()) - signalledAt;
        stopTimesMs.push(tookMs);
        if (exit?.code !== 0) totals.nonZeroExits++;
        if (tookMs > DRAIN_SECONDS * 1000 + 2_000) totals.slowExits++;
        options.log(
          `graceful-stop: stop ${stop}/${stops}: exit ${exit ? (exit.code ?? exit.signal) : "none"} after ${tookMs} ms${errors.length ? `; ${errors.join(", ")}` : ""}`,
        );
      } finally {
        agent.destroy();
        server.kill();
        await server.exited;
      }
    }
  } finally {
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
  const ok =
    totals.resets === 0 && totals.otherErrors === 0 && totals.badAnswers === 0 && totals.nonZeroExits === 0 && totals.slowExits === 0;
  const slowest = Math.max(...stopTimesMs);
  return {
    ok,
    line:
      `graceful-stop: ${stops} stops under ${CLIENTS} keep-alive clients: ${totals.requests} requests, ${totals.ok200}×200, ` +
      `${totals.refused503}×503 with Retry-After and Connection: close, ${totals.resets} resets, ${totals.otherErrors} other errors, ` +
      `${totals.badAnswers} wrong answers; exit 0 in ${stops - totals.nonZeroExits}/${stops}, slowest stop ${slowest} ms (drain bound ${DRAIN_SECONDS} s)`,
  };
}
