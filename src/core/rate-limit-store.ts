// @fastify/rate-limit's store, counted in the database so that neither a restart nor a
// second server process on the same DATA_DIR (or PostgreSQL database) hands anyone a fresh allowance.
//
// Two ways of counting, by cost:
// - A limit of its own (sign-in, device start, code approval, exports, imports, Vercel,
//   every route that names one) is counted exactly: one UPSERT … RETURNING per request
//   counts it and reads the total in the same statement, so two processes can never both
//   let the last allowed request through. These routes are rare; the write is cheap.
// - The global limit guards every other request, reads of secrets included. Counting it
//   exactly would add a write (an fsync at SQLITE_SYNCHRONOUS=full) to every read, so it is
//   counted in memory and merged into the database every few seconds and at close: each
//   process then adds what it counted and takes back the total of all of them. Across
//   processes a caller may overshoot it by what the others let through since their last
//   merge (README, "Several server processes on one data folder").
import { makeRoom } from "./bounded-map.ts";
import type { Clock } from "./clock.ts";
import { type Db, guard } from "./db.ts";
import { type PgStore, pgRow, pgRows, pgRun } from "./postgres.ts";
import { isPostgres, type Store, writeTransaction } from "./store.ts";

/** What the plugin passes to `child()`: the route's merged options and the route itself. */
interface LimitOptions {
  routeInfo?: { method?: string | string[]; url?: string };
}

type Callback = (error: Error | null, result: { current: number; ttl: number }) => void;

interface Window {
  /** The count as last known: the database's total at the last merge, plus `unsaved`. */
  current: number;
  /** Counted here since the last merge. */
  unsaved: number;
  startedAtMs: number;
  /** The window's length as last used, so saving knows when it ends. */
  windowMs: number;
}

/** A limit's scope in the keys: its route, or " " for a limiter made with createRateLimit. */
function scopeOf(options: object): string {
  const route = (options as LimitOptions).routeInfo;
  return `${[route?.method ?? ""].flat().join(",")} ${route?.url ?? ""}`;
}

/** Global windows kept in memory at most; past it the expired ones go, then the oldest. */
const MAX_WINDOWS = 50_000;

export interface RateLimitStoreOptions {
  /** How often the global counts are merged (5 s); a crash loses at most this much counting. */
  saveEveryMs?: number;
}

/** One window's merge: what was sent (`merged` of `window`'s unsaved count) and the total the database holds now. */
interface Merged {
  key: string;
  window: Window;
  merged: number;
  total: { count: number; started_at: string; expires_at: string };
}

/** A window's row as the database holds it. */
interface WindowRow {
  key: string;
  count: number;
  started_at: string;
  expires_at: string;
}

/** One global window's count to add, and the window it starts should the stored one have ended. */
interface MergeRow {
  key: string;
  unsaved: number;
  startedAt: string;
  expiresAt: string;
}

/** The statements of the store, one implementation per database. */
interface RateLimitRepo {
  /** Counts one request of an exact limit and answers the total, in one statement. */
  count(params: { key: string; now: string; expiresAt: string }): Promise<{ count: number; expires_at: string }>;
  read(key: string, now: string): Promise<{ count: number; expires_at: string } | undefined>;
  /** The live global windows, when the store starts (at once on SQLite). */
  loadLive(now: string): WindowRow[] | Promise<WindowRow[]>;
  /** Adds each row's count to its window (restarting windows that ended) and answers the totals; inside the caller's transaction. */
  merge(rows: MergeRow[], now: string): Promise<WindowRow[]>;
  removeExpired(now: string): Promise<void>;
}

function createRateLimitRepo(store: Store): RateLimitRepo {
  return isPostgres(store) ? createRateLimitRepoPg(store) : createRateLimitRepoSqlite(store);
}

