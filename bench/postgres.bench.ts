// The same read, write and import on SQLite (one server, FULL) and on PostgreSQL with one
// and with two servers on one database, side by side. The PostgreSQL cluster is a throwaway
// one (test/postgres.ts) made as durable as SQLite FULL, on disk; without PostgreSQL
// installed only the SQLite rows run.
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import Database from "better-sqlite3";
import pg from "pg";
import { createServerDatabase, findPostgresBin, startSharedCluster, stopSharedCluster } from "../test/postgres.ts";
import {
  type BenchContext,
  type BenchModule,
  type BenchRow,
  call,
  type LoadOptions,
  randomKey,
  runAlternating,
  type ServerProcess,
  signIn,
  startAppServer,
} from "./lib.ts";

const READ = "read one secret value";
const WRITE = "patch a secret's value";
const IMPORT = "import 500 entries (500 updates)";
const SQLITE = "SQLite (FULL), one server";
const PG_ONE = "PostgreSQL, one server";
const PG_TWO = "PostgreSQL, two servers";
/** Each scenario's configurations take turns in this many rounds, so load from elsewhere falls on all alike. */
const ROUNDS = 2;
const WRITE_CONNECTIONS = 8;
/**
 * Importers per configuration: at 10 imports a minute each, enough for some 60 imports a
 * second through a 30-second run, far above what 500 updates a request allow.
 */
const IMPORTERS = 200;

const rowName = (scenario: string, store: string) => `${scenario}: ${store}`;

/** One configuration under load: its servers (one or two on the same data) and what setup made there. */
interface Target {
  store: string;
  servers: ServerProcess[];
  base: string;
  cookie: string;
  readId: string;
  patchIds: string[];
  importKeys: string[];
  importers: string[];
}

/** What run() learned that the summary says (the summary sees only the rows). */
const notes: string[] = [];

