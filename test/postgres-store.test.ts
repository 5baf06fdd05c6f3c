// The PostgreSQL connection layer (src/core/postgres.ts) against a real throwaway cluster:
// transactions keep SQLite's contract across two pools on one database (two servers),
// migrations run once under their lock, and an outage is one error type that the same pool
// recovers from once PostgreSQL is back.
import assert from "node:assert/strict";
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { after, before, test } from "node:test";
import { sql } from "drizzle-orm";
import pino from "pino";
import { ConfigError } from "../src/core/config.ts";
import {
  inPgTransaction,
  isDatabaseUnavailable,
  migratePostgres,
  onPgRollback,
  openPostgres,
  type PgStore,
  pgReadTransaction,
  pgWriteTransaction,
} from "../src/core/postgres.ts";
import { createStorageMonitor, storageCondition } from "../src/core/storage.ts";
import { ROOT, waitFor } from "./helpers.ts";
import { createDatabase, freezeCluster, startCluster, stopCluster, usePostgres } from "./postgres.ts";

const stores: PgStore[] = [];
/** Two "servers": two pools on one database. */
let a: PgStore;
let b: PgStore;
let rollbacks = 0;

async function open(url: string, options: Parameters<typeof openPostgres>[1] = {}): Promise<PgStore> {
  const store = await openPostgres(url, { connectionTimeoutMs: 3000, ...options });
  stores.push(store);
  return store;
}

/** What `promise` rejected with, or undefined when it resolved. */
function rejectionOf(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    () => undefined,
    (e: unknown) => e,
  );
}

async function counter(store: PgStore, id: string): Promise<number | undefined> {
  const result = await store.client().query<{ n: number }>("SELECT n FROM counters WHERE id = $1", [id]);
  return result.rows[0]?.n;
}

before(async () => {
  const url = await createDatabase();
  a = await open(url, { statementTimeoutMs: 7000 });
  b = await open(url);
  await a.client().query("CREATE TABLE counters (id text PRIMARY KEY, n integer NOT NULL)");
  onPgRollback(a, () => rollbacks++);
});

after(async () => {
  await Promise.all(stores.map((store) => store.close()));
});
usePostgres();

test("a write transaction commits through db() and client(); the statement timeout is set on the connections", async () => {
  await pgWriteTransaction(a, async () => {
    await a.db().execute(sql`INSERT INTO counters (id, n) VALUES ('commit', 1)`);
    await a.client().query("UPDATE counters SET n = n + 1 WHERE id = 'commit'");
  });
  assert.equal(await counter(b, "commit"), 2);
  assert.equal(rollbacks, 0);
  const setting = await a.client().query<{ statement_timeout: string }>("SHOW statement_timeout");
  assert.equal(setting.rows[0]?.statement_timeout, "7s");
});

test("a write transaction waits for PostgreSQL's disk even where the database turned synchronous_commit off", async () => {
  const url = await createDatabase();
  const relaxed = await open(url);
  const database = (await relaxed.client().query<{ db: string }>("SELECT current_database() AS db")).rows[0]!.db;
  await relaxed.client().query(`ALTER DATABASE "${database}" SET synchronous_commit = off`);
  // A new pool, whose connections take the database's setting.
  const store = await open(url);
  // The database's own setting, as another client sees it.
  assert.equal(
    (
      await relaxed
        .client()
        .query<{ s: string }>(
          "SELECT setting AS s FROM pg_db_role_setting, unnest(setconfig) AS setting WHERE setdatabase = (SELECT oid FROM pg_database WHERE datname = current_database()) AND setting LIKE 'synchronous_commit=%'",
        )
    ).rows[0]?.s,
    "synchronous_commit=off",
  );
  const inside = await pgWriteTransaction(store, async () => {
    return (await store.client().query<{ synchronous_commit: string }>("SHOW synchronous_commit")).rows[0]?.synchronous_commit;
  });
  assert.equal(inside, "local");
  // Outside a transaction too (a sign-out's DELETE, a session's touch).
  assert.equal(
    (await store.client().query<{ synchronous_commit: string }>("SHOW synchronous_commit")).rows[0]?.synchronous_commit,
    "local",
  );
  // Any other setting is left as it is (a standby setup's remote_apply, say).
  await relaxed.client().query(`ALTER DATABASE "${database}" SET synchronous_commit = remote_apply`);
  const standby = await open(url);
  const kept = await pgWriteTransaction(standby, async () => {
    return (await standby.client().query<{ synchronous_commit: string }>("SHOW synchronous_commit")).rows[0]?.synchronous_commit;
  });
  assert.equal(kept, "remote_apply");
});

