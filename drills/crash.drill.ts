// Crash: a few clients import and write in a loop while the server is killed with SIGKILL
// at random moments and started again on the same data folder. After every restart the
// data is read back through the API and checked: every import is there whole or not at
// all (its 60 new keys and its overwrite of 10 shared keys), every write that got a 2xx
// is there with its value, and the shared keys hold one import's value, the last
// acknowledged one or a later one that committed without an answer. At the end
// `audit verify` must pass on the audit chain the crashes cut into.
import http from "node:http";
import {
  type Caller,
  createProject,
  type DrillOptions,
  type DrillResult,
  drillSeed,
  freePort,
  makeTempDir,
  Random,
  randomMasterKey,
  removeDir,
  request,
  runCommand,
  type ServerProcess,
  signIn,
  sleep,
  startServer,
} from "./lib.ts";

// At most 10 imports a minute per user, 60 new keys each: a project per kill stays under the
// cap of 1,000 secrets per environment.
const NEW_KEYS_PER_IMPORT = 60;
const SHARED_KEYS = 10;
const WORKERS = 3;

interface Attempt {
  kind: "import" | "write";
  id: string;
  worker: number;
  seq: number;
  acked: boolean;
  /** Answered 429 by import's own limit: nothing may have been written. */
  refused?: boolean;
}

interface Worker {
  caller: Caller;
  projectId: string;
  seq: number;
  attempts: Attempt[];
  /** Seq of the last acknowledged import: the shared keys hold it or a later one. */
  lastAckedImport: number;
}

const importKey = (w: number, seq: number, i: number) => `B_${w}_${seq}_${i}`;
const importValue = (w: number, seq: number, i: number) => `import-${w}-${seq}-${i}`;
const writeKey = (w: number, seq: number) => `S_${w}_${seq}`;

async function runWorker(index: number, worker: Worker, server: ServerProcess, agent: http.Agent, isKilled: () => boolean): Promise<void> {
  const base = `/api/projects/${worker.projectId}/environments/production`;
  let importsLimited = false;
  while (!isKilled()) {
    const seq = ++worker.seq;
    const isImport = !importsLimited && seq % 2 === 0;
    const attempt: Attempt = { kind: isImport ? "import" : "write", id: `${index}/${seq}`, worker: index, seq, acked: false };
    worker.attempts.push(attempt);
    const body = isImport
      ? {
          entries: [
            ...Array.from({ length: NEW_KEYS_PER_IMPORT }, (_, i) => ({
              key: importKey(index, seq, i),
              value: importValue(index, seq, i),
              overwrite: false,
            })),
            ...Array.from({ length: SHARED_KEYS }, (_, i) => ({ key: `SHARED_${i}`, value: `shared-${seq}`, overwrite: true })),
          ],
        }
      : { key: writeKey(index, seq), value: `write-${index}-${seq}` };
    const headers = { ...worker.caller.headers("POST"), "content-type": "application/json" };
    try {
      const res = await request(server.url, {
        method: "POST",
        path: `${base}/${isImport ? "import" : "secrets"}`,
        headers,
        body: JSON.stringify(body),
        agent,
      });
      if (res.status >= 200 && res.status < 300) {
        attempt.acked = true;
        if (isImport) worker.lastAckedImport = seq;
      } else if (res.status === 429) {
        attempt.refused = true;
        importsLimited = true; // import's own limit (10 a minute): single writes until the restart
      } else {
        throw new Error(`${attempt.kind} ${attempt.id} answered ${res.status}: ${res.body.slice(0, 200)}`);
      }
    } catch (error) {
      if (!isKilled()) throw error;
    }
  }
}

interface Check {
  partial: string[];
  lost: string[];
  committedUnanswered: number;
  absentUnanswered: number;
}

/** Reads every worker's project back and checks each attempt. */
async function check(workers: Worker[], agent: http.Agent): Promise<Check> {
  const result: Check = { partial: [], lost: [], committedUnanswered: 0, absentUnanswered: 0 };
  for (const [index, worker] of workers.entries()) {
    worker.caller.agent = agent;
    const { secrets } = (await worker.caller.ok("GET", `/api/projects/${worker.projectId}/environments/production/export`)) as {
      secrets: { key: string; value: string }[];
    };
    const values = new Map(secrets.map((s) => [s.key, s.value]));
    for (const attempt of worker.attempts.splice(0)) {
      let present: boolean;
      if (attempt.kind === "import") {
        let count = 0;
        for (let i = 0; i < NEW_KEYS_PER_IMPORT; i++) {
          const value = values.get(importKey(index, attempt.seq, i));
          if (value === undefined) continue;
          count++;
          if (value !== importValue(index, attempt.seq, i))
            result.partial.push(`import ${attempt.id}: ${importKey(index, attempt.seq, i)} holds another value`);
        }
        if (count !== 0 && count !== NEW_KEYS_PER_IMPORT)
          result.partial.push(`import ${attempt.id}: ${count} of ${NEW_KEYS_PER_IMPORT} new keys present`);
        present = count === NEW_KEYS_PER_IMPORT;
      } else {
        const value = values.get(writeKey(index, attempt.seq));
        if (value !== undefined && value !== `write-${index}-${attempt.seq}`)
          result.partial.push(`write ${attempt.id} holds another value`);
        present = value !== undefined;
      }
      if (attempt.acked && !present) result.lost.push(`${attempt.kind} ${attempt.id} was answered 2xx and is missing`);
      if (attempt.refused) {
        if (present) result.partial.push(`${attempt.kind} ${attempt.id} was refused with 429 and is present`);
      } else if (!attempt.acked) {
        if (present) result.committedUnanswered++;
        else result.absentUnanswered++;
      }
    }
    const shared = new Set(Array.from({ length: SHARED_KEYS }, (_, i) => values.get(`SHARED_${i}`)));
    if (shared.size !== 1) {
      result.partial.push(`worker ${index}: the shared keys hold ${shared.size} different imports' values`);
    } else {
      const [value] = shared;
      const seq = value === undefined ? 0 : Number(value.slice("shared-".length));
      if (seq < worker.lastAckedImport)
        result.lost.push(`worker ${index}: the shared keys hold import ${seq}, older than the acknowledged ${worker.lastAckedImport}`);
    }
  }
  return result;
}

