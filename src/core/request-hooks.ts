// The checks and bookkeeping every request goes through, outside any one feature, folded
// into one hook per stage and written as callback hooks: Fastify runs a callback hook
// without a promise, and each async hook cost a promise and a microtask turn per request
// (README, Performance). Credentials (core/auth.ts) and rate limits keep hooks of their own:
// the cookie parser and the limiter's plugin must run between them.
import type { FastifyInstance } from "fastify";
import { isApiRoute, matchedRoute } from "./auth.ts";
import { checkContentEncoding, type GracefulStop } from "./connections.ts";
import { HttpError } from "./errors.ts";
import type { SecurityHeaders } from "./security-headers.ts";

const NUL_IN_ADDRESS = /%00|\0/i;

export interface RequestHookParts {
  stop: GracefulStop;
  /** helmet's headers (core/security-headers.ts), built once for the app. */
  securityHeaders: SecurityHeaders;
  /** After each response (idle timers of the WAL maintenance and the idle collection). */
  afterResponse: () => void;
}

/** Registered before every other hook: a request refused while stopping costs only its headers. */
export function registerRequestHooks(app: FastifyInstance, { stop, securityHeaders, afterResponse }: RequestHookParts): void {
  app.addHook("onRequest", (req, reply, done) => {
    // The headers first: the refusals below are answers too.
    securityHeaders(req.raw, reply.raw, (error?: unknown) => {
      if (error) {
        done(error as Error);
        return;
      }
      try {
        stop.checkOpen();
        checkContentEncoding(req);
        // A NUL in the address is never a name or an id of ours, and PostgreSQL's text refuses it
        // (a statement error, not "no such row"): one 400 on both stores.
        if (NUL_IN_ADDRESS.test(req.url)) throw new HttpError(400, "The address could not be understood.");
      } catch (refusal) {
        done(refusal as Error);
        return;
      }
      done();
    });
  });

  app.addHook("onSend", (req, reply, _payload, done) => {
    stop.beforeSend(reply);
    // Every API answer is someone's own data (values, tokens, device codes, member lists):
    // no browser or proxy cache may keep it. Keyed on the matched route, not the raw URL
    // (see matchedRoute); an answer of no route at all (a 404, an unparsable address) is
    // no-store as well, since nothing there is for keeping.
    if (isApiRoute(req) || matchedRoute(req) === "") void reply.header("cache-control", "no-store");
    done();
  });

  app.addHook("onResponse", (_req, _reply, done) => {
    afterResponse();
    done();
  });
}
