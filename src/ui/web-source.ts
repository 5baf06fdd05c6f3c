import crypto from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { sourceRoot } from "../core/assets.ts";

export interface BuiltWeb {
  /** Relative paths (`index.html`, `assets/app-<hash>.js`, …) to their bytes. */
  files: Map<string, Buffer>;
  gzipBytes: number;
}

interface CacheEntry {
  digest: string;
  inputs: string[];
  files: string[];
  gzipBytes: number;
}

type BuildWeb = (options: {
  outdir: string;
  minify: boolean;
  quiet: boolean;
}) => Promise<{ files: string[]; gzipBytes: number; inputs: string[] }>;

/** Hash of every input's path and bytes: any edit, added import or removed file changes it. */
function digestOf(inputs: string[]): string | undefined {
  const hash = crypto.createHash("sha256");
  for (const file of inputs) {
    let body: Buffer;
    try {
      body = fs.readFileSync(file);
    } catch {
      return undefined;
    }
    hash.update(file).update("\0").update(body).update("\0");
  }
  return hash.digest("hex");
}

function readFiles(dir: string, names: string[]): Map<string, Buffer> {
  return new Map(names.map((name) => [name, fs.readFileSync(path.join(dir, ...name.split("/")))]));
}

/**
 * From source, esbuild builds the UI; the result is kept under node_modules/.cache, keyed by
 * a hash of everything the build read, so the many servers a test run starts (one process
 * per test file) and a restarted `npm start` build it once, not each time. The cache sits
 * in the checkout (never a shared temporary folder another user could plant a bundle in),
 * and a build is used only when every input still hashes the same.
 */
export async function buildWebFromSource(): Promise<BuiltWeb> {
  const root = sourceRoot();
  const cacheDir = path.join(root, "node_modules", ".cache", "secrets-server-web");
  // One entry per checkout: node_modules may be shared by several (a symlink, a workspace),
  // and an entry naming another checkout's files would hash as unchanged and serve its UI.
  const entryFile = path.join(cacheDir, `current-${crypto.createHash("sha256").update(root).digest("hex").slice(0, 16)}.json`);
  try {
    const entry = JSON.parse(fs.readFileSync(entryFile, "utf8")) as CacheEntry;
    if (digestOf(entry.inputs) === entry.digest) {
      return { files: readFiles(path.join(cacheDir, entry.digest), entry.files), gzipBytes: entry.gzipBytes };
    }
  } catch {
    // No cache yet, or one from another layout: build.
  }

  // A computed path, so the executable's bundler never pulls esbuild in: it only runs here.
  const builder = pathToFileURL(path.join(root, "web", "build-web.mjs")).href;
  const { buildWeb } = (await import(builder)) as { buildWeb: BuildWeb };
  fs.mkdirSync(cacheDir, { recursive: true, mode: 0o700 });
  const staging = fs.mkdtempSync(path.join(cacheDir, "build-"));
  try {
    const built = await buildWeb({ outdir: staging, minify: true, quiet: true });
    const files = readFiles(staging, built.files);
    const digest = digestOf(built.inputs);
    if (digest) {
      // Processes building at once write the same bytes: the first rename wins, and the
      // entry file is replaced atomically, so a reader never sees half a build.
      const finalDir = path.join(cacheDir, digest);
      try {
        fs.renameSync(staging, finalDir);
      } catch {
        // Another process got there first with the same build.
      }
      const entry: CacheEntry = { digest, inputs: built.inputs, files: built.files, gzipBytes: built.gzipBytes };
      const temporary = `${entryFile}.${process.pid}.${crypto.randomBytes(4).toString("hex")}`;
      fs.writeFileSync(temporary, JSON.stringify(entry));
      fs.renameSync(temporary, entryFile);
      pruneOldBuilds(cacheDir, digest);
    }
    return { files, gzipBytes: built.gzipBytes };
  } finally {
    fs.rmSync(staging, { recursive: true, force: true });
  }
}

/** Keeps the cache from growing with every edit: builds older than an hour, other than the current one, go. */
function pruneOldBuilds(cacheDir: string, keep: string): void {
  const cutoff = Date.now() - 60 * 60 * 1000;
  for (const name of fs.readdirSync(cacheDir)) {
    if (name === keep || name.startsWith("current")) continue;
    const full = path.join(cacheDir, name);
    try {
      if (fs.statSync(full).mtimeMs < cutoff) fs.rmSync(full, { recursive: true, force: true });
    } catch {
      // Gone already: another process pruned it.
    }
  }
}
