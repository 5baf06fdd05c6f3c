// `secrets set`, `secrets import` and `secrets delete`: the writes, one request per key
// (the import endpoint takes a browser session only), each confirmed for production.
import fs from "node:fs";
import { parseDotenv } from "../../web/src/dotenv.ts";
import { isSecretKey, MAX_IMPORT_BYTES, MAX_KEY_LENGTH, MAX_VALUE_UNITS as MAX_VALUE_LENGTH } from "../core/secret-rules.ts";
import { looksLikeToken, printable, strictUtf8 } from "../core/text.ts";
import { type Api, errorFor } from "./api.ts";
import { maybeOpenBrowser } from "./browser.ts";
import { environmentPath, locate, resolveTarget, type Target } from "./context.ts";
import { CliError, EXIT } from "./errors.ts";
import { askHidden, confirmProductionWrite, isInteractive } from "./prompt.ts";

/** A secret as the API lists it: metadata, never a value. */
export interface SecretMeta {
  id: string;
  key: string;
  version: number;
  createdAt: string;
  updatedAt: string;
}

type Status = "created" | "updated" | "unchanged" | "skipped";

interface WriteValues {
  server?: string;
  "token-file"?: string;
  project?: string;
  env?: string;
  json?: boolean;
  "from-stdin"?: boolean;
  yes?: boolean;
  silent?: boolean;
  overwrite?: boolean;
}

// The server's rules (core/secret-rules.ts), checked before the first write so a bad line cannot
// leave half a file imported.

function list(keys: string[]): string {
  return keys.map(printable).join(", ");
}

/** A value's longest UTF-8 (four bytes for each of its characters), and a line break. */
const MAX_STDIN_BYTES = MAX_VALUE_LENGTH * 4 + 2;

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  let received = 0;
  // Read no further than a value can be: `< /dev/zero` must not fill the memory.
  for await (const chunk of process.stdin) {
    received += (chunk as Buffer).length;
    if (received > MAX_STDIN_BYTES) {
      throw new CliError(
        `The value on standard input is longer than a secret can be (${MAX_VALUE_LENGTH.toLocaleString("en")} characters).`,
        EXIT.usage,
      );
    }
    chunks.push(chunk as Buffer);
  }
  const text = strictUtf8(Buffer.concat(chunks));
  if (text === undefined) {
    throw new CliError(
      "The value on standard input is not UTF-8 text, and a secret is text: encode a binary value first (base64).",
      EXIT.usage,
    );
  }
  return text;
}

export async function listSecrets(api: Api, base: string): Promise<SecretMeta[]> {
  const { secrets } = await api.expect<{ secrets: SecretMeta[] }>(200, "GET", `${base}/secrets`);
  return secrets;
}

async function secretsByKey(api: Api, base: string): Promise<Map<string, SecretMeta>> {
  return new Map((await listSecrets(api, base)).map((s) => [s.key, s]));
}

/** KEY=VALUE arguments, split at the first `=` (a key has none); a key given twice is refused. */
function parseAssignments(args: string[], usage: string): { key: string; value: string }[] {
  const entries = args.map((arg, i) => {
    const eq = arg.indexOf("=");
    if (eq <= 0) {
      // Quoted only when it is a key: anything else may be a value, which stays off the screen and out of CI logs.
      const which = isSecretKey(arg) ? `"${arg}"` : `Argument ${i + 1}`;
      throw new CliError(`${which} is not KEY=VALUE. Give every secret as KEY=VALUE, or one as KEY VALUE.\n\n${usage}`, EXIT.usage);
    }
    return { key: arg.slice(0, eq), value: arg.slice(eq + 1) };
  });
  const seen = new Set<string>();
  for (const { key } of entries) {
    if (seen.has(key)) throw new CliError(`${printable(key)} is given twice: which value should win?`, EXIT.usage);
    seen.add(key);
  }
  return entries;
}

/**
 * Problems the server would answer with 400, found before anything is written, each with
 * the rule spelled out (the API only says "invalid key or value").
 */
