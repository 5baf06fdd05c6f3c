// @fastify/rate-limit's store, counted in the database so that neither a restart nor a
// second server process on the same DATA_DIR hands anyone a fresh allowance.
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
import type { Clock } from "./clock.ts";
import { type Db, guard, writeTransaction } from "./db.ts";

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

export function createRateLimitStore(db: Db, clock: Clock, options: RateLimitStoreOptions = {}) {
  const sqlite = db.$client;
  const windows = new Map<string, Window>();
  const changed = new Set<string>();

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
     RETURNING count, started_at, expires_at`,
  );
  const removeExpired = sqlite.prepare("DELETE FROM rate_limit_windows WHERE expires_at <= ?");
  // Through the connection's gate (core/db.ts): a count is never made inside another request's transaction.
  const exact = guard(db, {
    count: (params: { key: string; now: string; expiresAt: string }) => countExactly.get(params) as { count: number; expires_at: string },
    read: (key: string, now: string) => readExactly.get(key, now) as { count: number; expires_at: string } | undefined,
  });
  const mergeChanged = (keys: string[], now: string) => {
    const totals: [string, { count: number; started_at: string; expires_at: string }][] = [];
    for (const key of keys) {
      const window = windows.get(key);
      if (!window) continue;
      const expiresAtMs = window.startedAtMs + window.windowMs;
      // Ended here meanwhile: nothing of it to add.
      if (expiresAtMs <= Date.parse(now)) continue;
      const total = merge.get({
        key,
        unsaved: window.unsaved,
        now,
        startedAt: new Date(window.startedAtMs).toISOString(),
        expiresAt: new Date(expiresAtMs).toISOString(),
      }) as { count: number; started_at: string; expires_at: string };
      totals.push([key, total]);
    }
    removeExpired.run(now);
    return totals;
  };

  /** Applied only once the merge committed: a rolled-back merge keeps every count unsaved. */
  function adopt(totals: [string, { count: number; started_at: string; expires_at: string }][]): void {
    for (const [key, total] of totals) {
      const startedAtMs = Date.parse(total.started_at);
      windows.set(key, { current: total.count, unsaved: 0, startedAtMs, windowMs: Date.parse(total.expires_at) - startedAtMs });
    }
  }

  for (const row of loadLive.all(clock.now().toISOString()) as { key: string; count: number; started_at: string; expires_at: string }[]) {
    const startedAtMs = Date.parse(row.started_at);
    windows.set(row.key, { current: row.count, unsaved: 0, startedAtMs, windowMs: Date.parse(row.expires_at) - startedAtMs });
  }

  function makeRoom(nowMs: number): void {
    for (const [key, window] of windows) {
      if (window.startedAtMs + window.windowMs <= nowMs) windows.delete(key);
    }
    // Still full of live windows (a flood of distinct keys): the oldest inserted go first.
    for (const key of windows.keys()) {
      if (windows.size < MAX_WINDOWS) break;
      windows.delete(key);
    }
  }

  /** The global limit: counted in memory, merged every few seconds. */
  class GlobalStore {
    incr(key: string, callback: Callback, windowMs: number): void {
      const nowMs = clock.now().getTime();
      const id = `global\n${key}`;
      let window = windows.get(id);
      if (!window || window.startedAtMs + windowMs <= nowMs) {
        if (!window && windows.size >= MAX_WINDOWS) makeRoom(nowMs);
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
    constructor(private readonly scope: string) {}

    incr(key: string, callback: Callback, windowMs: number, max?: number): void {
      const now = clock.now();
      const id = `${this.scope}\n${key}`;
      const over = exceeded.get(id);
      if (over && over.expiresAtMs > now.getTime()) {
        callback(null, { current: over.count, ttl: over.expiresAtMs - now.getTime() });
        return;
      }
      exact.count({ key: id, now: now.toISOString(), expiresAt: new Date(now.getTime() + windowMs).toISOString() }).then(
        (total) => this.counted(id, total, now, callback, max),
        (error: unknown) => callback(error as Error, { current: 0, ttl: 0 }),
      );
    }

    private counted(id: string, total: { count: number; expires_at: string }, now: Date, callback: Callback, max?: number): void {
      const expiresAtMs = Date.parse(total.expires_at);
      if (typeof max === "number" && total.count > max) {
        if (exceeded.size >= MAX_WINDOWS) {
          for (const [other, entry] of exceeded)
            if (entry.expiresAtMs <= now.getTime() || exceeded.size >= MAX_WINDOWS) exceeded.delete(other);
        }
        exceeded.set(id, { count: total.count, expiresAtMs });
      }
      callback(null, { current: total.count, ttl: expiresAtMs - now.getTime() });
    }

    read(key: string, callback: Callback): void {
      const now = clock.now();
      exact.read(`${this.scope}\n${key}`, now.toISOString()).then(
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
      adopt(await writeTransaction(db, () => mergeChanged(keys, clock.now().toISOString())));
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
