// The README's screenshots script, run into a temporary folder: it must keep producing
// every picture, at its size, with something on it.
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { test } from "node:test";
import { makeTempDir } from "./helpers.ts";
import { DESKTOP, makeScreenshots, PHONE, SHOT_FILES } from "./screenshots.ts";

/** Width and height from a PNG's IHDR chunk, after checking the signature. */
function pngSize(file: string): { width: number; height: number } {
  const bytes = fs.readFileSync(file);
  assert.equal(bytes.subarray(0, 8).toString("hex"), "89504e470d0a1a0a", `${file} is a PNG`);
  assert.equal(bytes.subarray(12, 16).toString("ascii"), "IHDR");
  return { width: bytes.readUInt32BE(16), height: bytes.readUInt32BE(20) };
}

test("npm run screenshots writes every README picture at laptop and phone size", async (t) => {
  const dir = makeTempDir("screenshots-");
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const written = await makeScreenshots(dir);
  assert.deepEqual(written.map((file) => path.basename(file)).sort(), [...SHOT_FILES].sort());
  for (const name of SHOT_FILES) {
    const file = path.join(dir, name);
    const size = pngSize(file);
    assert.deepEqual(size, name.includes("phone") ? PHONE : DESKTOP, name);
    // A blank or nearly blank page compresses to a few kilobytes; a page of text does not.
    assert.ok(fs.statSync(file).size > 20_000, `${name} is ${fs.statSync(file).size} bytes`);
  }
  // The README shows each of them.
  const readme = fs.readFileSync(path.join(import.meta.dirname, "..", "README.md"), "utf8");
  for (const name of SHOT_FILES) assert.ok(readme.includes(`(docs/screenshots/${name})`), `README links ${name}`);
});
