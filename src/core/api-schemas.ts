import { z } from "zod";
import { ENVIRONMENTS, PERMISSIONS, ROLES } from "./access.ts";

// Pieces every route's schemas share. Response schemas are plain (non-strict) objects:
// serializing through one drops every field it does not name, so a field reaches a client
// only once a schema here or in a routes file says it may.

export const Timestamp = z.string().describe("ISO 8601 UTC with milliseconds");
export const Environment = z.enum(ENVIRONMENTS);
export const Role = z.enum(ROLES);
export const Permission = z.enum(PERMISSIONS);
export const Ok = z.object({ ok: z.literal(true) });

/** Every error body: `{ error }`, a sentence for a person (README, API). */
export const ErrorBody = z.object({ error: z.string() });

/** The path parameters the routes share; plain strings: the service decides what is found. */
export const ProjectParams = z.object({ projectId: z.string().describe("A project id") });
export const EnvironmentParams = ProjectParams.extend({ env: z.string().describe("development, staging or production") });

/** The credentials an operation takes, as the OpenAPI document's security requirements. */
export const SECURITY = {
  /** A browser session only: a CLI or service token is refused with 403. */
  browser: [{ session: [] }],
  /** A browser session, a CLI access token or a service token. */
  browserOrToken: [{ session: [] }, { bearer: [] }],
  /** A CLI access token or a service token. */
  token: [{ bearer: [] }],
  /** No credential. */
  none: [],
  /** A browser session if there is one; none is needed. */
  sessionIfAny: [{}, { session: [] }],
} as const;

/**
 * A check that runs even when fields already have problems (zod skips refinements then),
 * so the route's message table can put its rule first. `name` is what the table calls it.
 */
export function checkAlways(name: string) {
  return { message: name, when: () => true };
}

export function isPlainObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}
