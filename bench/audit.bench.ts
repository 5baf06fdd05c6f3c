// Audit log at a million events: fills the table directly (prepared statements, a few
// large transactions, real keyed hash chain), then times the endpoint's service call for the
// first page and a deep page of every filter. Target: under 20 ms per page.
// Run alone with `npm run bench -- audit`; AUDIT_BENCH_EVENTS overrides the count.
// In-process on purpose: this measures the query and the service, not HTTP (the secrets
// bench covers the server's request path). Rows go into the bench table as one "request"
// per page read: p50 is the median, p99 the slowest of the runs.
import crypto from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { AUDIT_ACTIONS, type AuditAction } from "../src/audit/audit.actions.ts";
import { type AuditFilter, createAuditRepo } from "../src/audit/audit.repo.ts";
import { type AuditQuery, auditFilter, createAuditService, encodeCursor } from "../src/audit/audit.service.ts";
import { verifyAuditChain } from "../src/audit/audit.verify.ts";
import { createAuditWriter, createEventIds, eventHash, GENESIS_HASH } from "../src/audit/audit.writer.ts";
import { createAccessGuard } from "../src/core/access.ts";
import type { Caller } from "../src/core/caller.ts";
import { systemClock } from "../src/core/clock.ts";
import { loadConfig } from "../src/core/config.ts";
import { Keyring } from "../src/core/crypto.ts";
import { type Db, openDatabase } from "../src/core/db.ts";
import { createInvitationsRepo } from "../src/invitations/invitations.repo.ts";
import { createAccessRepo } from "../src/members/access.repo.ts";
import { createMembersRepo } from "../src/members/members.repo.ts";
import type { BenchModule, BenchRow } from "./lib.ts";

const TARGET_MS = 20;
const RUNS = 15;
const USERS = 40;
const PROJECTS = 10;
/** Share of the events in the measured project; the rest are spread over the others. */
const MAIN_PROJECT_SHARE = 0.6;
const BATCH = 100_000;

// How often each action occurs, roughly as in a busy project: reads dominate.
const ACTION_WEIGHTS: Partial<Record<AuditAction, number>> = {
  "secret.revealed": 40,
  "secrets.exported": 15,
  "secret.updated": 15,
  "secret.created": 8,
  "secret.version_revealed": 4,
  "secret.deleted": 2,
  "secret.rolled_back": 1,
  "secrets.imported": 1,
  "integration.synced": 8,
  "integration.redeployed": 1,
  "integration.sync_failed": 0.2,
  "environment_access.granted": 1,
  "environment_access.revoked": 0.5,
  "invitation.created": 0.5,
  "invitation.accepted": 0.5,
  "member.role_changed": 0.3,
  "project.updated": 0.5,
};

function pickerOf(weights: Partial<Record<AuditAction, number>>): () => AuditAction {
  const entries = Object.entries(weights) as [AuditAction, number][];
  const total = entries.reduce((sum, [, w]) => sum + w, 0);
  return () => {
    let r = Math.random() * total;
    for (const [action, weight] of entries) {
      r -= weight;
      if (r <= 0) return action;
    }
    return entries[0]![0];
  };
}

