// The executable's entry: the CLI's commands, and the server's loaded only when one of
// them runs (src/server-commands.ts), so a CLI command starts like a small tool.
import "./core/no-inspector-signal.ts";
import { CLI_HELP, cliCommands } from "./cli/index.ts";
import { VERSION } from "./core/version.ts";

const HELP = `secrets-server ${VERSION}: a self-hosted secrets manager in one executable.

Server commands:
  serve            Start the server
  migrate          Apply database migrations and exit
  backup FILE      Write a consistent copy of the database to FILE (while the server runs; SQLite)
  copy-database --to URL
                   Copy the SQLite database in DATA_DIR into an empty PostgreSQL database
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
  migrate:
    "Usage: secrets-server migrate\n\nApplies the database migrations (DATA_DIR, or DATABASE_URL when set) and exits (serve also does this at start).\n",
  backup:
    "Usage: secrets-server backup FILE\n\nWrites a consistent copy of the database in DATA_DIR to FILE, a new file; the server may keep running.\n",
  "setup-link":
    "Usage: secrets-server setup-link\n\nPrints a one-time link to create the first account (AUTH_PROVIDER=local) and voids the previous one.\n",
  version: "Usage: secrets-server version\n",
};

function usageCheck(name: string, args: string[]): number | undefined {
  if (!Object.hasOwn(SERVER_USAGE, name)) return undefined;
  const usage = SERVER_USAGE[name]!;
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

function isHelpFlag(arg: string | undefined): boolean {
  return arg === "--help" || arg === "-h";
}

/**
 * For the commands that read their own arguments: a help flag of its own, first or after a
 * subcommand (`rotate-key -h`, `users add --help`, `audit verify --help`, which would
 * verify). Anywhere else it may be a value (`rotate-key --batch-size "$N"`, `users add a@b
 * --name "$NAME"`), refused as such, never answered with the usage and exit 0.
 */
function asksForUsage(args: string[]): boolean {
  return isHelpFlag(args[0]) || (args[0] !== undefined && !args[0].startsWith("-") && isHelpFlag(args[1]));
}

/** Server commands that read their own arguments, and answer ["help"] with their usage on stdout. */
const OWN_USAGE = new Set(["audit", "rotate-key", "users", "copy-database"]);

/** The server's commands, in their own module (see loadServerCommands). */
const SERVER_COMMANDS = ["serve", "migrate", "backup", "copy-database", "audit", "rotate-key", "setup-link", "users"];

/** Whether V8 took the executable's code cache of the server bundle (absent from source). */
type CodeCache = "accepted" | "rejected" | "missing";

interface ServerCommands {
  runServerCommand(name: string, args: string[], startup?: { codeCache?: CodeCache }): Promise<number>;
}

/**
 * The server's commands, loaded only when one runs, so the CLI starts without Fastify,
 * SQLite, drizzle, pino or the UI. In the executable they are a bundle of their own, an
 * asset compiled here on first use (with the code cache build.mjs made for it); from
 * source, a module imported by a path esbuild does not follow.
 */
async function loadServerCommands(): Promise<{ commands: ServerCommands; codeCache?: CodeCache }> {
  const sea = process.getBuiltinModule("node:sea") as typeof import("node:sea") | undefined;
  if (sea?.isSea()) {
    const { Module } = process.getBuiltinModule("node:module") as typeof import("node:module");
    const vm = process.getBuiltinModule("node:vm") as typeof import("node:vm");
    // Read in place (getRawAsset copies nothing) and decoded as latin1, 4 times faster than
    // UTF-8 for 5 MB: esbuild writes every string, regular expression and name as ASCII,
    // so only comments hold other bytes, and no latin1 character ends a line in JavaScript.
    // build.mjs decodes it the same way for the code cache, which V8 matches to the text.
    const source = Buffer.from(sea.getRawAsset("server.cjs")).toString("latin1");
    let cachedData: Buffer | undefined;
    try {
      cachedData = Buffer.from(sea.getRawAsset("server.cache"));
    } catch {
      cachedData = undefined;
    }
    const script = new vm.Script(Module.wrap(source), { filename: "server.cjs", cachedData });
    const module = { exports: {} as ServerCommands };
    const wrapper = script.runInThisContext() as (
      exports: unknown,
      require: NodeJS.Require,
      module: unknown,
      filename: string,
      dirname: string,
    ) => void;
    wrapper(module.exports, require, module, process.execPath, process.cwd());
    return { commands: module.exports, codeCache: !cachedData ? "missing" : script.cachedDataRejected ? "rejected" : "accepted" };
  }
  // From source, drizzle-orm loads as CommonJS, a second sooner (dev/from-source.mjs). The
  // bench sets DRIZZLE_AS_BUNDLED=1: it measures the request path on the ES modules the
  // executable bundles, so its figures never depend on which build ran.
  if (process.env.DRIZZLE_AS_BUNDLED !== "1") {
    const fromSource = "./dev/from-source.mjs";
    await import(fromSource);
  }
  const file = "./server-commands.ts";
  return { commands: (await import(file)) as ServerCommands };
}

const commands: Record<string, Command> = {
  ...cliCommands,
  ...Object.fromEntries(
    SERVER_COMMANDS.map((name) => [
      name,
      async (args: string[]) => {
        const { commands, codeCache } = await loadServerCommands();
        return commands.runServerCommand(name, args, { codeCache });
      },
    ]),
  ),
  version: async () => {
    console.log(VERSION);
    return 0;
  },
  help: async () => {
    process.stdout.write(HELP);
    return 0;
  },
};

async function main(argv: string[]): Promise<void> {
  const [name, ...args] = argv;
  if (name === undefined) {
    // Someone who installed the executable for the CLI must not get a server writing ./data
    // where they stand: `serve` is always named.
    process.stderr.write(HELP);
    process.exit(2);
  }
  const commandName = name === "--help" || name === "-h" ? "help" : name === "--version" ? "version" : name;
  // Own keys only: "constructor" or "__proto__" is no command.
  const command = Object.hasOwn(commands, commandName) ? commands[commandName] : undefined;
  if (!command) {
    process.stderr.write(`Unknown command "${name}". Run "secrets-server help" for the list.\n`);
    process.exit(2);
  }
  const usage = usageCheck(name, args);
  if (usage !== undefined) process.exit(usage);
  // Server commands create the database, its -wal/-shm, the key file, backups and the
  // addon cache: nothing they create is for other users. The CLI sets each file's mode itself.
  if (!Object.hasOwn(cliCommands, name)) process.umask(0o077);
  const code = await command(OWN_USAGE.has(name) && asksForUsage(args) ? ["help"] : args);
  if (code < 0) return;
  await Promise.all([drained(process.stdout), drained(process.stderr)]);
  process.exit(code);
}

/**
 * Settles once what was written to the stream has left the process: writes to a pipe are
 * asynchronous, and process.exit drops what is still queued (an export piped into a reader
 * slower than us lost all but its first 64 KiB). A reader that went away (EPIPE) ends the wait.
 */
function drained(stream: NodeJS.WriteStream): Promise<void> {
  if (stream.writableLength === 0 || stream.destroyed) return Promise.resolve();
  return new Promise((resolve) => {
    stream.once("error", () => resolve());
    stream.write("", () => resolve());
  });
}

void main(process.argv.slice(2));
