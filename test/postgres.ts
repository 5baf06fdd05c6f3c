// A throwaway PostgreSQL cluster for the tests that need one: initdb in a temporary folder
// (in memory where there is room), a server listening on a Unix socket in that folder only
// (no TCP port, so no port to race other test files for), a fresh database for each
// createDatabase(), and everything removed when the test file ends. Debian's postgresql
// package provides the programs; the cluster Debian may start of its own is not used.
import { execFile, execFileSync } from "node:child_process";
import crypto from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after } from "node:test";
import { promisify } from "node:util";
import pg from "pg";

const execFileAsync = promisify(execFile);

const PROGRAMS = ["initdb", "pg_ctl", "postgres"];
const SUPERUSER = "postgres";

interface Cluster {
  /** The temporary folder: the socket lives here, the data in data/, the server's log in server.log. */
  dir: string;
  dataDir: string;
  bin: string;
  /** server_version_num, read at the first createDatabase(). */
  version?: number;
  /** The user the server runs as when this process is root (initdb and postgres refuse root). */
  runAs: string | undefined;
  /** Started with fsync, full-page writes and synchronous commit on, on disk: see ClusterOptions. */
  durable?: boolean;
  /** A database holding every migration, which a shared cluster's new databases are copies of. */
  template?: string;
}

export interface ClusterOptions {
  /**
   * Commits survive a crash, as SQLite's synchronous FULL does: fsync, full_page_writes and
   * synchronous_commit on, and the folder on disk, never in memory where fsync costs nothing.
   * For the bench, which compares the two; the tests leave it off.
   */
  durable?: boolean;
}

let cluster: Cluster | undefined;
let starting: Promise<Cluster> | undefined;

/** The folder holding initdb, pg_ctl and postgres: PATH first, then Debian's versioned folders, newest first. */
export function findPostgresBin(): string | undefined {
  const hasAll = (dir: string) => PROGRAMS.every((name) => isExecutable(path.join(dir, name)));
  for (const dir of (process.env.PATH ?? "").split(path.delimiter)) {
    if (!dir || !isExecutable(path.join(dir, "initdb"))) continue;
    // A link on PATH is followed to the programs' own folder (on Debian
    // /usr/lib/postgresql/<version>/bin), where pg_ctl looks for postgres.
    const real = path.dirname(fs.realpathSync(path.join(dir, "initdb")));
    if (hasAll(real)) return real;
  }
  const debian = "/usr/lib/postgresql";
  const versions = fs.existsSync(debian) ? fs.readdirSync(debian).filter((name) => /^\d+(\.\d+)?$/.test(name)) : [];
  versions.sort((a, b) => Number(b) - Number(a));
  for (const version of versions) {
    const dir = path.join(debian, version, "bin");
    if (hasAll(dir)) return dir;
  }
  return undefined;
}

function isExecutable(file: string): boolean {
  try {
    fs.accessSync(file, fs.constants.X_OK);
    return fs.statSync(file).isFile();
  } catch {
    return false;
  }
}

/**
 * Where the cluster's folder goes: a memory file system when there is a roomy one (initdb
 * writes some 40 MB in many small files, 0.8 s there against 2.8 s on the disk of a busy
 * 2-core machine), else the temporary folder.
 */
function clusterParent(durable: boolean): string {
  if (durable) return os.tmpdir();
  const shm = "/dev/shm";
  try {
    fs.accessSync(shm, fs.constants.W_OK);
    const stats = fs.statfsSync(shm);
    if (stats.bavail * stats.bsize >= 1024 ** 3) return shm;
  } catch {}
  return os.tmpdir();
}

/** initdb and postgres refuse to run as root: as root, run them as postgres (Debian's package makes that user) or nobody. */
function serverUser(): string | undefined {
  if (process.getuid?.() !== 0) return undefined;
  for (const name of [SUPERUSER, "nobody"]) {
    try {
      execFileSync("id", ["-u", name], { stdio: "ignore" });
      return name;
    } catch {}
  }
  throw new Error(
    "The PostgreSQL test cluster cannot run as root, and this machine has neither a postgres nor a nobody user to run it as.",
  );
}

/** The command line that runs one of the cluster's programs, as the server's user when this process is root. */
function commandFor(c: Pick<Cluster, "bin" | "runAs">, program: string, args: string[]): [string, string[]] {
  const file = path.join(c.bin, program);
  if (!c.runAs) return [file, args];
  if (RUNUSER) return [RUNUSER, ["-u", c.runAs, "--", file, ...args]];
  // su passes what follows the user name to the shell: $0 is the program, "$@" its arguments.
  return ["su", ["-s", "/bin/sh", c.runAs, "-c", 'exec "$0" "$@"', file, ...args]];
}

const RUNUSER = ["/usr/sbin/runuser", "/sbin/runuser", "/usr/bin/runuser"].find(isExecutable);

function failure(program: string, error: unknown): Error {
  const e = error as { stdout?: string; stderr?: string; message: string };
  return new Error(`${program} failed: ${`${e.stderr ?? ""}${e.stdout ?? ""}`.trim() || e.message}`);
}

