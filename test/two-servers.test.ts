// Two server processes on one store, requests alternating between them: on SQLite two
// processes on one DATA_DIR, and with TEST_DATABASE=postgres two servers on one PostgreSQL
// database (operations.md, "Several servers"). What must hold across them: one winner of a
// version conflict, all-or-nothing imports, one audit chain that `audit verify` accepts,
// and a CLI token refreshed through one server working on the other at once. Rate limits,
// syncs and the audit list order across processes are in test/several-processes.test.ts,
// which runs on both stores too.
import assert from "node:assert/strict";
import { type TestContext, test } from "node:test";
import {
  Client,
  databaseUrlOf,
  makeTempDir,
  randomMasterKey,
  runMain,
  type ServerProcess,
  startServerProcess,
  waitFor,
} from "./helpers.ts";
import { createSecret } from "./secrets-helpers.ts";
import { auditRows } from "./storage.ts";

interface Pair {
  a: ServerProcess;
  b: ServerProcess;
  /** One session, usable on either server. */
  onA: Client;
  onB: Client;
  env: Record<string, string>;
}

function clientOf(server: ServerProcess): Client {
  return new Client(server.url, `http://localhost:${new URL(server.url).port}`);
}

async function twoServers(t: TestContext): Promise<Pair> {
  // Removed when the test's process ends (makeTempDir), after the servers' leak scan.
  const dataDir = makeTempDir();
  const env: Record<string, string> = { DATA_DIR: dataDir, MASTER_KEY: randomMasterKey() };
  const a = await startServerProcess(t, env, { dataDir, timeoutMs: 60_000 });
  const b = await startServerProcess(t, env, { dataDir, timeoutMs: 60_000 });
  const url = databaseUrlOf.get(dataDir);
  if (url) env.DATABASE_URL = url;
  const onA = clientOf(a);
  const signedIn = await onA.json("POST", "/api/auth/dev/sign-in", { email: "owner@example.test" });
  assert.equal(signedIn.status, 200, JSON.stringify(signedIn.body));
  const onB = clientOf(b);
  onB.cookies = onA.cookies;
  return { a, b, onA, onB, env };
}

test("two servers, one store: concurrent PATCHes of one version have one winner; concurrent imports are each all or nothing", async (t) => {
  const { onA, onB } = await twoServers(t);
  const project = await onA.createProject({ name: "api", environments: ["development"] });
  const base = `/api/projects/${project.id}/environments/development/secrets`;
  const secret = await createSecret(onB, project.id, "development", "DB_PASSWORD", "first-value");

  for (let round = 0; round < 3; round++) {
    const current = await onA.json("GET", `${base}/${secret.id}`);
    const version = current.body.secret.version as number;
    const attempts = await Promise.all(
      Array.from({ length: 8 }, (_, i) =>
        (i % 2 === 0 ? onA : onB).json("PATCH", `${base}/${secret.id}`, { value: `round-${round}-writer-${i}`, expectedVersion: version }),
      ),
    );
    const statuses = attempts.map((r) => r.status).sort();
    assert.deepEqual(statuses, [200, 409, 409, 409, 409, 409, 409, 409], JSON.stringify(attempts.map((r) => r.body)));
    for (const lost of attempts.filter((r) => r.status === 409)) {
      assert.equal(lost.body.error, "This secret was changed by someone else. Reload and try again.");
    }
    const winner = attempts.findIndex((r) => r.status === 200);
    const after = await onB.json("GET", `${base}/${secret.id}`);
    assert.equal(after.body.secret.version, version + 1);
    assert.equal(after.body.secret.value, `round-${round}-writer-${winner}`, "the value of the one write that won");
  }

  // Two imports of overlapping keys at once, one through each server: both complete, and
  // every key holds one import's value, never a mix within one import's view of a key.
  const entries = (tag: string) => Array.from({ length: 60 }, (_, i) => ({ key: `IMPORTED_${i}`, value: `${tag}-${i}`, overwrite: true }));
  const [first, second] = await Promise.all([
    onA.json("POST", `/api/projects/${project.id}/environments/development/import`, { entries: entries("from-a") }),
    onB.json("POST", `/api/projects/${project.id}/environments/development/import`, { entries: entries("from-b") }),
  ]);
  assert.equal(first.status, 200, JSON.stringify(first.body));
  assert.equal(second.status, 200, JSON.stringify(second.body));
  const summaries = [first.body.summary, second.body.summary].sort((x, y) => y.created - x.created);
  // The import that ran first created all 60; the second found them and updated all 60.
  assert.deepEqual(summaries, [
    { created: 60, updated: 0, unchanged: 0, skipped: 0, failed: 0 },
    { created: 0, updated: 60, unchanged: 0, skipped: 0, failed: 0 },
  ]);
  const exported = await onA.json("GET", `/api/projects/${project.id}/environments/development/export`);
  assert.equal(exported.status, 200);
  const imported = (exported.body.secrets as { key: string; value: string }[]).filter((s) => s.key.startsWith("IMPORTED_"));
  assert.equal(imported.length, 60);
  const tags = new Set(imported.map((s) => s.value.split("-").slice(0, 2).join("-")));
  assert.equal(tags.size, 1, `one import's values win for every key, not a mix: ${[...tags].join(", ")}`);
});