function createRateLimitRepoSqlite(db: Db): RateLimitRepo {
  const sqlite = db.$client;
  // A window that ended is started afresh by the same statement, so the first request of a
  // new window is never refused on the old count.
  const countExactly = sqlite.prepare(
    `INSERT INTO rate_limit_windows (key, count, started_at, expires_at) VALUES (@key, 1, @now, @expiresAt)
     ON CONFLICT (key) DO UPDATE SET
       count = CASE WHEN rate_limit_windows.expires_at <= @now THEN 1 ELSE rate_limit_windows.count + 1 END,
       started_at = CASE WHEN rate_limit_windows.expires_at <= @now THEN @now ELSE rate_limit_windows.started_at END,
       expires_at = CASE WHEN rate_limit_windows.expires_at <= @now THEN @expiresAt ELSE rate_limit_windows.expires_at END
     RETURNING count, expires_at`,
  );
  const readExactly = sqlite.prepare("SELECT count, expires_at FROM rate_limit_windows WHERE key = ? AND expires_at > ?");
  const loadLive = sqlite.prepare(
    "SELECT key, count, started_at, expires_at FROM rate_limit_windows WHERE key LIKE 'global' || char(10) || '%' AND expires_at > ?",
  );
  const merge = sqlite.prepare(
    `INSERT INTO rate_limit_windows (key, count, started_at, expires_at) VALUES (@key, @unsaved, @startedAt, @expiresAt)
     ON CONFLICT (key) DO UPDATE SET
       count = CASE WHEN rate_limit_windows.expires_at <= @now THEN @unsaved ELSE rate_limit_windows.count + @unsaved END,
       started_at = CASE WHEN rate_limit_windows.expires_at <= @now THEN @startedAt ELSE rate_limit_windows.started_at END,
       expires_at = CASE WHEN rate_limit_windows.expires_at <= @now THEN @expiresAt ELSE rate_limit_windows.expires_at END
     RETURNING key, count, started_at, expires_at`,
  );
  const removeExpired = sqlite.prepare("DELETE FROM rate_limit_windows WHERE expires_at <= ?");
  // Through the connection's gate (core/db.ts): a count is never made inside another request's transaction.
  const guarded = guard(db, {
    count: (params: { key: string; now: string; expiresAt: string }) => countExactly.get(params) as { count: number; expires_at: string },
    read: (key: string, now: string) => readExactly.get(key, now) as { count: number; expires_at: string } | undefined,
    merge: (rows: MergeRow[], now: string) => rows.map((row) => merge.get({ ...row, now }) as WindowRow),
    removeExpired: (now: string): void => {
      removeExpired.run(now);
    },
  });
  return { ...guarded, loadLive: (now) => loadLive.all(now) as WindowRow[] };
}

function createRateLimitRepoPg(store: PgStore): RateLimitRepo {
  return {
    async count({ key, now, expiresAt }) {
      // One statement, as on SQLite: two servers counting the same key together queue on its row.
      const row = await pgRow<{ count: number; expires_at: string }>(
        store,
        `INSERT INTO rate_limit_windows (key, count, started_at, expires_at) VALUES ($1, 1, $2, $3)
         ON CONFLICT (key) DO UPDATE SET
           count = CASE WHEN rate_limit_windows.expires_at <= $2 THEN 1 ELSE rate_limit_windows.count + 1 END,
           started_at = CASE WHEN rate_limit_windows.expires_at <= $2 THEN $2 ELSE rate_limit_windows.started_at END,
           expires_at = CASE WHEN rate_limit_windows.expires_at <= $2 THEN $3 ELSE rate_limit_windows.expires_at END
         RETURNING count, expires_at`,
        [key, now, expiresAt],
      );
      return row as { count: number; expires_at: string };
    },
    read: (key, now) =>
      pgRow<{ count: number; expires_at: string }>(
        store,
        "SELECT count, expires_at FROM rate_limit_windows WHERE key = $1 AND expires_at > $2",
        [key, now],
      ),
    loadLive: (now) =>
      pgRows<WindowRow>(store, "SELECT key, count, started_at, expires_at FROM rate_limit_windows WHERE key LIKE $1 AND expires_at > $2", [
        "global\n%",
        now,
      ]),
    // Every window in one statement: the merge holds the write lock, and a round trip per
    // window would hold it for as many round trips. The keys are distinct, as ON CONFLICT
    // DO UPDATE requires of one statement.
    merge: (rows, now) =>
      rows.length === 0
        ? Promise.resolve([])
        : pgRows<WindowRow>(
            store,
            `INSERT INTO rate_limit_windows (key, count, started_at, expires_at)
             SELECT * FROM unnest($1::text[], $2::integer[], $3::text[], $4::text[])
             ON CONFLICT (key) DO UPDATE SET
               count = CASE WHEN rate_limit_windows.expires_at <= $5 THEN excluded.count ELSE rate_limit_windows.count + excluded.count END,
               started_at = CASE WHEN rate_limit_windows.expires_at <= $5 THEN excluded.started_at ELSE rate_limit_windows.started_at END,
               expires_at = CASE WHEN rate_limit_windows.expires_at <= $5 THEN excluded.expires_at ELSE rate_limit_windows.expires_at END
             RETURNING key, count, started_at, expires_at`,
            [rows.map((r) => r.key), rows.map((r) => r.unsaved), rows.map((r) => r.startedAt), rows.map((r) => r.expiresAt), now],
          ),
    async removeExpired(now) {
      await pgRun(store, "DELETE FROM rate_limit_windows WHERE expires_at <= $1", [now]);
    },
  };
}