export const postgresBench: BenchModule = {
  name: "postgres",

  async run(ctx: BenchContext): Promise<BenchRow[]> {
    notes.length = 0;
    const started: ServerProcess[] = [];
    const targets: Target[] = [];
    let cluster: string | undefined;
    const stopCluster = () => {
      if (cluster) stopSharedCluster(cluster);
      cluster = undefined;
    };
    // The cluster outlives this process unless stopped: an interrupted bench stops it too.
    const onSignal = (signal: NodeJS.Signals) => {
      stopCluster();
      process.kill(process.pid, signal);
    };
    const signals = ["SIGINT", "SIGTERM", "SIGHUP"] as const;
    try {
      const sqlite = await startAppServer({ pin: ctx.serverPin, synchronous: "full", dataDirPrefix: "bench-pg-sqlite-" });
      started.push(sqlite);
      ctx.log(`  setting up ${SQLITE}`);
      targets.push(
        await prepare(SQLITE, [sqlite], (projectId, userIds) => {
          const db = new Database(path.join(sqlite.dataDir, "secrets.db"));
          try {
            const insert = db.prepare(
              "INSERT INTO memberships (project_id, user_id, role, created_at, updated_at) VALUES (?, ?, 'admin', ?, ?)",
            );
            const now = new Date().toISOString();
            for (const userId of userIds) insert.run(projectId, userId, now, now);
          } finally {
            db.close();
          }
          return Promise.resolve();
        }),
      );

      if (!findPostgresBin()) {
        notes.push(
          "PostgreSQL rows skipped: PostgreSQL's initdb, pg_ctl and postgres were not found (Debian: apt-get install postgresql).",
        );
      } else {
        for (const signal of signals) process.once(signal, onSignal);
        ctx.log("  starting a durable PostgreSQL cluster (fsync, full_page_writes, synchronous_commit on; on disk)");
        cluster = await startSharedCluster({ durable: true });
        const core = ctx.serverPin.at(-1);
        const pinned = core !== undefined && pinCluster(cluster, core);
        notes.push(
          pinned
            ? `PostgreSQL runs pinned to core ${core} with the servers (taskset on the postmaster and its processes; the backends it forks inherit it).`
            : "PostgreSQL is not pinned: it may run on the load generator's core too.",
          "Server CPU µs/req counts the servers only (both summed for two servers); PostgreSQL's own CPU is not counted, SQLite's is (it runs inside the server).",
        );
        const [oneUrl, twoUrl] = await databases(cluster, 2);

        const one = await startAppServer({ pin: ctx.serverPin, synchronous: "full", dataDirPrefix: "bench-pg-one-", databaseUrl: oneUrl });
        started.push(one);
        ctx.log(`  setting up ${PG_ONE}`);
        targets.push(await prepare(PG_ONE, [one], (projectId, userIds) => addAdmins(oneUrl!, projectId, userIds)));

        // Servers on one database share the master key, as the README asks of them.
        const masterKey = randomKey();
        const two: ServerProcess[] = [];
        for (const name of ["a", "b"]) {
          const server = await startAppServer({
            pin: ctx.serverPin,
            synchronous: "full",
            dataDirPrefix: `bench-pg-two-${name}-`,
            databaseUrl: twoUrl,
            masterKey,
          });
          started.push(server);
          two.push(server);
        }
        ctx.log(`  setting up ${PG_TWO}`);
        targets.push(await prepare(PG_TWO, two, (projectId, userIds) => addAdmins(twoUrl!, projectId, userIds)));
      }

      const rows: BenchRow[] = [];
      for (const scenario of [READ, WRITE, IMPORT]) {
        ctx.log(`  ${scenario}: ${targets.map((t) => t.store).join("; ")}; in ${ROUNDS} alternating rounds`);
        rows.push(
          ...(await runAlternating(
            targets.map((target) => load(ctx, scenario, target)),
            ROUNDS,
          )),
        );
      }
      return rows;
    } finally {
      for (const server of started) {
        await server.stop();
        fs.rmSync(server.dataDir, { recursive: true, force: true });
      }
      stopCluster();
      for (const signal of signals) process.off(signal, onSignal);
    }
  },

  summary(rows: BenchRow[]): string[] {
    const lines = [...notes];
    for (const scenario of [READ, WRITE, IMPORT]) {
      const sqlite = rows.find((r) => r.name === rowName(scenario, SQLITE));
      if (!sqlite || sqlite.requestsPerSecond === 0) continue;
      const against = [PG_ONE, PG_TWO]
        .map((store) => [store, rows.find((r) => r.name === rowName(scenario, store))] as const)
        .filter(([, row]) => row !== undefined)
        .map(([store, row]) => `${store} ${(row!.requestsPerSecond / sqlite.requestsPerSecond).toFixed(2)}x`);
      if (against.length > 0) lines.push(`${scenario}, req/s against SQLite: ${against.join(", ")}.`);
    }
    return lines;
  },
};

/**
 * A project with a secret to read, one secret per write connection (no two writers on one
 * row), 500 secrets to import over, and IMPORTERS admins: imports are limited per user (10 a
 * minute) and the limit must never answer instead of the endpoint.
 */
async function prepare(
  store: string,
  servers: ServerProcess[],
  addMembers: (projectId: string, userIds: string[]) => Promise<void>,
): Promise<Target> {
  const url = servers[0]!.url;
  const owner = await signIn(url, "owner@bench.test");
  const { project } = await call(url, owner.cookie, "POST", "/api/projects", {
    name: "bench",
    environments: ["development", "production"],
  });
  const base = `/api/projects/${project.id}/environments`;
  const { secret: readMe } = await call(url, owner.cookie, "POST", `${base}/production/secrets`, {
    key: "DATABASE_URL",
    value: "postgres://user:password@db.internal:5432/app",
  });
  const patchIds: string[] = [];
  for (let i = 0; i < WRITE_CONNECTIONS; i++) {
    const { secret } = await call(url, owner.cookie, "POST", `${base}/development/secrets`, { key: `PATCH_${i}`, value: "initial" });
    patchIds.push(secret.id);
  }
  const importKeys = Array.from({ length: 500 }, (_, i) => `IMPORT_${i}`);
  await call(url, owner.cookie, "POST", `${base}/production/import`, {
    entries: importKeys.map((key) => ({ key, value: "initial", overwrite: false })),
  });
  const importers: string[] = [];
  const userIds: string[] = [];
  for (let i = 0; i < IMPORTERS; i++) {
    const user = await signIn(url, `importer${i}@bench.test`);
    importers.push(user.cookie);
    userIds.push(user.userId);
  }
  await addMembers(project.id, userIds);
  return { store, servers, base, cookie: owner.cookie, readId: readMe.id, patchIds, importKeys, importers };
}