test("two servers, one store: reveals and writes through both keep one audit chain, which audit verify accepts", async (t) => {
  const { onA, onB, env } = await twoServers(t);
  const project = await onA.createProject({ name: "api", environments: ["development"] });
  const ids = await Promise.all(
    Array.from(
      { length: 4 },
      async (_, i) => (await createSecret(i % 2 === 0 ? onA : onB, project.id, "development", `KEY_${i}`, `value-${i}`)).id as string,
    ),
  );
  const work: Promise<{ status: number }>[] = [];
  for (let round = 0; round < 6; round++) {
    for (const [i, id] of ids.entries()) {
      work.push(
        (i + round) % 2 === 0
          ? onA.json("GET", `/api/projects/${project.id}/environments/development/secrets/${id}`)
          : onB.json("GET", `/api/projects/${project.id}/environments/development/secrets/${id}`),
      );
    }
    work.push(
      createSecret(round % 2 === 0 ? onB : onA, project.id, "development", `MORE_${round}`, `more-${round}`).then(() => ({ status: 200 })),
    );
  }
  assert.deepEqual(
    (await Promise.all(work)).map((r) => r.status),
    work.map(() => 200),
  );
  const verified = await runMain(["audit", "verify"], env, { timeoutMs: 60_000 });
  assert.equal(verified.code, 0, verified.stderr + verified.stdout);
  // Every stored event verified, and none of the project's went missing: its creation, 10
  // secrets created, 24 values revealed.
  const events = Number(/Audit log intact: (\d+) events? verified/.exec(verified.stdout)?.[1]);
  assert.equal(events, auditRows(env.DATA_DIR!).length, verified.stdout);
  assert.equal(auditRows(env.DATA_DIR!, { project_id: project.id }).length, 35);
});

test("two servers, one store: a CLI login approved through one, refreshed through the other, works on both at once; the old refresh token is dead on both", async (t) => {
  const { a, b, onA } = await twoServers(t);
  const device = await clientOf(a).json("POST", "/api/cli/auth/device", { deviceName: "laptop" });
  assert.equal(device.status, 200);
  // The polling interval is kept in the store: a poll on one server, then at once on the
  // other, is polling too fast.
  const firstPoll = await clientOf(a).json("POST", "/api/cli/auth/token", { deviceCode: device.body.deviceCode });
  assert.deepEqual([firstPoll.status, firstPoll.body], [202, { status: "pending" }]);
  const tooFast = await clientOf(b).json("POST", "/api/cli/auth/token", { deviceCode: device.body.deviceCode });
  assert.equal(tooFast.status, 429, JSON.stringify(tooFast.body));
  assert.match(tooFast.body.error, /^Polling too fast\./);
  const approved = await onA.json("POST", "/api/cli/auth/approve", { userCode: device.body.userCode });
  assert.equal(approved.status, 200, JSON.stringify(approved.body));
  // Polled on the other server: the approval is visible there at once.
  // A too-early poll does not restart the wait: polling until the interval has passed is fine.
  const tokens = await waitFor("the tokens once the polling interval has passed", async () => {
    const poll = await clientOf(b).json("POST", "/api/cli/auth/token", { deviceCode: device.body.deviceCode });
    if (poll.status === 429) return undefined;
    return poll;
  });
  assert.equal(tokens.status, 200, JSON.stringify(tokens.body));
  const refreshed = await clientOf(a).json("POST", "/api/cli/auth/refresh", { refreshToken: tokens.body.refreshToken });
  assert.equal(refreshed.status, 200, JSON.stringify(refreshed.body));
  for (const server of [a, b]) {
    const client = clientOf(server);
    client.bearer = refreshed.body.accessToken;
    const projects = await client.json("GET", "/api/projects");
    assert.equal(projects.status, 200, `the new access token works on ${server.url}`);
  }
  for (const server of [a, b]) {
    const reused = await clientOf(server).json("POST", "/api/cli/auth/refresh", { refreshToken: tokens.body.refreshToken });
    assert.equal(reused.status, 401, `the rotated refresh token is refused on ${server.url}`);
  }
});
