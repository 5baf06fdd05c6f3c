import { hasKeyShape } from "../core/secret-rules.ts";
import { printable } from "../core/text.ts";
import { CliError, EXIT } from "./errors.ts";

export interface SecretPair {
  key: string;
  value: string;
}

/**
 * An export's secrets as the server sent them, once their keys are keys: the writers put a
 * key into shell and dotenv lines (and their comments) as it is, so a key with a line break
 * from a server that is not ours (a proxy, a man in the middle on plain http) must not
 * reach them.
 */
export function checkedSecrets(secrets: SecretPair[], server: string): SecretPair[] {
  if (!Array.isArray(secrets)) throw new CliError(`${server} sent an export without its list of secrets: nothing was used.`, EXIT.failed);
  for (const { key, value } of secrets) {
    if (!hasKeyShape(key) || typeof value !== "string") {
      throw new CliError(
        `${server} sent a secret whose key is not a key ("${printable(String(key)).slice(0, 60)}"): nothing was used.`,
        EXIT.failed,
      );
    }
  }
  return secrets;
}

export function formatJson(secrets: SecretPair[]): string {
  return `${JSON.stringify(Object.fromEntries(secrets.map((s) => [s.key, s.value])), null, 2)}\n`;
}
