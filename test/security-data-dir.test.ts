// Security review, item 5: the database files (every ciphertext, the wrapped keys, the
// audit log) are private to the server's user from the moment they exist, and files an
// older version or a careless restore left readable are tightened at start.
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { test } from "node:test";
import { makeTempDir, randomMasterKey, runMain, startServer } from "./helpers.ts";
import { createSecret } from "./secrets-helpers.ts";

const DB_FILES = ["secrets.db", "secrets.db-wal", "secrets.db-shm"];

function modeOf(file: string): number {
  return fs.statSync(file).mode & 0o777;
}

test("a new data folder's database, -wal and -shm are created 0600, with the umask of a plain shell", async (t) => {
  const previous = process.umask(0o022);
  t.after(() => process.umask(previous));
  // Without MASTER_KEY, development generates DATA_DIR/master.key: private as well.
  const server = await startServer(t, { env: { MASTER_KEY: undefined } });
  const alice = await server.signIn("alice@example.test");
  const project = await alice.createProject({ name: "api", environments: ["production"] });
  await createSecret(alice, project.id, "production", "DATABASE_URL", "data-dir-value-1");
  for (const name of [...DB_FILES, "master.key"]) {
    assert.equal(modeOf(path.join(server.dataDir, name)).toString(8), "600", name);
  }
  assert.equal(modeOf(server.dataDir).toString(8), "700");
});

test("files an older version left 0644 are tightened at start, and a folder others may enter is reported", async (t) => {
  const previous = process.umask(0o022);
  t.after(() => process.umask(previous));
  const dataDir = makeTempDir();
  t.after(() => fs.rmSync(dataDir, { recursive: true, force: true }));
  const masterKey = randomMasterKey();
  let server = await startServer(t, { dataDir, env: { MASTER_KEY: masterKey } });
  const alice = await server.signIn("alice@example.test");
  await alice.createProject({ name: "api", environments: ["production"] });
  await server.stop();
  fs.chmodSync(dataDir, 0o755);
  for (const name of DB_FILES) {
    const file = path.join(dataDir, name);
    if (fs.existsSync(file)) fs.chmodSync(file, 0o644);
  }
  fs.writeFileSync(path.join(dataDir, "secrets.db-wal"), "", { flag: "a" });
  fs.chmodSync(path.join(dataDir, "secrets.db-wal"), 0o644);

  server = await startServer(t, { dataDir, env: { MASTER_KEY: masterKey } });
  // The database and its WAL are there (made 0644 above); -shm may come and go with the connection.
  for (const name of ["secrets.db", "secrets.db-wal"]) assert.ok(fs.existsSync(path.join(dataDir, name)), name);
  for (const name of DB_FILES) {
    const file = path.join(dataDir, name);
    if (fs.existsSync(file)) assert.equal(modeOf(file).toString(8), "600", name);
  }
  const warning = server.logs
    .map((line) => JSON.parse(line) as { level: number; msg: string })
    .find((l) => l.msg.includes("can be entered by other users"));
  assert.ok(warning, "the folder's mode is reported");
  assert.equal(warning.level, 40);
  assert.equal(warning.msg, `DATA_DIR ${dataDir} can be entered by other users of this machine (mode 755): run chmod 700 on it.`);
  // The folder itself is the operator's to set: reported, not changed.
  assert.equal(modeOf(dataDir).toString(8), "755");
  // And the server works on the tightened files.
  const again = await server.signIn("alice@example.test");
  const list = await again.json("GET", "/api/projects");
  assert.equal(list.body.projects.length, 1);
});

test("server commands run with umask 077: migrate and a generated key file are private, the warning goes to stderr", async (t) => {
  const parent = makeTempDir();
  t.after(() => fs.rmSync(parent, { recursive: true, force: true }));
  const dataDir = path.join(parent, "data");
  const env = { NODE_ENV: "development", DATA_DIR: dataDir, MASTER_KEY: undefined };
  const migrated = await runMain(["migrate"], env);
  assert.equal(migrated.code, 0, migrated.stderr);
  assert.equal(modeOf(path.join(dataDir, "secrets.db")).toString(8), "600");
  assert.equal(modeOf(dataDir).toString(8), "700");

  fs.chmodSync(dataDir, 0o750);
  fs.chmodSync(path.join(dataDir, "secrets.db"), 0o640);
  const again = await runMain(["migrate"], env);
  assert.equal(again.code, 0, again.stderr);
  assert.equal(modeOf(path.join(dataDir, "secrets.db")).toString(8), "600");
  assert.match(
    again.stderr,
    /secrets-server: warning: DATA_DIR .* can be entered by other users of this machine \(mode 750\): run chmod 700 on it\./,
  );
});
