// Builds the admin UI: web/src/main.tsx and web/styles.css become content-hashed files
// under assets/, and index.html (from web/index.html) links them. Used by build.mjs for
// the single executable and by src/ui at server start when running from source.
import fs from "node:fs";
import path from "node:path";
import zlib from "node:zlib";
import * as esbuild from "esbuild";

const WEB = import.meta.dirname;
/** JavaScript and CSS together, gzipped, must stay under this (the budget). */
export const BUDGET_BYTES = 150 * 1024;

/**
 * Writes index.html and assets/ into outdir. Returns the written files (relative paths),
 * the gzipped size of JavaScript plus CSS, and every file the output depends on (absolute
 * paths: the sources esbuild read, the HTML template and this script), so a cache can
 * tell when a build is still current.
 * @param {{ outdir: string, minify?: boolean, quiet?: boolean }} options
 * @returns {Promise<{ files: string[], gzipBytes: number, inputs: string[] }>}
 */
export async function buildWeb({ outdir, minify = true, quiet = false }) {
  fs.mkdirSync(outdir, { recursive: true });
  const result = await esbuild.build({
    entryPoints: { app: path.join(WEB, "src/main.tsx"), styles: path.join(WEB, "styles.css") },
    outdir: path.join(outdir, "assets"),
    entryNames: "[name]-[hash]",
    bundle: true,
    format: "esm",
    platform: "browser",
    target: ["es2022", "chrome111", "firefox115", "safari16"],
    jsx: "automatic",
    jsxImportSource: "preact",
    minify,
    sourcemap: false,
    legalComments: "none",
    metafile: true,
    write: true,
    logLevel: "warning",
    define: { "process.env.NODE_ENV": '"production"' },
  });
  if (result.errors.length > 0) throw new Error("web build failed");

  const outputs = Object.keys(result.metafile.outputs).map((file) => path.relative(outdir, path.resolve(file)).split(path.sep).join("/"));
  const js = outputs.find((file) => file.endsWith(".js"));
  const css = outputs.find((file) => file.endsWith(".css"));
  if (!js || !css) throw new Error("web build wrote no JavaScript or CSS");

  // No inline script or style: the CSP allows only files from this origin.
  const template = fs.readFileSync(path.join(WEB, "index.html"), "utf8");
  const html = template
    .replace("<!-- styles -->", `<link rel="stylesheet" href="/${css}" />`)
    .replace("<!-- script -->", `<script type="module" src="/${js}"></script>`);
  if (!html.includes(js) || !html.includes(css)) throw new Error("web/index.html lacks the <!-- styles --> or <!-- script --> marker");
  fs.writeFileSync(path.join(outdir, "index.html"), html);

  const gzipBytes = [js, css].reduce((sum, file) => sum + zlib.gzipSync(fs.readFileSync(path.join(outdir, file)), { level: 9 }).length, 0);
  const kib = (gzipBytes / 1024).toFixed(1);
  if (gzipBytes > BUDGET_BYTES)
    throw new Error(`web UI is ${kib} KiB gzipped (JavaScript + CSS), over the ${BUDGET_BYTES / 1024} KiB budget`);
  if (!quiet) console.log(`web UI: ${js}, ${css}: ${kib} KiB gzipped (JavaScript + CSS; budget ${BUDGET_BYTES / 1024} KiB)`);
  const inputs = [
    ...Object.keys(result.metafile.inputs).map((file) => path.resolve(file)),
    path.join(WEB, "index.html"),
    import.meta.filename,
  ];
  return { files: ["index.html", ...outputs].sort(), gzipBytes, inputs: [...new Set(inputs)].sort() };
}

// `node web/build-web.mjs [outdir]` builds on its own (default dist/web).
if (import.meta.url === `file://${process.argv[1]}`) {
  await buildWeb({ outdir: path.resolve(process.argv[2] ?? path.join(WEB, "../dist/web")), minify: true });
}
