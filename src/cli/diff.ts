// `secrets diff ENV_A ENV_B`: which keys one environment has and the other lacks, and which
// differ. Values are compared here, from two exports, and printed only with --show-values.
import { printable } from "../core/text.ts";
import { locate, normalizeEnvironment, readExport, resolveTarget } from "./context.ts";
import { CliError, EXIT } from "./errors.ts";

interface DiffValues {
  server?: string;
  "token-file"?: string;
  project?: string;
  env?: string;
  json?: boolean;
  silent?: boolean;
  "show-values"?: boolean;
}

/** As diff(1): 0 the same, 1 different, anything else trouble. */
const DIFFERENT = 1;
const TROUBLE = 2;

export async function diffEnvironments(values: DiffValues, args: string[], usage: string): Promise<number> {
  try {
    return await diff(values, args, usage);
  } catch (error) {
    // Exit code 1 means "different" here and nothing else: a failure that is 1 elsewhere is 2.
    if (error instanceof CliError) throw error.exitCode === DIFFERENT ? new CliError(error.message, TROUBLE) : error;
    throw new CliError(`unexpected error: ${(error as Error)?.message ?? String(error)}`, TROUBLE);
  }
}

async function diff(values: DiffValues, args: string[], usage: string): Promise<number> {
  if (args.length !== 2) throw new CliError(`Name two environments: secrets diff ENV_A ENV_B.\n\n${usage}`, EXIT.usage);
  if (values.env !== undefined)
    throw new CliError(`secrets diff takes the two environments as arguments, not --env.\n\n${usage}`, EXIT.usage);
  const [a, b] = args.map(normalizeEnvironment) as [string, string];
  // Resolved with the first environment only so that a missing --env is no error here.
  const target = resolveTarget({ ...values, env: a });
  const read = async (environment: string): Promise<Map<string, string>> => {
    const at = await locate({ ...target, environment });
    return new Map((await readExport(target, at)).map((s) => [s.key, s.value]));
  };
  const left = await read(a);
  const right = await read(b);

  const onlyA = [...left.keys()].filter((key) => !right.has(key)).sort();
  const onlyB = [...right.keys()].filter((key) => !left.has(key)).sort();
  const different = [...left.keys()].filter((key) => right.has(key) && right.get(key) !== left.get(key)).sort();
  const same = left.size - onlyA.length - different.length;
  const isSame = onlyA.length + onlyB.length + different.length === 0;
  const show = Boolean(values["show-values"]);

  if (values.silent) return isSame ? EXIT.ok : DIFFERENT;
  if (values.json) {
    const valuesOf = (keys: string[], map: Map<string, string>) => Object.fromEntries(keys.map((key) => [key, map.get(key)]));
    const result = {
      environments: [a, b],
      onlyIn: { [a]: show ? valuesOf(onlyA, left) : onlyA, [b]: show ? valuesOf(onlyB, right) : onlyB },
      different: show ? Object.fromEntries(different.map((key) => [key, { [a]: left.get(key), [b]: right.get(key) }])) : different,
      same,
    };
    process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
    return isSame ? EXIT.ok : DIFFERENT;
  }
  if (isSame) {
    process.stdout.write(`${a} and ${b} hold the same ${same} secret${same === 1 ? "" : "s"}.\n`);
    return EXIT.ok;
  }
  // A value is quoted as JSON: one line, every control character escaped, nothing for a terminal to obey.
  const quoted = (value: string | undefined) => printable(JSON.stringify(value));
  const width = Math.max(`only in ${a}`.length, `only in ${b}`.length, "different".length);
  const lines: string[] = [];
  for (const key of onlyA) lines.push(`${`only in ${a}`.padEnd(width)}  ${key}${show ? `=${quoted(left.get(key))}` : ""}`);
  for (const key of onlyB) lines.push(`${`only in ${b}`.padEnd(width)}  ${key}${show ? `=${quoted(right.get(key))}` : ""}`);
  for (const key of different) {
    lines.push(`${"different".padEnd(width)}  ${key}${show ? `  ${a}=${quoted(left.get(key))}  ${b}=${quoted(right.get(key))}` : ""}`);
  }
  lines.push(`(${same} the same)`);
  process.stdout.write(`${lines.join("\n")}\n`);
  return DIFFERENT;
}