test("a write transaction that throws rolls back, and the rollback listeners run", async () => {
  const before = rollbacks;
  await assert.rejects(
    pgWriteTransaction(a, async () => {
      await a.client().query("INSERT INTO counters (id, n) VALUES ('rolled-back', 1)");
      throw new Error("refused by the service");
    }),
    /refused by the service/,
  );
  assert.equal(await counter(b, "rolled-back"), undefined);
  assert.equal(rollbacks, before + 1);
});

test("a transaction whose failed statement was caught by its own code does not report a commit", async () => {
  const before = rollbacks;
  await assert.rejects(
    pgWriteTransaction(a, async () => {
      await a.client().query("INSERT INTO counters (id, n) VALUES ('swallowed', 1)");
      await a
        .client()
        .query("INSERT INTO counters (id, n) VALUES ('swallowed', 2)")
        .catch(() => {});
    }),
    /the transaction was rolled back: a statement in it failed/,
  );
  assert.equal(await counter(b, "swallowed"), undefined);
  assert.equal(rollbacks, before + 1);
});

test("two write transactions on two pools are serialized: read, await, write from both counts twice", async () => {
  await a.client().query("INSERT INTO counters (id, n) VALUES ('shared', 0)");
  let firstRead!: () => void;
  const firstHasRead = new Promise<void>((resolve) => {
    firstRead = resolve;
  });
  let secondHasRead = false;
  const increment = (store: PgStore, afterRead: () => Promise<void>) =>
    pgWriteTransaction(store, async () => {
      const n = await counter(store, "shared");
      await afterRead();
      await store.client().query("UPDATE counters SET n = $1 WHERE id = 'shared'", [(n ?? 0) + 1]);
    });
  const first = increment(a, async () => {
    firstRead();
    // Write only once the second server is waiting for the write lock (or, were there no
    // lock, has read the same 0): the read-then-write window is open while it tries.
    await waitFor("the second writer to wait for the lock", async () => secondHasRead || (await waitingForAdvisoryLock(b)));
  });
  await firstHasRead;
  const second = increment(b, async () => {
    secondHasRead = true;
  });
  await Promise.all([first, second]);
  assert.equal(await counter(a, "shared"), 2);
});

/** Whether some connection of `store`'s database waits for an advisory lock. */
async function waitingForAdvisoryLock(store: PgStore): Promise<boolean> {
  const result = await store.pool.query("SELECT count(*)::int AS c FROM pg_locks WHERE locktype = 'advisory' AND NOT granted");
  return result.rows[0].c > 0;
}

test("a writer that waits for the write lock past its timeout fails as SQLite's busy database does (503)", async () => {
  const impatient = await open(a.pool.options.connectionString as string, { writeLockTimeoutMs: 100 });
  let failure: unknown;
  await pgWriteTransaction(a, async () => {
    // Held by this server until the other one has given up.
    failure = await rejectionOf(pgWriteTransaction(impatient, () => "written"));
  });
  assert.equal(storageCondition(failure), "busy", String(failure));
  assert.equal(isDatabaseUnavailable(failure), false);
  // The lock is free again.
  assert.equal(await pgWriteTransaction(impatient, () => "written"), "written");
});

