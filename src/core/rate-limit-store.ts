// @fastify/rate-limit's store, counted in memory like its LocalStore but saved to the
// database, so a restart does not give every caller a fresh allowance. A write per request
// would cost an fsync on every read of a secret: the windows that changed are saved together
// every few seconds and at close, and the unexpired ones are loaded at start.
import type { Clock } from "./clock.ts";
import type { Db } from "./db.ts";

/** What the plugin passes to `child()`: the route's merged options and the route itself. */
interface LimitOptions {
  routeInfo?: { method?: string | string[]; url?: string };
}

type Callback = (error: Error | null, result: { current: number; ttl: number }) => void;

interface Window {
  current: number;
  startedAtMs: number;
  /** The window's length as last used, so saving knows when it ends. */
  windowMs: number;
}

/** Windows kept in memory at most; past it the expired ones go, then the oldest. */
const MAX_WINDOWS = 50_000;

export interface RateLimitStoreOptions {
  /** How often changed windows are saved (5 s); a crash loses at most this much counting. */
  saveEveryMs?: number;
}

export function createRateLimitStore(db: Db, clock: Clock, options: RateLimitStoreOptions = {}) {
  const sqlite = db.$client;
  const windows = new Map<string, Window>();
  const changed = new Set<string>();

  const loadLive = sqlite.prepare("SELECT key, count, started_at, expires_at FROM rate_limit_windows WHERE expires_at > ?");
  const upsert = sqlite.prepare(
    `INSERT INTO rate_limit_windows (key, count, started_at, expires_at) VALUES (@key, @count, @startedAt, @expiresAt)
     ON CONFLICT (key) DO UPDATE SET count = excluded.count, started_at = excluded.started_at, expires_at = excluded.expires_at`,
  );
  const removeExpired = sqlite.prepare("DELETE FROM rate_limit_windows WHERE expires_at <= ?");
  const saveChanged = sqlite.transaction((keys: string[], now: string) => {
    for (const key of keys) {
      const window = windows.get(key);
      if (!window) continue;
      upsert.run({
        key,
        count: window.current,
        startedAt: new Date(window.startedAtMs).toISOString(),
        expiresAt: new Date(window.startedAtMs + window.windowMs).toISOString(),
      });
    }
    removeExpired.run(now);
  });

  for (const row of loadLive.all(clock.now().toISOString()) as { key: string; count: number; started_at: string; expires_at: string }[]) {
    const startedAtMs = Date.parse(row.started_at);
    windows.set(row.key, { current: row.count, startedAtMs, windowMs: Date.parse(row.expires_at) - startedAtMs });
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

  /** One limit's view of the shared windows: the global limit, or one route's. */
  class PersistentStore {
    private readonly scope: string;

    // The plugin constructs the global store itself, passing its options: that one is "global".
    constructor(scope?: unknown) {
      this.scope = typeof scope === "string" ? scope : "global";
    }

    incr(key: string, callback: Callback, windowMs: number): void {
      const nowMs = clock.now().getTime();
      const id = `${this.scope}\n${key}`;
      let window = windows.get(id);
      if (!window || window.startedAtMs + windowMs <= nowMs) {
        if (!window && windows.size >= MAX_WINDOWS) makeRoom(nowMs);
        window = { current: 1, startedAtMs: nowMs, windowMs };
        windows.set(id, window);
      } else {
        window.current += 1;
        window.windowMs = windowMs;
      }
      changed.add(id);
      callback(null, { current: window.current, ttl: window.startedAtMs + windowMs - nowMs });
    }

    read(key: string, callback: Callback, windowMs: number): void {
      const nowMs = clock.now().getTime();
      const window = windows.get(`${this.scope}\n${key}`);
      if (!window || window.startedAtMs + windowMs <= nowMs) callback(null, { current: 0, ttl: 0 });
      else callback(null, { current: window.current, ttl: window.startedAtMs + windowMs - nowMs });
    }

    // Typed as a route by the plugin, but at run time the route's merged limit options with
    // the route under `routeInfo`.
    child(options: object): PersistentStore {
      const route = (options as LimitOptions).routeInfo;
      return new PersistentStore(`${[route?.method ?? ""].flat().join(",")} ${route?.url ?? ""}`);
    }
  }

  /** Saves the windows that changed since the last save, and drops the expired rows. */
  function save(): void {
    if (changed.size === 0) return;
    const keys = [...changed];
    changed.clear();
    try {
      saveChanged(keys, clock.now().toISOString());
    } catch (error) {
      // The database is busy or failing: keep counting in memory and try again next time.
      for (const key of keys) changed.add(key);
      throw error;
    }
  }

  let timer: NodeJS.Timeout | undefined;

  return {
    /** The class to pass as the plugin's `store` option. */
    Store: PersistentStore,
    save,
    /** Saves every few seconds until stop(); the timer does not keep the process alive. */
    start(onError: (error: unknown) => void): void {
      timer = setInterval(() => {
        try {
          save();
        } catch (error) {
          onError(error);
        }
      }, options.saveEveryMs ?? 5000);
      timer.unref();
    },
    /** Stops the timer and saves once more (at close, before the database closes). */
    stop(): void {
      clearInterval(timer);
      save();
    },
  };
}
