// The reference of the secrets bench: a bare Fastify route that reads one SQLite row,
// decrypts it with AES-256-GCM and inserts one audit row, on the same SQLite settings as
// the real server (WAL, the same `synchronous`). No sessions, access checks or logging.
// Usage: reference-server.ts <port> <dataDir> <full|normal>
import crypto from "node:crypto";
import path from "node:path";
import Database from "better-sqlite3";
import Fastify from "fastify";

const [portText, dataDir, synchronous] = process.argv.slice(2);
const sqlite = new Database(path.join(dataDir!, "reference.db"));
sqlite.pragma("journal_mode = WAL");
sqlite.pragma(`synchronous = ${synchronous === "normal" ? "NORMAL" : "FULL"}`);
sqlite.exec(`
  CREATE TABLE IF NOT EXISTS secrets (id TEXT PRIMARY KEY, key TEXT NOT NULL, ciphertext BLOB NOT NULL);
  CREATE TABLE IF NOT EXISTS audit (seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL, at TEXT NOT NULL,
    action TEXT NOT NULL, target_id TEXT NOT NULL, metadata TEXT NOT NULL);
`);

const key = crypto.randomBytes(32);
const id = crypto.randomUUID();
const aad = Buffer.from(`secret-value|${id}|1`);
const nonce = crypto.randomBytes(12);
const cipher = crypto.createCipheriv("aes-256-gcm", key, nonce);
cipher.setAAD(aad);
const body = Buffer.concat([cipher.update("postgres://user:password@db.internal:5432/app", "utf8"), cipher.final()]);
sqlite
  .prepare("INSERT INTO secrets (id, key, ciphertext) VALUES (?, ?, ?)")
  .run(id, "DATABASE_URL", Buffer.concat([nonce, body, cipher.getAuthTag()]));

const select = sqlite.prepare("SELECT key, ciphertext FROM secrets WHERE id = ?");
const insertAudit = sqlite.prepare("INSERT INTO audit (id, at, action, target_id, metadata) VALUES (?, ?, ?, ?, ?)");

const app = Fastify();
app.get("/healthz", async () => ({ ok: true }));
app.get("/reference/secret", async () => {
  const row = select.get(id) as { key: string; ciphertext: Buffer };
  const sealed = row.ciphertext;
  const decipher = crypto.createDecipheriv("aes-256-gcm", key, sealed.subarray(0, 12));
  decipher.setAAD(aad);
  decipher.setAuthTag(sealed.subarray(sealed.length - 16));
  const value = Buffer.concat([decipher.update(sealed.subarray(12, sealed.length - 16)), decipher.final()]).toString("utf8");
  insertAudit.run(crypto.randomUUID(), new Date().toISOString(), "secret.revealed", id, JSON.stringify({ key: row.key }));
  return { secret: { id, key: row.key, value } };
});

process.on("SIGTERM", () => {
  void app.close().then(() => process.exit(0));
});
await app.listen({ host: "127.0.0.1", port: Number(portText) });