test("writes queued behind one another while another server holds the lock each fail busy within the one timeout, not one after another", async () => {
  const impatient = await open(a.pool.options.connectionString as string, { writeLockTimeoutMs: 400 });
  const started = Date.now();
  let failures: unknown[] = [];
  await pgWriteTransaction(a, async () => {
    // Eight writes of one server in its queue, the lock held elsewhere until all have given up.
    failures = await Promise.all(Array.from({ length: 8 }, () => rejectionOf(pgWriteTransaction(impatient, () => "written"))));
  });
  const elapsed = Date.now() - started;
  assert.deepEqual(
    failures.map((failure) => storageCondition(failure)),
    Array(8).fill("busy"),
  );
  // One after another, the last would have failed after 8 x 400 ms.
  assert.ok(elapsed < 2000, `all eight failed within ${elapsed} ms`);
  assert.equal(await pgWriteTransaction(impatient, () => "written"), "written");
});

test("a process that stalls while holding the write lock is cut off after the lock timeout: other writers go on, its work is rolled back", async () => {
  const stalling = await open(a.pool.options.connectionString as string, { writeLockTimeoutMs: 300 });
  const other = await open(a.pool.options.connectionString as string, { writeLockTimeoutMs: 3000 });
  let stalled!: () => void;
  const stall = new Promise<void>((resolve) => {
    stalled = resolve;
  });
  const failure = rejectionOf(
    pgWriteTransaction(stalling, async () => {
      await stalling.client().query("INSERT INTO counters (id, n) VALUES ('stalled', 1)");
      stalled();
      // Idle inside the transaction, the lock held, as a stopped process would be.
      await new Promise((resolve) => setTimeout(resolve, 1500));
      await stalling.client().query("INSERT INTO counters (id, n) VALUES ('stalled-after', 1)");
    }),
  );
  await stall;
  const started = Date.now();
  await pgWriteTransaction(other, () => other.client().query("INSERT INTO counters (id, n) VALUES ('went-on', 1)"));
  assert.ok(Date.now() - started < 1400, "the other writer got the lock before the stalled one woke");
  assert.equal(isDatabaseUnavailable(await failure), true, String(await failure));
  assert.equal(await counter(b, "went-on"), 1);
  assert.equal(await counter(b, "stalled"), undefined);
  assert.equal(await counter(b, "stalled-after"), undefined);
  // The stalled server's pool serves again.
  assert.equal(await pgWriteTransaction(stalling, () => "written"), "written");
});

test("sslmode in the URL is what pg does; a CA file that cannot be read stops the start with its name", async () => {
  // The test cluster listens on a Unix socket only, where PostgreSQL offers no TLS: a URL
  // that requires it is refused, and that is a configuration error, not an outage.
  const url = a.pool.options.connectionString as string;
  const tls = await open(`${url}&sslmode=require`);
  const error = await rejectionOf(tls.client().query("SELECT 1"));
  assert.match(String(error), /does not support SSL/);
  assert.equal(isDatabaseUnavailable(error), false);
  await assert.rejects(
    () => openPostgres(url, { caFile: path.join(ROOT, "no-such-ca.pem") }),
    (e: unknown) => e instanceof ConfigError && /^The CA file .*no-such-ca\.pem cannot be read: ENOENT\.$/.test(e.message),
  );
});

test("a read transaction sees one snapshot while another pool commits", async () => {
  await a.client().query("INSERT INTO counters (id, n) VALUES ('snapshot', 1)");
  const seen = await pgReadTransaction(a, async () => {
    const before = await counter(a, "snapshot");
    await pgWriteTransaction(b, () => b.client().query("UPDATE counters SET n = 2 WHERE id = 'snapshot'"));
    const afterCommit = await counter(a, "snapshot");
    return [before, afterCommit];
  });
  assert.deepEqual(seen, [1, 1]);
  assert.equal(await counter(a, "snapshot"), 2);
});

