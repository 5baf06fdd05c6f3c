import type { FastifyError, FastifyInstance } from "fastify";
import type { ZodTypeProvider } from "fastify-type-provider-zod";
import { z } from "zod";
import { type AccessGuard, ENVIRONMENTS } from "../core/access.ts";
import { Environment, Ok, ProjectParams, SECURITY, Timestamp } from "../core/api-schemas.ts";
import { type Auth, WORKLOAD_EXCHANGE_ROUTE } from "../core/auth.ts";
import { perNetwork } from "../core/client-address.ts";
import { HttpError } from "../core/errors.ts";
import { isAllowedIssuerUrl, TRUST_TEXT_MAX } from "../core/service-account-rules.ts";
import { fitsUnits, isPlainText, isSingleLine, isVisibleName, looksLikeToken } from "../core/text.ts";
import { parseCidr, type ServiceAccountsService } from "./service-accounts.service.ts";
import { IDENTITY_TOKEN_REFUSED, type WorkloadIdentityService } from "./workload-identity.service.ts";

const WORKLOAD_EXCHANGES_PER_MINUTE = 30;

// Names go into audit metadata, whose writer refuses token-shaped text: 400, not 500.
const Name = z
  .string()
  // Stored composed (NFC): an accent typed either way is stored one way.
  .normalize("NFC")
  .trim()
  .min(1)
  .refine(isVisibleName)
  // UTF-16 units, like project names (zod's .max would count code points).
  .refine(fitsUnits(60))
  .refine((name) => !looksLikeToken(name))
  .refine(isSingleLine);
const Description = z.string().refine(fitsUnits(280)).refine(isPlainText);
const Role = z.enum(["viewer", "member"]);
const Environments = z
  .array(z.enum(ENVIRONMENTS))
  .min(1)
  .max(ENVIRONMENTS.length)
  .refine((list) => new Set(list).size === list.length);

const NewServiceAccount = z.strictObject({
  name: Name,
  description: Description.nullable().optional(),
  role: Role,
  environments: Environments,
});

// No body, null or {} is "nothing to update".
const ServiceAccountChanges = z
  .strictObject({
    name: Name.optional(),
    description: Description.nullable().optional().describe("null clears it"),
    role: Role.optional(),
    environments: Environments.optional(),
  })
  .nullish()
  // {"bogus": 1} also fails this (unknown keys are dropped first): the table answers "+" first.
  .refine((body) => body !== null && body !== undefined && Object.keys(body).length > 0, "nothingToUpdate");

const NewToken = z.strictObject({
  name: Name,
  expiresInDays: z.number().int().min(1).max(365).nullable().optional().describe("Left out or null: the token never expires"),
  allowedCidrs: z
    .array(
      z
        .string()
        .max(64)
        .refine((text) => parseCidr(text) !== undefined),
    )
    .max(20)
    .optional()
    .describe("IPv4/IPv6 networks the token may be used from; empty or left out: any address"),
});

const Text = z
  .string()
  .min(1)
  .max(TRUST_TEXT_MAX)
  .refine(isSingleLine)
  .refine((text) => !looksLikeToken(text));
const NewTrust = z.strictObject({
  issuer: z.string().max(TRUST_TEXT_MAX).refine(isAllowedIssuerUrl),
  audience: Text,
  subject: Text,
  claims: z
    .record(z.string().min(1).max(100).refine(isSingleLine), z.string().max(TRUST_TEXT_MAX).refine(isSingleLine))
    .refine((claims) => Object.keys(claims).length <= 20)
    .optional(),
});

const AccountParams = ProjectParams.extend({ accountId: z.string() });
const TokenParams = AccountParams.extend({ tokenId: z.string() });
const TrustParams = AccountParams.extend({ trustId: z.string() });

