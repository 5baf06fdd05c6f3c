import type { Clock } from "../core/clock.ts";
import { HttpError } from "../core/errors.ts";
import { type Store, writeTransaction } from "../core/store.ts";
import { foldEmail } from "../core/text.ts";
import type { Identity, UserRow, UsersRepo } from "./users.repo.ts";

export type { UserRow } from "./users.repo.ts";

/** The public shape of a user in sign-in responses. */
export function toPublicUser(user: Pick<UserRow, "id" | "email" | "name">) {
  return { id: user.id, email: user.email, name: user.name };
}

/**
 * What ending a person's access needs of the features that own it: their browser sessions
 * and unused account links (sign-in) and their CLI sessions (cli-auth). Passed in by app.ts
 * and the users command, since sign-in reaches users and not the other way round.
 */
export interface UserAccessEnd {
  deleteAllSessionsOf(userId: string): Promise<number>;
  revokeAllSessionsOf(userId: string, nowIso: string): Promise<number>;
  deleteUnusedLinksOf(userId: string): Promise<void>;
}

interface Deps {
  db: Store;
  users: UsersRepo;
  browserSessions: Pick<UserAccessEnd, "deleteAllSessionsOf">;
  cliSessions: Pick<UserAccessEnd, "revokeAllSessionsOf">;
  accountLinks: Pick<UserAccessEnd, "deleteUnusedLinksOf">;
  clock: Clock;
  /**
   * Called inside the transaction that disabled a user: the members feature voids what the
   * user created on their authority (invitations, a Vercel connection). The users command
   * passes it; list and enable need none.
   */
  onDisabled?: (userId: string) => Promise<void>;
}

export type UsersService = ReturnType<typeof createUsersService>;

/**
 * People: the sign-in providers find and create them here, and the operator manages them
 * (the `users` commands), whichever provider vouched for them.
 */
export function createUsersService({ db, users, browserSessions, cliSessions, accountLinks, clock, onDisabled }: Deps) {
  async function matching(email: string): Promise<UserRow[]> {
    const rows = await users.listByEmail(email.trim());
    if (rows.length === 0) throw new HttpError(404, `No user has the e-mail ${foldEmail(email)}.`);
    return rows;
  }

  return {
    findById(id: string): Promise<UserRow | undefined> {
      return users.findById(id);
    },

    findByIdentity(issuer: string, subject: string): Promise<UserRow | undefined> {
      return users.findByIdentity(issuer, subject);
    },

    /** Creates the user of an identity, or refreshes e-mail and name of the existing one. */
    upsertIdentity(identity: Identity, now: Date): Promise<UserRow> {
      return users.upsertIdentity(identity, now);
    },

    countByIssuer(issuer: string): Promise<number> {
      return users.countByIssuer(issuer);
    },

    async setPassword(userId: string, passwordHash: string, name: string | null, now: Date): Promise<void> {
      await users.setPassword(userId, passwordHash, name, now);
    },

    replacePasswordHash(userId: string, from: string, to: string, now: Date): Promise<boolean> {
      return users.replacePasswordHash(userId, from, to, now);
    },

    /** Ends every browser session and revokes every CLI session of the user (a password reset). */
    async endSessions(userId: string, now: Date): Promise<void> {
      await browserSessions.deleteAllSessionsOf(userId);
      await cliSessions.revokeAllSessionsOf(userId, now.toISOString());
    },

    list(): Promise<UserRow[]> {
      return users.listAll();
    },

    /**
     * Disables every user with this e-mail and ends their sessions in the same transaction:
     * browser sessions are deleted and CLI sessions revoked, so the very next request of
     * either fails (auth also refuses disabled users on its own).
     */
    disable(email: string): Promise<{ user: UserRow; browserSessions: number; cliSessions: number }[]> {
      return writeTransaction(db, async () => {
        const now = clock.now();
        const results: { user: UserRow; browserSessions: number; cliSessions: number }[] = [];
        for (const user of await matching(email)) {
          if (!user.disabledAt) await users.setDisabled(user.id, now, now);
          await accountLinks.deleteUnusedLinksOf(user.id);
          // Also for one disabled before: running disable again finishes what an older version left.
          await onDisabled?.(user.id);
          results.push({
            user,
            browserSessions: await browserSessions.deleteAllSessionsOf(user.id),
            cliSessions: await cliSessions.revokeAllSessionsOf(user.id, now.toISOString()),
          });
        }
        return results;
      });
    },

    enable(email: string): Promise<UserRow[]> {
      return writeTransaction(db, async () => {
        const now = clock.now();
        const enabled: UserRow[] = [];
        for (const user of await matching(email)) {
          await users.setDisabled(user.id, null, now);
          enabled.push((await users.findById(user.id))!);
        }
        return enabled;
      });
    },
  };
}