export function createRateLimitStore(store: Store, clock: Clock, options: RateLimitStoreOptions = {}) {
  const repo = createRateLimitRepo(store);
  const windows = new Map<string, Window>();
  const changed = new Set<string>();

  const mergeChanged = async (keys: string[], now: string): Promise<Merged[]> => {
    const batch: { window: Window; row: MergeRow }[] = [];
    for (const key of keys) {
      const window = windows.get(key);
      if (!window) continue;
      const expiresAtMs = window.startedAtMs + window.windowMs;
      // Ended here meanwhile: nothing of it to add.
      if (expiresAtMs <= Date.parse(now)) continue;
      batch.push({
        window,
        row: {
          key,
          unsaved: window.unsaved,
          startedAt: new Date(window.startedAtMs).toISOString(),
          expiresAt: new Date(expiresAtMs).toISOString(),
        },
      });
    }
    const rows = await repo.merge(
      batch.map((b) => b.row),
      now,
    );
    const totals = new Map(rows.map((total) => [total.key, total]));
    await repo.removeExpired(now);
    const merged: Merged[] = [];
    for (const { window, row } of batch) {
      const total = totals.get(row.key);
      if (total) merged.push({ key: row.key, window, merged: row.unsaved, total });
    }
    return merged;
  };

  /**
   * Applied only once the merge committed: a rolled-back merge keeps every count unsaved.
   * Requests counted between the merge and its commit stay unsaved on top of the total; a
   * window that restarted meanwhile is left as it is (the total was the old window's).
   */
  function adopt(totals: Merged[]): void {
    for (const { key, window, merged, total } of totals) {
      if (windows.get(key) !== window) continue;
      const left = window.unsaved - merged;
      const startedAtMs = Date.parse(total.started_at);
      windows.set(key, { current: total.count + left, unsaved: left, startedAtMs, windowMs: Date.parse(total.expires_at) - startedAtMs });
      if (left > 0) changed.add(key);
    }
  }

  function adoptLive(rows: WindowRow[]): void {
    for (const row of rows) {
      const startedAtMs = Date.parse(row.started_at);
      windows.set(row.key, { current: row.count, unsaved: 0, startedAtMs, windowMs: Date.parse(row.expires_at) - startedAtMs });
    }
  }

  // SQLite answers at once. PostgreSQL answers later: until then the global limit waits, so
  // that no one is counted from zero meanwhile. A load that fails leaves the counts at zero
  // (as a fresh database would) and is reported once start() has somewhere to report it.
  let loading: Promise<void> | undefined;
  let loadError: unknown;
  const live = repo.loadLive(clock.now().toISOString());
  if (Array.isArray(live)) {
    adoptLive(live);
  } else {
    loading = live.then(adoptLive, (error: unknown) => {
      loadError = error;
    });
    void loading.then(() => {
      loading = undefined;
    });
  }

  /** The global limit: counted in memory, merged every few seconds. */
  class GlobalStore {
    incr(key: string, callback: Callback, windowMs: number): void {
      if (loading !== undefined) {
        void loading.then(() => this.incr(key, callback, windowMs));
        return;
      }
      const nowMs = clock.now().getTime();
      const id = `global\n${key}`;
      let window = windows.get(id);
      if (!window || window.startedAtMs + windowMs <= nowMs) {
        // Still full of live windows after the expired ones go (a flood of distinct keys): the oldest go first.
        if (!window && windows.size >= MAX_WINDOWS) makeRoom(windows, MAX_WINDOWS, (w) => w.startedAtMs + w.windowMs <= nowMs);
        window = { current: 1, unsaved: 1, startedAtMs: nowMs, windowMs };
        windows.set(id, window);
      } else {
        window.current += 1;
        window.unsaved += 1;
        window.windowMs = windowMs;
      }
      changed.add(id);
      callback(null, { current: window.current, ttl: window.startedAtMs + windowMs - nowMs });
    }

    read(key: string, callback: Callback, windowMs: number): void {
      if (loading !== undefined) {
        void loading.then(() => this.read(key, callback, windowMs));
        return;
      }
      const nowMs = clock.now().getTime();
      const window = windows.get(`global\n${key}`);
      if (!window || window.startedAtMs + windowMs <= nowMs) callback(null, { current: 0, ttl: 0 });
      else callback(null, { current: window.current, ttl: window.startedAtMs + windowMs - nowMs });
    }

    // Typed as a route by the plugin, but at run time the route's merged limit options with
    // the route under `routeInfo`.
    child(options: object): ExactStore {
      return new ExactStore(scopeOf(options));
    }
  }

  /**
   * Windows known to be over their limit, and until when: within a window a count only
   * grows, so refusing from here is as exact as asking the database, and a flood past a
   * limit costs no write per request.
   */
  const exceeded = new Map<string, { count: number; expiresAtMs: number }>();

  /** A limit of its own: counted in the database, in the statement that reads the total. */
  class ExactStore {
    private readonly scope: string;

    constructor(scope: string) {
      this.scope = scope;
    }

    incr(key: string, callback: Callback, windowMs: number, max?: number): void {
      const now = clock.now();
      const id = `${this.scope}\n${key}`;
      const over = exceeded.get(id);
      if (over && over.expiresAtMs > now.getTime()) {
        callback(null, { current: over.count, ttl: over.expiresAtMs - now.getTime() });
        return;
      }
      repo.count({ key: id, now: now.toISOString(), expiresAt: new Date(now.getTime() + windowMs).toISOString() }).then(
        (total) => this.counted(id, total, now, callback, max),
        (error: unknown) => callback(error as Error, { current: 0, ttl: 0 }),
      );
    }

    private counted(id: string, total: { count: number; expires_at: string }, now: Date, callback: Callback, max?: number): void {
      const expiresAtMs = Date.parse(total.expires_at);
      if (typeof max === "number" && total.count > max) {
        if (exceeded.size >= MAX_WINDOWS) makeRoom(exceeded, MAX_WINDOWS, (entry) => entry.expiresAtMs <= now.getTime());
        exceeded.set(id, { count: total.count, expiresAtMs });
      }
      callback(null, { current: total.count, ttl: expiresAtMs - now.getTime() });
    }

    read(key: string, callback: Callback): void {
      const now = clock.now();
      repo.read(`${this.scope}\n${key}`, now.toISOString()).then(
        (row) => {
          if (!row) callback(null, { current: 0, ttl: 0 });
          else callback(null, { current: row.count, ttl: Date.parse(row.expires_at) - now.getTime() });
        },
        (error: unknown) => callback(error as Error, { current: 0, ttl: 0 }),
      );
    }

    child(options: object): ExactStore {
      return new ExactStore(scopeOf(options));
    }
  }

  /** Merges the global windows that changed since the last merge, and drops expired rows. */
  async function save(): Promise<void> {
    if (changed.size === 0) return;
    const keys = [...changed];
    changed.clear();
    try {
      adopt(await writeTransaction(store, () => mergeChanged(keys, clock.now().toISOString())));
    } catch (error) {
      // The database is busy or failing: keep counting in memory and try again next time.
      for (const key of keys) changed.add(key);
      throw error;
    }
  }

  let timer: NodeJS.Timeout | undefined;

  return {
    /** The class to pass as the plugin's `store` option: the plugin makes the global one, routes their children. */
    Store: GlobalStore,
    save,
    /** Merges every few seconds until stop(); the timer does not keep the process alive. */
    start(onError: (error: unknown) => void): void {
      void (loading ?? Promise.resolve()).then(() => {
        if (loadError !== undefined) onError(loadError);
      });
      timer = setInterval(() => {
        save().catch(onError);
      }, options.saveEveryMs ?? 5000);
      timer.unref();
    },
    /** Stops the timer and merges once more (at close, before the database closes). */
    async stop(): Promise<void> {
      clearInterval(timer);
      await save();
    },
  };
}
