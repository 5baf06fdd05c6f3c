import type { Writable } from "node:stream";
import { type FastifyReply, type FastifyRequest, LogController } from "fastify";
import pino, { type Logger } from "pino";
import pinoPretty from "pino-pretty";
import type { Config } from "./config.ts";

/** Fields that must never reach a log line, wherever they appear in a logged object. */
const LOG_REDACTIONS = [
  "req.headers.authorization",
  "req.headers.cookie",
  'res.headers["set-cookie"]',
  "*.authorization",
  "*.cookie",
  "*.value",
  "*.token",
  "*.refreshToken",
  "*.accessToken",
  "*.deviceCode",
  "*.password",
  "*.deployHookUrl",
];

/**
 * Readable lines for a person watching a development server in a terminal; JSON lines, one
 * object each, for log collectors everywhere else (production, a pipe, journald, a file).
 */
export function chooseLogFormat(config: Pick<Config, "isProduction">, isTTY: boolean): "pretty" | "json" {
  return !config.isProduction && isTTY ? "pretty" : "json";
}

/**
 * pino-pretty as a synchronous stream in this process, not as pino's transport: a transport
 * runs in a worker thread loaded from a file, which the single executable does not have.
 * It formats what pino has already redacted.
 */
function prettyStream(): Writable {
  return pinoPretty({
    sync: true,
    colorize: true,
    translateTime: "SYS:HH:MM:ss.l",
    ignore: "pid,hostname,req,res,responseTime",
    // A request on one line: "request completed GET /api/projects 200 3ms".
    messageFormat: (log, messageKey) => {
      const req = log.req as { method?: string; url?: string } | undefined;
      const res = log.res as { statusCode?: number } | undefined;
      const message = String(log[messageKey] ?? "");
      if (!req) return message;
      const time = typeof log.responseTime === "number" ? ` ${Math.round(log.responseTime)}ms` : "";
      return `${message} ${req.method} ${req.url}${res?.statusCode ? ` ${res.statusCode}` : ""}${time}`;
    },
  });
}

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
  return current instanceof Error ? current.message : String(current);
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
    let message = withoutParams(current.message);
    // Several attempts (a host with several addresses): the message alone is often empty.
    if (current instanceof AggregateError) {
      message = [message, ...current.errors.map((e) => withoutParams(String(e?.message ?? e)))].filter(Boolean).join("; ");
    }
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

export function createLogger(config: Pick<Config, "logLevel" | "isProduction">, stream?: Writable): Logger {
  const destination = stream ?? (chooseLogFormat(config, Boolean(process.stdout.isTTY)) === "pretty" ? prettyStream() : process.stdout);
  return pino(
    {
      level: config.logLevel,
      redact: { paths: LOG_REDACTIONS, censor: "[redacted]" },
      serializers: {
        err: serializeError,
        // The path only: query strings can carry codes (the CLI approval page's ?code=).
        req: (req: FastifyRequest) => ({ method: req.method, url: req.url.split("?")[0], remoteAddress: req.ip }),
      },
    },
    destination,
  );
}

/** One log line per request, written when it ends, instead of Fastify's two (a few percent of a secret read). */
export class OneLinePerRequest extends LogController {
  override incomingRequest(): void {}

  override requestCompleted(error: Error | null | undefined, request: FastifyRequest, reply: FastifyReply): void {
    if (error) reply.log.error({ req: request, res: reply, err: error, responseTime: reply.elapsedTime }, "request errored");
    else reply.log.info({ req: request, res: reply, responseTime: reply.elapsedTime }, "request completed");
  }
}
