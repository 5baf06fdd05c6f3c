import type { BrowserSessionRow } from "../core/auth.ts";
import { type PgStore, pgRow, pgRun, pgWriteTransaction } from "../core/postgres.ts";
import type { BrowserSessionsRepo } from "./browser-sessions.repo.ts";

/** browser-sessions.repo.ts on PostgreSQL: the same rows, the same JavaScript values. */
export function createBrowserSessionsRepoPg(store: PgStore): BrowserSessionsRepo {
  return {
    find: (tokenHash) =>
      pgRow<BrowserSessionRow>(
        store,
        `SELECT s.id AS session_id, s.created_at, s.last_seen_at, s.expires_at, u.id, u.email, u.name, u.email_verified::int AS email_verified
         FROM browser_sessions s JOIN users u ON u.id = s.user_id
         WHERE s.token_hash = $1 AND u.disabled_at IS NULL`,
        [tokenHash],
      ),
    async touch(sessionId, lastSeenAt, expiresAt, unlessSince) {
      await pgRun(store, "UPDATE browser_sessions SET last_seen_at = $1, expires_at = $2 WHERE id = $3 AND last_seen_at <= $4", [
        lastSeenAt,
        expiresAt,
        sessionId,
        unlessSince,
      ]);
    },
    // In a write transaction: its cluster-wide lock orders it with a reset or a disable,
    // whose transaction would otherwise not see (and not delete) a row written beside it.
    insert: (row, checked) =>
      pgWriteTransaction(
        store,
        async () =>
          (await pgRun(
            store,
            `INSERT INTO browser_sessions (id, user_id, token_hash, created_at, last_seen_at, expires_at)
             SELECT $1, id, $2, $3, $3, $4 FROM users
             WHERE id = $5 AND disabled_at IS NULL AND ($6::boolean OR password_hash IS NOT DISTINCT FROM $7)`,
            [row.id, row.tokenHash, row.createdAt, row.expiresAt, row.userId, checked === undefined, checked?.passwordHash ?? null],
          )) === 1,
      ),
    async delete(tokenHash) {
      await pgRun(store, "DELETE FROM browser_sessions WHERE token_hash = $1", [tokenHash]);
    },
    deleteAllSessionsOf: (userId) => pgRun(store, "DELETE FROM browser_sessions WHERE user_id = $1", [userId]),
  };
}
