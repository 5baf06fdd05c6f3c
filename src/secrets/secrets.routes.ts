import type { FastifyError, FastifyInstance } from "fastify";
import type { ZodTypeProvider } from "fastify-type-provider-zod";
import { z } from "zod";
import type { AccessGuard } from "../core/access.ts";
import { checkAlways, EnvironmentParams, isPlainObject, Ok, SECURITY, Timestamp } from "../core/api-schemas.ts";
import type { Auth } from "../core/auth.ts";
import { HttpError } from "../core/errors.ts";
import { isWellFormedText, MAX_IMPORT_BYTES, MAX_KEY_LENGTH, MAX_VALUE_UNITS, SECRET_KEY_PATTERN } from "../core/secret-rules.ts";
import { fitsUnits, looksLikeToken } from "../core/text.ts";
import { DockerEnvRefusal, dockerRefusalMessage, EXPORT_FORMATS, exportFile } from "./export-formats.ts";
import type { SecretsService } from "./secrets.service.ts";

const MAX_IMPORT_ENTRIES = 500;
export const IMPORT_TOO_LARGE = "The import is too large.";
export const UNKNOWN_EXPORT_FORMAT = "Unknown export format: use format=dotenv, shell, docker or yaml, or leave it out for JSON.";

// The key goes into audit metadata, whose writer refuses token-shaped text (svc_at_…):
// such a key could be stored but never read, so it is refused here with a 400.
const Key = z
  .string()
  .max(MAX_KEY_LENGTH)
  .regex(SECRET_KEY_PATTERN)
  .refine((key) => !looksLikeToken(key))
  .describe("Letters, digits and underscores, not starting with a digit; up to 128 characters");
// Keys are ASCII by their pattern, so .max(128) counts them the same either way; values are
// not, and are counted in UTF-16 units (fitsUnits), as the UI's maxlength counts them.
const Value = z
  .string()
  .min(1)
  .refine(fitsUnits(MAX_VALUE_UNITS))
  // Well-formed: a lone surrogate would be stored as U+FFFD and read back different.
  .refine(isWellFormedText)
  .describe("1 to 10,000 characters");
const ExpectedVersion = z
  .number()
  .int()
  .min(1)
  .max(Number.MAX_SAFE_INTEGER)
  .describe("Write only if the secret is still at this version (409 otherwise)");

const NewSecret = z.strictObject({ key: Key, value: Value });
// No body, null, or no key and no value is "nothing to update" (its own message comes first).
const SecretChanges = z
  .strictObject({ key: Key.optional(), value: Value.optional(), expectedVersion: ExpectedVersion.optional() })
  .nullish()
  .refine(
    (body: unknown) => body !== null && body !== undefined && (!isPlainObject(body) || body.key !== undefined || body.value !== undefined),
    checkAlways("nothingToUpdate"),
  );
const RestoreBody = z.strictObject({ expectedVersion: ExpectedVersion.optional() }).nullish();
const ImportBody = z.strictObject({
  entries: z
    .array(z.strictObject({ key: Key, value: Value, overwrite: z.boolean().optional().default(false) }))
    // Too many entries is the size's answer (413), whatever else is wrong with them (a
    // .max() would stop this check from running when an entry is wrong too).
    .refine((entries: unknown) => !Array.isArray(entries) || entries.length <= MAX_IMPORT_ENTRIES, checkAlways("tooManyEntries"))
    // A key twice in one request is ambiguous: which value wins? Refuse it whole.
    .refine((entries) => new Set(entries.map((e) => e.key)).size === entries.length)
    .meta({ maxItems: MAX_IMPORT_ENTRIES }),
});
const ExportQuery = z.strictObject({
  format: z.enum(EXPORT_FORMATS).optional().describe("Leave it out for JSON; the others answer a file"),
});

const SecretParams = EnvironmentParams.extend({ secretId: z.string() });
// 15 digits at most, so any version number is exact as a number.
const VersionParams = SecretParams.extend({ versionNumber: z.string().regex(/^[1-9]\d{0,14}$/) });