export async function drill(options: DrillOptions): Promise<DrillResult> {
  const kills = options.short ? 2 : Number(process.env.CRASH_KILLS) || 30;
  const seed = drillSeed();
  const r = new Random(seed);
  const dataDir = makeTempDir("drill-crash-");
  const port = await freePort();
  const env = { MASTER_KEY: randomMasterKey() };
  const failures: string[] = [];
  const totals = {
    imports: 0,
    importsAcked: 0,
    writes: 0,
    writesAcked: 0,
    committedUnanswered: 0,
    absentUnanswered: 0,
    partial: 0,
    lost: 0,
    killsInFlight: 0,
  };
  let auditLine = "not run";
  const started = performance.now();
  let server = await startServer({ dataDir, port, env }).catch((error: unknown) => {
    removeDir(dataDir);
    throw error;
  });
  try {
    const workers: Worker[] = [];
    for (let i = 0; i < WORKERS; i++) {
      workers.push({ caller: await signIn(server, `importer${i}@crash.test`), projectId: "", seq: 0, attempts: [], lastAckedImport: 0 });
    }
    for (let kill = 1; kill <= kills && failures.length === 0; kill++) {
      const agent = new http.Agent({ keepAlive: true });
      let killed = false;
      // A fresh project per kill, so the imports never reach the cap of secrets per environment.
      for (const [index, worker] of workers.entries()) {
        worker.caller.agent = agent;
        worker.projectId = (await createProject(worker.caller, `crash ${index} ${kill}`, ["production"])).id;
        worker.lastAckedImport = 0;
      }
      const running = workers.map((worker, index) =>
        runWorker(index, worker, server, agent, () => killed).catch((error: unknown) => {
          failures.push(`a client failed: ${error instanceof Error ? error.message : String(error)}`);
        }),
      );
      // A random moment: early ones land during start-up traffic, late ones mid-import.
      await sleep(r.between(options.short ? 200 : 300, options.short ? 800 : 2500));
      const inFlightBefore = workers.reduce((n, w) => n + (w.attempts.at(-1)?.acked === false ? 1 : 0), 0);
      killed = true;
      await server.kill();
      if (inFlightBefore > 0) totals.killsInFlight++;
      await Promise.all(running);
      agent.destroy();
      for (const worker of workers) {
        for (const attempt of worker.attempts) {
          if (attempt.kind === "import") {
            totals.imports++;
            if (attempt.acked) totals.importsAcked++;
          } else {
            totals.writes++;
            if (attempt.acked) totals.writesAcked++;
          }
        }
      }
      server = await startServer({ dataDir, port, env });
      const verifyAgent = new http.Agent({ keepAlive: true });
      const result = await check(workers, verifyAgent);
      verifyAgent.destroy();
      totals.partial += result.partial.length;
      totals.lost += result.lost.length;
      totals.committedUnanswered += result.committedUnanswered;
      totals.absentUnanswered += result.absentUnanswered;
      failures.push(
        ...result.partial.map((p) => `after kill ${kill}: partial: ${p}`),
        ...result.lost.map((l) => `after kill ${kill}: lost: ${l}`),
      );
      if (!options.short || kill === kills)
        options.log(
          `  crash: kill ${kill}/${kills}: ${result.committedUnanswered} committed without an answer, ${result.absentUnanswered} absent, ${result.partial.length + result.lost.length} problems`,
        );
    }
    await server.stop();
    const verify = await runCommand(["audit", "verify"], server.env);
    auditLine = verify.stdout.split("\n")[0]?.trim() || verify.stderr.trim().split("\n")[0] || `exit ${verify.code}`;
    if (verify.code !== 0) failures.push(`audit verify exited ${verify.code}: ${(verify.stdout + verify.stderr).trim().slice(0, 400)}`);
  } catch (error) {
    failures.push(`the drill itself failed: ${error instanceof Error ? error.message : String(error)}`);
  } finally {
    await server.kill();
    if (failures.length === 0) removeDir(dataDir);
  }
  for (const failure of failures.slice(0, 10)) options.log(`  crash: ${failure}`);
  if (failures.length > 0) options.log(`  crash: the data folder is kept for a look: ${dataDir}`);
  const seconds = (performance.now() - started) / 1000;
  const line =
    `crash: seed ${seed}, ${kills} SIGKILLs (${totals.killsInFlight} with a write in flight) in ${seconds.toFixed(1)} s; ` +
    `${totals.imports} imports (${totals.importsAcked} acknowledged), ${totals.writes} single writes (${totals.writesAcked} acknowledged); ` +
    `unanswered at a kill: ${totals.committedUnanswered} committed, ${totals.absentUnanswered} absent; ` +
    `${totals.partial} partial, ${totals.lost} lost acknowledged; audit verify: ${auditLine}`;
  return { ok: failures.length === 0, line };
}
