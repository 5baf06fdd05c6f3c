import type { IncomingMessage, ServerResponse } from "node:http";
import helmet from "helmet";

/**
 * helmet's headers for every response (set by core/request-hooks.ts), with a strict Content-Security-Policy. The helmet
 * middleware is built once here: @fastify/helmet built it anew for every request (parsing
 * the CSP directives each time), which cost a few percent of a secret read.
 */
export type SecurityHeaders = (req: IncomingMessage, res: ServerResponse, next: (error?: unknown) => void) => void;

export function createSecurityHeaders(options: { hsts: boolean }): SecurityHeaders {
  return helmet({
    contentSecurityPolicy: {
      useDefaults: false,
      directives: {
        defaultSrc: ["'self'"],
        scriptSrc: ["'self'"],
        styleSrc: ["'self'"],
        imgSrc: ["'self'", "data:"],
        fontSrc: ["'self'"],
        connectSrc: ["'self'"],
        objectSrc: ["'none'"],
        baseUri: ["'none'"],
        frameAncestors: ["'none'"],
        formAction: ["'self'"],
      },
    },
    hsts: options.hsts,
  });
}