const Person = z.object({ userId: z.string(), email: z.string().nullable() });
const TokenInfo = z.object({
  id: z.string(),
  name: z.string(),
  createdAt: Timestamp,
  createdBy: Person.nullable(),
  expiresAt: Timestamp.nullable(),
  allowedCidrs: z.array(z.string()),
  lastUsedAt: Timestamp.nullable(),
  lastUsedIp: z.string().nullable(),
});
const Trust = z.object({
  id: z.string(),
  issuer: z.string(),
  audience: z.string(),
  subject: z.string().describe("Exact, or a pattern where * matches any run of characters"),
  claims: z.record(z.string(), z.string()),
  createdAt: Timestamp,
});
const ServiceAccount = z.object({
  id: z.string(),
  name: z.string(),
  description: z.string().nullable(),
  role: Role,
  environments: z.array(Environment),
  createdAt: Timestamp,
  createdBy: Person.nullable(),
  tokens: z.array(TokenInfo).describe("Live tokens only; never the token or its hash"),
  trusts: z.array(Trust),
});
const AccountEnvelope = z.object({ serviceAccount: ServiceAccount });

// Every failure is the exchange's one 401 with its reason in the log (the service's job), so
// a field of the wrong type reaches the service as missing rather than failing here.
const WorkloadExchange = z
  .object({
    serviceAccountId: z.string().optional().catch(undefined).describe("The service account whose trust should accept the token"),
    token: z.string().optional().catch(undefined).describe("The workload's identity token (a JWT)"),
  })
  .nullish()
  .catch({});

const BASE = "/api/projects/:projectId/service-accounts";

interface Deps {
  auth: Auth;
  access: AccessGuard;
  serviceAccounts: ServiceAccountsService;
  workloadIdentity: WorkloadIdentityService;
}

