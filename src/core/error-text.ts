// What an error may say where people read it (a log line, a command's one line): its own
// sentences and codes along its causes, never the values a database statement was given.
// No dependencies, so that commands which never start a server can use it too.

/** The first code along an error's causes: the system's, the driver's or the database's (ECONNREFUSED, 28P01, SQLITE_FULL). */
export function errorCode(error: unknown): string | undefined {
  for (let current = error, depth = 0; current && depth < 5; current = (current as { cause?: unknown }).cause, depth++) {
    const code = (current as { code?: unknown }).code;
    if (typeof code === "string") return code;
  }
  return undefined;
}

/** The message of the error at the end of the causes: the database's own sentence, not drizzle's wrapper (the whole statement). */
export function rootMessage(error: unknown): string {
  let current = error;
  for (let depth = 0; depth < 5 && (current as { cause?: unknown })?.cause; depth++) current = (current as { cause: unknown }).cause;
  return current instanceof Error ? messageOf(current) : String(current);
}

/**
 * The sentence to show a person: the error's own, except drizzle's wrapper (whose message
 * is the statement, and whose `params` are the values), for which its cause's. Our own
 * errors keep their wording ("The database cannot be reached: …").
 */
export function shownMessage(error: unknown): string {
  let current = error;
  for (let depth = 0; depth < 5 && current instanceof Error && "params" in current && current.cause !== undefined; depth++) {
    current = current.cause;
  }
  return withoutParams(current instanceof Error ? messageOf(current) : String(current));
}

/** An error's own message; for several attempts (a host with several addresses), whose message alone is often empty, theirs too. */
function messageOf(error: Error): string {
  if (!(error instanceof AggregateError)) return error.message;
  return [error.message, ...error.errors.map((e) => (e instanceof Error ? e.message : String(e)))].filter(Boolean).join("; ");
}

/** A database error's message up to the values it was given (drizzle's "params: …"). */
function withoutParams(message: string): string {
  const at = message.indexOf("\nparams: ");
  return at === -1 ? message : message.slice(0, at);
}

/**
 * An error as logged: its type, code, message and stack, and its causes' (pino's own
 * serializer would copy every field). What a database error carries about the row is left
 * out: drizzle's `params` and `query` fields and the values it puts in its message,
 * PostgreSQL's `detail` ("Key (email)=(…)"). Ciphertexts, token hashes and e-mail addresses
 * have no place in a log line.
 */
export function serializeError(error: unknown): Record<string, unknown> {
  if (!(error instanceof Error)) return { message: String(error) };
  const messages: string[] = [];
  const stacks: string[] = [];
  let current: unknown = error;
  for (let depth = 0; depth < 5 && current instanceof Error; depth++) {
    const message = withoutParams(messageOf(current));
    messages.push(message);
    stacks.push((current.stack ?? message).replace(current.message, () => message));
    current = current.cause;
  }
  return {
    type: error.constructor?.name ?? error.name,
    code: errorCode(error),
    message: messages.join(": "),
    stack: stacks.join("\ncaused by: "),
  };
}

/** An error's message for a log field, with its causes', and without a database error's values. */
export function loggedMessage(error: unknown): string {
  return String(serializeError(error).message);
}
