// The HTTP client of the CLI and of the server's outside calls (workload identity, Vercel). node:http and
// node:https rather than fetch: fetch's first call loads undici, 50–75 ms of every CLI command
// (a loopback GET took 70–95 ms through fetch and 17–21 ms through http.get in a fresh
// process), for nothing either user needs. What they relied on from fetch stays: a
// whole-request timeout, no redirect followed, errors named by their code; and an answer is
// never read past its size limit, announced or counted as it arrives.
//
// node:http and node:https are loaded at the first request, not with this module: https
// brings tls with it, and the two took 25–30 ms of every start of the server and of every
// CLI command, `version` included, that never makes a request (CPU profile of the executable).

export interface HttpAnswer {
  status: number;
  /** A header's value by lower-case name (several values joined with ", "), or null. */
  header(name: string): string | null;
  text: string;
}

/** A request that failed before an answer; `code` is the system's (ECONNREFUSED) or ours (TIMEOUT, REDIRECT). */
export class HttpFailure extends Error {
  readonly code: string;

  constructor(code: string, message: string) {
    super(message);
    this.code = code;
  }
}

/**
 * The largest answer read: twice the largest the server sends (an export of 1,000 values
 * of 10,000 characters, each escaped to six bytes in JSON, about 61 MB). A server that
 * sends more, or never stops, fails the command instead of filling the memory.
 */
export const MAX_ANSWER_BYTES = 128 * 1024 * 1024;

export function httpRequest(
  url: string,
  options: {
    method?: string;
    headers?: Record<string, string>;
    body?: string;
    timeoutMs: number;
    maxBytes?: number;
    /** Cuts the request (HttpFailure ABORTED), where it is: a server that is closing. */
    signal?: AbortSignal;
  },
): Promise<HttpAnswer> {
  const maxBytes = options.maxBytes ?? MAX_ANSWER_BYTES;
  const { signal } = options;
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(aborted());
      return;
    }
    let target: URL;
    try {
      target = new URL(url);
    } catch {
      reject(new HttpFailure("INVALID_URL", `not a URL: ${url}`));
      return;
    }
    const client =
      target.protocol === "https:"
        ? process.getBuiltinModule("node:https")
        : target.protocol === "http:"
          ? process.getBuiltinModule("node:http")
          : undefined;
    if (!client) {
      reject(new HttpFailure("UNSUPPORTED_PROTOCOL", `not an http or https URL: ${target.protocol}`));
      return;
    }
    let timer: NodeJS.Timeout | undefined;
    const headers = { ...options.headers };
    if (options.body !== undefined) headers["content-length"] = String(Buffer.byteLength(options.body));
    const request = client.request(target, { method: options.method ?? "GET", headers }, (response) => {
      const status = response.statusCode ?? 0;
      if (status >= 300 && status < 400 && response.headers.location !== undefined) {
        response.resume();
        // Only the origin: a sign-in page's address may carry a state or a code.
        let to = "elsewhere";
        try {
          to = new URL(response.headers.location, target).origin;
        } catch {}
        fail(new HttpFailure("REDIRECT", `a redirect to ${to}`));
        return;
      }
      const declared = Number(response.headers["content-length"]);
      if (declared > maxBytes) {
        fail(new HttpFailure("TOO_LARGE", `the answer is larger than ${formatSize(maxBytes)}`));
        return;
      }
      const chunks: Buffer[] = [];
      let received = 0;
      response.on("data", (chunk: Buffer) => {
        received += chunk.length;
        if (received > maxBytes) fail(new HttpFailure("TOO_LARGE", `the answer is larger than ${formatSize(maxBytes)}`));
        else chunks.push(chunk);
      });
      response.on("error", (error) => fail(error));
      response.on("end", () => {
        settle();
        const text = Buffer.concat(chunks).toString("utf8");
        resolve({
          status,
          header(name) {
            const value = response.headers[name.toLowerCase()];
            return value === undefined ? null : Array.isArray(value) ? value.join(", ") : value;
          },
          text,
        });
      });
    });
    const onAbort = () => fail(aborted());
    const settle = () => {
      clearTimeout(timer);
      signal?.removeEventListener("abort", onAbort);
    };
    const fail = (error: Error) => {
      settle();
      request.destroy();
      reject(error);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
    // The whole exchange, not only the connection: a server that stalls mid-answer fails too.
    timer = setTimeout(
      () => fail(new HttpFailure("TIMEOUT", `no answer within ${Math.round(options.timeoutMs / 1000)} s`)),
      options.timeoutMs,
    );
    request.on("error", (error) => fail(error));
    request.end(options.body);
  });
}

/** How long a Retry-After header asks to wait, in seconds or as an HTTP date; undefined when it says neither. */
export function retryAfterMs(value: string | null | undefined, now = Date.now()): number | undefined {
  const text = value?.trim();
  if (!text) return undefined;
  const seconds = Number(text);
  if (Number.isFinite(seconds) && seconds >= 0) return seconds * 1000;
  const date = Date.parse(text);
  return Number.isNaN(date) ? undefined : Math.max(0, date - now);
}

function aborted(): HttpFailure {
  return new HttpFailure("ABORTED", "the request was cut short");
}

function formatSize(bytes: number): string {
  if (bytes >= 1024 * 1024) return `${Math.round(bytes / 1024 / 1024)} MiB`;
  return bytes % 1024 === 0 ? `${bytes / 1024} KiB` : `${bytes} bytes`;
}

/** The short reason a request failed, for a message: the system's code (ECONNREFUSED) or ours in words. */
export function failureReason(error: unknown): string {
  if (error instanceof HttpFailure) return error.message;
  const code = (error as { code?: unknown }).code;
  return typeof code === "string" ? code : error instanceof Error ? error.message : String(error);
}