/** The scenario against one target; with two servers, requests alternate between them. */
function load(ctx: BenchContext, scenario: string, target: Target): LoadOptions {
  const urls = target.servers.map((s) => s.url);
  let turn = 0;
  const nextUrl = () => urls[turn++ % urls.length]!;
  const common = {
    name: rowName(scenario, target.store),
    url: urls[0]!,
    serverPid: target.servers[0]!.pid,
    otherServerPids: target.servers.slice(1).map((s) => s.pid),
    seconds: ctx.seconds,
  };
  if (scenario === READ) {
    return {
      ...common,
      connections: 8,
      next: () => ({
        method: "GET",
        path: `${target.base}/production/secrets/${target.readId}`,
        headers: { cookie: target.cookie },
        url: nextUrl(),
      }),
    };
  }
  if (scenario === WRITE) {
    let counter = 0;
    return {
      ...common,
      connections: WRITE_CONNECTIONS,
      next: (worker) => ({
        method: "PATCH",
        path: `${target.base}/development/secrets/${target.patchIds[worker]!}`,
        headers: { cookie: target.cookie, "content-type": "application/json" },
        body: JSON.stringify({ value: `patched-${counter++}` }),
        url: nextUrl(),
      }),
    };
  }
  let round = 0;
  return {
    ...common,
    connections: 2,
    next: () => {
      const n = round++;
      return {
        method: "POST",
        path: `${target.base}/production/import`,
        headers: { cookie: target.importers[n % target.importers.length]!, "content-type": "application/json" },
        body: JSON.stringify({ entries: target.importKeys.map((key) => ({ key, value: `imported-${n}-${key}`, overwrite: true })) }),
        url: nextUrl(),
      };
    },
  };
}

/** `count` fresh databases in the cluster startSharedCluster named. */
async function databases(cluster: string, count: number): Promise<string[]> {
  // createServerDatabase creates in the cluster this variable names (a test run's shared one).
  const before = process.env.TEST_PG_CLUSTER;
  process.env.TEST_PG_CLUSTER = cluster;
  try {
    const urls: string[] = [];
    for (let i = 0; i < count; i++) urls.push(await createServerDatabase());
    return urls;
  } finally {
    if (before === undefined) delete process.env.TEST_PG_CLUSTER;
    else process.env.TEST_PG_CLUSTER = before;
  }
}

/** Inserts the admins directly: no API adds hundreds of members without an invitation round trip each. */
async function addAdmins(databaseUrl: string, projectId: string, userIds: string[]): Promise<void> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    const now = new Date().toISOString();
    await client.query(
      "INSERT INTO memberships (project_id, user_id, role, created_at, updated_at) SELECT $1, unnest($2::text[]), 'admin', $3, $3",
      [projectId, userIds, now],
    );
  } finally {
    await client.end();
  }
}

/**
 * Pins the cluster's postmaster and the processes it has started to `core`; the backends it
 * forks for the servers' connections inherit the pinning. False if any of them could not be.
 */
function pinCluster(cluster: string, core: string): boolean {
  const { dataDir } = JSON.parse(cluster) as { dataDir: string };
  const postmaster = Number(fs.readFileSync(path.join(dataDir, "postmaster.pid"), "utf8").split("\n")[0]);
  const pids = [postmaster, ...childrenOf(postmaster)];
  return pids.every((pid) => spawnSync("taskset", ["-a", "-cp", core, String(pid)], { stdio: "ignore" }).status === 0);
}

function childrenOf(parent: number): number[] {
  const children: number[] = [];
  for (const entry of fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${entry}/stat`, "utf8");
      // The parent's pid is the second field after the command name, which is in parentheses.
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      if (ppid === parent) children.push(Number(entry));
    } catch {
      // gone meanwhile
    }
  }
  return children;
}
