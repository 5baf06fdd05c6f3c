// Drill: the disk under DATA_DIR fills up while the server runs, then space is freed.
// A real server process on a small tmpfs (root only); writes, reveals and exports must
// answer 503 with Retry-After (never 500), /healthz must say degraded, the condition is
// logged once a minute, nothing partial is written, and freeing space recovers the same
// process.
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import Database from "better-sqlite3";
import { devSession, sleep, startServerProcess } from "./faults.lib.ts";

export async function drill(options: {
  short: boolean;
  log: (line: string) => void;
}): Promise<{ ok: boolean; line: string; skipped?: string }> {
  if (process.getuid?.() !== 0) return { ok: true, line: "disk-full: skipped", skipped: "mounting a tmpfs needs root" };
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "drill-disk-full-"));
  try {
    execFileSync("mount", ["-t", "tmpfs", "-o", "size=4m,mode=0700", "tmpfs", dataDir], { stdio: "pipe" });
  } catch (error) {
    fs.rmSync(dataDir, { recursive: true, force: true });
    const reason = String((error as { stderr?: Buffer }).stderr ?? error).trim();
    return { ok: true, line: "disk-full: skipped", skipped: `cannot mount a tmpfs: ${reason}` };
  }
  let server: Awaited<ReturnType<typeof startServerProcess>> | undefined;
  try {
    server = await startServerProcess(dataDir);
    const api = await devSession(server.url, "drill@example.test");
    const project = await api("POST", "/api/projects", { name: "drill", environments: ["production"] });
    const base = `/api/projects/${project.body.project.id}/environments/production`;
    const created = await api("POST", `${base}/secrets`, { key: "KEPT_SETTING", value: "kept-before-the-disk-filled" });
    if (created.status !== 201) throw new Error(`setup: create answered ${created.status}`);
    const secretId = created.body.secret.id as string;

    // As on a server that has run a while: the WAL checkpointed and truncated, so the next
    // write has to grow a file.
    const sqlite = new Database(path.join(dataDir, "secrets.db"));
    sqlite.pragma("wal_checkpoint(TRUNCATE)");
    sqlite.close();
    const filler = fillDisk(dataDir);
    const logBefore = server.output().length;
    options.log(`disk-full: ${dataDir} filled (${Math.round(fs.statSync(filler).size / 1024)} KiB of filler)`);

    const rounds = options.short ? 10 : 100;
    const statuses = new Map<number, number>();
    let withoutRetryAfter = 0;
    let wrongMessage = 0;
    const started = Date.now();
    for (let round = 0; round < rounds; round++) {
      for (const [method, requestPath, body] of [
        ["POST", `${base}/secrets`, { key: `WRITTEN_${round}`, value: "written-while-full" }],
        ["PATCH", `${base}/secrets/${secretId}`, { value: "changed-while-full", expectedVersion: 1 }],
        ["GET", `${base}/secrets/${secretId}`, undefined],
        // Exports have a limit of their own per minute: the first rounds only.
        ...(round < 10 ? ([["GET", `${base}/export`, undefined]] as const) : []),
      ] as const) {
        const res = await api(method, requestPath, body);
        statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
        if (res.status === 503 && !res.headers.get("retry-after")) withoutRetryAfter++;
        if (res.status === 503 && !/disk is full/.test(res.body?.error ?? "")) wrongMessage++;
      }
    }
    const failingMs = Date.now() - started;
    const health = await api("GET", "/healthz");
    const conditionLines = server
      .output()
      .slice(logBefore)
      .split("\n")
      .filter((line) => line.includes('"storage":"full"')).length;
    const stackLines = server
      .output()
      .slice(logBefore)
      .split("\n")
      .filter((line) => line.includes('"stack"')).length;

    fs.rmSync(filler);
    const freedAt = Date.now();
    let recoveredMs = -1;
    while (Date.now() - freedAt < 15_000) {
      if ((await api("GET", "/healthz")).status === 200) {
        recoveredMs = Date.now() - freedAt;
        break;
      }
      await sleep(100);
    }
    const after = await api("POST", `${base}/secrets`, { key: "WRITTEN_AFTER", value: "written-after-space-freed" });
    const listed = await api("GET", `${base}/secrets`);
    const keys = (listed.body.secrets as { key: string; version: number }[]).map((s) => `${s.key}@${s.version}`).sort();
    const nothingPartial = keys.join(",") === "KEPT_SETTING@1,WRITTEN_AFTER@1";
    const alive = server.child.exitCode === null;

    const requests = [...statuses.values()].reduce((a, b) => a + b, 0);
    const answered503 = statuses.get(503) ?? 0;
    const ok =
      answered503 === requests &&
      withoutRetryAfter === 0 &&
      wrongMessage === 0 &&
      health.status === 503 &&
      conditionLines <= 1 &&
      stackLines === 0 &&
      recoveredMs >= 0 &&
      after.status === 201 &&
      nothingPartial &&
      alive;
    const counts = [...statuses].map(([status, n]) => `${n}×${status}`).join(" ");
    return {
      ok,
      line:
        `disk-full: ${requests} writes/reveals/exports on a full disk in ${failingMs} ms: ${counts}` +
        `${withoutRetryAfter ? ` (${withoutRetryAfter} without Retry-After)` : ""}${wrongMessage ? ` (${wrongMessage} with another message)` : ""}; ` +
        `healthz ${health.status}; ${conditionLines} log line(s) for the condition, ${stackLines} stack(s); ` +
        `recovered ${recoveredMs >= 0 ? `${recoveredMs} ms after space was freed` : "NOT within 15 s"} without a restart; ` +
        `write after: ${after.status}; ${nothingPartial ? "nothing partial written" : `secrets now ${keys.join(",")}`}`,
    };
  } finally {
    server?.kill();
    if (server) await server.exited;
    try {
      execFileSync("umount", ["-l", dataDir], { stdio: "pipe" });
    } finally {
      fs.rmSync(dataDir, { recursive: true, force: true });
    }
  }
}

/** Writes a file until the file system has no byte left. */
function fillDisk(dir: string): string {
  const filler = path.join(dir, "filler");
  const fd = fs.openSync(filler, "w");
  try {
    for (const size of [64 * 1024, 512]) {
      const chunk = Buffer.alloc(size, 1);
      try {
        for (;;) fs.writeSync(fd, chunk);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== "ENOSPC") throw error;
      }
    }
  } finally {
    fs.closeSync(fd);
  }
  return filler;
}
