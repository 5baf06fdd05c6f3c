import { parseArgs } from "node:util";
import { createAuditWriter } from "../audit/audit.writer.ts";
import { createCliAuthRepo } from "../cli-auth/cli-auth.repo.ts";
import { createAccessGuard } from "../core/access.ts";
import { systemClock } from "../core/clock.ts";
import { type Config, loadConfig } from "../core/config.ts";
import { loadKeyring } from "../core/crypto.ts";
import { HttpError } from "../core/errors.ts";
import { checkMasterKeys, closeStore, openStore, requireDatabaseFile, type Store } from "../core/store.ts";
import { displayName, isSingleLine, printable } from "../core/text.ts";
import { createMembersForCommand } from "../lost-rights.ts";
import { createAccessRepo } from "../members/access.repo.ts";
import { createMembersRepo } from "../members/members.repo.ts";
import { createBrowserSessionsRepo } from "../sign-in/browser-sessions.repo.ts";
import { createLocalRepo } from "../sign-in/local.repo.ts";
import { createLocalAccounts, type IssuedLink, LOCAL_ISSUER } from "../sign-in/local.service.ts";
import { createUsersRepo } from "../users/users.repo.ts";
import { createUsersService, type UserRow } from "../users/users.service.ts";

const USERS_HELP = `Usage: secrets-server users <command>

  list                   List every user: e-mail, name, provider, status
  add EMAIL [--name N]   Create a local account and print a one-time link to set its password
  reset-password EMAIL   Print a new one-time link for a local account (ends its browser sessions once used)
  disable EMAIL          Disable the user and end their browser and CLI sessions at once
  enable EMAIL           Enable a disabled user again

add and reset-password need AUTH_PROVIDER=local. Links are printed for you to hand over.
`;

type Command = (args: string[]) => Promise<number>;

/**
 * Runs fn on the database. `creates`: the command may make the first database of a new
 * install (setup-link, users add before the first start); the others only read or change an
 * existing one, and refuse a DATA_DIR that holds none (a typo would otherwise list or change
 * nothing, "successfully"). `localCommand`: the command is for local accounts, and refuses
 * another AUTH_PROVIDER before anything is opened, created or migrated.
 */
async function withDatabase<T>(
  fn: (db: Store, config: Config) => Promise<T>,
  { creates = false, localCommand }: { creates?: boolean; localCommand?: string } = {},
): Promise<T> {
  const config = loadConfig();
  if (localCommand) requireLocal(config, localCommand);
  if (!creates) requireDatabaseFile(config);
  const db = await openStore(config);
  try {
    // Awaited here: the database closes only once the command's last statement has run.
    return await fn(db, config);
  } finally {
    await closeStore(db);
  }
}

function usersService(db: Store, onDisabled?: (userId: string) => Promise<void>) {
  return createUsersService({
    db,
    users: createUsersRepo(db),
    browserSessions: createBrowserSessionsRepo(db),
    cliSessions: createCliAuthRepo(db),
    accountLinks: createLocalRepo(db),
    clock: systemClock,
    onDisabled,
  });
}

function local(db: Store, config: Config) {
  // Only a sign-in uses the keyring, which no command makes: links need no master key, so
  // it is loaded (once) only if asked.
  let loaded: ReturnType<typeof loadKeyring> | undefined;
  const keyring = { pseudonym: (text: string) => (loaded ??= loadKeyring(config)).pseudonym(text) };
  return createLocalAccounts({ db, users: usersService(db), repo: createLocalRepo(db), config, clock: systemClock, keyring });
}

function printLink(what: string, link: IssuedLink): void {
  // The one place a token is printed: the operator asked for it and hands it over.
  console.log(`${what}\n\n  ${link.url}\n\nThe link works once, until ${link.expiresAt}.`);
}

function status(user: UserRow): string {
  if (user.disabledAt) return "disabled";
  if (user.authIssuer === LOCAL_ISSUER && !user.passwordHash) return "invited";
  return "active";
}

/** Runs a command body; an HttpError (a refused request) becomes one line on stderr and exit 1. */
async function run(fn: () => Promise<number>): Promise<number> {
  try {
    return await fn();
  } catch (error) {
    if (!(error instanceof HttpError)) throw error;
    process.stderr.write(`secrets-server: ${error.message}\n`);
    return 1;
  }
}

function requireLocal(config: Config, command: string): void {
  if (config.authProvider !== "local") {
    throw new HttpError(
      400,
      `${command} is for local accounts, but AUTH_PROVIDER is ${config.authProvider}: people sign in through ${config.authProvider === "oidc" ? "the identity provider" : "the development sign-in"}.`,
    );
  }
}

/** Prints why a command's arguments were refused, then its usage; the command exits 2. */
function refuseArguments(usage: string, reason?: string): undefined {
  process.stderr.write(`${reason ? `secrets-server: ${reason}\n` : ""}Usage: secrets-server ${usage}\n`);
  return undefined;
}

/**
 * Exactly the arguments the usage names (`count` of them, and --name where it is taken), or
 * undefined once the usage is printed (exit 2): anything dropped in silence would report
 * success for what was not done (`users disable alice bob` disabled alice only, and
 * `--name=Bob` gave no name).
 */