test("a nested transaction that fails rolls back to its savepoint and keeps the outer work; nested ones nest again; two at once are refused", async () => {
  const before = rollbacks;
  await pgWriteTransaction(a, async () => {
    await a.client().query("INSERT INTO counters (id, n) VALUES ('outer-1', 1)");
    await assert.rejects(
      pgWriteTransaction(a, async () => {
        await a.client().query("INSERT INTO counters (id, n) VALUES ('inner', 1)");
        throw new Error("inner failed");
      }),
      /inner failed/,
    );
    await a.client().query("INSERT INTO counters (id, n) VALUES ('outer-2', 1)");
    await pgReadTransaction(a, async () => {
      await a.client().query("INSERT INTO counters (id, n) VALUES ('level-1', 1)");
      await assert.rejects(
        pgWriteTransaction(a, async () => {
          await a.client().query("INSERT INTO counters (id, n) VALUES ('level-2', 1)");
          throw new Error("level 2 failed");
        }),
        /level 2 failed/,
      );
    });
    const overlapping = await Promise.allSettled([pgWriteTransaction(a, () => counter(a, "outer-1")), pgReadTransaction(a, () => 0)]);
    assert.deepEqual(
      overlapping.map((o) => o.status),
      ["fulfilled", "rejected"],
    );
    assert.match(String((overlapping[1] as PromiseRejectedResult).reason), /must run one after the other/);
  });
  assert.equal(await counter(b, "outer-1"), 1);
  assert.equal(await counter(b, "outer-2"), 1);
  assert.equal(await counter(b, "inner"), undefined);
  assert.equal(await counter(b, "level-1"), 1);
  assert.equal(await counter(b, "level-2"), undefined);
  assert.equal(rollbacks, before + 2);
  // A read transaction is READ ONLY: a write inside it is refused before its first statement.
  await assert.rejects(
    pgReadTransaction(a, () => pgWriteTransaction(a, () => 0)),
    /a write transaction cannot run inside a read transaction/,
  );
});

test("code outside a transaction is not inside it, even while it is open; work it leaves behind runs on the pool", async () => {
  let inserted!: () => void;
  const hasInserted = new Promise<void>((resolve) => {
    inserted = resolve;
  });
  let checked!: () => void;
  const outsideChecked = new Promise<void>((resolve) => {
    checked = resolve;
  });
  let leftBehind: Promise<boolean> | undefined;
  let release!: () => void;
  const later = new Promise<void>((resolve) => {
    release = resolve;
  });
  const transaction = pgWriteTransaction(a, async () => {
    await a.client().query("INSERT INTO counters (id, n) VALUES ('uncommitted', 1)");
    assert.equal(inPgTransaction(a), true);
    assert.notEqual(a.client(), a.pool);
    // Not inside the other store's transactions either.
    assert.equal(inPgTransaction(b), false);
    leftBehind = later.then(() => inPgTransaction(a));
    inserted();
    await outsideChecked;
  });
  await hasInserted;
  assert.equal(inPgTransaction(a), false);
  assert.equal(a.client(), a.pool);
  // On another connection: the open transaction's row is not visible yet.
  assert.equal(await counter(a, "uncommitted"), undefined);
  checked();
  await transaction;
  release();
  assert.equal(await leftBehind, false);
  assert.equal(await counter(a, "uncommitted"), 1);
});

