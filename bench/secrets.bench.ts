// Secrets endpoints through the real server (sessions, access checks, audit, encryption),
// and the reference: a bare Fastify route that reads, decrypts and audits one row.
import path from "node:path";
import Database from "better-sqlite3";
import {
  type BenchContext,
  type BenchModule,
  type BenchRow,
  call,
  freePort,
  makeTempDir,
  runAlternating,
  runLoad,
  type ServerProcess,
  signIn,
  startAppServer,
  startProcess,
} from "./lib.ts";

/** Reading it with a service token must reach this share of the session read's req/s. */
export const MIN_SERVICE_TOKEN_RATIO = 0.95;
export const READ_NAME = "read one secret value";
const SERVICE_TOKEN_READ_NAME = "read one secret value with a service token";
const READ_ROUNDS = 4;
export const LIST_NAME = "list 1,000 secrets";
export const EXPORT_NAME = "export 1,000 secrets as dotenv";
export const IMPORT_NAME = "import 500 entries (500 updates)";
export const REFERENCE_NAME = "reference: bare Fastify read + decrypt + audit insert (FULL)";
export const NORMAL_REFERENCE_NAME = "reference: the same with synchronous NORMAL";

export const secretsBench: BenchModule = {
  name: "secrets",

  async run(ctx: BenchContext): Promise<BenchRow[]> {
    const rows: BenchRow[] = [];
    const synchronous = "full";

    // The references, FULL and NORMAL, each in its own process on the core the real server
    // uses; they take turns with the real server's reads below, so load from elsewhere on
    // the machine falls on all of them alike.
    const references: ServerProcess[] = [];
    for (const level of ["full", "normal"]) {
      const referenceDir = makeTempDir("bench-reference-");
      const referencePort = await freePort();
      references.push(
        await startProcess(
          ctx.serverPin,
          "bench/reference-server.ts",
          [String(referencePort), referenceDir, level],
          {},
          referencePort,
          "/healthz",
          referenceDir,
        ),
      );
    }
    const referenceLoad = (name: string, reference: ServerProcess): Parameters<typeof runLoad>[0] => ({
      name,
      url: reference.url,
      serverPid: reference.pid,
      connections: 8,
      seconds: ctx.seconds,
      next: () => ({ method: "GET", path: "/reference/secret" }),
    });

    const server = await startAppServer({ pin: ctx.serverPin, synchronous, dataDirPrefix: "bench-secrets-" });
    try {
      const url = server.url;
      ctx.log("  setting up: a project, 1,000 secrets to list and export, 500 to import over, users for the rate-limited routes");
      const owner = await signIn(url, "owner@bench.test");
      const { project } = await call(url, owner.cookie, "POST", "/api/projects", {
        name: "bench",
        environments: ["development", "staging", "production"],
      });
      const base = (env: string) => `/api/projects/${project.id}/environments/${env}`;
      const readMe = (
        await call(url, owner.cookie, "POST", `${base("production")}/secrets`, {
          key: "DATABASE_URL",
          value: "postgres://user:password@db.internal:5432/app",
        })
      ).secret;
      for (const part of [0, 1]) {
        const entries = Array.from({ length: 500 }, (_, i) => ({
          key: `LIST_${part * 500 + i}`,
          value: `value-${part * 500 + i}-${"x".repeat(40)}`,
          overwrite: false,
        }));
        await call(url, owner.cookie, "POST", `${base("staging")}/import`, { entries });
      }
      const importKeys = Array.from({ length: 500 }, (_, i) => `IMPORT_${i}`);
      await call(url, owner.cookie, "POST", `${base("production")}/import`, {
        entries: importKeys.map((key) => ({ key, value: "initial", overwrite: false })),
      });
      // A viewer service account of production with one token, as a deploy job would hold.
      const { serviceAccount } = await call(url, owner.cookie, "POST", `/api/projects/${project.id}/service-accounts`, {
        name: "bench-deploy",
        role: "viewer",
        environments: ["production"],
      });
      const { token: serviceToken } = await call(
        url,
        owner.cookie,
        "POST",
        `/api/projects/${project.id}/service-accounts/${serviceAccount.id}/tokens`,
        {
          name: "bench",
        },
      );
      const patchConnections = 8;
      const patchTargets: { id: string; version: number }[] = [];
      for (let i = 0; i < patchConnections; i++) {
        const { secret } = await call(url, owner.cookie, "POST", `${base("development")}/secrets`, { key: `PATCH_${i}`, value: "initial" });
        patchTargets.push({ id: secret.id, version: secret.version });
      }
      // Export (30 a minute) and import (10 a minute) are limited per user: spread the load
      // over enough admins that the limit never answers instead of the endpoint.
      const pool: string[] = [];
      const db = new Database(path.join(server.dataDir, "secrets.db"));
      const addMember = db.prepare(
        "INSERT INTO memberships (project_id, user_id, role, created_at, updated_at) VALUES (?, ?, 'admin', ?, ?)",
      );
      for (let i = 0; i < 400; i++) {
        const user = await signIn(url, `user${i}@bench.test`);
        const now = new Date().toISOString();
        addMember.run(project.id, user.userId, now, now);
        pool.push(user.cookie);
      }
      db.close();
      const exportPool = pool.slice(0, 300);
      const importPool = pool.slice(300);
      let exportTurn = 0;
      let importTurn = 0;
      let importRound = 0;
      let patchCounter = 0;

      // The same read with a browser session and with a service token, compared in turns
      // (READ_ROUNDS each way, ctx.seconds in all per credential).
      const reads: Parameters<typeof runLoad>[0][] = [
        {
          name: READ_NAME,
          url,
          serverPid: server.pid,
          connections: 8,
          seconds: ctx.seconds,
          next: () => ({ method: "GET", path: `${base("production")}/secrets/${readMe.id}`, headers: { cookie: owner.cookie } }),
        },
        {
          name: SERVICE_TOKEN_READ_NAME,
          url,
          serverPid: server.pid,
          connections: 8,
          seconds: ctx.seconds,
          next: () => ({
            method: "GET",
            path: `${base("production")}/secrets/${readMe.id}`,
            headers: { authorization: `Bearer ${serviceToken}` },
          }),
        },
      ];
      ctx.log(
        `  ${REFERENCE_NAME}, ${NORMAL_REFERENCE_NAME}, ${READ_NAME} and ${SERVICE_TOKEN_READ_NAME}, in ${READ_ROUNDS} alternating rounds`,
      );
      rows.push(
        ...(await runAlternating(
          [referenceLoad(REFERENCE_NAME, references[0]!), referenceLoad(NORMAL_REFERENCE_NAME, references[1]!), ...reads],
          READ_ROUNDS,
        )),
      );

      const scenarios: Parameters<typeof runLoad>[0][] = [
        {
          name: LIST_NAME,
          url,
          serverPid: server.pid,
          connections: 8,
          seconds: ctx.seconds,
          next: () => ({ method: "GET", path: `${base("staging")}/secrets`, headers: { cookie: owner.cookie } }),
        },
        {
          name: EXPORT_NAME,
          url,
          serverPid: server.pid,
          connections: 4,
          seconds: ctx.seconds,
          next: () => ({
            method: "GET",
            path: `${base("staging")}/export?format=dotenv`,
            headers: { cookie: exportPool[exportTurn++ % exportPool.length]! },
          }),
        },
        {
          name: IMPORT_NAME,
          url,
          serverPid: server.pid,
          connections: 2,
          seconds: ctx.seconds,
          next: () => {
            const round = importRound++;
            const entries = importKeys.map((key) => ({ key, value: `imported-${round}-${key}`, overwrite: true }));
            return {
              method: "POST",
              path: `${base("production")}/import`,
              headers: { cookie: importPool[importTurn++ % importPool.length]!, "content-type": "application/json" },
              body: JSON.stringify({ entries }),
            };
          },
        },
        {
          name: "patch with expectedVersion",
          url,
          serverPid: server.pid,
          connections: patchConnections,
          seconds: ctx.seconds,
          next: (worker) => ({
            method: "PATCH",
            path: `${base("development")}/secrets/${patchTargets[worker]!.id}`,
            headers: { cookie: owner.cookie, "content-type": "application/json" },
            body: JSON.stringify({ value: `patched-${patchCounter++}`, expectedVersion: patchTargets[worker]!.version }),
          }),
          onResponse: (worker, response) => {
            if (response.status === 200)
              patchTargets[worker]!.version = (JSON.parse(response.body) as { secret: { version: number } }).secret.version;
          },
        },
      ];
      for (const scenario of scenarios) {
        ctx.log(`  ${scenario.name}`);
        rows.push(await runLoad(scenario));
      }
    } finally {
      await server.stop();
      for (const reference of references) await reference.stop();
    }
    return rows;
  },

  summary(rows: BenchRow[]): string[] {
    const read = rows.find((r) => r.name === READ_NAME);
    const serviceRead = rows.find((r) => r.name === SERVICE_TOKEN_READ_NAME);
    const lines: string[] = [];
    if (read && serviceRead && read.requestsPerSecond > 0) {
      const ratio = serviceRead.requestsPerSecond / read.requestsPerSecond;
      lines.push(
        `Reading it with a service token reaches ${ratio.toFixed(2)}x the session read's req/s ` +
          `(${serviceRead.requestsPerSecond.toFixed(0)} vs ${read.requestsPerSecond.toFixed(0)}; target at least ${MIN_SERVICE_TOKEN_RATIO}x): ` +
          (ratio >= MIN_SERVICE_TOKEN_RATIO ? "PASS" : "FAIL"),
        `Server CPU per service-token read: ${serviceRead.serverCpuMicros.toFixed(0)} µs (session read: ${read.serverCpuMicros.toFixed(0)} µs).`,
      );
    }
    return lines;
  },
};
