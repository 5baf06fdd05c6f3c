// Two server processes on one SQLite DATA_DIR (README, "Several server processes on one data
// folder"): rate limits count once for both, a starting server leaves the other's running
// sync alone, automatic syncs run on one process, a killed process's sync is taken over,
// and the audit list follows the chain whoever wrote it. Real `serve` processes on port 0
// and the fake Vercel API.
import assert from "node:assert/strict";
import crypto from "node:crypto";
import { type TestContext, test } from "node:test";
import { type FakeVercel, isEnvCreate, isEnvList, startFakeVercel } from "./fake-vercel.ts";
import { Client, makeTempDir, randomMasterKey, type ServerProcess, startServerProcess, waitFor } from "./helpers.ts";
import { createSecret } from "./secrets-helpers.ts";
import { auditRows, storedRows, writeLockIsFree } from "./storage.ts";

/** `serve` on PORT=0 on the test's data folder; its APP_URL follows the port it got. */
function startProcess(t: TestContext, s: Setup): Promise<ServerProcess> {
  // Starting from source takes seconds on a busy machine.
  return startServerProcess(t, s.env, { dataDir: s.dataDir, timeoutMs: 60_000 });
}

/** A browser's client of one process: its APP_URL (the Origin it checks) follows its port. */
function clientOf(server: ServerProcess): Client {
  return new Client(server.url, `http://localhost:${new URL(server.url).port}`);
}

/** One person with one session, able to send each request to either process. */
function clientsFor(a: ServerProcess, b: ServerProcess): [Client, Client] {
  const onA = clientOf(a);
  return [onA, sameSession(onA, b)];
}

/** The same session (cookie jar), sent to another process. */
function sameSession(client: Client, server: ServerProcess): Client {
  const other = clientOf(server);
  other.cookies = client.cookies;
  return other;
}

/**
 * SIGSTOP, at a moment the process holds no write transaction: on SQLite a process stopped
 * inside one blocks every writer until it wakes (no server can end its turn), which is
 * SQLite's nature, not what these tests are about.
 */
