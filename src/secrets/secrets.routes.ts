import type { FastifyError, FastifyInstance, FastifyRequest } from "fastify";
import { z } from "zod";
import type { AccessGuard } from "../core/access.ts";
import type { Auth } from "../core/auth.ts";
import { looksLikeToken } from "../audit/audit.writer.ts";
import { HttpError, parse } from "../core/errors.ts";
import { fitsUnits } from "../core/text.ts";
import { DockerEnvRefusal, dockerRefusalMessage, EXPORT_FORMATS, exportFile } from "./export-formats.ts";
import type { SecretsService } from "./secrets.service.ts";
import { MAX_KEY_LENGTH, MAX_VALUE_UNITS, SECRET_KEY_PATTERN } from "../core/secret-rules.ts";

export const MAX_IMPORT_ENTRIES = 500;
export const MAX_IMPORT_BYTES = 2_000_000;
const IMPORT_TOO_LARGE = "The import is too large.";
const NOTHING_TO_UPDATE = "Nothing to update.";
const BAD_EXPECTED_VERSION = "expectedVersion must be a positive integer.";
const INVALID_KEY_OR_VALUE = "invalid key or value";
const INVALID_REQUEST = "invalid request";

// The key goes into audit metadata, whose writer refuses token-shaped text (svc_at_…):
// such a key could be stored but never read, so it is refused here with a 400.
const Key = z
  .string()
  .max(MAX_KEY_LENGTH)
  .regex(SECRET_KEY_PATTERN)
  .refine((key) => !looksLikeToken(key));
// Well-formed: a lone surrogate would be stored as U+FFFD and read back different.
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
// Keys are ASCII by their pattern, so .max(128) counts them the same either way; values are
// not, and are counted in UTF-16 units (fitsUnits), as the UI's maxlength counts them.
const Value = z
  .string()
  .min(1)
  .refine(fitsUnits(MAX_VALUE_UNITS))
  .refine((v) => !LONE_SURROGATE.test(v));
const ExpectedVersion = z.number().int().min(1).max(Number.MAX_SAFE_INTEGER);

const NewSecret = z.strictObject({ key: Key, value: Value });
const SecretChanges = z.strictObject({ key: Key.optional(), value: Value.optional(), expectedVersion: ExpectedVersion.optional() });
const RestoreBody = z.strictObject({ expectedVersion: ExpectedVersion.optional() });
const ImportBody = z.strictObject({
  entries: z
    .array(z.strictObject({ key: Key, value: Value, overwrite: z.boolean().optional().default(false) }))
    .max(MAX_IMPORT_ENTRIES)
    // A key twice in one request is ambiguous: which value wins? Refuse it whole.
    .refine((entries) => new Set(entries.map((e) => e.key)).size === entries.length),
});
const ExportQuery = z.strictObject({ format: z.enum(EXPORT_FORMATS).optional() });
const UNKNOWN_EXPORT_FORMAT = "Unknown export format: use format=dotenv, shell, docker or yaml, or leave it out for JSON.";

interface Params {
  projectId: string;
  env: string;
  secretId: string;
  versionNumber: string;
}

const BASE = "/api/projects/:projectId/environments/:env";

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}

function versionNumberOf(text: string): number {
  if (!/^[1-9]\d{0,14}$/.test(text)) throw new HttpError(404, "Version not found.");
  return Number(text);
}

