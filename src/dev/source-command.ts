// How the tests, drills and bench run `secrets-server` from source as a process of its own.
//
// Node runs our TypeScript itself (type stripping: tsconfig's erasableSyntaxOnly keeps the
// source to syntax it can strip), with no loader in between: tsx's hooks cost each process
// a third of a second before its first line ran (0.5 s for `version`, 1.4 s for
// `users list`; 0.18 s and 0.57 s this way). from-source.mjs is loaded first, so that the
// compile cache it enables holds every module the process loads, main.ts included.
import path from "node:path";

const ROOT = path.resolve(import.meta.dirname, "../..");

/** `node --import src/dev/from-source.mjs src/main.ts`: append the command and its arguments. */
export const SOURCE_COMMAND: readonly string[] = [
  process.execPath,
  "--import",
  path.join(ROOT, "src/dev/from-source.mjs"),
  path.join(ROOT, "src/main.ts"),
];

/** `secrets-server <args>` from source as one line for sh (`script -c`, a wrapper script), each word quoted. */
export function sourceShellCommand(...args: string[]): string {
  return [...SOURCE_COMMAND, ...args].map((word) => `'${word.replace(/'/g, `'\\''`)}'`).join(" ");
}

/** `secrets-server <args>` from source as spawn() takes it: the program, then its arguments. */
export function sourceCommand(...args: string[]): [program: string, args: string[]] {
  return sourceCommandWithNodeArgs([], ...args);
}

/** sourceCommand with flags for node itself (`--max-semi-space-size=4`), which go before the entry. */
export function sourceCommandWithNodeArgs(nodeArgs: readonly string[], ...args: string[]): [program: string, args: string[]] {
  const [program, ...rest] = SOURCE_COMMAND;
  return [program!, [...nodeArgs, ...rest, ...args]];
}
