import { type ServerOptions, type ServerResponse, STATUS_CODES } from "node:http";
import type { Socket } from "node:net";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { Config } from "./config.ts";
import { HttpError, NOT_UNDERSTOOD } from "./errors.ts";
import { printable } from "./text.ts";

/** Headers must have arrived this long after a request starts (never more than the whole request's time). */
const HEADERS_TIMEOUT_SECONDS = 15;
/** How often Node looks for requests past their time (its default, 30 s, would let one live 30 s too long). */
const TIMEOUT_CHECK_INTERVAL_MS = 1_000;
/** What a request arriving during a graceful stop is told: the next process is usually up by then. */
const CLOSING_RETRY_AFTER_SECONDS = 5;

/** What a request gets while the server stops: the same answer for every kind of request. */
export function shuttingDown(): HttpError {
  return new HttpError(503, "The server is shutting down. Try again in a few seconds.", undefined, {
    "retry-after": String(CLOSING_RETRY_AFTER_SECONDS),
  });
}
/** How long closing the server waits for connections still open before it cuts them. */
const CLOSE_GRACE_MS = 1_000;

/**
 * Timeouts for a server with no proxy in front, where every slow or stalled client is this
 * process's problem (Node's defaults wait 300 s for a body shorter than its Content-Length):
 * - headers within 15 s;
 * - the whole request within REQUEST_TIMEOUT_SECONDS (60): a 2 MB import at 512 kbit/s
 *   takes about 32 s. Past it Node answers 408 and closes the connection;
 * - an idle keep-alive connection closes after KEEP_ALIVE_TIMEOUT_SECONDS (5, announced in
 *   `Keep-Alive: timeout=5` so clients stop reusing it first), below the shutdown drain so a
 *   graceful stop never has to cut an idle connection a client may be reusing;
 * - a connection with no traffic either way for twice REQUEST_TIMEOUT_SECONDS is closed (a
 *   client that stopped reading a response); twice, so a stalled body gets its 408 first.
 */
export function serverTimeouts(config: Pick<Config, "requestTimeoutSeconds" | "keepAliveTimeoutSeconds">): {
  http: ServerOptions;
  requestTimeout: number;
  keepAliveTimeout: number;
  connectionTimeout: number;
} {
  const requestTimeout = config.requestTimeoutSeconds * 1000;
  return {
    http: {
      headersTimeout: Math.min(HEADERS_TIMEOUT_SECONDS * 1000, requestTimeout),
      requestTimeout,
      connectionsCheckingInterval: TIMEOUT_CHECK_INTERVAL_MS,
    },
    requestTimeout,
    keepAliveTimeout: config.keepAliveTimeoutSeconds * 1000,
    connectionTimeout: 2 * requestTimeout,
  };
}

/** Node's parser's refusals: the status and what the client is told; any other is a 400. */
const CLIENT_ERRORS = new Map<string | undefined, [number, string]>([
  ["ERR_HTTP_REQUEST_TIMEOUT", [408, "The request did not arrive in time: send it again."]],
  ["HPE_HEADER_OVERFLOW", [431, "The request's headers are too large."]],
  ["HPE_CHUNK_EXTENSIONS_OVERFLOW", [413, "The request's chunk extensions are too large."]],
]);

/**
 * The answer to a request Node's HTTP parser refuses before Fastify sees it: headers past
 * Node's size limit, a malformed request, a request not complete within
 * REQUEST_TIMEOUT_SECONDS. The socket is then destroyed. Fastify's own answer leaves out
 * `Connection: close`, so an HTTP/1.1 client kept the connection and its next request on it
 * failed (the fuzz drill's `write ECONNRESET` on a GET sent right after a 431). This answer
 * says the connection closes and has the `{ error }` body of every other error. As Node's
 * own does, it writes nothing once a response has begun on the socket, which would corrupt it
 * (`headersSent` is true from the moment the head is built, a little before Node's own test).
 */
export function answerClientError(this: FastifyInstance, error: NodeJS.ErrnoException, socket: Socket): void {
  if (error.code === "ECONNRESET" || socket.destroyed) return;
  const [status, message] = CLIENT_ERRORS.get(error.code) ?? [400, NOT_UNDERSTOOD];
  this.log.debug({ code: error.code, status }, "client error");
  const inFlight = (socket as Socket & { _httpMessage?: { headersSent?: boolean } })._httpMessage;
  if (socket.writable && !inFlight?.headersSent) {
    const body = JSON.stringify({ error: message });
    const head = Object.entries(closingErrorHeaders(body))
      .map(([name, value]) => `${name}: ${value}\r\n`)
      .join("");
    socket.write(`HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\n${head}\r\n${body}`);
  }
  socket.destroy(error);
}

