import type { Writable } from "node:stream";
import { type FastifyReply, type FastifyRequest, LogController } from "fastify";
import pino, { type Logger } from "pino";
import type { Config } from "./config.ts";
import { serializeError } from "./error-text.ts";

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
 * It formats what pino has already redacted. Loaded only for such a server: it and its
 * colours took about 9 ms of every start of the executable.
 */
async function prettyStream(): Promise<Writable> {
  const { default: pinoPretty } = await import("pino-pretty");
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

export async function createLogger(config: Pick<Config, "logLevel" | "isProduction">, stream?: Writable): Promise<Logger> {
  const destination =
    stream ?? (chooseLogFormat(config, Boolean(process.stdout.isTTY)) === "pretty" ? await prettyStream() : process.stdout);
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