function exactArguments(
  args: string[],
  usage: string,
  count: 0 | 1,
  takesName = false,
): { positionals: string[]; name?: string } | undefined {
  let parsed: { values: { name?: string }; positionals: string[] };
  try {
    parsed = parseArgs({ args, options: takesName ? { name: { type: "string" } } : {}, allowPositionals: true, strict: true });
  } catch (error) {
    return refuseArguments(usage, printable((error as Error).message));
  }
  if (parsed.positionals.length > count) {
    return refuseArguments(
      usage,
      count === 0 ? "This command takes no arguments." : "One e-mail address at a time: run the command once for each.",
    );
  }
  if (parsed.positionals.length < count) return refuseArguments(usage);
  return { positionals: parsed.positionals, name: parsed.values.name };
}

function emailArguments(args: string[], usage: string, takesName = false): { email: string; name?: string } | undefined {
  const parsed = exactArguments(args, usage, 1, takesName);
  if (!parsed) return undefined;
  const email = parsed.positionals[0]!;
  // Nobody types a control character, a bidirectional mark or a line break at sign-in: an
  // account under such an address could never be signed in to.
  if (!/^[^\s@]+@[^\s@]+$/.test(email) || email.length > 254 || !isSingleLine(email)) {
    return refuseArguments(
      usage,
      `${printable(JSON.stringify(email))} is not an e-mail address: one line with one @, no spaces or control characters.`,
    );
  }
  return { email, name: parsed.name };
}

export const setupLinkCommand: Command = async () =>
  run(() =>
    withDatabase(
      async (db, config) => {
        printLink(
          "Open this link to create the first account (the e-mail you enter there counts as verified):",
          await local(db, config).issueSetupLink(),
        );
        return 0;
      },
      { creates: true, localCommand: "setup-link" },
    ),
  );

export const usersCommand: Command = async ([sub, ...args]) => {
  switch (sub) {
    case "list":
      if (!exactArguments(args, "users list", 0)) return 2;
      return run(() =>
        withDatabase(async (db) => {
          const rows = await usersService(db).list();
          if (rows.length === 0) {
            console.log("No users yet.");
            return 0;
          }
          console.log(["EMAIL", "NAME", "PROVIDER", "STATUS", "VERIFIED", "CREATED"].join("\t"));
          for (const u of rows) {
            console.log([u.email ?? "-", u.name ?? "-", u.authIssuer, status(u), u.emailVerified ? "yes" : "no", u.createdAt].join("\t"));
          }
          return 0;
        }),
      );
    case "add": {
      const parsed = emailArguments(args, "users add EMAIL [--name NAME]", true);
      if (!parsed) return 2;
      const { email } = parsed;
      // As a name the identity provider sends: unsafe characters become spaces, 100 at most.
      const name = parsed.name === undefined ? null : displayName(parsed.name);
      return run(() =>
        withDatabase(
          async (db, config) => {
            const { user, link } = await local(db, config).addUser(email, name);
            printLink(`Created ${user.email}. Give them this link to set their password:`, link);
            return 0;
          },
          { creates: true, localCommand: "users add" },
        ),
      );
    }
    case "reset-password": {
      const email = emailArguments(args, "users reset-password EMAIL")?.email;
      if (!email) return 2;
      return run(() =>
        withDatabase(
          async (db, config) => {
            const { user, link } = await local(db, config).resetPassword(email);
            printLink(`Give ${user.email} this link to choose a new password:`, link);
            return 0;
          },
          { localCommand: "users reset-password" },
        ),
      );
    }
    case "disable": {
      const email = emailArguments(args, "users disable EMAIL")?.email;
      if (!email) return 2;
      return run(() =>
        withDatabase(async (db, config) => {
          // The events this writes are chained under the master key like the server's: a
          // key that does not match the database stops here instead of breaking the chain.
          const keyring = loadKeyring(config);
          await checkMasterKeys(db, keyring, systemClock.now());
          const members = createMembersForCommand({
            db,
            repo: createMembersRepo(db),
            access: createAccessGuard(createAccessRepo(db)),
            audit: createAuditWriter(db, systemClock, keyring),
            clock: systemClock,
            config,
          });
          const results = await usersService(db, (userId) => members.userDisabled(userId)).disable(email);
          for (const r of results) {
            console.log(
              `Disabled ${r.user.email} (${r.user.authIssuer}): ended ${r.browserSessions} browser and ${r.cliSessions} CLI sessions.`,
            );
          }
          return 0;
        }),
      );
    }
    case "enable": {
      const email = emailArguments(args, "users enable EMAIL")?.email;
      if (!email) return 2;
      return run(() =>
        withDatabase(async (db) => {
          for (const user of await usersService(db).enable(email)) {
            console.log(`Enabled ${user.email} (${user.authIssuer}).`);
          }
          return 0;
        }),
      );
    }
    case undefined:
    case "help":
      process.stdout.write(USERS_HELP);
      return sub === undefined ? 2 : 0;
    default:
      process.stderr.write(`Unknown users command "${sub}".\n${USERS_HELP}`);
      return 2;
  }
};