const SecretMeta = z.object({ id: z.string(), key: z.string(), version: z.number().int(), createdAt: Timestamp, updatedAt: Timestamp });
const SecretEnvelope = z.object({ secret: SecretMeta });
const SecretWithValue = z.object({ id: z.string(), key: z.string(), value: z.string(), version: z.number().int(), updatedAt: Timestamp });
const VersionEntry = z.object({
  versionNumber: z.number().int(),
  changeType: z.enum(["CREATED", "UPDATED", "ROLLED_BACK", "BASELINE"]),
  key: z.string(),
  isCurrent: z.boolean(),
  restoredFromVersion: z.number().int().optional().describe("On ROLLED_BACK entries"),
  createdAt: Timestamp,
  changedBy: z
    .object({ userId: z.string(), email: z.string().nullable(), isYou: z.boolean(), isMember: z.boolean() })
    .nullable()
    .describe("Null for BASELINE records and for changes by a service account"),
  changedByServiceAccount: z
    .object({ id: z.string(), name: z.string() })
    .optional()
    .describe("The service account that made the change, as it was named then"),
});
const ImportStatus = z.enum(["created", "updated", "unchanged", "skipped", "failed"]);
const ImportResult = z.object({
  summary: z.object({
    created: z.number().int(),
    updated: z.number().int(),
    unchanged: z.number().int(),
    skipped: z.number().int(),
    failed: z.number().int(),
  }),
  results: z.array(z.object({ key: z.string(), status: ImportStatus })),
});

const BASE = "/api/projects/:projectId/environments/:env";

