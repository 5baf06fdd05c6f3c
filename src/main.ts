// Each command's module is imported only when that command runs: the CLI commands then
// start without loading the server (Fastify, SQLite, every feature).
import { CLI_HELP, cliCommands } from "./cli/index.ts";
import { ConfigError, loadConfig } from "./core/config.ts";

export const VERSION = "0.1.0";

const HELP = `secrets-server ${VERSION}: a self-hosted secrets manager in one executable.

Server commands:
  serve            Start the server
  migrate          Apply database migrations and exit
  backup FILE      Write a consistent copy of the database to FILE (while the server runs)
  audit verify     Check the audit log's keyed hash chain (needs the master keys); exit code 1 at a broken link
  rotate-key       Verify and re-key the audit chain, then re-encrypt every record to the current master key version (in batches; rerun to resume)
  setup-link       Print a one-time link to create the first account (AUTH_PROVIDER=local)
  users ...        list, add EMAIL, reset-password EMAIL, disable EMAIL, enable EMAIL
  version          Print the version
  help             Show this help

${CLI_HELP}
Configuration comes from environment variables; see the README.
`;

type Command = (args: string[]) => Promise<number>;

/**
 * Usage of the server commands that take no options. `<command> --help` prints it and does
 * nothing else, and an unexpected argument is a usage error: `serve --help` used to start
 * the server, `backup --help` wrote a backup to a file named --help, and `setup-link --help`
 * voided the pending setup link.
 */
const SERVER_USAGE: Record<string, string> = {
  serve: "Usage: secrets-server serve\n\nStarts the server, configured by environment variables (see the README).\n",
  migrate: "Usage: secrets-server migrate\n\nApplies the database migrations in DATA_DIR and exits (serve also does this at start).\n",
  backup: "Usage: secrets-server backup FILE\n\nWrites a consistent copy of the database in DATA_DIR to FILE, a new file; the server may keep running.\n",
  "setup-link": "Usage: secrets-server setup-link\n\nPrints a one-time link to create the first account (AUTH_PROVIDER=local) and voids the previous one.\n",
  version: "Usage: secrets-server version\n",
};

function usageCheck(name: string, args: string[]): number | undefined {
  const usage = SERVER_USAGE[name];
  if (usage === undefined) return undefined;
  if (args.some(isHelpFlag)) {
    process.stdout.write(usage);
    return 0;
  }
  const expected = name === "backup" ? 1 : 0;
  if (args.length !== expected || args.some((a) => a.startsWith("-"))) {
    process.stderr.write(usage);
    return 2;
  }
  return undefined;
}

function isHelpFlag(arg: string): boolean {
  return arg === "--help" || arg === "-h";
}

const commands: Record<string, Command> = {
  serve: serve,
  ...cliCommands,
  migrate: async () => {
    const config = loadConfig();
    const { openDatabase } = await import("./core/db.ts");
    openDatabase(config).$client.close();
    console.log(`Database in ${config.dataDir} is up to date.`);
    return 0;
  },
  backup: async ([file]) => {
    if (!file) {
      process.stderr.write("Usage: secrets-server backup FILE  (a consistent copy of the database; the server may keep running)\n");
      return 2;
    }
    const config = loadConfig();
    const { backupDatabase } = await import("./core/db.ts");
    await backupDatabase(config, file);
    console.log(`Backed up ${config.dataDir} to ${file}. Keep MASTER_KEY safe elsewhere: the copy cannot be read without it.`);
    return 0;
  },
  audit: async (args) => (await import("./audit/audit.verify.ts")).auditCommand(args),
  "rotate-key": async (args) => (await import("./secrets/rotate-key.ts")).rotateKeyCommand(args),
  "setup-link": async (args) => (await import("./users/users.commands.ts")).setupLinkCommand(args),
  users: async (args) => (await import("./users/users.commands.ts")).usersCommand(args),
  version: async () => {
    console.log(VERSION);
    return 0;
  },
  help: async () => {
    process.stdout.write(HELP);
    return 0;
  },
};

async function serve(): Promise<number> {
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
    server.log.info({ signal, drainSeconds: config.shutdownDrainSeconds }, "shutting down: finishing requests in flight, answering new ones 503");
    server
      .drain(drainMs, cut.signal)
      .then(({ closedAtDeadline }) => {
        server.log.info({ drainedMs: Date.now() - startedAt, closedAtDeadline }, "connections drained; stopping");
        return server.close();
      })
      .then(
        () => process.exit(0),
        () => process.exit(1),
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
  server.log.info(
    { url: config.appUrl, mode: config.isProduction ? "production" : "development", auth: config.authProvider },
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

async function main(argv: string[]): Promise<void> {
  const [name, ...args] = argv;
  if (name === undefined) {
    // Someone who installed the executable for the CLI must not get a server writing ./data
    // where they stand: `serve` is always named.
    process.stderr.write(HELP);
    process.exit(2);
  }
  const command = commands[name === "--help" || name === "-h" ? "help" : name === "--version" ? "version" : name];
  if (!command) {
    process.stderr.write(`Unknown command "${name}". Run "secrets-server help" for the list.\n`);
    process.exit(2);
  }
  const usage = usageCheck(name, args);
  if (usage !== undefined) process.exit(usage);
  // Server commands create the database, its -wal/-shm, the key file, backups and the
  // addon cache: nothing they create is for other users. The CLI sets each file's mode itself.
  if (!(name in cliCommands)) process.umask(0o077);
  try {
    // `audit verify --help` would verify: every help flag asks for audit's usage.
    const code = await command(name === "audit" && args.some(isHelpFlag) ? ["help"] : args);
    if (code >= 0) process.exit(code);
  } catch (error) {
    if (error instanceof ConfigError) {
      // One clear line naming the variable, no stack trace.
      process.stderr.write(`secrets-server: configuration error: ${error.message}\n`);
      process.exit(1);
    }
    throw error;
  }
}

void main(process.argv.slice(2));