async function run(c: Pick<Cluster, "bin" | "runAs">, program: string, args: string[]): Promise<void> {
  const [command, commandArgs] = commandFor(c, program, args);
  try {
    // A folder the server's user may enter, which this process's working folder may not be.
    await execFileAsync(command, commandArgs, { encoding: "utf8", cwd: os.tmpdir() });
  } catch (error) {
    throw failure(program, error);
  }
}

function runSync(c: Pick<Cluster, "bin" | "runAs">, program: string, args: string[]): void {
  const [command, commandArgs] = commandFor(c, program, args);
  try {
    execFileSync(command, commandArgs, { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"], cwd: os.tmpdir() });
  } catch (error) {
    throw failure(program, error);
  }
}

async function start(options: ClusterOptions = {}): Promise<Cluster> {
  const bin = findPostgresBin();
  if (!bin) {
    throw new Error(
      "The PostgreSQL tests need PostgreSQL's initdb, pg_ctl and postgres (Debian: apt-get install postgresql; .ci/run installs it). None was found on PATH or under /usr/lib/postgresql/*/bin.",
    );
  }
  const runAs = serverUser();
  const durable = options.durable ?? false;
  const dir = fs.mkdtempSync(path.join(clusterParent(durable), "secrets-pg-"));
  const dataDir = path.join(dir, "data");
  if (runAs) {
    const uid = Number(execFileSync("id", ["-u", runAs], { encoding: "utf8" }));
    const gid = Number(execFileSync("id", ["-g", runAs], { encoding: "utf8" }));
    fs.chownSync(dir, uid, gid);
  }
  const c: Cluster = { dir, dataDir, bin, runAs, ...(durable ? { durable } : {}) };
  // From here on the folder (and a server started in it) must go when the process ends.
  cluster = c;
  try {
    // UTF-8 and the C locale whatever the machine's: the same cluster on every machine, and
    // initdb needs no locale to be installed. --no-sync even when durable: what a durable
    // cluster is for is the running server's commits, not initdb's own files.
    await run(c, "initdb", ["-D", dataDir, "-A", "trust", "-U", SUPERUSER, "--no-sync", "-E", "UTF8", "--no-locale"]);
    await run(c, "pg_ctl", startArgs(c));
  } catch (error) {
    const log = readLog(dir);
    stopPostgres();
    throw new Error(`${(error as Error).message}${log ? `\nserver log:\n${log}` : ""}`);
  }
  return c;
}

/** pg_ctl's arguments that start the cluster's server (again). */
function startArgs(c: Cluster): string[] {
  // Durability is of no use to a cluster deleted at the end of the run, unless it is measured.
  const durability = c.durable ? "on" : "off";
  const options = `-k '${c.dir}' -c listen_addresses='' -c fsync=${durability} -c full_page_writes=${durability} -c synchronous_commit=${durability}`;
  return ["-D", c.dataDir, "-l", path.join(c.dir, "server.log"), "-w", "-o", options, "start"];
}

/**
 * Stops the running cluster's server and keeps its data, for an outage test: "fast" as an
 * operator's restart does, so open connections are told the server is shutting down (57P01)
 * and new ones find no socket. startCluster() brings it back with the same databases.
 */
export async function stopCluster(): Promise<void> {
  const c = await ensureCluster();
  await run(c, "pg_ctl", ["-D", c.dataDir, "-m", "fast", "-w", "stop"]);
}

/**
 * Freezes the running server (SIGSTOP to the postmaster) until the returned function thaws it
 * (SIGCONT): new connections are accepted by the kernel and then never answered, as with a
 * hung server or a network that drops packets. Connections already open are not frozen.
 */
export async function freezeCluster(): Promise<() => void> {
  const c = await ensureCluster();
  const pid = Number(fs.readFileSync(path.join(c.dataDir, "postmaster.pid"), "utf8").split("\n")[0]);
  process.kill(pid, "SIGSTOP");
  return () => process.kill(pid, "SIGCONT");
}

/** Starts the server stopped by stopCluster() again (pg_ctl -w: it accepts connections on return). */
export async function startCluster(): Promise<void> {
  const c = await ensureCluster();
  await run(c, "pg_ctl", startArgs(c));
}

function readLog(dir: string): string {
  try {
    return fs.readFileSync(path.join(dir, "server.log"), "utf8").trim().split("\n").slice(-20).join("\n");
  } catch {
    return "";
  }
}

/** Stops the cluster (if this process started one) and removes its folder. Synchronous, so it can run at exit. */
export function stopPostgres(): void {
  const c = cluster;
  if (!c) return;
  cluster = undefined;
  starting = undefined;
  try {
    // Immediate: nothing in it needs to survive, and open connections are cut at once.
    runSync(c, "pg_ctl", ["-D", c.dataDir, "-m", "immediate", "-w", "stop"]);
  } catch {
    // Already gone (or never fully up): the folder is removed all the same.
  } finally {
    fs.rmSync(c.dir, { recursive: true, force: true });
  }
}

let exitHooked = false;

function stopAtExit(): void {
  if (exitHooked) return;
  exitHooked = true;
  process.once("exit", stopPostgres);
  // A test run that is interrupted or cancelled ends with a signal, which skips "exit":
  // stop the cluster, then end the way the signal would have.
  for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"] as const) {
    process.once(signal, () => {
      stopPostgres();
      process.kill(process.pid, signal);
    });
  }
}

/** The running cluster, started on first use; a failed start is tried again by the next call. */
function ensureCluster(): Promise<Cluster> {
  stopAtExit();
  starting ??= start().catch((error: unknown) => {
    starting = undefined;
    throw error;
  });
  return starting;
}

/** A connection URL for the cluster's superuser on `database`, through the socket folder. */
function urlFor(c: Cluster, database: string): string {
  return `postgres://${SUPERUSER}@/${database}?host=${encodeURIComponent(c.dir)}`;
}

/**
 * A new, empty database in the test cluster (started on first use), as a postgres:// URL
 * whose host is the socket folder. It compares text in en-US order by default (ICU, on
 * PostgreSQL 15 and newer), not byte order. The cluster stops when the process exits; call
 * usePostgres() at the top of a test file to stop it as soon as the file's tests end.
 */
export async function createDatabase(options: { encoding?: string } = {}): Promise<string> {
  return createDatabaseIn(await ensureCluster(), options);
}

async function createDatabaseIn(c: Cluster, options: { encoding?: string } = {}): Promise<string> {
  return urlFor(c, await newDatabase(c, options));
}

/** Creates a database in the cluster and returns its name; `encoding` other than UTF8 comes with the C locale. */
async function newDatabase(c: Cluster, options: { encoding?: string } = {}): Promise<string> {
  const name = `test_${crypto.randomBytes(6).toString("hex")}`;
  const client = new pg.Client({ connectionString: urlFor(c, "postgres") });
  await client.connect();
  try {
    c.version ??= Number((await client.query<{ v: string }>("SELECT current_setting('server_version_num') AS v")).rows[0]!.v);
    // A language collation by default, as most production databases have (the cluster's own
    // is C): byte order that a query gets only by luck of the database's collation shows up
    // in the tests. PostgreSQL 15 and newer choose a database's collation provider.
    const collation = c.version >= 150000 ? " TEMPLATE template0 LOCALE_PROVIDER icu ICU_LOCALE 'en-US'" : "";
    // A copy of the migrated template keeps its collation.
    if (options.encoding) {
      await client.query(`CREATE DATABASE ${name} TEMPLATE template0 ENCODING '${options.encoding}' LC_COLLATE 'C' LC_CTYPE 'C'`);
    } else await client.query(`CREATE DATABASE ${name}${c.template ? ` TEMPLATE ${c.template}` : collation}`);
  } finally {
    await client.end();
  }
  return name;
}

/**
 * The cluster a whole test run shares (test/run.ts starts it once and names it in
 * TEST_PG_CLUSTER), or undefined when the file runs alone. Shared, so no test file may stop
 * or freeze it: the outage tests use their own cluster (stopCluster and freezeCluster).
 */
function sharedCluster(): Cluster | undefined {
  const named = process.env.TEST_PG_CLUSTER;
  return named ? (JSON.parse(named) as Cluster) : undefined;
}

/** Starts a cluster that outlives this process, for a whole test run: what TEST_PG_CLUSTER names; stopSharedCluster ends it. */
export async function startSharedCluster(options: ClusterOptions = {}): Promise<string> {
  const c = await start(options);
  // Every server of the run starts on a copy of one migrated database: copying takes a
  // third of creating and migrating (92 ms against 227 ms here, for hundreds of servers).
  // The servers still run their migrations, and find them applied. A fresh database's
  // migrations are tested by postgres-schema and postgres-store, in clusters of their own.
  const template = await newDatabase(c);
  const { migratePostgres, openPostgres } = await import("../src/core/postgres.ts");
  const store = await openPostgres(urlFor(c, template));
  try {
    await migratePostgres(store);
  } finally {
    // CREATE DATABASE copies only a database that nobody is connected to.
    await store.close();
  }
  c.template = template;
  // This process only hands it over: stopping it is stopSharedCluster's.
  cluster = undefined;
  starting = undefined;
  return JSON.stringify(c);
}

/** Stops a cluster startSharedCluster() started and removes its folder. */
export function stopSharedCluster(named: string): void {
  cluster = JSON.parse(named) as Cluster;
  stopPostgres();
}

/**
 * A new, empty database for a test server: in the run's shared cluster when there is one,
 * else in this process's own (started on first use).
 */
export async function createServerDatabase(): Promise<string> {
  const shared = sharedCluster();
  return shared ? createDatabaseIn(shared) : createDatabase();
}

/**
 * Stops the cluster after the file's tests (it stops at exit otherwise). Call it at top
 * level, below the hooks that close the file's connections to the cluster: `after` hooks
 * run in the order they are declared, and a connection the server drops under an idle
 * pg.Client is an unhandled error.
 */
export function usePostgres(): void {
  after(stopPostgres);
}
