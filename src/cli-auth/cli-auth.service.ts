import crypto from "node:crypto";
import type { Logger } from "pino";
import type { Caller } from "../core/caller.ts";
import { CLI_SESSION_ENDED } from "../core/caller.ts";
import type { Clock } from "../core/clock.ts";
import type { Config } from "../core/config.ts";
import { hashToken, randomToken } from "../core/crypto.ts";
import { HttpError } from "../core/errors.ts";
import { type Store, writeTransaction } from "../core/store.ts";
import type { CliAuthRepo, CliSessionRow } from "./cli-auth.repo.ts";

const DEVICE_EXPIRES_IN_SECONDS = 600;
const POLL_INTERVAL_SECONDS = 3;
const ACCESS_TOKEN_MINUTES = 60;
const REFRESH_TOKEN_DAYS = 30;
const DEVICE_NAME_MAX = 60;

// No vowels (no words), no digits, no look-alikes such as O/0 or I/1: easy to read aloud and type.
const USER_CODE_ALPHABET = "BCDFGHJKLMNPQRSTVWXZ";
const USER_CODE_LENGTH = 8;
const USER_CODE_ATTEMPTS = 10;
// A poll that arrives this much early still counts as on time: timers and networks jitter.
const POLL_TOLERANCE_MS = 500;
const DAY_MS = 24 * 60 * 60 * 1000;
/** How long a revoked or expired CLI session stays on record before a device start deletes it. */
const ENDED_SESSIONS_KEPT_MS = 30 * DAY_MS;

export const INVALID_DEVICE_CODE = "Invalid device code.";
const INVALID_USER_CODE = "That code is invalid or has expired.";
export const MALFORMED_USER_CODE = "Enter the 8 character code from your terminal.";

export interface DeviceStart {
  deviceCode: string;
  userCode: string;
  verificationUrl: string;
  expiresIn: number;
  interval: number;
}

export interface TokenResponse {
  status: "approved";
  accessToken: string;
  refreshToken: string;
  accessExpiresAt: string;
  refreshExpiresAt: string;
  email: string;
}

export type PollResult =
  | { statusCode: 202; body: { status: "pending" } }
  | { statusCode: 200; body: TokenResponse }
  | { statusCode: 400; body: { status: "denied" } | { status: "expired" } };

export interface CliSessionView {
  id: string;
  deviceName: string;
  createdAt: string;
  lastUsedAt: string;
  expiresAt: string;
}

/** Strips control and formatting characters and markup, collapses spaces, cuts to 60 characters. */
function sanitizeDeviceName(input: string | undefined): string {
  const cleaned = (input ?? "")
    // [^<>]: a tag scan stops at the next "<", so a name of a million "<" stays linear
    // (with [^>] each "<" scanned to the end: minutes of blocked event loop per request).
    .replace(/<[^<>]*>/g, " ")
    .replace(/[\p{Cc}\p{Cf}\p{Zl}\p{Zp}<>]/gu, " ")
    .replace(/\s+/g, " ")
    .trim();
  // Cut by code points so a character outside the BMP is never split in half.
  const cut = [...cleaned].slice(0, DEVICE_NAME_MAX).join("").trim();
  return cut || "CLI";
}

/** `BCDF-GHJK`, `bcdfghjk` and ` bcdf-ghjk ` are the same code; anything else is undefined. */
export function normalizeUserCode(input: string): string | undefined {
  const compact = input.trim().replace(/-/, "").toUpperCase();
  if (compact.length !== USER_CODE_LENGTH) return undefined;
  for (const char of compact) if (!USER_CODE_ALPHABET.includes(char)) return undefined;
  return compact;
}

function newUserCode(): string {
  let code = "";
  for (let i = 0; i < USER_CODE_LENGTH; i++) code += USER_CODE_ALPHABET[crypto.randomInt(USER_CODE_ALPHABET.length)];
  return code;
}

function displayUserCode(code: string): string {
  return `${code.slice(0, 4)}-${code.slice(4)}`;
}

interface Deps {
  db: Store;
  repo: CliAuthRepo;
  /** The users feature's lookup (app.ts passes the users service). */
  users: { findById(id: string): Promise<{ email: string | null; disabledAt: string | null } | undefined> };
  clock: Clock;
  config: Pick<Config, "appUrl">;
  log: Pick<Logger, "warn">;
}

