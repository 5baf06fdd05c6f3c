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

/**
 * A value typed on the terminal without it showing: a secret must stay off the screen (a
 * shared screen, a recording, the scrollback). Raw mode, so nothing is echoed; Enter ends
 * it, Backspace takes back the last character, Ctrl-C cancels the command, Ctrl-D on
 * nothing typed is no answer. Other control keys (arrows) are ignored.
 */
export function askHidden(question: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const stdin = process.stdin;
    // Raw before the question shows: what is typed (or pasted) as soon as it does is not echoed.
    stdin.setEncoding("utf8");
    stdin.setRawMode(true);
    process.stderr.write(question);
    let typed = "";
    const finish = () => {
      stdin.removeListener("data", onData);
      stdin.setRawMode(false);
      stdin.pause();
      process.stderr.write("\n");
    };
    const onData = (chunk: string) => {
      for (const char of chunk) {
        if (char === "\r" || char === "\n" || (char === "\u0004" && typed !== "")) {
          finish();
          resolve(typed);
          return;
        }
        if (char === "\u0004") {
          finish();
          reject(new CliError("No value given: nothing was written.", EXIT.failed));
          return;
        }
        if (char === "\u0003") {
          finish();
          process.exit(130);
        }
        if (char === "\u007f" || char === "\b") typed = Array.from(typed).slice(0, -1).join("");
        // An escape sequence (an arrow key) ends the chunk it starts.
        else if (char === "\u001b") break;
        else if (char >= " ") typed += char;
      }
    };
    stdin.on("data", onData);
    stdin.resume();
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