export function registerServiceAccountRoutes(app: FastifyInstance, { auth, access, serviceAccounts, workloadIdentity }: Deps): void {
  const routes = app.withTypeProvider<ZodTypeProvider>();
  const tags = ["Service accounts"];
  const security = SECURITY.browser;
  // Browser first: a CLI token or a service token gets the browser-only answer, member or not.
  const guard = [auth.browser, access.route("service_accounts:manage")];

  routes.get(
    BASE,
    {
      preValidation: guard,
      schema: {
        tags,
        summary: "List the project's service accounts",
        description: "Ordered by name. Owners and admins (service_accounts:manage).",
        security,
        params: ProjectParams,
        response: { 200: z.object({ serviceAccounts: z.array(ServiceAccount) }) },
      },
    },
    async (req) => ({ serviceAccounts: await serviceAccounts.list(auth.caller(req), req.params.projectId) }),
  );

  routes.post(
    BASE,
    {
      preValidation: guard,
      schema: {
        tags,
        summary: "Create a service account",
        security,
        params: ProjectParams,
        body: NewServiceAccount,
        response: { 201: AccountEnvelope },
      },
    },
    async (req, reply) => {
      const serviceAccount = await serviceAccounts.create(auth.caller(req), req.params.projectId, req.body);
      return reply.code(201).send({ serviceAccount });
    },
  );

  routes.get(
    `${BASE}/:accountId`,
    {
      preValidation: guard,
      schema: { tags, summary: "Read a service account", security, params: AccountParams, response: { 200: AccountEnvelope } },
    },
    async (req) => ({ serviceAccount: await serviceAccounts.get(auth.caller(req), req.params.projectId, req.params.accountId) }),
  );

  routes.patch(
    `${BASE}/:accountId`,
    {
      preValidation: guard,
      schema: {
        tags,
        summary: "Change a service account",
        description: "Takes effect on the account's next request.",
        security,
        params: AccountParams,
        body: ServiceAccountChanges,
        response: { 200: AccountEnvelope },
      },
    },
    async (req) => ({
      serviceAccount: await serviceAccounts.update(auth.caller(req), req.params.projectId, req.params.accountId, req.body ?? {}),
    }),
  );

  routes.delete(
    `${BASE}/:accountId`,
    {
      preValidation: guard,
      schema: {
        tags,
        summary: "Delete a service account",
        description: "Every token and access token of it stops working at once.",
        security,
        params: AccountParams,
        response: { 200: Ok },
      },
    },
    async (req) => {
      await serviceAccounts.delete(auth.caller(req), req.params.projectId, req.params.accountId);
      return { ok: true as const };
    },
  );

  routes.post(
    `${BASE}/:accountId/tokens`,
    {
      preValidation: guard,
      schema: {
        tags,
        summary: "Create a service token",
        description: "The only answer that carries the token (svc_st_…); at most 20 live tokens per account.",
        security,
        params: AccountParams,
        body: NewToken,
        response: { 201: z.object({ token: z.string(), tokenInfo: TokenInfo }) },
      },
    },
    async (req, reply) => {
      const { projectId, accountId } = req.params;
      return reply.code(201).send(await serviceAccounts.createToken(auth.caller(req), projectId, accountId, req.body));
    },
  );

  routes.delete(
    `${BASE}/:accountId/tokens/:tokenId`,
    { preValidation: guard, schema: { tags, summary: "Revoke a service token", security, params: TokenParams, response: { 200: Ok } } },
    async (req) => {
      const { projectId, accountId, tokenId } = req.params;
      await serviceAccounts.revokeToken(auth.caller(req), projectId, accountId, tokenId);
      return { ok: true as const };
    },
  );

  routes.post(
    `${BASE}/:accountId/trusts`,
    {
      preValidation: guard,
      schema: {
        tags,
        summary: "Trust a workload identity issuer",
        description:
          "Lets a workload exchange its identity token (GitHub Actions, GitLab CI, Kubernetes, any OpenID Connect issuer) for a short-lived access token; at most 10 per account.",
        security,
        params: AccountParams,
        body: NewTrust,
        response: { 201: z.object({ trust: Trust }) },
      },
    },
    async (req, reply) => {
      const { projectId, accountId } = req.params;
      return reply.code(201).send({ trust: await serviceAccounts.createTrust(auth.caller(req), projectId, accountId, req.body) });
    },
  );

  routes.delete(
    `${BASE}/:accountId/trusts/:trustId`,
    { preValidation: guard, schema: { tags, summary: "Remove a trust", security, params: TrustParams, response: { 200: Ok } } },
    async (req) => {
      const { projectId, accountId, trustId } = req.params;
      await serviceAccounts.deleteTrust(auth.caller(req), projectId, accountId, trustId);
      return { ok: true as const };
    },
  );

  // A bad service credential never reaches this handler (core/auth.ts answers 401 first).
  routes.get(
    "/api/service-accounts/me",
    {
      schema: {
        tags,
        summary: "The service account a token acts as",
        description: "A service token or a workload access token only; anything else is 401.",
        security: SECURITY.token,
        response: {
          200: z.object({
            serviceAccount: z.object({
              id: z.string(),
              name: z.string(),
              projectId: z.string(),
              projectName: z.string(),
              role: Role,
              environments: z.array(Environment),
            }),
            expiresAt: Timestamp.nullable(),
          }),
        },
      },
    },
    async (req) => serviceAccounts.me(auth.serviceAccount(req)),
  );

  // No credential: the identity token is the credential. Every attempt counts, per address.
  routes.post(
    WORKLOAD_EXCHANGE_ROUTE,
    {
      config: {
        rateLimit: {
          max: WORKLOAD_EXCHANGES_PER_MINUTE,
          timeWindow: 60_000,
          keyGenerator: perNetwork("workload-exchange"),
        },
      },
      schema: {
        tags,
        summary: "Exchange a workload identity token for an access token",
        description:
          "The JWT is verified against the issuer's keys and matched against the account's trusts. The access token (svc_wt_…) is used like a service token and lives 15 minutes at most, never past the JWT's expiry. Every failure is one 401. 30 a minute per client address.",
        security: SECURITY.none,
        body: WorkloadExchange,
        response: { 200: z.object({ accessToken: z.string(), tokenType: z.literal("Bearer"), expiresIn: z.number().int() }) },
      },
      // A body that is not JSON, of another type or too large is a failure like any other:
      // one 401 (machine-access.md), the reason in the log. Past the rate limit stays 429.
      errorHandler: async (error: FastifyError, req) => {
        const status = error.statusCode;
        if (typeof status !== "number" || status < 400 || status >= 500 || status === 401 || status === 429) throw error;
        req.log.warn({ reason: `the request could not be read (${error.code ?? status})` }, "workload identity exchange refused");
        throw new HttpError(401, IDENTITY_TOKEN_REFUSED);
      },
    },
    async (req) => {
      const body = req.body ?? {};
      return workloadIdentity.exchange({ serviceAccountId: body.serviceAccountId, token: body.token });
    },
  );
}
