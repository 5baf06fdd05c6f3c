import crypto from "node:crypto";
import type { Clock } from "../core/clock.ts";
import type { Config } from "../core/config.ts";
import { hashToken, randomToken } from "../core/crypto.ts";
import { writeTransaction, type Db } from "../core/db.ts";
import { HttpError } from "../core/errors.ts";
import type { UserRow, UsersRepo } from "../users/users.repo.ts";
import type { AccountLinkRow, LinkPurpose, LocalRepo } from "./local.repo.ts";
import { hashPassword, verifyPassword } from "./passwords.ts";

/** The `auth_issuer` of local accounts; their subject is the lower-case e-mail. */
export const LOCAL_ISSUER = "local";

const HOUR_MS = 60 * 60 * 1000;
/** How long each kind of one-time link works. */
export const LINK_LIFETIME_HOURS: Record<LinkPurpose, number> = { setup: 24, invite: 7 * 24, reset: 24 };

/** Per account: this many failed sign-ins in the window, then 429 until the window passes. */
export const ACCOUNT_FAILURE_LIMIT = 10;
export const ACCOUNT_FAILURE_WINDOW_MS = 15 * 60 * 1000;

export const SIGN_IN_FAILED = "Incorrect e-mail or password.";
export const ACCOUNT_DISABLED = "This account is disabled. Ask your administrator.";
export const LINK_UNUSABLE = "This link is invalid, expired, or already used. Ask your administrator for a new one.";
export const SETUP_DONE = "The first account exists already. Sign in, or ask your administrator for a link.";

export interface IssuedLink {
  url: string;
  expiresAt: string;
}

interface Deps {
  db: Db;
  users: UsersRepo;
  repo: LocalRepo;
  config: Pick<Config, "appUrl">;
  clock: Clock;
}

export type LocalAccounts = ReturnType<typeof createLocalAccounts>;

/**
 * Accounts kept by the server itself (AUTH_PROVIDER=local): scrypt password hashes, and
 * one-time links (stored as hashes) through which a person sets a password. Whoever holds
 * a link was vouched for by the operator who printed it, so setting a password through
 * one verifies the e-mail.
 */