export function createCliAuthService({ db, repo, users, clock, config, log }: Deps) {
  function sessionEnded(): HttpError {
    return new HttpError(401, CLI_SESSION_ENDED);
  }

  /** Issues a fresh access and refresh token in a session; only their hashes are stored. */
  async function issuePair(sessionId: string, now: Date, email: string | null): Promise<TokenResponse> {
    const accessToken = `svc_at_${randomToken(32)}`;
    const refreshToken = `svc_rt_${randomToken(32)}`;
    const accessExpiresAt = new Date(now.getTime() + ACCESS_TOKEN_MINUTES * 60 * 1000).toISOString();
    const refreshExpiresAt = new Date(now.getTime() + REFRESH_TOKEN_DAYS * DAY_MS).toISOString();
    const createdAt = now.toISOString();
    await repo.insertToken({
      id: crypto.randomUUID(),
      sessionId,
      kind: "access",
      tokenHash: hashToken(accessToken),
      createdAt,
      expiresAt: accessExpiresAt,
    });
    await repo.insertToken({
      id: crypto.randomUUID(),
      sessionId,
      kind: "refresh",
      tokenHash: hashToken(refreshToken),
      createdAt,
      expiresAt: refreshExpiresAt,
    });
    return { status: "approved", accessToken, refreshToken, accessExpiresAt, refreshExpiresAt, email: email ?? "" };
  }

  function toSessionView(row: CliSessionRow): CliSessionView {
    return { id: row.id, deviceName: row.deviceName, createdAt: row.createdAt, lastUsedAt: row.lastUsedAt, expiresAt: row.expiresAt };
  }

  return {
    async startDevice(deviceName: string | undefined): Promise<DeviceStart> {
      const deviceCode = randomToken(32);
      const name = sanitizeDeviceName(deviceName);
      const userCode = await writeTransaction(db, async () => {
        const now = clock.now();
        const nowIso = now.toISOString();
        await repo.deleteDeviceRequestsExpiredBefore(new Date(now.getTime() - DAY_MS).toISOString());
        await repo.deleteDeadTokens(nowIso, new Date(now.getTime() - ENDED_SESSIONS_KEPT_MS).toISOString());
        // Two pending requests must never share a code, or one approval could sign in the wrong terminal.
        for (let attempt = 0; attempt < USER_CODE_ATTEMPTS; attempt++) {
          const candidate = newUserCode();
          if (await repo.findPendingDeviceRequestByUserCode(hashToken(candidate), nowIso)) continue;
          await repo.insertDeviceRequest({
            id: crypto.randomUUID(),
            deviceCodeHash: hashToken(deviceCode),
            userCodeHash: hashToken(candidate),
            deviceName: name,
            status: "pending",
            createdAt: nowIso,
            expiresAt: new Date(now.getTime() + DEVICE_EXPIRES_IN_SECONDS * 1000).toISOString(),
          });
          return candidate;
        }
        return undefined;
      });
      if (!userCode) throw new HttpError(503, "Could not start login. Try again.");
      const shown = displayUserCode(userCode);
      return {
        deviceCode,
        userCode: shown,
        verificationUrl: `${config.appUrl}/cli/authorize?code=${shown}`,
        expiresIn: DEVICE_EXPIRES_IN_SECONDS,
        interval: POLL_INTERVAL_SECONDS,
      };
    },

    /** One poll of the CLI: 202 while pending, 200 with the tokens once after approval, then expired; 400 when denied or expired (PollResult). */
    poll(deviceCode: string): Promise<PollResult> {
      return writeTransaction(db, async (): Promise<PollResult> => {
        const row = await repo.findDeviceRequestByDeviceCode(hashToken(deviceCode));
        if (!row) throw new HttpError(400, INVALID_DEVICE_CODE);
        const now = clock.now();
        if (row.lastPolledAt && now.getTime() - Date.parse(row.lastPolledAt) < POLL_INTERVAL_SECONDS * 1000 - POLL_TOLERANCE_MS) {
          // The only cost of polling fast: this answer. The request stays as it was, and the
          // too-early poll does not restart the wait.
          throw new HttpError(429, `Polling too fast. Wait ${POLL_INTERVAL_SECONDS} seconds between polls.`, undefined, {
            "retry-after": String(POLL_INTERVAL_SECONDS),
          });
        }
        await repo.setDeviceRequestPolledAt(row.id, now.toISOString());
        if (row.status === "denied") return { statusCode: 400, body: { status: "denied" } };
        if (row.status === "consumed" || Date.parse(row.expiresAt) <= now.getTime()) {
          return { statusCode: 400, body: { status: "expired" } };
        }
        if (row.status === "pending") return { statusCode: 202, body: { status: "pending" } };
        const userId = row.approvedBy!;
        const approver = await users.findById(userId);
        // Disabled since approving: no session for an account that can no longer use one.
        if (!approver || approver.disabledAt) {
          await repo.setDeviceRequestStatus(row.id, "approved", "denied");
          return { statusCode: 400, body: { status: "denied" } };
        }
        // Approved: consume and issue in one transaction, so the tokens exist exactly once.
        if (!(await repo.setDeviceRequestStatus(row.id, "approved", "consumed"))) return { statusCode: 400, body: { status: "expired" } };
        const nowIso = now.toISOString();
        const sessionId = crypto.randomUUID();
        await repo.insertSession({
          id: sessionId,
          userId,
          deviceName: row.deviceName,
          createdAt: nowIso,
          lastUsedAt: nowIso,
          expiresAt: new Date(now.getTime() + REFRESH_TOKEN_DAYS * DAY_MS).toISOString(),
        });
        return { statusCode: 200, body: await issuePair(sessionId, now, approver.email ?? null) };
      });
    },

    /** What the approval page shows before the user decides: which device asks, until when. */
    async describePending(userCode: string): Promise<{ userCode: string; deviceName: string; expiresAt: string }> {
      const code = normalizeUserCode(userCode);
      if (!code) throw new HttpError(400, MALFORMED_USER_CODE);
      const row = await repo.findPendingDeviceRequestByUserCode(hashToken(code), clock.now().toISOString());
      if (!row) throw new HttpError(404, INVALID_USER_CODE);
      return { userCode: displayUserCode(code), deviceName: row.deviceName, expiresAt: row.expiresAt };
    },

    async approve(caller: Caller, userCode: string, isApproved: boolean): Promise<{ ok: true; approved: boolean; deviceName: string }> {
      const code = normalizeUserCode(userCode);
      if (!code) throw new HttpError(400, MALFORMED_USER_CODE);
      return writeTransaction(db, async () => {
        const row = await repo.findPendingDeviceRequestByUserCode(hashToken(code), clock.now().toISOString());
        if (!row || !(await repo.setDeviceRequestStatus(row.id, "pending", isApproved ? "approved" : "denied", caller.userId))) {
          throw new HttpError(404, INVALID_USER_CODE);
        }
        return { ok: true as const, approved: isApproved, deviceName: row.deviceName };
      });
    },

    /** Single use: a rotated refresh token presented again revokes its whole session. */
    async refresh(refreshToken: string): Promise<TokenResponse> {
      if (!/^svc_rt_[A-Za-z0-9_-]{20,200}$/.test(refreshToken)) throw sessionEnded();
      const outcome = await writeTransaction(db, async (): Promise<TokenResponse | "ended" | "reused"> => {
        const now = clock.now();
        const nowIso = now.toISOString();
        const found = await repo.findTokenWithSession(hashToken(refreshToken));
        if (found?.token.kind !== "refresh") return "ended";
        const { token, session } = found;
        if (session.revokedAt || found.userDisabledAt) return "ended";
        if (token.usedAt || !(await repo.markTokenUsed(token.id, nowIso))) {
          // Someone holds a copy of a token that was already exchanged: it may have been
          // stolen, so every token of the session stops working, the newest included.
          await repo.revokeSession(session.id, nowIso);
          log.warn({ cliSessionId: session.id, userId: session.userId }, "refresh token reused: CLI session revoked");
          return "reused";
        }
        if (Date.parse(token.expiresAt) <= now.getTime() || Date.parse(session.expiresAt) <= now.getTime()) return "ended";
        const pair = await issuePair(session.id, now, found.userEmail);
        await repo.extendSession(session.id, nowIso, pair.refreshExpiresAt);
        return pair;
      });
      // Thrown outside the transaction: the revocation above must be committed, not rolled back.
      if (typeof outcome === "string") throw sessionEnded();
      return outcome;
    },

    /** Ends the caller's CLI session; anything else (no token, a dead one) is already logged out. */
    async logout(caller: Caller | null): Promise<void> {
      if (caller?.via !== "cli") return;
      await writeTransaction(db, async () => {
        await repo.revokeSession(caller.sessionId, clock.now().toISOString());
      });
    },

    async listSessions(caller: Caller): Promise<CliSessionView[]> {
      return (await repo.listActiveSessions(caller.userId, clock.now().toISOString())).map(toSessionView);
    },

    /** "End every CLI session": a sign-in approved a moment ago that no terminal has collected yet is denied too. */
    revokeAllSessions(caller: Caller): Promise<number> {
      return writeTransaction(db, async () => {
        await repo.denyUncollectedApprovals(caller.userId);
        return await repo.revokeActiveSessions(caller.userId, clock.now().toISOString());
      });
    },

    async revokeSession(caller: Caller, sessionId: string): Promise<void> {
      // Scoped to the caller: another user's session id answers exactly like an unknown one.
      const revoked = await writeTransaction(db, () => repo.revokeActiveSessions(caller.userId, clock.now().toISOString(), sessionId));
      if (revoked === 0) throw new HttpError(404, "Session not found.");
    },
  };
}

export type CliAuthService = ReturnType<typeof createCliAuthService>;