test("two servers migrating one database at once apply each migration once; a newer database is refused", async () => {
  const url = await createDatabase();
  const first = await open(url);
  const second = await open(url);
  await Promise.all([migratePostgres(first), migratePostgres(second)]);
  // The lock is let go, and the connection that held it stays in the pool for what follows.
  const heldLocks = async () =>
    (
      await first.pool.query(
        "SELECT count(*)::int AS c FROM pg_locks WHERE locktype = 'advisory' AND database = (SELECT oid FROM pg_database WHERE datname = current_database())",
      )
    ).rows[0].c;
  assert.equal(await heldLocks(), 0);
  assert.deepEqual([second.pool.totalCount, second.pool.idleCount], [1, 1]);
  const journal = JSON.parse(fs.readFileSync(path.join(ROOT, "migrations", "postgres", "meta", "_journal.json"), "utf8")) as {
    entries: unknown[];
  };
  const applied = await first.pool.query("SELECT count(*)::int AS c, max(created_at)::text AS newest FROM drizzle.__drizzle_migrations");
  assert.equal(applied.rows[0].c, journal.entries.length);
  const table = await first.pool.query("SELECT to_regclass('public.audit_events')::text AS t");
  assert.equal(table.rows[0].t, "audit_events");
  // Started again: nothing to apply.
  await migratePostgres(first);
  const again = await first.pool.query("SELECT count(*)::int AS c FROM drizzle.__drizzle_migrations");
  assert.equal(again.rows[0].c, journal.entries.length);

  await first.pool.query("INSERT INTO drizzle.__drizzle_migrations (hash, created_at) VALUES ('from-a-newer-version', $1)", [
    Number(applied.rows[0].newest) + 1000,
  ]);
  await assert.rejects(migratePostgres(second), (error: unknown) => {
    assert.ok(error instanceof ConfigError);
    assert.equal(
      error.message,
      "The database at DATABASE_URL was upgraded by a newer version of secrets-server, which this version cannot use. Run the newer version, or restore the backup taken before the upgrade.",
    );
    return true;
  });
  // Refused, the migration closes its connection rather than trust the lock to be let go
  // (its session ends a moment after the close).
  await waitFor("the refused migration's session to end", async () => (await heldLocks()) === 0, 5000);
  assert.deepEqual([second.pool.totalCount, second.pool.idleCount], [0, 0]);
});

test("a database in a single-byte encoding is refused at start, before anything is written to it", async () => {
  const store = await open(await createDatabase({ encoding: "LATIN1" }));
  await assert.rejects(migratePostgres(store), (error: unknown) => {
    assert.ok(error instanceof ConfigError);
    assert.equal(
      error.message,
      "The database at DATABASE_URL uses the LATIN1 encoding; secrets-server needs UTF8. Create the database with ENCODING 'UTF8' (createdb -E UTF8 -T template0).",
    );
    return true;
  });
  const tables = await store.pool.query("SELECT count(*)::int AS c FROM pg_tables WHERE schemaname = 'public'");
  assert.equal(tables.rows[0].c, 0);
});

test("a server starting while another migrates waits for it, whatever its statement timeout; the pooled connection keeps that timeout", async () => {
  const url = await createDatabase();
  const holder = await open(url);
  // pg's own read timeout on this pool's clients is 1 + 0.5 s: the wait below is longer than both.
  const starting = await open(url, { statementTimeoutMs: 1000, connectionTimeoutMs: 500 });
  const held = await holder.pool.connect();
  await held.query("SELECT pg_advisory_lock(1397048146, 2)");
  const migrating = migratePostgres(starting);
  await new Promise((resolve) => setTimeout(resolve, 2500));
  await held.query("SELECT pg_advisory_unlock(1397048146, 2)");
  held.release();
  await migrating;
  const applied = await starting.pool.query("SELECT count(*)::int AS c FROM drizzle.__drizzle_migrations");
  assert.ok(applied.rows[0].c > 0);
  assert.deepEqual([starting.pool.totalCount, starting.pool.idleCount], [1, 1]);
  assert.equal((await starting.pool.query("SHOW statement_timeout")).rows[0].statement_timeout, "1s");
});

test("a connection the server terminates inside a transaction fails it as database unavailable; the next one runs", async () => {
  const before = rollbacks;
  const failure = await rejectionOf(
    pgWriteTransaction(a, async () => {
      const pid = (await a.client().query<{ pid: number }>("SELECT pg_backend_pid() AS pid")).rows[0]?.pid;
      await b.pool.query("SELECT pg_terminate_backend($1)", [pid]);
      await a.client().query("INSERT INTO counters (id, n) VALUES ('terminated', 1)");
    }),
  );
  assert.equal(isDatabaseUnavailable(failure), true, String(failure));
  assert.equal(rollbacks, before + 1);
  await pgWriteTransaction(a, () => a.client().query("INSERT INTO counters (id, n) VALUES ('terminated', 1)"));
  assert.equal(await counter(b, "terminated"), 1);
});

