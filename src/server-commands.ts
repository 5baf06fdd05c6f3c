// The server's commands: everything that opens the database or starts the server. Loaded
// only when one of them runs (src/main.ts): the CLI never loads Fastify, SQLite, drizzle,
// pino or the UI. In the executable this is a bundle of its own (build.mjs).
import { ConfigError, loadConfig } from "./core/config.ts";
import { shownMessage } from "./core/error-text.ts";
import { printable, redactTokens } from "./core/text.ts";

/** What main.ts knows of the start: whether V8 took the executable's code cache. */
export interface Startup {
  codeCache?: "accepted" | "rejected" | "missing";
}

type Command = (args: string[], startup: Startup) => Promise<number>;

const commands: Record<string, Command> = {
  serve,
  migrate: async () => {
    const config = loadConfig();
    const { openStore, closeStore } = await import("./core/store.ts");
    await closeStore(await openStore(config));
    console.log(config.database ? "The database at DATABASE_URL is up to date." : `Database in ${config.dataDir} is up to date.`);
    return 0;
  },
  backup: async ([file]) => {
    if (!file) {
      process.stderr.write("Usage: secrets-server backup FILE  (a consistent copy of the database; the server may keep running)\n");
      return 2;
    }
    const config = loadConfig();
    if (config.database) {
      // PostgreSQL has its own consistent copy, which also serves every other server's data.
      throw new ConfigError(
        'DATABASE_URL is set: back up PostgreSQL with pg_dump (for example pg_dump --format=custom --file=FILE "$DATABASE_URL"); see "Backup" in the README. Keep MASTER_KEY safe elsewhere.',
      );
    }
    const { backupDatabase } = await import("./core/db.ts");
    await backupDatabase(config, file);
    console.log(`Backed up ${config.dataDir} to ${file}. Keep MASTER_KEY safe elsewhere: the copy cannot be read without it.`);
    return 0;
  },
  "copy-database": async (args) => (await import("./commands/copy-database.ts")).copyDatabaseCommand(args),
  audit: async (args) => (await import("./audit/audit.verify.ts")).auditCommand(args),
  "rotate-key": async (args) => (await import("./secrets/rotate-key.ts")).rotateKeyCommand(args),
  "setup-link": async (args) => (await import("./commands/users.commands.ts")).setupLinkCommand(args),
  users: async (args) => (await import("./commands/users.commands.ts")).usersCommand(args),
};

export const SERVER_COMMANDS = Object.keys(commands);

/**
 * Runs a server command: its exit code, or -1 while it keeps running (serve). A
 * configuration problem is one clear line naming the variable, and any other failure (a
 * full disk, a lock not granted in time, a damaged database file) one line with its own
 * sentence: never a stack trace, exit 1.
 */
export async function runServerCommand(name: string, args: string[], startup: Startup = {}): Promise<number> {
  const command = commands[name];
  if (!command) throw new Error(`not a server command: ${name}`);
  try {
    return await command(args, startup);
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`secrets-server: configuration error: ${error.message}\n`);
      return 1;
    }
    process.stderr.write(`secrets-server: ${failureMessage(error)}\n`);
    return 1;
  }
}

/**
 * A failure's own sentence as one printable line (shownMessage: not drizzle's statement, and
 * not the values it was given);
 * a password in a URL and anything shaped like one of our tokens are taken out, should a
 * driver ever quote them.
 */
function failureMessage(error: unknown): string {
  const line = redactTokens(printable(shownMessage(error).replace(/\s+/g, " ").trim())).replace(
    /(\/\/[^\s/@:]*:)[^\s/]*@/g,
    "$1[redacted]@",
  );
  return line || (error instanceof Error ? error.name : "unexpected failure");
}

async function serve(_args: string[], startup: Startup): Promise<number> {
  const config = loadConfig();
  const { buildApp } = await import("./app.ts");
  const server = await buildApp(config);
  let stopping = false;
  const cut = new AbortController();
  const stop = (signal: string) => {
    if (stopping) {
      // A second Ctrl-C or SIGTERM: stop waiting for the connections.
      cut.abort();
      return;
    }
    stopping = true;
    const drainMs = config.shutdownDrainSeconds * 1000;
    const startedAt = Date.now();
    server.log.info(
      { signal, drainSeconds: config.shutdownDrainSeconds },
      "shutting down: finishing requests in flight, answering new ones 503",
    );
    server
      .drain(drainMs, cut.signal)
      .then(({ closedAtDeadline }) => {
        server.log.info({ drainedMs: Date.now() - startedAt, closedAtDeadline }, "connections drained; stopping");
        return server.close();
      })
      .then(
        () => process.exit(0),
        (error: unknown) => {
          // The exit code alone would leave an operator nothing to go on.
          server.log.error({ err: error }, "the server could not stop cleanly");
          process.exit(1);
        },
      );
  };
  process.on("SIGTERM", () => stop("SIGTERM"));
  process.on("SIGINT", () => stop("SIGINT"));
  try {
    await server.app.listen({ host: config.host, port: config.port });
  } catch (error) {
    await server.close();
    throw listenError(error, config.host, config.port);
  }
  await server.announce();
  server.log.info(
    {
      url: config.appUrl,
      mode: config.isProduction ? "production" : "development",
      auth: config.authProvider,
      // Since the process started; a rejected code cache (a build made by another node
      // binary or with other V8 flags) makes every start compile the bundle again.
      startMs: Math.round(performance.now()),
      ...startup,
    },
    "secrets-server is ready",
  );
  return -1; // keep running
}

/** HOST or PORT that cannot be listened on is a configuration problem: one line, no stack. */
function listenError(error: unknown, host: string, port: number): unknown {
  const code = (error as NodeJS.ErrnoException).code;
  const at = `${host}:${port}`;
  switch (code) {
    case "EADDRINUSE":
      return new ConfigError(`PORT ${port} is already in use on ${host}: stop the other process or set another PORT.`);
    case "EACCES":
      return new ConfigError(`PORT ${port} needs privileges on this system: choose a port above 1023.`);
    case "EADDRNOTAVAIL":
      return new ConfigError(`HOST ${host} is not an address of this machine (cannot listen on ${at}).`);
    case "ENOTFOUND":
    case "EAI_AGAIN":
      return new ConfigError(`HOST ${host} does not resolve to an address (cannot listen on ${at}).`);
    default:
      return error;
  }
}