function invalidEntries(entries: { key: string; value?: string }[]): string[] {
  const problems: string[] = [];
  for (const { key, value } of entries) {
    if (!isSecretKey(key)) {
      problems.push(
        looksLikeToken(key)
          ? "A key looks like a secrets-server token (svc_…_), which the server refuses in keys (key and value swapped?); it is not shown"
          : `"${printable(key)}" is not a valid key: use letters, digits and _, not starting with a digit ([A-Za-z_][A-Za-z0-9_]*), at most ${MAX_KEY_LENGTH} characters`,
      );
    } else if (value !== undefined && value.length === 0) {
      problems.push(`The value of ${key} is empty: a value has 1 to ${MAX_VALUE_LENGTH.toLocaleString("en")} characters`);
    } else if (value !== undefined && value.length > MAX_VALUE_LENGTH) {
      problems.push(
        `The value of ${key} has ${value.length.toLocaleString("en")} characters: a value has 1 to ${MAX_VALUE_LENGTH.toLocaleString("en")}`,
      );
    }
  }
  return problems;
}

/** One problem is the whole message; several are listed under what could not be done. */
function refuseInvalid(problems: string[], what: string, exitCode: number): void {
  if (problems.length === 0) return;
  if (problems.length === 1) throw new CliError(`${problems[0]}.`, exitCode);
  throw new CliError(`${what}; nothing was written:\n  ${problems.join("\n  ")}`, exitCode);
}

/** The first `max` bytes of a file, whatever it is (a device such as /dev/zero never ends). */
function readAtMost(file: string, max: number): Buffer {
  const fd = fs.openSync(file, "r");
  try {
    const buffer = Buffer.alloc(max);
    let length = 0;
    while (length < max) {
      const read = fs.readSync(fd, buffer, length, max - length, null);
      if (read === 0) break;
      length += read;
    }
    return buffer.subarray(0, length);
  } finally {
    fs.closeSync(fd);
  }
}

/** Reads a .env file as the `dotenv` package does: the same reader the web UI's import uses. */
function readDotenvFile(file: string): { key: string; value: string }[] {
  let bytes: Buffer;
  try {
    bytes = readAtMost(file, MAX_IMPORT_BYTES + 1);
  } catch (error) {
    throw new CliError(`Cannot read ${file}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}.`, EXIT.usage);
  }
  if (bytes.length > MAX_IMPORT_BYTES) {
    throw new CliError(`${file} is larger than 2 MB, the most one import takes; nothing was written. Split it.`, EXIT.failed);
  }
  const text = strictUtf8(bytes);
  if (text === undefined) {
    throw new CliError(`${file} is not UTF-8 text; nothing was written. Save it as UTF-8 and import it again.`, EXIT.failed);
  }
  const parsed = parseDotenv(text);
  if (parsed.problems.length > 0) {
    // Numbers only: such a line is often the rest of a value (an unquoted key over several
    // lines), and stderr ends up in CI logs.
    const numbers = parsed.problems.slice(0, 10).map((p) => p.line);
    const more = parsed.problems.length > numbers.length ? `, and ${parsed.problems.length - numbers.length} more` : "";
    throw new CliError(
      `${file} has lines that are not KEY=VALUE (${numbers.length === 1 && !more ? "line" : "lines"} ${numbers.join(", ")}${more}); nothing was written. ` +
        "A value over several lines needs quotes. The lines are not shown: they may hold values.",
      EXIT.failed,
    );
  }
  if (parsed.duplicates.length > 0) {
    process.stderr.write(
      `Warning: ${list(parsed.duplicates)} ${parsed.duplicates.length === 1 ? "is" : "are"} given more than once in ${file}; the last value is used, as dotenv does.\n`,
    );
  }
  return parsed.entries.map(({ key, value }) => ({ key, value }));
}