test("a connection that breaks while the health probe holds it answers unreachable, and the process goes on", {
  timeout: 20_000,
}, async (t) => {
  // A TCP proxy in front of the cluster: it stops passing the client's bytes on when held
  // (a statement sent, no answer), and cuts every connection on demand.
  // The cluster listens on a Unix socket: postgres://user@/db?host=<its folder>.
  const target = new URL((await createDatabase()).replace("@/", "@localhost/"));
  const socketFile = path.join(target.searchParams.get("host")!, `.s.PGSQL.${target.port || 5432}`);
  const sockets = new Set<net.Socket>();
  let held = false;
  const proxy = net.createServer((client) => {
    const upstream = net.connect(socketFile);
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.on("error", () => {});
    }
    client.on("data", (chunk) => {
      if (!held) upstream.write(chunk);
    });
    upstream.pipe(client);
  });
  await new Promise<void>((resolve) => proxy.listen(0, "127.0.0.1", resolve));
  t.after(() => new Promise<void>((resolve) => proxy.close(() => resolve())));
  const store = await open(`postgres://${target.username}@127.0.0.1:${(proxy.address() as net.AddressInfo).port}${target.pathname}`);
  // One idle connection in the pool, which the probe takes.
  await store.client().query("SELECT 1");

  const monitor = createStorageMonitor(store, fs.mkdtempSync(path.join(os.tmpdir(), "probe-")), pino({ level: "silent" }));
  held = true;
  const health = monitor.health();
  await waitFor("the probe's statement on its way", async () => store.pool.idleCount === 0);
  for (const socket of sockets) socket.destroy();
  const answer = await health;
  assert.equal(answer.ok, false);
  assert.match(String(answer.reason), /cannot reach its database/);
});

test("a request that waits past the connection timeout for one of a full pool's connections is busy, not unreachable", async () => {
  const store = await open(await createDatabase(), { poolSize: 1, connectionTimeoutMs: 300 });
  const held = await store.pool.connect();
  try {
    const error = await rejectionOf(store.client().query("SELECT 1"));
    assert.equal(isDatabaseUnavailable(error), false, String(error));
    assert.equal(storageCondition(error), "busy");
  } finally {
    held.release();
  }
  assert.equal((await store.client().query("SELECT 1 AS one")).rows[0].one, 1);
});

test("a server that does not answer fails within the connection timeout as database unavailable", { timeout: 20_000 }, async () => {
  const url = await createDatabase();
  const thaw = await freezeCluster();
  try {
    const store = await open(url, { connectionTimeoutMs: 300 });
    const error = await rejectionOf(store.client().query("SELECT 1"));
    assert.equal(isDatabaseUnavailable(error), true, String(error));
    const inTransaction = await rejectionOf(pgWriteTransaction(store, () => 0));
    assert.equal(isDatabaseUnavailable(inTransaction), true, String(inTransaction));
  } finally {
    thaw();
  }
});

test("PostgreSQL stopped: statements fail as database unavailable (503), and the same pools serve again once it is back", {
  timeout: 20_000,
}, async () => {
  // Connections idle in both pools when the server goes away.
  await Promise.all([counter(a, "commit"), counter(b, "commit")]);
  await stopCluster();
  let restarted = false;
  try {
    const outside = await rejectionOf(counter(a, "commit"));
    assert.equal(isDatabaseUnavailable(outside), true, String(outside));
    assert.equal(storageCondition(outside), "unreachable");
    const throughDrizzle = await rejectionOf(b.db().execute(sql`SELECT 1`));
    assert.equal(isDatabaseUnavailable(throughDrizzle), true, String(throughDrizzle));
    assert.equal(storageCondition(throughDrizzle), "unreachable");
    const inTransaction = await rejectionOf(pgWriteTransaction(a, () => counter(a, "commit")));
    assert.equal(isDatabaseUnavailable(inTransaction), true, String(inTransaction));
    await startCluster();
    restarted = true;
  } finally {
    if (!restarted) await startCluster();
  }
  assert.equal(await counter(a, "commit"), 2);
  assert.equal(await pgWriteTransaction(b, () => counter(b, "commit")), 2);
  assert.equal(await pgReadTransaction(a, () => counter(a, "commit")), 2);
});
