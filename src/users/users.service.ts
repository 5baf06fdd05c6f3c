import type { Clock } from "../core/clock.ts";
import { writeTransaction, type Db } from "../core/db.ts";
import { HttpError } from "../core/errors.ts";
import type { UserRow, UsersRepo } from "./users.repo.ts";

interface Deps {
  db: Db;
  users: UsersRepo;
  clock: Clock;
  /**
   * Called inside the transaction that disabled a user: the members feature voids what the
   * user created on their authority (invitations, a Vercel connection). The users command
   * passes it; list and enable need none.
   */
  onDisabled?: (userId: string) => void;
}

export type UsersService = ReturnType<typeof createUsersService>;

/** The operator's user management (the `users` commands), for every sign-in provider. */
export function createUsersService({ db, users, clock, onDisabled }: Deps) {
  function matching(email: string): UserRow[] {
    const rows = users.listByEmail(email.trim());
    if (rows.length === 0) throw new HttpError(404, `No user has the e-mail ${email.trim().toLowerCase()}.`);
    return rows;
  }

  return {
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
          users.deleteUnusedAccountLinks(user.id);
          // Also for one disabled before: running disable again finishes what an older version left.
          onDisabled?.(user.id);
          return { user, browserSessions: users.deleteBrowserSessions(user.id), cliSessions: users.revokeCliSessions(user.id, now) };
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