export function createLocalAccounts({ db, users, repo, config, clock }: Deps) {
  // Failed sign-ins per account, existing or not (so a 429 reveals nothing), in the
  // database so that a restart does not hand an attacker a fresh set of tries.
  function recentFailures(accountHash: string, now: number): number[] {
    return repo.failuresSince(accountHash, new Date(now - ACCOUNT_FAILURE_WINDOW_MS).toISOString()).map((at) => Date.parse(at));
  }

  function recordFailure(accountHash: string, now: number): void {
    writeTransaction(db, () => repo.recordFailure(accountHash, new Date(now).toISOString(), new Date(now - ACCOUNT_FAILURE_WINDOW_MS).toISOString()));
  }

  /** Writes a new link (replacing unused ones of the same purpose and user) and returns its URL. */
  function issueLink(purpose: LinkPurpose, email: string, userId: string | null): IssuedLink {
    const token = randomToken(32);
    const now = clock.now();
    const expiresAt = new Date(now.getTime() + LINK_LIFETIME_HOURS[purpose] * HOUR_MS).toISOString();
    repo.deleteUnusedLinks(purpose, userId);
    repo.insertLink({
      id: crypto.randomUUID(),
      tokenHash: hashToken(token),
      purpose,
      email,
      userId,
      createdAt: now.toISOString(),
      expiresAt,
      usedAt: null,
    });
    // In the fragment: browsers never send it to a server, so it stays out of access logs.
    return { url: `${config.appUrl}/set-password#${token}`, expiresAt };
  }

  function usableLink(token: string): AccountLinkRow {
    const link = token.length >= 20 && token.length <= 200 ? repo.findLinkByTokenHash(hashToken(token)) : undefined;
    if (!link || link.usedAt !== null || Date.parse(link.expiresAt) <= clock.now().getTime()) throw new HttpError(410, LINK_UNUSABLE);
    return link;
  }

  function findLocalUser(email: string): UserRow | undefined {
    return users.findByIdentity(LOCAL_ISSUER, email.toLowerCase());
  }

  return {
    hasLocalUser(): boolean {
      return users.countByIssuer(LOCAL_ISSUER) > 0;
    },

    /** A link to create the first account; refused once any local account exists. */
    issueSetupLink(): IssuedLink {
      return writeTransaction(db, () => {
        if (users.countByIssuer(LOCAL_ISSUER) > 0) throw new HttpError(409, SETUP_DONE);
        // The setup link names no e-mail: the person at the console enters and vouches for it.
        return issueLink("setup", "", null);
      });
    },

    /** Creates an account without a password and returns the link to set one. */
    addUser(email: string, name: string | null): { user: UserRow; link: IssuedLink } {
      const normalized = email.trim().toLowerCase();
      return writeTransaction(db, () => {
        if (findLocalUser(normalized)) {
          throw new HttpError(409, `A user with the e-mail ${normalized} exists already. To give them a new link, run: users reset-password ${normalized}`);
        }
        const user = users.upsertIdentity(
          { issuer: LOCAL_ISSUER, subject: normalized, email: normalized, emailVerified: false, name },
          clock.now(),
        );
        return { user, link: issueLink("invite", normalized, user.id) };
      });
    },

    resetPassword(email: string): { user: UserRow; link: IssuedLink } {
      const normalized = email.trim().toLowerCase();
      return writeTransaction(db, () => {
        const user = findLocalUser(normalized);
        if (!user) throw new HttpError(404, `No local account has the e-mail ${normalized}.`);
        if (user.disabledAt) throw new HttpError(409, `The account ${normalized} is disabled. Enable it first: users enable ${normalized}`);
        return { user, link: issueLink("reset", normalized, user.id) };
      });
    },

    /** What the link page needs to show: the kind of link and whose it is. */
    describeLink(token: string): { purpose: LinkPurpose; email: string | null; expiresAt: string } {
      const link = usableLink(token);
      return { purpose: link.purpose, email: link.email || null, expiresAt: link.expiresAt };
    },

    /** Sets a password through a one-time link; returns the user to start a session for. */
    async setPassword(input: { token: string; password: string; name?: string; email?: string }): Promise<UserRow> {
      const first = usableLink(input.token);
      if (first.purpose === "setup" && !input.email) throw new HttpError(400, "Enter your e-mail address.");
      // Hashing takes a while and is asynchronous, so it happens before the transaction,
      // which then checks the link again: it may have been used in the meantime.
      const passwordHash = await hashPassword(input.password);
      const now = clock.now();
      return writeTransaction(db, () => {
        const link = usableLink(input.token);
        let userId: string;
        if (link.purpose === "setup") {
          // Two setup links, or a `users add` in between, must not yield a second first account.
          if (users.countByIssuer(LOCAL_ISSUER) > 0) throw new HttpError(410, SETUP_DONE);
          const email = input.email!.trim().toLowerCase();
          userId = users.upsertIdentity(
            { issuer: LOCAL_ISSUER, subject: email, email, emailVerified: true, name: input.name ?? null },
            now,
          ).id;
        } else {
          const user = link.userId ? users.findById(link.userId) : undefined;
          if (!user || user.disabledAt) throw new HttpError(410, LINK_UNUSABLE);
          userId = user.id;
          // A reset ends every session that may have been opened with the old password:
          // browser sessions, and CLI sessions approved from them.
          if (link.purpose === "reset") {
            users.deleteBrowserSessions(userId);
            users.revokeCliSessions(userId, now);
          }
        }
        if (!repo.markLinkUsed(link.id, now)) throw new HttpError(410, LINK_UNUSABLE);
        users.setPassword(userId, passwordHash, input.name ?? null, now);
        return users.findById(userId)!;
      });
    },

    /**
     * Checks e-mail and password. Every failure gives the same message, whether or not the
     * account exists, and takes the same time (a dummy hash is verified for unknown ones).
     */
    async signIn(email: string, password: string): Promise<UserRow> {
      const normalized = email.trim().toLowerCase();
      const account = hashToken(normalized);
      const now = clock.now().getTime();
      const recent = recentFailures(account, now);
      if (recent.length >= ACCOUNT_FAILURE_LIMIT) {
        const retryInSeconds = Math.max(1, Math.ceil((recent[0]! + ACCOUNT_FAILURE_WINDOW_MS - now) / 1000));
        throw new HttpError(
          429,
          `Too many failed sign-ins for this account. Try again in ${Math.ceil(retryInSeconds / 60)} minutes.`,
          undefined,
          { "retry-after": String(retryInSeconds) },
        );
      }
      const user = findLocalUser(normalized);
      const isValid = await verifyPassword(password, user?.passwordHash);
      if (!user || !isValid) {
        recordFailure(account, now);
        throw new HttpError(401, SIGN_IN_FAILED);
      }
      repo.clearFailures(account);
      // Said only to someone who knows the password.
      if (user.disabledAt) throw new HttpError(403, ACCOUNT_DISABLED);
      return user;
    },
  };
}
