import type { BrowserSessionRow } from "../core/auth.ts";
import { type Db, guard } from "../core/db.ts";
import { isPostgres, type Store } from "../core/store.ts";
import { createBrowserSessionsRepoPg } from "./browser-sessions.repo.pg.ts";

export type BrowserSessionsRepo = ReturnType<typeof createBrowserSessionsRepoSqlite>;

export interface NewBrowserSession {
  id: string;
  userId: string;
  tokenHash: string;
  createdAt: string;
  expiresAt: string;
}

/** The password hash a sign-in verified (null: the account had none, as OIDC accounts). */
export interface CheckedCredential {
  passwordHash: string | null;
}

export function createBrowserSessionsRepo(store: Store): BrowserSessionsRepo {
  return isPostgres(store) ? createBrowserSessionsRepoPg(store) : createBrowserSessionsRepoSqlite(store);
}

/**
 * Browser sessions, looked up by their token's hash on every signed-in request
 * (core/auth.ts): prepared once, each one index seek.
 */
function createBrowserSessionsRepoSqlite(db: Db) {
  const sqlite = db.$client;
  // CAST: see "Joins with parameters" in core/db.ts (a join compared with a bare
  // parameter is compiled anew on every call).
  const findByTokenHash = sqlite.prepare(
    `SELECT s.id AS session_id, s.created_at, s.last_seen_at, s.expires_at, u.id, u.email, u.name, u.email_verified
     FROM browser_sessions s JOIN users u ON u.id = s.user_id
     WHERE s.token_hash = CAST(? AS TEXT) AND u.disabled_at IS NULL`,
  );
  const touch = sqlite.prepare("UPDATE browser_sessions SET last_seen_at = ?, expires_at = ? WHERE id = ? AND last_seen_at <= ?");
  // Written only while the user is enabled and (when given) still has the password hash that
  // was checked: a reset or a disable that commits while a sign-in waits for its hash must
  // not be outlived by the session that sign-in then starts.
  const insert = sqlite.prepare(
    `INSERT INTO browser_sessions (id, user_id, token_hash, created_at, last_seen_at, expires_at)
     SELECT @id, id, @tokenHash, @createdAt, @createdAt, @expiresAt FROM users
     WHERE id = @userId AND disabled_at IS NULL AND (@anyPassword = 1 OR password_hash IS @passwordHash)`,
  );
  const deleteByTokenHash = sqlite.prepare("DELETE FROM browser_sessions WHERE token_hash = ?");
  const deleteOfUser = sqlite.prepare("DELETE FROM browser_sessions WHERE user_id = ?");

  return guard(db, {
    /** The session of a token and its user, unless the user is disabled. */
    find(tokenHash: string): BrowserSessionRow | undefined {
      return findByTokenHash.get(tokenHash) as BrowserSessionRow | undefined;
    },
    /** Records a use and slides the expiry, unless a use was recorded after `unlessSince` (core/auth.ts TOUCH_INTERVAL_MS). */
    touch(sessionId: string, lastSeenAt: string, expiresAt: string, unlessSince: string): void {
      touch.run(lastSeenAt, expiresAt, sessionId, unlessSince);
    },
    /** Whether the session was written: not for a disabled user, nor when the password changed since `checked`. */
    insert(row: NewBrowserSession, checked?: CheckedCredential): boolean {
      const passwordHash = checked === undefined ? null : checked.passwordHash;
      return insert.run({ ...row, anyPassword: checked === undefined ? 1 : 0, passwordHash }).changes === 1;
    },
    delete(tokenHash: string): void {
      deleteByTokenHash.run(tokenHash);
    },
    /** Ends every browser session of the user; how many there were. */
    deleteAllSessionsOf(userId: string): number {
      return deleteOfUser.run(userId).changes;
    },
  });
}
