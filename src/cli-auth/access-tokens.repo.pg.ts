import type { AccessTokenRow } from "../core/auth.ts";
import { type PgStore, pgRow, pgRun } from "../core/postgres.ts";
import type { AccessTokensRepo } from "./access-tokens.repo.ts";

/** access-tokens.repo.ts on PostgreSQL: the same rows, the same JavaScript values. */
export function createAccessTokensRepoPg(store: PgStore): AccessTokensRepo {
  return {
    findLive: (tokenHash, nowIso) =>
      pgRow<AccessTokenRow>(
        store,
        `SELECT c.id AS session_id, c.last_used_at, u.id, u.email, u.name, u.email_verified::int AS email_verified
         FROM cli_tokens t JOIN cli_sessions c ON c.id = t.session_id JOIN users u ON u.id = c.user_id
         WHERE t.token_hash = $1 AND t.kind = 'access' AND t.expires_at > $2 AND c.revoked_at IS NULL
           AND c.expires_at > $2 AND u.disabled_at IS NULL`,
        [tokenHash, nowIso],
      ),
    async touchSession(sessionId, lastUsedAt, unlessSince) {
      await pgRun(store, "UPDATE cli_sessions SET last_used_at = $1 WHERE id = $2 AND last_used_at <= $3", [
        lastUsedAt,
        sessionId,
        unlessSince,
      ]);
    },
  };
}
