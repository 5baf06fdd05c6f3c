import type { Clock } from "../core/clock.ts";
import { type Db, writeTransaction } from "../core/db.ts";
import { HttpError } from "../core/errors.ts";
import type { Identity, UserRow, UsersRepo } from "./users.repo.ts";

export type { Identity, UserRow } from "./users.repo.ts";

/** The public shape of a user in sign-in responses. */
export function toPublicUser(user: Pick<UserRow, "id" | "email" | "name">) {
  return { id: user.id, email: user.email, name: user.name };
}

/**
 * What ending a person's access needs of the features that own it: their CLI sessions
 * (cli-auth) and their unused account links (local sign-in). Passed in by app.ts and the
 * users command, since sign-in reaches users and not the other way round.
 */
export interface UserAccessEnd {
  revokeAllSessionsOf(userId: string, nowIso: string): number;
  deleteUnusedLinksOf(userId: string): void;
}

interface Deps {
  db: Db;
  users: UsersRepo;
  cliSessions: Pick<UserAccessEnd, "revokeAllSessionsOf">;
  accountLinks: Pick<UserAccessEnd, "deleteUnusedLinksOf">;
  clock: Clock;
  /**
   * Called inside the transaction that disabled a user: the members feature voids what the
   * user created on their authority (invitations, a Vercel connection). The users command
   * passes it; list and enable need none.
   */
  onDisabled?: (userId: string) => void;
}

export type UsersService = ReturnType<typeof createUsersService>;

/**
 * People: the sign-in providers find and create them here, and the operator manages them
 * (the `users` commands), whichever provider vouched for them.
 */
export function createUsersService({ db, users, cliSessions, accountLinks, clock, onDisabled }: Deps) {
  function matching(email: string): UserRow[] {
    const rows = users.listByEmail(email.trim());
    if (rows.length === 0) throw new HttpError(404, `No user has the e-mail ${email.trim().toLowerCase()}.`);
    return rows;
  }

  return {
    findById(id: string): UserRow | undefined {
      return users.findById(id);
    },

    findByIdentity(issuer: string, subject: string): UserRow | undefined {
      return users.findByIdentity(issuer, subject);
    },

    /** Creates the user of an identity, or refreshes e-mail and name of the existing one. */
    upsertIdentity(identity: Identity, now: Date): UserRow {
      return users.upsertIdentity(identity, now);
    },

    countByIssuer(issuer: string): number {
      return users.countByIssuer(issuer);
    },

    setPassword(userId: string, passwordHash: string, name: string | null, now: Date): void {
      users.setPassword(userId, passwordHash, name, now);
    },

    /** Ends every browser session and revokes every CLI session of the user (a password reset). */
    endSessions(userId: string, now: Date): void {
      users.deleteBrowserSessions(userId);
      cliSessions.revokeAllSessionsOf(userId, now.toISOString());
    },

    list(): UserRow[] {
      return users.listAll();
    },

    /**
     * Disables every user with this e-mail and ends their sessions in the same transaction:
     * browser sessions are deleted and CLI sessions revoked, so the very next request of
     * either fails (auth also refuses disabled users on its own).
     */
    disable(email: string): { user: UserRow; browserSessions: number; cliSessions: number }[] {
      return writeTransaction(db, () => {
        const now = clock.now();
        return matching(email).map((user) => {
          if (!user.disabledAt) users.setDisabled(user.id, now, now);
          accountLinks.deleteUnusedLinksOf(user.id);
          // Also for one disabled before: running disable again finishes what an older version left.
          onDisabled?.(user.id);
          return {
            user,
            browserSessions: users.deleteBrowserSessions(user.id),
            cliSessions: cliSessions.revokeAllSessionsOf(user.id, now.toISOString()),
          };
        });
      });
    },

    enable(email: string): UserRow[] {
      return writeTransaction(db, () => {
        const now = clock.now();
        return matching(email).map((user) => {
          users.setDisabled(user.id, null, now);
          return users.findById(user.id)!;
        });
      });
    },
  };
}
