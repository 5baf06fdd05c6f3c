// The README's first command, `npm ci && npm start`: package.json's start script runs the
// server from source on Node itself, on its embedded defaults (development mode, SQLite in
// DATA_DIR). Run through npm, as a newcomer runs it.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { test } from "node:test";
import { DATABASE_FILE } from "../src/core/db.ts";
import { makeTempDir, ROOT } from "./helpers.ts";

test("npm start serves /healthz and the web UI on a fresh DATA_DIR, on SQLite", async (t) => {
  const dataDir = makeTempDir();
  t.after(() => fs.rmSync(dataDir, { recursive: true, force: true }));
  // A process group of its own: npm runs the server as its child, and both must go.
  const child = spawn("npm", ["start"], {
    cwd: ROOT,
    env: { PATH: process.env.PATH, HOME: process.env.HOME, DATA_DIR: dataDir, PORT: "0" },
    stdio: ["ignore", "pipe", "pipe"],
    detached: true,
  });
  const stopAll = (signal: NodeJS.Signals) => {
    try {
      process.kill(-child.pid!, signal);
    } catch {}
  };
  t.after(() => stopAll("SIGKILL"));
  let output = "";
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`npm start was not ready within 60 s:\n${output}`)), 60_000);
    child.stdout!.on("data", (chunk: Buffer) => {
      output += chunk;
      const ready = output.split("\n").find((line) => line.includes("secrets-server is ready"));
      if (!ready) return;
      clearTimeout(timer);
      resolve(`http://127.0.0.1:${new URL((JSON.parse(ready) as { url: string }).url).port}`);
    });
    child.stderr!.on("data", (chunk: Buffer) => (output += chunk));
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`npm start exited (${code}) before it was ready:\n${output}`));
    });
  });

  const health = await fetch(`${url}/healthz`);
  assert.equal(health.status, 200);
  assert.deepEqual(await health.json(), { ok: true });
  const page = await fetch(`${url}/`);
  assert.equal(page.status, 200);
  assert.match(page.headers.get("content-type") ?? "", /^text\/html/);
  assert.match(await page.text(), /<html/i);
  assert.ok(fs.existsSync(path.join(dataDir, DATABASE_FILE)), "the SQLite file is in DATA_DIR");

  const exited = new Promise<void>((resolve) => child.once("close", () => resolve()));
  stopAll("SIGTERM");
  await exited;
});