export async function writeSecrets(
  action: "set" | "import" | "delete",
  values: WriteValues,
  args: string[],
  usage: string,
): Promise<number> {
  const say = (text: string) => {
    if (!values.silent && !values.json) process.stdout.write(text);
  };

  if (action === "delete") {
    if (args.length === 0) throw new CliError(usage, EXIT.usage);
    return deleteSecrets(values, [...new Set(args)], say);
  }

  let entries: { key: string; value: string }[] | undefined;
  let fromStdinKey: string | undefined;
  let overwrite = true;
  if (action === "import") {
    if (args.length !== 1 || values["from-stdin"]) throw new CliError(usage, EXIT.usage);
    entries = readDotenvFile(args[0]!);
    overwrite = Boolean(values.overwrite);
    if (entries.length === 0) throw new CliError(`${args[0]} holds no KEY=VALUE lines: nothing to import.`, EXIT.failed);
  } else if (args[0]?.includes("=")) {
    if (values["from-stdin"]) throw new CliError(`--from-stdin takes one KEY and no KEY=VALUE.\n\n${usage}`, EXIT.usage);
    entries = parseAssignments(args, usage);
  } else {
    const [key, value, ...rest] = args;
    if (!key || rest.length > 0) throw new CliError(usage, EXIT.usage);
    if (values["from-stdin"] === (value !== undefined)) {
      throw new CliError(`Give the value either as an argument or with --from-stdin.\n\n${usage}`, EXIT.usage);
    }
    if (value !== undefined) entries = [{ key, value }];
    else fromStdinKey = key;
  }
  // --from-stdin's value is only read once the write is confirmed; the others are checked now.
  refuseInvalid(
    invalidEntries(entries ?? (fromStdinKey ? [{ key: fromStdinKey }] : [])),
    action === "import" ? `${args[0]} cannot be imported` : "Cannot set these",
    action === "import" ? EXIT.failed : EXIT.usage,
  );

  const target = resolveTarget(values);
  const { api } = target;
  const { projectId, environment } = await locate(target);
  const base = environmentPath(projectId, environment);
  const keys = fromStdinKey ? [fromStdinKey] : entries!.map((e) => e.key);
  const question =
    action === "import"
      ? `Import ${keys.length} secret${keys.length === 1 ? "" : "s"} from ${args[0]} into production${overwrite ? ", overwriting existing keys" : ""}?`
      : `Set ${list(keys)} in production?`;
  await confirmProductionWrite(environment, values.yes, question);
  // One trailing newline is what `echo` and editors add; anything else is part of the value.
  if (fromStdinKey) {
    // At a terminal the value is typed, not shown; from a pipe, read as it comes.
    const value = process.stdin.isTTY
      ? await askHidden(`Value of ${fromStdinKey} (not shown): `)
      : (await readStdin()).replace(/\r?\n$/, "");
    entries = [{ key: fromStdinKey, value }];
    refuseInvalid(invalidEntries(entries), "Cannot set these", EXIT.usage);
  }

  const existing = await secretsByKey(api, base);
  const results: { key: string; status: Status; version?: number }[] = [];
  let lastSaved: SecretMeta | undefined;
  for (const { key, value } of entries!) {
    const before = existing.get(key);
    try {
      if (before && !overwrite) {
        results.push({ key, status: "skipped", version: before.version });
        say(`skipped    ${key} (exists; --overwrite replaces it)\n`);
        continue;
      }
      const saved = before
        ? (await api.expect<{ secret: SecretMeta }>(200, "PATCH", `${base}/secrets/${encodeURIComponent(before.id)}`, { value })).secret
        : (await api.expect<{ secret: SecretMeta }>(201, "POST", `${base}/secrets`, { key, value })).secret;
      if (typeof saved?.version !== "number") throw new CliError(`${api.server} answered the write without the secret's version.`);
      // The server answers an equal value with the current version and writes nothing.
      lastSaved = saved;
      const status: Status = !before ? "created" : saved.version === before.version ? "unchanged" : "updated";
      // The key as sent (checked here), not as echoed.
      results.push({ key, status, version: saved.version });
      if (action === "import") say(`${status.padEnd(10)} ${key} (version ${saved.version})\n`);
      else if (status === "unchanged")
        say(`${key} in ${environment} already has this value (version ${saved.version}): nothing changed.\n`);
      else say(`${status === "created" ? "Created" : "Updated"} ${key} in ${environment} (version ${saved.version}).\n`);
    } catch (error) {
      if (!(error instanceof CliError) || results.length === 0) throw error;
      const done = results.filter((r) => r.status !== "skipped").map((r) => r.key);
      throw new CliError(
        `${printable(key)}: ${error.message} Stopped there: ${done.length > 0 ? `${list(done)} ${done.length === 1 ? "was" : "were"} written before it` : "nothing was written"}; the keys after it were not.`,
        error.exitCode,
      );
    }
  }
  if (values.json && !values.silent) {
    // The single form prints the secret's metadata, as it always has.
    process.stdout.write(`${JSON.stringify(action === "set" && !args[0]?.includes("=") ? lastSaved : { environment, results })}\n`);
  } else if (action === "import") {
    const count = (status: Status) => results.filter((r) => r.status === status).length;
    say(
      `Imported ${args[0]} into ${environment}: ${count("created")} created, ${count("updated")} updated, ${count("unchanged")} unchanged, ${count("skipped")} skipped.\n`,
    );
  }
  return EXIT.ok;
}

