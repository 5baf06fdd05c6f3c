import crypto from "node:crypto";
import type { Clock } from "../core/clock.ts";
import type { Config } from "../core/config.ts";
import { hashToken, type Keyring, randomToken } from "../core/crypto.ts";
import { HttpError } from "../core/errors.ts";
import { type Store, writeTransaction } from "../core/store.ts";
import { isSingleLine, plural } from "../core/text.ts";
import type { UserRow, UsersService } from "../users/users.service.ts";
import type { AccountLinkRow, LinkPurpose, LocalRepo } from "./local.repo.ts";
import { hashPassword, isCurrentHash, verifyPassword, withPasswordCapacity } from "./passwords.ts";

/** The `auth_issuer` of local accounts; their subject is the lower-case e-mail. */
export const LOCAL_ISSUER = "local";

const HOUR_MS = 60 * 60 * 1000;
/** How long each kind of one-time link works. */
const LINK_LIFETIME_HOURS: Record<LinkPurpose, number> = { setup: 24, invite: 7 * 24, reset: 24 };

/**
 * Failed sign-ins are limited twice. Per account and client address (an IPv6 client's /64,
 * see addressNetwork): 10 in 15 minutes, which slows one guesser to a crawl but leaves the
 * owner, who signs in from elsewhere, alone. Per account over all addresses: 100 in an
 * hour, so that guessing from many addresses is still bounded (and only that can lock the
 * owner out).
 */
const PAIR_FAILURE_LIMIT = 10;
const PAIR_FAILURE_WINDOW_MS = 15 * 60 * 1000;
const ACCOUNT_FAILURE_LIMIT = 100;
const ACCOUNT_FAILURE_WINDOW_MS = 60 * 60 * 1000;

export const SIGN_IN_FAILED = "Incorrect e-mail or password.";
const ACCOUNT_DISABLED = "This account is disabled. Ask your administrator.";
export const LINK_UNUSABLE = "This link is invalid, expired, or already used. Ask your administrator for a new one.";
const SETUP_DONE = "The first account exists already. Sign in, or ask your administrator for a link.";

export interface IssuedLink {
  url: string;
  /** The url without APP_URL in front, for a message written once the port is known. */
  path: string;
  expiresAt: string;
}

interface Deps {
  db: Store;
  users: UsersService;
  repo: LocalRepo;
  config: Pick<Config, "appUrl">;
  clock: Clock;
  keyring: Pick<Keyring, "pseudonym">;
}

export type LocalAccounts = ReturnType<typeof createLocalAccounts>;

/**
 * A local account's address as stored and looked up: lower case throughout, as accounts
 * have always been stored. Unlike foldEmail (which invitations match by), any letter is
 * folded: the operator vouches for the address, and a look-alike typed at sign-in still
 * needs the account's password.
 */
function localAddress(email: string): string {
  return email.trim().toLowerCase();
}

/**
 * Accounts kept by the server itself (AUTH_PROVIDER=local): scrypt password hashes, and
 * one-time links (stored as hashes) through which a person sets a password. Whoever holds
 * a link was vouched for by the operator who printed it, so setting a password through
 * one verifies the e-mail.
 */