async function stopOutsideAWrite(server: ServerProcess, dataDir: string): Promise<void> {
  for (;;) {
    server.child.kill("SIGSTOP");
    if (writeLockIsFree(dataDir)) return;
    server.child.kill("SIGCONT");
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

interface Setup {
  dataDir: string;
  env: Record<string, string>;
  fake: FakeVercel;
}

async function setup(t: TestContext, env: Record<string, string> = {}): Promise<Setup> {
  // Removed when the test's process ends (makeTempDir), after the servers' leak scan.
  const dataDir = makeTempDir();
  const fake = await startFakeVercel();
  t.after(() => fake.stop());
  return {
    dataDir,
    fake,
    env: { DATA_DIR: dataDir, MASTER_KEY: randomMasterKey(), VERCEL_API_URL: fake.url, VERCEL_RETRY_BASE_MS: "5", ...env },
  };
}

/**
 * Process A, signed in, with a linked project; then process B with the same session. A
 * starts first, so A holds the scheduler lease.
 */
async function twoProcessesLinked(t: TestContext, s: Setup) {
  const a = await startProcess(t, s);
  const onA = clientOf(a);
  await onA.json("POST", "/api/auth/dev/sign-in", { email: "owner@example.test" });
  const linked = await linkedProject(s, onA);
  const b = await startProcess(t, s);
  return { a, b, onA, onB: sameSession(onA, b), ...linked };
}

/** A project linked to the fake's prj_web, development → development; returns its integration path and Vercel token. */
async function linkedProject(s: Setup, owner: Client): Promise<{ projectId: string; base: string; token: string }> {
  const project = await owner.createProject({ name: "api", environments: ["development"] });
  const base = `/api/projects/${project.id}/integrations/hosting`;
  const token = `vcp_${crypto.randomBytes(18).toString("hex")}`;
  s.fake.addToken(token);
  s.fake.addProject("prj_web", "web");
  assert.equal((await owner.json("POST", base, { token })).status, 201);
  const put = await owner.json("PUT", base, { hostProjectId: "prj_web", mappings: { development: "development" } });
  assert.equal(put.status, 200, JSON.stringify(put.body));
  return { projectId: project.id, base, token };
}

async function integrationEvents(client: Client, projectId: string): Promise<{ action: string; metadata: Record<string, unknown> }[]> {
  const res = await client.json("GET", `/api/projects/${projectId}/audit?category=integrations&limit=100`);
  assert.equal(res.status, 200, JSON.stringify(res.body));
  return (res.body.events as { action: string; metadata: Record<string, unknown> }[]).reverse();
}

test("a rate limit counts once for both processes: device starts alternate between them and the 11th of the minute is refused", async (t) => {
  const s = await setup(t);
  const a = await startProcess(t, s);
  const b = await startProcess(t, s);
  const statuses: number[] = [];
  for (let i = 0; i < 12; i++) {
    const server = i % 2 === 0 ? a : b;
    statuses.push((await clientOf(server).request("POST", "/api/cli/auth/device", {})).status);
  }
  assert.deepEqual(statuses, [...Array(10).fill(200), 429, 429]);
});

test("a server that starts leaves a sync running on another alone", async (t) => {
  const s = await setup(t, { SYNC_DEBOUNCE_MS: "600000" });
  const a = await startProcess(t, s);
  const owner = clientOf(a);
  await owner.json("POST", "/api/auth/dev/sign-in", { email: "owner@example.test" });
  const { projectId, base } = await linkedProject(s, owner);
  await createSecret(owner, projectId, "development", "RUNNING_KEY", "running-value");

  const held = s.fake.hold(isEnvList);
  const run = owner.json("POST", `${base}/sync`);
  await held.reached;
  const b = await startProcess(t, s);
  const onB = sameSession(owner, b);
  const during = (await onB.json("GET", base)).body;
  assert.equal(during.syncing, true, "B's start did not end A's sync");
  assert.equal(during.lastRun.status, "running");
  held.release();

  const done = await run;
  assert.equal(done.status, 200, JSON.stringify(done.body));
  assert.equal(done.body.summary.created, 1);
  const view = (await onB.json("GET", base)).body;
  assert.deepEqual([view.syncing, view.lastSyncStatus, view.lastError], [false, "ok", null]);
  assert.deepEqual(
    (await integrationEvents(onB, projectId)).map((e) => e.action).filter((action) => action.startsWith("integration.sync")),
    ["integration.synced"],
  );
  assert.equal(s.fake.envFor("prj_web", "RUNNING_KEY", "development")!.value, "running-value");
});

test("automatic syncs run on one process: changes made through both are sent by one run", async (t) => {
  const s = await setup(t, { SYNC_DEBOUNCE_MS: "5000", SYNC_LEASE_SECONDS: "2" });
  const { onA, onB, projectId, base } = await twoProcessesLinked(t, s);

  // Well within the debounce, which each change seen by the leader restarts.
  for (let i = 0; i < 6; i++)
    await createSecret(i % 2 === 0 ? onA : onB, projectId, "development", `KEY_${i}`, `value-from-${i % 2 === 0 ? "a" : "b"}-${i}`);
  const settled = await waitFor("the automatic sync", async () => {
    const view = (await onB.json("GET", base)).body;
    return !view.syncing && view.pending === 0 && view.lastRun?.status === "ok" ? view : undefined;
  });
  assert.equal(settled.lastRun.trigger, "automatic");
  assert.equal(settled.lastRun.created, 6);
  assert.equal(s.fake.requests.filter(isEnvList).length, 1, "one run listed the vars once");
  for (let i = 0; i < 6; i++)
    assert.equal(s.fake.envFor("prj_web", `KEY_${i}`, "development")!.value, `value-from-${i % 2 === 0 ? "a" : "b"}-${i}`);
  assert.deepEqual(
    (await integrationEvents(onA, projectId)).filter((e) => e.action === "integration.synced").map((e) => e.metadata.trigger),
    ["automatic"],
  );
});

test("a change made through a process that dies at once is still synced: the automatic syncs do not live in that process", async (t) => {
  const s = await setup(t, { SYNC_DEBOUNCE_MS: "300", SYNC_LEASE_SECONDS: "2" });
  const { b, onA, onB, projectId, base } = await twoProcessesLinked(t, s);

  await createSecret(onB, projectId, "development", "FROM_B", "sent-by-the-leader");
  b.child.kill("SIGKILL");
  await b.exited;
  const view = await waitFor("the automatic sync", async () => {
    const current = (await onA.json("GET", base)).body;
    return current.pending === 0 && current.lastRun?.status === "ok" ? current : undefined;
  });
  assert.equal(view.lastRun.created, 1);
  assert.equal(s.fake.envFor("prj_web", "FROM_B", "development")!.value, "sent-by-the-leader");
});

test("a killed process's sync is taken over: marked interrupted once its lease is stale, then run again by the other process", async (t) => {
  const s = await setup(t, { SYNC_DEBOUNCE_MS: "300", SYNC_LEASE_SECONDS: "2" });
  const { a, onA, onB, projectId, base } = await twoProcessesLinked(t, s);

  const held = s.fake.hold(isEnvList);
  await createSecret(onA, projectId, "development", "TAKEN_OVER", "taken-over-value");
  await held.reached;
  a.child.kill("SIGKILL");
  await a.exited;
  // Vercel answers the dead process's request; nothing reached Vercel through it.
  held.release();

  const view = await waitFor("the sync to be taken over", async () => {
    const current = (await onB.json("GET", base)).body;
    return current.pending === 0 && current.lastRun?.status === "ok" ? current : undefined;
  });
  assert.deepEqual([view.syncing, view.lastRun.trigger, view.lastRun.created], [false, "automatic", 1]);
  assert.equal(s.fake.envFor("prj_web", "TAKEN_OVER", "development")!.value, "taken-over-value");
  const events = (await integrationEvents(onB, projectId)).filter((e) => e.action.startsWith("integration.sync"));
  assert.deepEqual(
    events.map((e) => [e.action, e.metadata.error ?? null]),
    [
      ["integration.sync_failed", "The server stopped while a sync was running. Run the sync again."],
      ["integration.synced", null],
    ],
  );
});

test("a process that stalls past its lease stops its sync when it wakes: only the process that took over writes at Vercel", async (t) => {
  const s = await setup(t, { SYNC_DEBOUNCE_MS: "300", SYNC_LEASE_SECONDS: "2" });
  const { a, onA, onB, projectId, base } = await twoProcessesLinked(t, s);

  const held = s.fake.hold(isEnvList);
  await createSecret(onA, projectId, "development", "STALLED", "stalled-value");
  await held.reached;
  await stopOutsideAWrite(a, s.dataDir);
  try {
    // Vercel's answer to the stalled process waits in its socket.
    held.release();
    await waitFor("the sync to be taken over", async () => {
      const current = (await onB.json("GET", base)).body;
      return current.pending === 0 && current.lastRun?.status === "ok" ? current : undefined;
    });
  } finally {
    a.child.kill("SIGCONT");
  }
  await waitFor("the stalled process to stop its sync", async () => a.output().includes("stopped a Vercel sync"));

  assert.equal(s.fake.requests.filter(isEnvCreate).length, 1, "the stalled process created nothing");
  assert.equal(s.fake.envFor("prj_web", "STALLED", "development")!.value, "stalled-value");
  const events = (await integrationEvents(onA, projectId)).filter((e) => e.action.startsWith("integration.sync"));
  assert.deepEqual(
    events.map((e) => e.action),
    ["integration.sync_failed", "integration.synced"],
  );
  // The process that stalled serves again, and sees the run that replaced its own.
  const view = (await onA.json("GET", base)).body;
  assert.deepEqual([view.syncing, view.lastRun.status, view.lastRun.created], [false, "ok", 1]);
});

test("changes that waited for a reconnect go out when it is made through the process that does not run the automatic syncs", async (t) => {
  const s = await setup(t, { SYNC_DEBOUNCE_MS: "300", SYNC_LEASE_SECONDS: "2" });
  const { onA, onB, projectId, base, token } = await twoProcessesLinked(t, s);

  // A (the leader) runs the change's sync with a token Vercel no longer takes: attention.
  s.fake.revokeToken(token);
  await createSecret(onA, projectId, "development", "WAITED", "waited-value");
  await waitFor("the connection to need attention", async () => {
    const view = (await onB.json("GET", base)).body;
    return view.status === "attention" && !view.syncing && view.pending === 1 ? view : undefined;
  });

  // Reconnected through B, which only counts changes: A's tick must see the new token.
  const fresh = `vcp_${crypto.randomBytes(18).toString("hex")}`;
  s.fake.addToken(fresh);
  const reconnected = await onB.json("POST", base, { token: fresh });
  assert.equal(reconnected.status, 201, JSON.stringify(reconnected.body));
  assert.equal(reconnected.body.status, "active");
  const view = await waitFor("the waiting change to go out", async () => {
    const current = (await onB.json("GET", base)).body;
    return current.pending === 0 && current.lastRun?.status === "ok" ? current : undefined;
  });
  assert.equal(view.lastRun.trigger, "automatic");
  assert.equal(s.fake.envFor("prj_web", "WAITED", "development")!.value, "waited-value");
});

/**
 * Process A, the leader, syncs GOING; its next run creates MADE at Vercel and is then held
 * on the delete of GOING, before its last commit. The debounce is long enough for both
 * changes to be one run on a slow machine: created in a run of its own, MADE would be
 * recorded by that run's last commit, and the tests below would prove nothing.
 */
async function runHeldAfterItsCreate(t: TestContext) {
  const s = await setup(t, { SYNC_DEBOUNCE_MS: "1500", SYNC_LEASE_SECONDS: "2" });
  const linked = await twoProcessesLinked(t, s);
  const { onA, projectId, base } = linked;
  const secrets = `/api/projects/${projectId}/environments/development/secrets`;
  const gone = await createSecret(onA, projectId, "development", "GOING", "going-value");
  await waitFor("the first sync", async () => s.fake.envFor("prj_web", "GOING", "development"));
  await waitFor("it to settle", async () => {
    const current = (await onA.json("GET", base)).body;
    return current.pending === 0 && !current.syncing;
  });
  const held = s.fake.hold((r) => r.method === "DELETE");
  const made = await createSecret(onA, projectId, "development", "MADE", "made-value");
  assert.equal((await onA.json("DELETE", `${secrets}/${gone.id}`)).status, 200);
  await held.reached;
  const madeVar = s.fake.envFor("prj_web", "MADE", "development")!;
  assert.equal(madeVar.value, "made-value");
  /**
   * Lets A's held request go on, and waits for B to finish the run A left: MADE holds the
   * value A claimed before it asked Vercel, so B records it as ours.
   */
  async function takenOverByB(): Promise<void> {
    held.release();
    await waitFor("the sync to be taken over", async () => {
      const current = (await linked.onB.json("GET", base)).body;
      return current.pending === 0 && current.lastRun?.status === "ok" && !current.syncing ? current : undefined;
    });
    assert.deepEqual(
      storedRows(s.dataDir, "integration_vars", { project_id: projectId, key: "MADE" }).map((r) => r.host_env_id),
      [madeVar.id],
    );
  }
  return { s, ...linked, secrets, made, madeId: madeVar.id, takenOverByB };
}

test("a process that stalls past its lease after Vercel created a var still records that var as ours: it goes when its secret goes", async (t) => {
  // A's run creates MADE, then stalls on the delete of GOING.
  const { s, a, onB, projectId, secrets, made, madeId, takenOverByB } = await runHeldAfterItsCreate(t);
  await stopOutsideAWrite(a, s.dataDir);
  try {
    // B runs the sync A left, and takes MADE as ours by A's claim.
    await takenOverByB();
  } finally {
    a.child.kill("SIGCONT");
  }
  // A wakes to find its run taken over, and records the var it made all the same.
  await waitFor("the stalled process to record the var it made", async () =>
    storedRows(s.dataDir, "integration_vars", { project_id: projectId, key: "MADE" }).some((r) => r.host_env_id === madeId),
  );

  // MADE was created by this connection: deleting its secret deletes it at Vercel.
  assert.equal((await onB.json("DELETE", `${secrets}/${made.id}`)).status, 200);
  await waitFor(
    "the var this connection made to go with its secret",
    async () => s.fake.envFor("prj_web", "MADE", "development") === undefined,
  );
});

test("a process killed after Vercel created a var, before its run's last commit: the var is still known as ours and goes when its secret goes", async (t) => {
  // A's run creates MADE, then dies on the delete of GOING: its last commit never comes.
  const { s, a, onB, secrets, made, takenOverByB } = await runHeldAfterItsCreate(t);
  a.child.kill("SIGKILL");
  await a.exited;
  await takenOverByB();
  assert.equal(s.fake.envs("prj_web").filter((e) => e.key === "MADE").length, 1, "not created twice");
  assert.equal((await onB.json("DELETE", `${secrets}/${made.id}`)).status, 200);
  await waitFor("the var A made to go with its secret", async () => s.fake.envFor("prj_web", "MADE", "development") === undefined);
});

test("a change the other process counts while the leader's run calls the deploy hook is sent all the same", async (t) => {
  const s = await setup(t, { SYNC_DEBOUNCE_MS: "300" });
  const { onA, onB, projectId, base } = await twoProcessesLinked(t, s);
  const put = await onA.json("PUT", base, {
    hostProjectId: "prj_web",
    mappings: { development: "development" },
    autoRedeploy: true,
    deployHookUrl: s.fake.addHook("prj_web"),
  });
  assert.equal(put.status, 200, JSON.stringify(put.body));

  // A's run has made its last commit and calls the hook; B, which runs no syncs, counts a change.
  const hook = s.fake.hold((r) => r.method === "POST" && r.path.startsWith("/v1/integrations/deploy/"));
  await createSecret(onA, projectId, "development", "FIRST", "first-value");
  await hook.reached;
  await createSecret(onB, projectId, "development", "SECOND", "second-value");
  hook.release();
  // The leader's ticks (every 5 s here) see the same pending count as after its run: only
  // the leader noticing it after the run sends it.
  await waitFor("the second change to reach Vercel", async () => s.fake.envFor("prj_web", "SECOND", "development"), 15_000);
  await waitFor("nothing pending", async () => ((await onB.json("GET", base)).body.pending === 0 ? true : undefined));
});

test("the audit list follows the chain: events written through both processes at once list in chain order, across pages", async (t) => {
  const s = await setup(t);
  const a = await startProcess(t, s);
  const b = await startProcess(t, s);
  const [onA, onB] = clientsFor(a, b);
  await onA.json("POST", "/api/auth/dev/sign-in", { email: "owner@example.test" });
  const project = await onA.createProject({ name: "api", environments: ["development"] });
  const ids = await Promise.all(
    Array.from(
      { length: 6 },
      async (_, i) =>
        (await createSecret(i % 2 === 0 ? onA : onB, project.id, "development", `CHAIN_${i}`, `chain-value-${i}`)).id as string,
    ),
  );
  // Reveals share their audit commit per process, and creates interleave with them.
  const writes: Promise<unknown>[] = [];
  const reads: Promise<{ status: number }>[] = [];
  for (let round = 0; round < 5; round++) {
    for (const [i, id] of ids.entries()) {
      const client = (i + round) % 2 === 0 ? onA : onB;
      const read = client.json("GET", `/api/projects/${project.id}/environments/development/secrets/${id}`);
      reads.push(read);
      writes.push(read);
    }
    writes.push(createSecret(round % 2 === 0 ? onB : onA, project.id, "development", `MORE_${round}`, `more-value-${round}`));
  }
  await Promise.all(writes);
  // Every reveal was one: a wrong id would answer 404 and write no event.
  assert.deepEqual(
    (await Promise.all(reads)).map((r) => r.status),
    reads.map(() => 200),
  );

  const listed: string[] = [];
  let cursor: string | null = null;
  do {
    type Page = { events: { id: string }[]; nextCursor: string | null };
    const page: { status: number; body: Page } = await onB.json<Page>(
      "GET",
      `/api/projects/${project.id}/audit?limit=7${cursor ? `&cursor=${cursor}` : ""}`,
    );
    assert.equal(page.status, 200, JSON.stringify(page.body));
    listed.push(...page.body.events.map((e) => e.id));
    cursor = page.body.nextCursor;
  } while (cursor);

  // The chain itself is storage: read from the file, as `audit verify` walks it.
  const chain = auditRows(s.dataDir, { project_id: project.id })
    .map((row) => row.id)
    .reverse();
  // The project's creation, 11 secrets created and 30 values revealed.
  assert.equal(chain.length, 42);
  assert.deepEqual(listed, chain);
});
