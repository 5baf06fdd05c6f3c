// A home folder of its own for each CLI test: the CLI keeps credentials, link indexes and
// fallback copies under $XDG_CONFIG_HOME, so tests never share or touch the real ones.
import fs from "node:fs";
import path from "node:path";
import type { TestContext } from "node:test";
import { makeTempDir } from "./helpers.ts";

export interface CliHome {
  dir: string;
  env: Record<string, string>;
  credentialsFile: string;
}

/** An empty HOME and XDG_CONFIG_HOME, removed when the test ends. */
export function cliHome(t: TestContext): CliHome {
  const dir = makeTempDir("secrets-cli-");
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  return {
    dir,
    env: { XDG_CONFIG_HOME: path.join(dir, "config"), HOME: dir },
    credentialsFile: path.join(dir, "config", "secrets-server", "credentials.json"),
  };
}
