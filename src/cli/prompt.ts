// Questions on a terminal: the production confirmation and the pickers of `link`/`setup`.
// Asked on stderr, so stdout stays the command's output.
import { printable } from "../core/text.ts";
import { CliError, EXIT } from "./errors.ts";

/** A person is there to answer: stdin and stderr are terminals. */
export function isInteractive(): boolean {
  return Boolean(process.stdin.isTTY && process.stderr.isTTY);
}

/** One line typed on the terminal; Ctrl-D (end of input) is a refusal, not an empty answer. */
function ask(question: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const rl = process.getBuiltinModule("node:readline").createInterface({ input: process.stdin, output: process.stderr, terminal: true });
    let answered = false;
    rl.once("line", (line) => {
      answered = true;
      rl.close();
      resolve(line.trim());
    });
    rl.once("close", () => {
      if (!answered) reject(new CliError("No answer given: nothing was done.", EXIT.failed));
    });
    // Ctrl-C while asking cancels the command like anywhere else.
    rl.once("SIGINT", () => {
      rl.close();
      process.stderr.write("\n");
      process.exit(130);
    });
    rl.setPrompt(question);
    rl.prompt();
  });
}

/** Asks until the answer is a number from 1 to `items.length`; returns its index. */
export async function pick(title: string, items: string[]): Promise<number> {
  process.stderr.write(`${printable(title)}\n${items.map((item, i) => `  ${i + 1}) ${printable(item)}`).join("\n")}\n`);
  for (;;) {
    const answer = await ask(`Number [1-${items.length}]: `);
    const n = Number(answer);
    if (/^\d+$/.test(answer) && n >= 1 && n <= items.length) return n - 1;
    process.stderr.write(`Type a number from 1 to ${items.length}.\n`);
  }
}

export const CONFIRM_OPTIONS = {
  yes: { type: "boolean", short: "y", default: false },
  silent: { type: "boolean", default: false },
} as const;

/**
 * A write to production needs a yes: typed on a terminal, or --yes. Without a terminal to
 * ask on (a script, CI, a pipe) and without --yes the write is refused, so a command copied
 * from a development recipe cannot change production by accident.
 */
export async function confirmProductionWrite(environment: string, assumeYes: boolean | undefined, question: string): Promise<void> {
  if (environment !== "production" || assumeYes) return;
  if (!process.stdin.isTTY) {
    throw new CliError(
      `This writes to production and stdin is not a terminal to confirm on. Add --yes to confirm: nothing was written.`,
      EXIT.usage,
    );
  }
  const answer = await ask(`${question} [y/N] `);
  if (!/^y(es)?$/i.test(answer)) throw new CliError("Cancelled: nothing was written.", EXIT.failed);
}
