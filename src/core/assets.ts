import fs from "node:fs";
import path from "node:path";

// Inside the single executable `require` reaches only built-ins, and files ship as
// assets of the executable. From source, the same names are read from the repository.

type Sea = { isSea(): boolean; getAsset(name: string): ArrayBuffer };

function sea(): Sea | undefined {
  const mod = process.getBuiltinModule?.("node:sea") as Sea | undefined;
  return mod?.isSea() ? mod : undefined;
}

export function isSingleExecutable(): boolean {
  return sea() !== undefined;
}

/** The repository root when running from source (tsx) or from the dist bundle. */
export function sourceRoot(): string {
  return path.resolve(import.meta.dirname, "../..");
}

/** Reads an asset of the executable, or the same path below the repository from source. */
export function readAsset(name: string): Buffer {
  const executable = sea();
  if (executable) return Buffer.from(executable.getAsset(name));
  return fs.readFileSync(path.join(sourceRoot(), name));
}
