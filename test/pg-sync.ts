// Synchronous statements on a PostgreSQL test database, for test/storage.ts, whose functions
// are synchronous (as better-sqlite3 is): a worker thread holds a pg connection per
// database, and the test's thread waits on a shared flag (Atomics.wait) until the worker
// has answered. Only for the tests' few direct reads and tamperings; never on a hot path.
import { createRequire } from "node:module";
import { MessageChannel, receiveMessageOnPort, Worker } from "node:worker_threads";

export interface SyncResult {
  rows: Record<string, unknown>[];
  changes: number;
}

const WORKER = `
const { workerData } = require("node:worker_threads");
const pg = require(workerData.pg);
const clients = new Map();
const types = { getTypeParser: (oid, format) => (oid === 20 && format !== "binary" ? Number : pg.types.getTypeParser(oid, format)) };
workerData.port.on("message", async ({ url, sql, params, flag }) => {
  const signal = new Int32Array(flag);
  let answer;
  try {
    let client = clients.get(url);
    if (!client) {
      client = new pg.Client({ connectionString: url, types });
      client.on("error", () => clients.delete(url));
      await client.connect();
      clients.set(url, client);
    }
    const result = await client.query(sql, params.map((p) => (p instanceof Uint8Array ? Buffer.from(p) : p)));
    answer = { rows: result.rows ?? [], changes: result.rowCount ?? 0 };
  } catch (error) {
    answer = { error: String(error && error.message || error) };
  }
  workerData.port.postMessage(answer);
  Atomics.store(signal, 0, 1);
  Atomics.notify(signal, 0);
});
`;

let worker: { worker: Worker; port: MessageChannel["port1"] } | undefined;

function ensureWorker(): { worker: Worker; port: MessageChannel["port1"] } {
  if (worker) return worker;
  const channel = new MessageChannel();
  const thread = new Worker(WORKER, {
    eval: true,
    workerData: { pg: createRequire(import.meta.url).resolve("pg"), port: channel.port2 },
    transferList: [channel.port2],
  });
  // Never keeps a finished test file's process alive.
  thread.unref();
  channel.port1.unref();
  worker = { worker: thread, port: channel.port1 };
  return worker;
}

/** Runs one statement (`?` placeholders, as SQLite's) on the database at `url` and waits for it. */
export function queryPostgresSync(url: string, sql: string, params: unknown[] = []): SyncResult {
  const { port } = ensureWorker();
  let n = 0;
  const text = sql.replace(/\?/g, () => `$${++n}`);
  const flag = new SharedArrayBuffer(4);
  port.postMessage({ url, sql: text, params, flag });
  const waited = Atomics.wait(new Int32Array(flag), 0, 0, 30_000);
  if (waited === "timed-out") throw new Error(`PostgreSQL did not answer within 30 s: ${sql}`);
  const message = receiveMessageOnPort(port)?.message as (SyncResult & { error?: string }) | undefined;
  if (!message) throw new Error("the PostgreSQL worker answered nothing");
  if (message.error !== undefined) throw new Error(`${message.error} (in: ${sql})`);
  // Rows as better-sqlite3 gives them, so a test reads the same on both stores: a bytea
  // (a Uint8Array once across the thread boundary) as a Buffer, a boolean as 0 or 1.
  for (const row of message.rows) {
    for (const [name, value] of Object.entries(row)) {
      if (value instanceof Uint8Array) row[name] = Buffer.from(value);
      else if (typeof value === "boolean") row[name] = value ? 1 : 0;
    }
  }
  return message;
}
