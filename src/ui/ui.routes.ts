import crypto from "node:crypto";
import path from "node:path";
import zlib from "node:zlib";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { isSingleExecutable, readAsset } from "../core/assets.ts";
import { HttpError } from "../core/errors.ts";
import { buildWebFromSource } from "./web-source.ts";

interface WebFile {
  body: Buffer;
  /** Present when gzip makes the file smaller. */
  gzip?: Buffer;
  type: string;
  etag: string;
  /** Content-hashed names never change meaning, so browsers may keep them for a year. */
  immutable: boolean;
}

type WebFiles = Map<string, WebFile>;

const TYPES: Record<string, string> = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".json": "application/json; charset=utf-8",
  ".svg": "image/svg+xml",
  ".png": "image/png",
  ".ico": "image/x-icon",
  ".woff2": "font/woff2",
  ".txt": "text/plain; charset=utf-8",
};

/** The gzip of a file of a type that compresses, when it is smaller than the file. */
function gzipOf(type: string, body: Buffer): Buffer | undefined {
  if (!/^(text\/|application\/json|image\/svg)/.test(type)) return undefined;
  const gzipped = zlib.gzipSync(body, { level: 9 });
  return gzipped.length < body.length ? gzipped : undefined;
}

function typeOf(name: string): string {
  return TYPES[path.extname(name)] ?? "application/octet-stream";
}

function toWebFile(name: string, body: Buffer, gzip: Buffer | undefined): WebFile {
  return {
    body,
    gzip,
    type: typeOf(name),
    etag: `"${crypto.createHash("sha256").update(body).digest("base64url").slice(0, 27)}"`,
    immutable: name.startsWith("assets/"),
  };
}

/**
 * The executable carries the built files as assets named web/<path>, listed in
 * web/manifest.json, and the gzip of each one `gzipped` names as web-gzip/<path>: build.mjs
 * compresses them (by gzipOf's rule), which took 6 ms of every start.
 */
function loadFromExecutable(): WebFiles {
  const manifest = JSON.parse(readAsset("web/manifest.json").toString("utf8")) as { files: string[]; gzipped: string[] };
  const gzipped = new Set(manifest.gzipped);
  return new Map(
    manifest.files.map((name) => [
      name,
      toWebFile(name, readAsset(`web/${name}`), gzipped.has(name) ? readAsset(`web-gzip/${name}`) : undefined),
    ]),
  );
}

async function buildFromSource(): Promise<{ files: WebFiles; gzipBytes: number }> {
  const built = await buildWebFromSource();
  return {
    files: new Map([...built.files].map(([name, body]) => [name, toWebFile(name, body, gzipOf(typeOf(name), body))])),
    gzipBytes: built.gzipBytes,
  };
}

// Once per process: every server started in it (tests start many) shares the build.
let loading: Promise<{ files: WebFiles; gzipBytes?: number }> | undefined;

function loadWebFiles(): Promise<{ files: WebFiles; gzipBytes?: number }> {
  loading ??= isSingleExecutable() ? Promise.resolve().then(() => ({ files: loadFromExecutable() })) : buildFromSource();
  return loading;
}

function send(req: FastifyRequest, reply: FastifyReply, file: WebFile): FastifyReply {
  void reply
    .header("content-type", file.type)
    .header("etag", file.etag)
    .header("vary", "accept-encoding")
    .header("cache-control", file.immutable ? "public, max-age=31536000, immutable" : "no-cache");
  const match = req.headers["if-none-match"];
  if (match?.split(",").some((tag) => tag.trim().replace(/^W\//, "") === file.etag)) {
    return reply.code(304).send();
  }
  const acceptsGzip = /\bgzip\b/.test(String(req.headers["accept-encoding"] ?? ""));
  if (file.gzip && acceptsGzip) return reply.header("content-encoding", "gzip").send(file.gzip);
  return reply.send(file.body);
}

/**
 * Serves the single-page UI: the built files by name, and index.html for every other GET
 * outside /api, so deep links (/projects/<id>/production) load the app.
 */
export function registerUiRoutes(app: FastifyInstance): void {
  let files: WebFiles | undefined;
  let failure: unknown;

  // Build before listening so the first page is quick; a broken UI build must not take the API down.
  app.addHook("onReady", async () => {
    try {
      const loaded = await loadWebFiles();
      files = loaded.files;
      if (loaded.gzipBytes !== undefined) {
        app.log.info({ gzipKiB: Number((loaded.gzipBytes / 1024).toFixed(1)) }, "web UI built");
      }
    } catch (error) {
      failure = error;
      app.log.error({ err: error }, "the web UI could not be built; the API still works");
    }
  });

  // Not part of the API document: the pages of the web UI.
  app.get("/*", { config: { rateLimit: false }, schema: { hide: true } }, async (req, reply) => {
    const pathname = req.url.split("?")[0]!.split("#")[0]!;
    let name: string;
    try {
      name = decodeURIComponent(pathname).replace(/^\/+/, "");
    } catch {
      throw new HttpError(404, "Not found.");
    }
    // Decoded and case-folded first: "/%61pi/nope" or "/API/nope" is an unknown API path, not a page.
    const folded = name.toLowerCase();
    if (folded === "api" || folded.startsWith("api/")) throw new HttpError(404, "Not found.");
    if (!files) {
      if (failure) throw new HttpError(503, "The web UI is not available: its build failed. See the server log.");
      files = (await loadWebFiles()).files;
    }
    const file = files.get(name);
    if (file) return send(req, reply, file);
    // A missing hashed file is an old page asking for a gone build: a 404 rather than HTML.
    if (name.startsWith("assets/")) throw new HttpError(404, "Not found.");
    return send(req, reply, files.get("index.html")!);
  });
}