const HANDOVER_POLL_MS = 2000;
const HANDOVER_WAIT_MS = 10 * 60 * 1000;

/**
 * The server refused a CLI credential the deletion. On a terminal: print (and on a desktop
 * open) the web UI page that selects the keys and asks for the confirmation, then wait until
 * they are gone. Without a terminal nobody can click: say where to do it and fail.
 */
async function handOverToBrowser(
  target: Target,
  at: {
    projectId: string;
    environment: string;
    base: string;
    keys: string[];
    deleted: string[];
    values: WriteValues;
    say: (text: string) => void;
  },
): Promise<number> {
  const { keys, deleted, environment } = at;
  const url = `${target.server}/projects/${encodeURIComponent(at.projectId)}/${encodeURIComponent(environment)}?delete=${encodeURIComponent(keys.join(","))}`;
  const before = deleted.length > 0 ? ` (${list(deleted)} ${deleted.length === 1 ? "was" : "were"} deleted before it)` : "";
  if (!isInteractive()) {
    throw new CliError(
      `The server lets only a browser session delete a secret (it removes the whole version history), not a CLI token or service token. ` +
        `Delete ${list(keys)} in the web UI: ${url}${before ? `${before}.` : ". Nothing was deleted."}`,
      EXIT.denied,
    );
  }
  process.stderr.write(
    `The server lets only a browser session delete a secret (it removes the whole version history)${before}.\n` +
      `Confirm the deletion of ${list(keys)} in the web UI:\n\n  ${url}\n\nWaiting for it... (Ctrl-C stops waiting; nothing is deleted without your click there)\n`,
  );
  maybeOpenBrowser(url);
  const deadline = Date.now() + HANDOVER_WAIT_MS;
  for (;;) {
    await new Promise((resolve) => setTimeout(resolve, HANDOVER_POLL_MS));
    const left = await secretsByKey(target.api, at.base);
    const gone = keys.filter((key) => !left.has(key));
    if (gone.length === keys.length) break;
    if (Date.now() > deadline) {
      throw new CliError(
        `${list(keys.filter((key) => left.has(key)))} ${keys.length - gone.length === 1 ? "was" : "were"} not deleted within 10 minutes.`,
        EXIT.failed,
      );
    }
  }
  for (const key of keys) at.say(`Deleted ${key} from ${environment} (confirmed in the browser).\n`);
  if (at.values.json && !at.values.silent) process.stdout.write(`${JSON.stringify({ environment, deleted: [...deleted, ...keys] })}\n`);
  return EXIT.ok;
}

async function deleteSecrets(values: WriteValues, keys: string[], say: (text: string) => void): Promise<number> {
  const target = resolveTarget(values);
  const { api, server } = target;
  const { projectId, environment } = await locate(target);
  const base = environmentPath(projectId, environment);
  const existing = await secretsByKey(api, base);
  const missing = keys.filter((key) => !existing.has(key));
  if (missing.length > 0) throw new CliError(`No secret ${list(missing)} in ${environment}: nothing was deleted.`, EXIT.denied);
  await confirmProductionWrite(
    environment,
    values.yes,
    `Delete ${list(keys)} and ${keys.length === 1 ? "its" : "their"} version history from production?`,
  );
  const deleted: string[] = [];
  for (const key of keys) {
    const res = await api.request("DELETE", `${base}/secrets/${encodeURIComponent(existing.get(key)!.id)}`);
    if (res.status === 403 && /browser session/i.test(String(res.body?.error))) {
      // Deleting a secret takes a browser session (its route in secrets.routes.ts); no CLI credential may. So the
      // deletion is handed to the web UI, which opens on these keys with its confirmation.
      const remaining = keys.slice(deleted.length);
      return handOverToBrowser(target, { projectId, environment, base, keys: remaining, deleted, values, say });
    }
    if (res.status !== 200) throw errorFor(res, server);
    deleted.push(key);
    say(`Deleted ${key} from ${environment}.\n`);
  }
  if (values.json && !values.silent) process.stdout.write(`${JSON.stringify({ environment, deleted })}\n`);
  return EXIT.ok;
}