export const EXPECTATION_REFUSED = "Only Expect: 100-continue is supported.";

/**
 * A request whose Expect header is not 100-continue: Node answers it a bare 417 by itself
 * unless someone listens; here it gets the { error } body every answer has, and the
 * connection closes (the body it announced may follow).
 */
export function answerExpectation(res: ServerResponse): void {
  const body = JSON.stringify({ error: EXPECTATION_REFUSED });
  res.writeHead(417, closingErrorHeaders(body));
  res.end(body);
}

/** The headers of an { error } answer written outside Fastify, after which the connection closes. */
function closingErrorHeaders(body: string): Record<string, string> {
  return {
    Connection: "close",
    "Content-Type": "application/json; charset=utf-8",
    "Content-Length": String(Buffer.byteLength(body)),
    "Cache-Control": "no-store",
    "X-Content-Type-Options": "nosniff",
  };
}

/**
 * A body in an encoding the server does not decode would be parsed, or stored, as if it
 * were plain: refused before it is read (the request hook calls this).
 */
export function checkContentEncoding(req: FastifyRequest): void {
  const encoding = req.headers["content-encoding"];
  if (encoding === undefined) return;
  const hasBody = req.headers["transfer-encoding"] !== undefined || Number(req.headers["content-length"] ?? 0) > 0;
  if (!hasBody || /^\s*(identity\s*)?$/i.test(encoding)) return;
  throw new HttpError(
    415,
    `Request bodies with Content-Encoding ${printable(encoding.trim().slice(0, 40))} are not accepted: send the body uncompressed (no Content-Encoding).`,
  );
}

export interface GracefulStop {
  /** Refuses a request while stopping (the first thing the request hook does: a refused request costs nothing). */
  checkOpen(): void;
  /** For every response: while stopping it says `Connection: close`. */
  beforeSend(reply: FastifyReply): void;
  /**
   * Stops taking work and waits until every connection has closed, at most `drainMs`:
   * responses carry `Connection: close`, requests in flight finish, new requests (on open
   * sockets or new connections: the listener stays open) get 503 with Retry-After, and idle
   * keep-alive connections end by their own timeout, which clients were told of. Resolves
   * when the drain is over; `cut` ends it early (a second signal).
   */
  drain(drainMs: number, cut?: AbortSignal): Promise<{ closedAtDeadline: number }>;
}

/** Tracks the server's connections; its checks run in core/request-hooks.ts. */
export function createGracefulStop(app: FastifyInstance): GracefulStop {
  const sockets = new Set<Socket>();
  let closing = false;
  let onIdle: (() => void) | undefined;

  app.server.on("connection", (socket: Socket) => {
    sockets.add(socket);
    socket.once("close", () => {
      sockets.delete(socket);
      if (sockets.size === 0) onIdle?.();
    });
  });

  return {
    checkOpen() {
      if (closing) {
        throw shuttingDown();
      }
    },
    // Node then closes the socket once this response is written: the client knows not to
    // reuse it, so no request is ever sent into a socket the server is closing.
    beforeSend(reply) {
      if (closing) void reply.header("connection", "close");
    },
    drain(drainMs, cut) {
      closing = true;
      return new Promise((resolve) => {
        let timer: NodeJS.Timeout | undefined;
        const finish = () => {
          if (timer === undefined) return;
          clearTimeout(timer);
          timer = undefined;
          onIdle = undefined;
          const closedAtDeadline = sockets.size;
          // The bound: whatever is still open is cut (a request running past the drain,
          // a client that opened a connection and sent nothing).
          for (const socket of sockets) socket.destroy();
          resolve({ closedAtDeadline });
        };
        timer = setTimeout(finish, drainMs);
        onIdle = finish;
        cut?.addEventListener("abort", finish, { once: true });
        if (sockets.size === 0) finish();
      });
    },
  };
}

/**
 * Closes the listener and every connection. Node's close ends idle keep-alive connections
 * but waits for one whose request is still arriving, and stops checking request timeouts
 * as it closes: a client that sent half a request (a browser tab left open) held the close
 * until the socket's own timeout, two minutes. What is still open after a second is cut; a
 * graceful stop has drained the connections before this.
 */
export async function closeServer(app: FastifyInstance): Promise<void> {
  const cut = setTimeout(() => app.server.closeAllConnections(), CLOSE_GRACE_MS);
  try {
    await app.close();
  } finally {
    clearTimeout(cut);
  }
}
