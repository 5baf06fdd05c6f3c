import type { AccessTokenRow } from "../core/auth.ts";
import { type Db, guard } from "../core/db.ts";
import { isPostgres, type Store } from "../core/store.ts";
import { createAccessTokensRepoPg } from "./access-tokens.repo.pg.ts";

export type AccessTokensRepo = ReturnType<typeof createAccessTokensRepoSqlite>;

export function createAccessTokensRepo(store: Store): AccessTokensRepo {
  return isPostgres(store) ? createAccessTokensRepoPg(store) : createAccessTokensRepoSqlite(store);
}

/**
 * CLI access tokens, looked up by their hash on every CLI request (core/auth.ts): one
 * prepared statement joining the token, its session and its user.
 */
function createAccessTokensRepoSqlite(db: Db) {
  const sqlite = db.$client;
  // CAST: see "Joins with parameters" in core/db.ts.
  const findLive = sqlite.prepare(
    `SELECT c.id AS session_id, c.last_used_at, u.id, u.email, u.name, u.email_verified
     FROM cli_tokens t JOIN cli_sessions c ON c.id = t.session_id JOIN users u ON u.id = c.user_id
     WHERE t.token_hash = CAST(? AS TEXT) AND t.kind = 'access' AND t.expires_at > CAST(? AS TEXT) AND c.revoked_at IS NULL
       AND c.expires_at > CAST(? AS TEXT) AND u.disabled_at IS NULL`,
  );
  const touchSession = sqlite.prepare("UPDATE cli_sessions SET last_used_at = ? WHERE id = ? AND last_used_at <= ?");

  return guard(db, {
    /** A live access token's session and user at `nowIso`: not expired, not revoked, user enabled. */
    findLive(tokenHash: string, nowIso: string): AccessTokenRow | undefined {
      return findLive.get(tokenHash, nowIso, nowIso) as AccessTokenRow | undefined;
    },
    /** Records a use unless one was recorded after `unlessSince` (core/auth.ts TOUCH_INTERVAL_MS). */
    touchSession(sessionId: string, lastUsedAt: string, unlessSince: string): void {
      touchSession.run(lastUsedAt, sessionId, unlessSince);
    },
  });
}