export function createLocalAccounts({ db, users, repo, config, clock, keyring }: Deps) {
  // Failed sign-ins per account, existing or not (so a 429 reveals nothing), in the
  // database so that a restart does not hand an attacker a fresh set of tries.
  /** Seconds until the window holds fewer than `limit` of `times` (oldest first), or 0 when it already does. */
  function secondsUntilBelow(times: string[], limit: number, windowMs: number, now: number): number {
    if (times.length < limit) return 0;
    const freedAt = Date.parse(times[times.length - limit]!) + windowMs;
    return Math.max(1, Math.ceil((freedAt - now) / 1000));
  }

  /**
   * Counts this attempt as a failure before the password is checked, in the same IMMEDIATE
   * transaction as the count: checking first and recording after the (slow, asynchronous)
   * hash let parallel guesses all pass the check, and the lock makes two processes on one
   * file queue too. Returns the seconds to wait when a limit is reached (nothing recorded).
   */
  function countAttempt(accountHash: string, addressHash: string, now: number): Promise<number> {
    return writeTransaction(db, async () => {
      const since = (windowMs: number) => new Date(now - windowMs).toISOString();
      const waitSeconds = Math.max(
        secondsUntilBelow(
          await repo.failuresSince(accountHash, addressHash, since(PAIR_FAILURE_WINDOW_MS)),
          PAIR_FAILURE_LIMIT,
          PAIR_FAILURE_WINDOW_MS,
          now,
        ),
        secondsUntilBelow(
          await repo.failuresSince(accountHash, undefined, since(ACCOUNT_FAILURE_WINDOW_MS)),
          ACCOUNT_FAILURE_LIMIT,
          ACCOUNT_FAILURE_WINDOW_MS,
          now,
        ),
      );
      if (waitSeconds === 0) {
        await repo.recordFailure(accountHash, addressHash, new Date(now).toISOString(), since(ACCOUNT_FAILURE_WINDOW_MS));
      }
      return waitSeconds;
    });
  }

  /**
   * Writes a new link and returns its URL. It replaces the user's unused links of every
   * kind: an invite link left over after a reset would still set a password later, without
   * ending the sessions a reset ends. (Setup links, which have no user, replace each other.)
   */
  async function issueLink(purpose: LinkPurpose, email: string, userId: string | null): Promise<IssuedLink> {
    const token = randomToken(32);
    const now = clock.now();
    const expiresAt = new Date(now.getTime() + LINK_LIFETIME_HOURS[purpose] * HOUR_MS).toISOString();
    if (userId === null) await repo.deleteUnusedSetupLinks();
    else await repo.deleteUnusedLinksOf(userId);
    await repo.insertLink({
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
    const path = `/set-password#${token}`;
    return { url: `${config.appUrl}${path}`, path, expiresAt };
  }

  async function usableLink(token: string): Promise<AccountLinkRow> {
    const link = token.length >= 20 && token.length <= 200 ? await repo.findLinkByTokenHash(hashToken(token)) : undefined;
    if (!link || link.usedAt !== null || Date.parse(link.expiresAt) <= clock.now().getTime()) throw new HttpError(410, LINK_UNUSABLE);
    return link;
  }

  function findLocalUser(email: string): Promise<UserRow | undefined> {
    // No account's address holds a control character (accounts are made from checked
    // addresses), and PostgreSQL refuses a NUL as a parameter: a 500 instead of the 401.
    if (!isSingleLine(email)) return Promise.resolve(undefined);
    return users.findByIdentity(LOCAL_ISSUER, localAddress(email));
  }

  async function checkSignIn(email: string, password: string, network: string): Promise<UserRow> {
    const normalized = localAddress(email);
    const account = keyring.pseudonym(`sign-in account ${normalized}`);
    const pair = keyring.pseudonym(`sign-in network ${network}`);
    const retryInSeconds = await countAttempt(account, pair, clock.now().getTime());
    if (retryInSeconds > 0) {
      throw new HttpError(
        429,
        `Too many failed sign-ins for this account. Try again in ${plural(Math.ceil(retryInSeconds / 60), "minute")}.`,
        undefined,
        { "retry-after": String(retryInSeconds) },
      );
    }
    const user = await findLocalUser(normalized);
    // A wrong password leaves the failure countAttempt recorded; a right one takes it back
    // together with the earlier failures from this network (not those from elsewhere).
    const isValid = await verifyPassword(password, user?.passwordHash);
    if (!user || !isValid) throw new HttpError(401, SIGN_IN_FAILED);
    await writeTransaction(db, () => repo.clearPairFailures(account, pair));
    // Said only to someone who knows the password.
    if (user.disabledAt) throw new HttpError(403, ACCOUNT_DISABLED);
    return user;
  }

  return {
    async hasLocalUser(): Promise<boolean> {
      return (await users.countByIssuer(LOCAL_ISSUER)) > 0;
    },

    /** A link to create the first account; refused once any local account exists. */
    issueSetupLink(): Promise<IssuedLink> {
      return writeTransaction(db, async () => {
        if ((await users.countByIssuer(LOCAL_ISSUER)) > 0) throw new HttpError(409, SETUP_DONE);
        // The setup link names no e-mail: the person at the console enters and vouches for it.
        return issueLink("setup", "", null);
      });
    },

    /** Creates an account without a password and returns the link to set one. */
    addUser(email: string, name: string | null): Promise<{ user: UserRow; link: IssuedLink }> {
      const normalized = localAddress(email);
      return writeTransaction(db, async () => {
        if (await findLocalUser(normalized)) {
          throw new HttpError(
            409,
            `A user with the e-mail ${normalized} exists already. To give them a new link, run: users reset-password ${normalized}`,
          );
        }
        const user = await users.upsertIdentity(
          { issuer: LOCAL_ISSUER, subject: normalized, email: normalized, emailVerified: false, name },
          clock.now(),
        );
        return { user, link: await issueLink("invite", normalized, user.id) };
      });
    },

    resetPassword(email: string): Promise<{ user: UserRow; link: IssuedLink }> {
      const normalized = localAddress(email);
      return writeTransaction(db, async () => {
        const user = await findLocalUser(normalized);
        if (!user) throw new HttpError(404, `No local account has the e-mail ${normalized}.`);
        if (user.disabledAt) throw new HttpError(409, `The account ${normalized} is disabled. Enable it first: users enable ${normalized}`);
        return { user, link: await issueLink("reset", normalized, user.id) };
      });
    },

    /** What the link page needs to show: the kind of link and whose it is. */
    async describeLink(token: string): Promise<{ purpose: LinkPurpose; email: string | null; expiresAt: string }> {
      const link = await usableLink(token);
      return { purpose: link.purpose, email: link.email || null, expiresAt: link.expiresAt };
    },

    /** Sets a password through a one-time link; returns the user to start a session for. */
    async setPassword(input: { token: string; password: string; name?: string; email?: string }): Promise<UserRow> {
      const first = await usableLink(input.token);
      if (first.purpose === "setup" && !input.email) throw new HttpError(400, "Enter your e-mail address.");
      // Hashing takes a while and is asynchronous, so it happens before the transaction,
      // which then checks the link again: it may have been used in the meantime.
      const passwordHash = await withPasswordCapacity(() => hashPassword(input.password));
      const now = clock.now();
      return writeTransaction(db, async () => {
        const link = await usableLink(input.token);
        let userId: string;
        if (link.purpose === "setup") {
          // Two setup links, or a `users add` in between, must not yield a second first account.
          if ((await users.countByIssuer(LOCAL_ISSUER)) > 0) throw new HttpError(410, SETUP_DONE);
          const email = localAddress(input.email!);
          userId = (
            await users.upsertIdentity({ issuer: LOCAL_ISSUER, subject: email, email, emailVerified: true, name: input.name ?? null }, now)
          ).id;
        } else {
          const user = link.userId ? await users.findById(link.userId) : undefined;
          if (!user || user.disabledAt) throw new HttpError(410, LINK_UNUSABLE);
          userId = user.id;
          // A reset ends every session that may have been opened with the old password:
          // browser sessions, and CLI sessions approved from them.
          if (link.purpose === "reset") {
            await users.endSessions(userId, now);
          }
        }
        if (!(await repo.markLinkUsed(link.id, now))) throw new HttpError(410, LINK_UNUSABLE);
        // Any other unused link of the account dies with this one: the password is set now.
        if (link.userId !== null) await repo.deleteUnusedLinksOf(link.userId);
        await users.setPassword(userId, passwordHash, input.name ?? null, now);
        return (await users.findById(userId))!;
      });
    },

    /**
     * Checks e-mail and password. Every failure gives the same message, whether or not the
     * account exists, and takes the same time (a dummy hash is verified for unknown ones).
     * `network` is the client as per-address limits count it (`req.clientNetwork`: its
     * address, which TRUST_PROXY decides, or its IPv6 network). Both are stored as keyed
     * hashes (Keyring.pseudonym), which a copy of the database alone cannot undo.
     */
    signIn(email: string, password: string, network: string): Promise<UserRow> {
      // The room is taken before the attempt is counted: a sign-in refused for the server's load is no guess.
      return withPasswordCapacity(() => checkSignIn(email, password, network));
    },

    /**
     * After a sign-in: the password, just checked, hashed again with today's parameters when
     * its stored hash was made with weaker ones (isCurrentHash). Written only over that same
     * hash, so a reset that came meanwhile stands. Not counted as a password change: no
     * session ends. A second sign-in of the account checked against the old hash at this
     * very moment is refused as a reset's would be, once; the next one succeeds.
     */
    async upgradePasswordHash(user: UserRow, password: string): Promise<void> {
      const from = user.passwordHash;
      if (!from || isCurrentHash(from)) return;
      const to = await withPasswordCapacity(() => hashPassword(password));
      await writeTransaction(db, () => users.replacePasswordHash(user.id, from, to, clock.now()));
    },
  };
}