/** If-None-Match holds `*` or a list of tags, weak ones (W/"…") included. */
function matchesTag(header: string, etag: string): boolean {
  return header.split(",").some((tag) => {
    const t = tag.trim();
    return t === "*" || t.replace(/^W\//, "") === etag;
  });
}

/** An optional expectedVersion gets its own message before the rest of the body is checked. */
function checkExpectedVersion(body: Record<string, unknown>): void {
  if ("expectedVersion" in body && !ExpectedVersion.safeParse(body.expectedVersion).success) {
    throw new HttpError(400, BAD_EXPECTED_VERSION);
  }
}

export function registerSecretRoutes(
  app: FastifyInstance,
  { auth, access, secrets }: { auth: Auth; access: AccessGuard; secrets: SecretsService },
): void {
  const read = access.route("secrets:read", { environment: true });
  const params = (req: FastifyRequest) => req.params as Params;

  app.get(`${BASE}/secrets`, { preHandler: [auth.browserOrCli, read] }, async (req) => {
    const { projectId, env } = params(req);
    return { secrets: secrets.list(auth.principal(req), projectId, env) };
  });

  app.post(
    `${BASE}/secrets`,
    { preHandler: [auth.browserOrCli, access.route("secrets:create", { environment: true })] },
    async (req, reply) => {
      const { projectId, env } = params(req);
      const input = parse(NewSecret, req.body, INVALID_KEY_OR_VALUE);
      const secret = secrets.create(auth.principal(req), projectId, env, input);
      return reply.code(201).send({ secret });
    },
  );

  app.get(`${BASE}/secrets/:secretId`, { preHandler: [auth.browserOrCli, read] }, async (req) => {
    const { projectId, env, secretId } = params(req);
    const secret = await secrets.reveal(auth.principal(req), projectId, env, secretId);
    return { secret };
  });

  app.patch(
    `${BASE}/secrets/:secretId`,
    { preHandler: [auth.browserOrCli, access.route("secrets:update", { environment: true })] },
    async (req) => {
      const { projectId, env, secretId } = params(req);
      const body = req.body ?? {};
      if (!isPlainObject(body)) throw new HttpError(400, INVALID_KEY_OR_VALUE);
      if (body.key === undefined && body.value === undefined) throw new HttpError(400, NOTHING_TO_UPDATE);
      checkExpectedVersion(body);
      const input = parse(SecretChanges, body, INVALID_KEY_OR_VALUE);
      return { secret: secrets.update(auth.principal(req), projectId, env, secretId, input) };
    },
  );

  app.delete(
    `${BASE}/secrets/:secretId`,
    { preHandler: [auth.browser, access.route("secrets:delete", { environment: true })] },
    async (req) => {
      const { projectId, env, secretId } = params(req);
      secrets.delete(auth.caller(req), projectId, env, secretId);
      return { ok: true };
    },
  );

  app.get(`${BASE}/secrets/:secretId/versions`, { preHandler: [auth.browser, read] }, async (req) => {
    const { projectId, env, secretId } = params(req);
    return secrets.versions(auth.caller(req), projectId, env, secretId);
  });

  app.get(`${BASE}/secrets/:secretId/versions/:versionNumber`, { preHandler: [auth.browser, read] }, async (req) => {
    const { projectId, env, secretId, versionNumber } = params(req);
    const version = await secrets.revealVersion(auth.caller(req), projectId, env, secretId, versionNumberOf(versionNumber));
    return { version };
  });

  app.post(
    `${BASE}/secrets/:secretId/versions/:versionNumber/restore`,
    { preHandler: [auth.browser, access.route("secrets:update", { environment: true })] },
    async (req) => {
      const { projectId, env, secretId, versionNumber } = params(req);
      const body = req.body ?? {};
      if (!isPlainObject(body)) throw new HttpError(400, INVALID_REQUEST);
      checkExpectedVersion(body);
      const { expectedVersion } = parse(RestoreBody, body, INVALID_REQUEST);
      const secret = secrets.restore(auth.caller(req), projectId, env, secretId, versionNumberOf(versionNumber), expectedVersion);
      return { secret };
    },
  );

  app.get(
    `${BASE}/export`,
    { preHandler: [auth.browserOrCli, read], config: { rateLimit: { max: 30, timeWindow: 60_000 } } },
    async (req, reply) => {
      const { projectId, env } = params(req);
      const { format = "json" } = parse(ExportQuery, req.query, UNKNOWN_EXPORT_FORMAT);
      const ifNoneMatch = req.headers["if-none-match"];
      const result = await secrets.export(auth.principal(req), projectId, env, format, ifNoneMatch ? (etag) => matchesTag(ifNoneMatch, etag) : undefined);
      void reply.header("etag", result.etag);
      if ("notModified" in result) return reply.code(304).send();
      const { values } = result;
      if (format === "json") return { secrets: values };
      let file;
      try {
        file = exportFile(format, values, env);
      } catch (error) {
        // Audited like any export: the values were read, though none leave.
        if (error instanceof DockerEnvRefusal) throw new HttpError(400, dockerRefusalMessage(error, { json: "format=json", shell: "format=shell" }));
        throw error;
      }
      return (
        reply
          .type(file.contentType)
          .header("content-disposition", `attachment; filename="${file.filename}"`)
          // How many secrets the file leaves out (a comment in it says why, at each one's place).
          .header("x-secrets-left-out", String(file.leftOut.length))
          .send(file.text)
      );
    },
  );

  // The rate limit runs first (onRequest, like every limit: see app.ts), then credential and
  // access before the body is read (preParsing), so a caller who may not import learns
  // nothing and costs nothing; the size limit is checked next, on Content-Length when sent.
  const guardImport = [auth.browser, access.route("secrets:create", { environment: true })];
  app.post(
    `${BASE}/import`,
    {
      bodyLimit: MAX_IMPORT_BYTES,
      preParsing: async (req, _reply, payload) => {
        for (const guard of guardImport) await guard(req);
        return payload;
      },
      config: { rateLimit: { max: 10, timeWindow: 60_000 } },
      // Fastify's own body limit answers with the import's message.
      errorHandler: (error: FastifyError, req, reply) => {
        if (error.code === "FST_ERR_CTP_BODY_TOO_LARGE") return reply.code(413).send({ error: IMPORT_TOO_LARGE });
        return app.errorHandler(error, req, reply);
      },
    },
    async (req) => {
      const { projectId, env } = params(req);
      const body = req.body;
      if (isPlainObject(body) && Array.isArray(body.entries) && body.entries.length > MAX_IMPORT_ENTRIES) {
        throw new HttpError(413, IMPORT_TOO_LARGE);
      }
      const { entries } = parse(ImportBody, body, INVALID_REQUEST);
      return secrets.import(auth.caller(req), projectId, env, entries);
    },
  );
}