function fill(db: Db, keyring: Keyring, count: number, projectIds: string[], userIds: string[], startMs: number, spanMs: number): void {
  const sqlite = db.$client;
  const insert = sqlite.prepare(
    `INSERT INTO audit_events (id, project_id, at, action, category, actor_user_id, target_type, target_id, metadata, prev_hash, hash, mac_key_version)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
  );
  const macKey = keyring.auditMacKey(keyring.currentVersion);
  const pickAction = pickerOf(ACTION_WEIGHTS);
  const nextId = createEventIds();
  const secretIds = Array.from({ length: 200 }, () => crypto.randomUUID());
  let prevHash = GENESIS_HASH;
  const step = spanMs / count;
  for (let done = 0; done < count; done += BATCH) {
    sqlite
      .transaction(() => {
        for (let i = done; i < Math.min(count, done + BATCH); i++) {
          const action = pickAction();
          const projectId = Math.random() < MAIN_PROJECT_SHARE ? projectIds[0]! : projectIds[1 + (i % (projectIds.length - 1))]!;
          // Skewed actors: a few people (and the CLI of a deploy bot) do most of the work.
          const actor = action === "integration.synced" && i % 3 === 0 ? null : userIds[Math.floor(USERS * Math.random() ** 2)]!;
          const secretId = secretIds[i % secretIds.length]!;
          const content = {
            id: nextId(),
            projectId,
            at: new Date(startMs + Math.floor(i * step)).toISOString(),
            action,
            category: AUDIT_ACTIONS[action].category,
            actorUserId: actor,
            targetType: action.startsWith("secret.") ? "secret" : "project",
            targetId: action.startsWith("secret.") ? secretId : projectId,
            metadata: JSON.stringify(
              action.startsWith("secret.") ? { key: `KEY_${i % 200}`, environment: "production", version: 1 + (i % 7) } : {},
            ),
          };
          const hash = eventHash(prevHash, content, macKey);
          insert.run(
            content.id,
            content.projectId,
            content.at,
            content.action,
            content.category,
            content.actorUserId,
            content.targetType,
            content.targetId,
            content.metadata,
            prevHash,
            hash,
            keyring.currentVersion,
          );
          prevHash = hash;
        }
      })
      .immediate();
  }
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
}

async function time(fn: () => unknown): Promise<number> {
  const start = process.hrtime.bigint();
  await fn();
  return Number(process.hrtime.bigint() - start) / 1e6;
}

/** A row of the bench table, filled from page timings. */
function pageRow(name: string, times: number[]): BenchRow {
  const p50 = median(times);
  return {
    name,
    requests: times.length,
    requestsPerSecond: Math.round(1000 / p50),
    p50Ms: Number(p50.toFixed(2)),
    p99Ms: Number(Math.max(...times).toFixed(2)),
    // A page over the target counts as an error, so the table shows it.
    errors: times.filter((t) => t >= TARGET_MS).length,
    serverCpuMicros: Math.round(p50 * 1000),
  };
}

export const auditBench: BenchModule = {
  name: "audit",
  run: (ctx) => run(ctx.log),
  summary(rows) {
    const worst = Math.max(...rows.map((r) => r.p50Ms));
    return [
      `audit: slowest median page ${worst.toFixed(2)} ms over ${rows.length} pages (the first and a deep page of each filter): ` +
        `${worst < TARGET_MS ? "within" : "OVER"} the ${TARGET_MS} ms target.`,
    ];
  },
};

async function run(log: (line: string) => void): Promise<BenchRow[]> {
  const count = Number(process.env.AUDIT_BENCH_EVENTS ?? 1_000_000);
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "audit-bench-"));
  try {
    const config = loadConfig({ DATA_DIR: dataDir, MASTER_KEY: crypto.randomBytes(32).toString("base64"), SQLITE_SYNCHRONOUS: "normal" });
    const db = openDatabase(config);
    const sqlite = db.$client;
    const now = new Date().toISOString();
    const userIds = Array.from({ length: USERS }, () => crypto.randomUUID());
    const projectIds = Array.from({ length: PROJECTS }, () => crypto.randomUUID());
    sqlite.transaction(() => {
      const user = sqlite.prepare(
        "INSERT INTO users (id, email, email_verified, auth_issuer, auth_subject, created_at, updated_at) VALUES (?, ?, 1, 'dev', ?, ?, ?)",
      );
      userIds.forEach((id, i) => {
        user.run(id, `user${i}@example.test`, `user${i}@example.test`, now, now);
      });
      for (const projectId of projectIds) {
        sqlite
          .prepare("INSERT INTO projects (id, name, created_at, updated_at) VALUES (?, ?, ?, ?)")
          .run(projectId, projectId.slice(0, 8), now, now);
        sqlite.prepare("INSERT INTO project_environments (project_id, slug, created_at) VALUES (?, 'production', ?)").run(projectId, now);
      }
      // Half the users are still members of the measured project: the page joins memberships.
      userIds.forEach((id, i) => {
        if (i === 0 || i % 2 === 1) {
          sqlite
            .prepare("INSERT INTO memberships (project_id, user_id, role, created_at, updated_at) VALUES (?, ?, ?, ?, ?)")
            .run(projectIds[0], id, i === 0 ? "owner" : "member", now, now);
        }
      });
    })();

    const spanMs = 365 * 24 * 60 * 60 * 1000;
    const startMs = Date.now() - spanMs;
    // A large page cache for the fill only; the pages are then read with the server's default.
    const defaultCacheSize = sqlite.pragma("cache_size", { simple: true }) as number;
    sqlite.pragma("cache_size = -524288");
    const keyring = new Keyring(1, new Map([[1, crypto.randomBytes(32)]]));
    const fillMs = await time(() => fill(db, keyring, count, projectIds, userIds, startMs, spanMs));
    sqlite.pragma(`cache_size = ${defaultCacheSize}`);
    sqlite.pragma("wal_checkpoint(TRUNCATE)");
    const inMain = sqlite.prepare("SELECT count(*) FROM audit_events WHERE project_id = ?").pluck().get(projectIds[0]) as number;
    const fileMb = fs.statSync(path.join(dataDir, "secrets.db")).size / 1e6;
    log(
      `Filled ${count.toLocaleString("en")} events (${inMain.toLocaleString("en")} in the measured project) in ${(fillMs / 1000).toFixed(1)} s; database ${fileMb.toFixed(0)} MB.`,
    );

    const repo = createAuditRepo(db);
    const service = createAuditService({
      repo,
      writer: createAuditWriter(db, systemClock, keyring),
      access: createAccessGuard(createAccessRepo(db)),
      config,
      keyring,
      serviceAccountCounts: async () => ({ accounts: 0, tokens: 0, tokensWithoutExpiry: 0, tokensUnusedFor90Days: 0, trusts: 0 }),
      openTrustAccounts: async () => [],
      members: createMembersRepo(db),
      invitations: createInvitationsRepo(db),
      clock: systemClock,
    });
    const caller: Caller = {
      userId: userIds[0]!,
      email: "user0@example.test",
      name: null,
      emailVerified: true,
      via: "browser",
      sessionId: "bench",
    };
    const projectId = projectIds[0]!;
    const busyActor = userIds[1]!;
    const quietActor = userIds[USERS - 1]!;
    const isoDaysAgo = (days: number) => new Date(Date.now() - days * 24 * 60 * 60 * 1000).toISOString();

    const filters: [string, Omit<AuditQuery, "limit" | "cursor">][] = [
      ["no filter", {}],
      ["category=secrets", { category: "secrets" }],
      ["category=access (rare)", { category: "access" }],
      ["category=integrations", { category: "integrations" }],
      ["action=secret.revealed", { action: "secret.revealed" }],
      ["action=integration.sync_failed (rare)", { action: "integration.sync_failed" }],
      ["actor (busy)", { actorUserId: busyActor }],
      ["actor (quiet)", { actorUserId: quietActor }],
      ["actor + category=secrets", { actorUserId: busyActor, category: "secrets" }],
      ["actor (quiet) + category=access", { actorUserId: quietActor, category: "access" }],
      ["actor (busy) + category=access", { actorUserId: busyActor, category: "access" }],
      ["actor (busy) + action=secret.rolled_back", { actorUserId: busyActor, action: "secret.rolled_back" }],
      ["from/to (30 days)", { fromAt: isoDaysAgo(200), to: { at: isoDaysAgo(170), exclusive: true } }],
      ["category=secrets + from/to", { category: "secrets", fromAt: isoDaysAgo(200), to: { at: isoDaysAgo(170), exclusive: true } }],
      ["actor + from/to", { actorUserId: busyActor, fromAt: isoDaysAgo(200), to: { at: isoDaysAgo(170), exclusive: true } }],
      ["actor (quiet) + from/to", { actorUserId: quietActor, fromAt: isoDaysAgo(200), to: { at: isoDaysAgo(170), exclusive: true } }],
      ["actor (none) + a year", { actorUserId: crypto.randomUUID(), fromAt: isoDaysAgo(366), to: { at: isoDaysAgo(0), exclusive: false } }],
      [
        "action (rare) + actor (quiet) + from/to",
        {
          action: "integration.sync_failed",
          actorUserId: quietActor,
          fromAt: isoDaysAgo(300),
          to: { at: isoDaysAgo(10), exclusive: false },
        },
      ],
    ];

    const rows: string[][] = [];
    const pageRows: BenchRow[] = [];
    let worst = 0;
    for (const [name, filter] of filters) {
      const query: AuditQuery = { limit: 50, ...filter };
      const repoFilter: AuditFilter = { ...auditFilter(projectId, filter), limit: 1 };
      // A deep position: the event at 80% of this filter's matches (found untimed).
      const matches = countMatches(db, repoFilter);
      const deepRow = deepEvent(db, repoFilter, Math.floor(matches * 0.8));
      const deepCursor = deepRow ? encodeCursor(deepRow) : undefined;
      const firstTimes: number[] = [];
      const deepTimes: number[] = [];
      let firstCount = 0;
      let deepCount = 0;
      for (let i = 0; i < RUNS; i++) {
        firstTimes.push(await time(async () => (firstCount = (await service.list(caller, projectId, query)).events.length)));
        if (deepCursor)
          deepTimes.push(
            await time(async () => (deepCount = (await service.list(caller, projectId, { ...query, cursor: deepCursor })).events.length)),
          );
      }
      pageRows.push(pageRow(`audit ${name}: first page`, firstTimes));
      if (deepTimes.length > 0) pageRows.push(pageRow(`audit ${name}: deep page`, deepTimes));
      const first = median(firstTimes);
      const deep = deepTimes.length > 0 ? median(deepTimes) : 0;
      worst = Math.max(worst, first, deep);
      const plan =
        (await repo.explainPage({ ...repoFilter, before: deepRow ?? undefined })).find((line) => line.includes("audit_events")) ?? "";
      rows.push([
        name,
        matches.toLocaleString("en"),
        `${first.toFixed(2)} (${firstCount})`,
        deepCursor ? `${deep.toFixed(2)} (${deepCount})` : "-",
        plan.replace(/^(SEARCH|SCAN) e /, "").replace("USING INDEX ", ""),
      ]);
    }
    printTable(log, ["filter", "matches", "first page ms (rows)", "deep page ms (rows)", "plan"], rows);
    log(
      `Median of ${RUNS} runs per page, 50 events per page, through the service (access check, joins, JSON). ` +
        `Slowest page: ${worst.toFixed(2)} ms: ${worst < TARGET_MS ? "within" : "OVER"} the ${TARGET_MS} ms target.`,
    );

    const verifyMs = await time(async () => {
      const result = await verifyAuditChain(db, keyring);
      if (!result.ok) throw new Error("the benchmark's own chain does not verify");
    });
    log(`audit verify over ${count.toLocaleString("en")} events: ${(verifyMs / 1000).toFixed(1)} s.`);
    sqlite.close();
    return pageRows;
  } finally {
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}

function whereOf(filter: AuditFilter): { sql: string; params: unknown[] } {
  const where = ["project_id = ?"];
  const params: unknown[] = [filter.projectId];
  if (filter.action) {
    where.push("action = ?");
    params.push(filter.action);
  } else if (filter.category) {
    where.push("category = ?");
    params.push(filter.category);
  }
  if (filter.actorUserId) {
    where.push("actor_user_id = ?");
    params.push(filter.actorUserId);
  }
  if (filter.fromAt) {
    where.push("at >= ?");
    params.push(filter.fromAt);
  }
  if (filter.toAt) {
    where.push(filter.toExclusive ? "at < ?" : "at <= ?");
    params.push(filter.toAt);
  }
  return { sql: where.join(" AND "), params };
}

function countMatches(db: Db, filter: AuditFilter): number {
  const { sql, params } = whereOf(filter);
  return db.$client
    .prepare(`SELECT count(*) FROM audit_events WHERE ${sql}`)
    .pluck()
    .get(...params) as number;
}

function deepEvent(db: Db, filter: AuditFilter, offset: number): { at: string; id: string } | undefined {
  if (offset < 1) return undefined;
  const { sql, params } = whereOf(filter);
  return db.$client
    .prepare(`SELECT at, id FROM audit_events WHERE ${sql} ORDER BY at DESC, id DESC LIMIT 1 OFFSET ?`)
    .get(...params, offset) as { at: string; id: string } | undefined;
}

function printTable(log: (line: string) => void, header: string[], rows: string[][]): void {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: string[]) => cells.map((c, i) => c.padEnd(widths[i]!)).join("  ");
  log(line(header));
  log(widths.map((w) => "-".repeat(w)).join("  "));
  for (const row of rows) log(line(row));
}
