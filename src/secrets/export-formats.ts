// The export formats, one per kind of reader (README, "Export as .env" and "Other export
// formats"): `json` is the API's default body `{ secrets: [...] }`; the others are files.
// The server and the CLI write them with the same functions.

import { DockerEnvRefusal, formatDockerEnv } from "./docker-env.ts";
import { type DotenvFile, formatDotenv } from "./dotenv.ts";
import { type ExportEntry, formatShell } from "./shell.ts";
import { formatYaml } from "./yaml.ts";

export { DockerEnvRefusal };

const FILE_FORMATS = ["dotenv", "shell", "docker", "yaml"] as const;
export type FileFormat = (typeof FILE_FORMATS)[number];
export const EXPORT_FORMATS = ["json", ...FILE_FORMATS] as const;
/** The same formats in the order the CLI offers them (dotenv, its default, first). */
export const CLI_EXPORT_FORMATS = ["dotenv", "shell", "docker", "json", "yaml"] as const satisfies readonly ExportFormat[];
export type ExportFormat = (typeof EXPORT_FORMATS)[number];

export interface ExportFile {
  text: string;
  contentType: string;
  /** The attachment's name for environment `env`. */
  filename: string;
  /** Keys not in the file; a comment line in the file says why for each. */
  leftOut: string[];
  /** The part of `leftOut` left out for their name alone (shell and docker). */
  unsafeNames: string[];
  /** dotenv: the keys in the block a sourcing shell skips, and why (see formatDotenv). */
  dotenvOnly?: DotenvFile["dotenvOnly"];
}

/**
 * `entries` (sorted by key) as `format`. `allow` names keys the caller lets through the
 * `run` rule (shell and docker only). Throws DockerEnvRefusal for docker when a value cannot
 * be written.
 */
export function exportFile(format: FileFormat, entries: ExportEntry[], env: string, allow: ReadonlySet<string> = new Set()): ExportFile {
  switch (format) {
    case "dotenv": {
      const { text, omitted, dotenvOnly } = formatDotenv(entries);
      return { text, contentType: "text/plain; charset=utf-8", filename: `.env.${env}`, leftOut: omitted, unsafeNames: [], dotenvOnly };
    }
    case "shell":
      return { ...formatShell(entries, allow), contentType: "text/x-shellscript; charset=utf-8", filename: `${env}.sh` };
    case "docker":
      return { ...formatDockerEnv(entries, allow), contentType: "text/plain; charset=utf-8", filename: `${env}.env` };
    case "yaml":
      return {
        text: formatYaml(entries),
        contentType: "application/yaml; charset=utf-8",
        filename: `${env}.yaml`,
        leftOut: [],
        unsafeNames: [],
      };
  }
}

/** The 400 answer (and CLI error) for a docker export that cannot be written. */
export function dockerRefusalMessage(error: DockerEnvRefusal, how: { json: string; shell: string }): string {
  return `${error.message} Use ${how.json} or ${how.shell}.`;
}