/** If-None-Match holds `*` or a list of tags, weak ones (W/"…") included. */
function matchesTag(header: string, etag: string): boolean {
  return header.split(",").some((tag) => {
    const t = tag.trim();
    return t === "*" || t.replace(/^W\//, "") === etag;
  });
}

export function registerSecretRoutes(
  app: FastifyInstance,
  { auth, access, secrets }: { auth: Auth; access: AccessGuard; secrets: SecretsService },
): void {
  const routes = app.withTypeProvider<ZodTypeProvider>();
  const tags = ["Secrets"];
  const read = access.route("secrets:read", { environment: true });
  const update = access.route("secrets:update", { environment: true });

  routes.get(
    `${BASE}/secrets`,
    {
      preValidation: [auth.browserOrCli, read],
      schema: {
        tags,
        summary: "List an environment's secrets",
        description: "Metadata only, most recently updated first.",
        security: SECURITY.browserOrToken,
        params: EnvironmentParams,
        response: { 200: z.object({ secrets: z.array(SecretMeta) }) },
      },
    },
    async (req) => ({ secrets: await secrets.list(auth.principal(req), req.params.projectId, req.params.env) }),
  );

  routes.post(
    `${BASE}/secrets`,
    {
      preValidation: [auth.browserOrCli, access.route("secrets:create", { environment: true })],
      schema: {
        tags,
        summary: "Create a secret",
        description: "Version 1 of a new key.",
        security: SECURITY.browserOrToken,
        params: EnvironmentParams,
        body: NewSecret,
        response: { 201: SecretEnvelope },
      },
    },
    async (req, reply) => {
      const secret = await secrets.create(auth.principal(req), req.params.projectId, req.params.env, req.body);
      return reply.code(201).send({ secret });
    },
  );

  routes.get(
    `${BASE}/secrets/:secretId`,
    {
      preValidation: [auth.browserOrCli, read],
      schema: {
        tags,
        summary: "Read a secret's value",
        description: "Audited as secret.revealed; the only single-secret read that returns a value.",
        security: SECURITY.browserOrToken,
        params: SecretParams,
        response: { 200: z.object({ secret: SecretWithValue }) },
      },
    },
    async (req) => {
      const { projectId, env, secretId } = req.params;
      return { secret: await secrets.reveal(auth.principal(req), projectId, env, secretId) };
    },
  );

  routes.patch(
    `${BASE}/secrets/:secretId`,
    {
      preValidation: [auth.browserOrCli, update],
      schema: {
        tags,
        summary: "Rename a secret or change its value",
        description:
          "A new value is a new version; a rename is not. With expectedVersion the write applies only at that version (409 otherwise).",
        security: SECURITY.browserOrToken,
        params: SecretParams,
        body: SecretChanges,
        response: { 200: SecretEnvelope },
      },
    },
    async (req) => {
      const { projectId, env, secretId } = req.params;
      return { secret: await secrets.update(auth.principal(req), projectId, env, secretId, req.body ?? {}) };
    },
  );

  routes.delete(
    `${BASE}/secrets/:secretId`,
    {
      preValidation: [auth.browser, access.route("secrets:delete", { environment: true })],
      schema: {
        tags,
        summary: "Delete a secret and its history",
        security: SECURITY.browser,
        params: SecretParams,
        response: { 200: Ok },
      },
    },
    async (req) => {
      const { projectId, env, secretId } = req.params;
      await secrets.delete(auth.caller(req), projectId, env, secretId);
      return { ok: true as const };
    },
  );

  routes.get(
    `${BASE}/secrets/:secretId/versions`,
    {
      preValidation: [auth.browser, read],
      schema: {
        tags,
        summary: "A secret's version history",
        description: "Newest first, metadata only.",
        security: SECURITY.browser,
        params: SecretParams,
        response: { 200: z.object({ currentVersion: z.number().int(), versions: z.array(VersionEntry) }) },
      },
    },
    async (req) => {
      const { projectId, env, secretId } = req.params;
      return await secrets.versions(auth.caller(req), projectId, env, secretId);
    },
  );

  routes.get(
    `${BASE}/secrets/:secretId/versions/:versionNumber`,
    {
      preValidation: [auth.browser, read],
      schema: {
        tags,
        summary: "Read an earlier value",
        description: "Audited as secret.version_revealed.",
        security: SECURITY.browser,
        params: VersionParams,
        response: { 200: z.object({ version: z.object({ versionNumber: z.number().int(), value: z.string() }) }) },
      },
    },
    async (req) => {
      const { projectId, env, secretId, versionNumber } = req.params;
      return { version: await secrets.revealVersion(auth.caller(req), projectId, env, secretId, Number(versionNumber)) };
    },
  );

  routes.post(
    `${BASE}/secrets/:secretId/versions/:versionNumber/restore`,
    {
      preValidation: [auth.browser, update],
      schema: {
        tags,
        summary: "Restore an earlier value",
        description: "Writes the old value as a new version (ROLLED_BACK); it does not rewind.",
        security: SECURITY.browser,
        params: VersionParams,
        body: RestoreBody,
        response: { 200: SecretEnvelope },
      },
    },
    async (req) => {
      const { projectId, env, secretId, versionNumber } = req.params;
      const secret = await secrets.restore(auth.caller(req), projectId, env, secretId, Number(versionNumber), req.body?.expectedVersion);
      return { secret };
    },
  );

  routes.get(
    `${BASE}/export`,
    {
      preValidation: [auth.browserOrCli, read],
      config: { rateLimit: { max: 30, timeWindow: 60_000 } },
      schema: {
        tags,
        summary: "Export every value of an environment",
        description:
          "JSON sorted by key, or with `format` a file (Content-Disposition attachment; X-Secrets-Left-Out counts the secrets a format cannot hold). Audited as secrets.exported. Answers an ETag; with If-None-Match of the current one, 304 and nothing is read. 30 a minute per user.",
        security: SECURITY.browserOrToken,
        params: EnvironmentParams,
        querystring: ExportQuery,
        response: {
          200: z.object({ secrets: z.array(z.object({ key: z.string(), value: z.string() })) }),
          304: z.undefined().describe("If-None-Match holds the current tag: nothing was read"),
        },
      },
    },
    async (req, reply) => {
      const { projectId, env } = req.params;
      const format = req.query.format ?? "json";
      const ifNoneMatch = req.headers["if-none-match"];
      const result = await secrets.export(
        auth.principal(req),
        projectId,
        env,
        format,
        ifNoneMatch ? (etag) => matchesTag(ifNoneMatch, etag) : undefined,
      );
      let file: ReturnType<typeof exportFile> | undefined;
      try {
        if (!("notModified" in result) && format !== "json") file = exportFile(format, result.values, env);
      } catch (error) {
        // Audited like any export: the values were read, though none leave. No tag either:
        // a client that kept it would be told 304 for a file it never had.
        if (error instanceof DockerEnvRefusal)
          throw new HttpError(400, dockerRefusalMessage(error, { json: "format=json", shell: "format=shell" }));
        throw error;
      }
      void reply.header("etag", result.etag);
      if ("notModified" in result) return reply.code(304).send();
      if (!file) return { secrets: result.values };
      return (
        reply
          .type(file.contentType)
          .header("content-disposition", `attachment; filename="${file.filename}"`)
          // How many secrets the file leaves out (a comment in it says why, at each one's place).
          .header("x-secrets-left-out", String(file.leftOut.length))
          // A string with a text type is sent as it is, past the JSON response schema.
          .send(file.text as never)
      );
    },
  );

  // The rate limit runs first (onRequest, like every limit: see app.ts), then credential and
  // access before the body is read (preParsing), so a caller who may not import learns
  // nothing and costs nothing; the size limit is checked next, on Content-Length when sent.
  const guardImport = [auth.browser, access.route("secrets:create", { environment: true, beforeBody: true })];
  routes.post(
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
        return app.errorHandler(error.code === "FST_ERR_CTP_BODY_TOO_LARGE" ? new HttpError(413, IMPORT_TOO_LARGE) : error, req, reply);
      },
      schema: {
        tags,
        summary: "Import many secrets at once",
        description:
          "All or nothing: the whole request is checked before anything is written. An existing key changes only when its entry has overwrite true (which needs secrets:update). At most 500 entries and 2,000,000 bytes (413); 10 a minute per user.",
        security: SECURITY.browser,
        params: EnvironmentParams,
        body: ImportBody,
        response: { 200: ImportResult },
      },
    },
    async (req) => await secrets.import(auth.caller(req), req.params.projectId, req.params.env, req.body.entries),
  );
}
