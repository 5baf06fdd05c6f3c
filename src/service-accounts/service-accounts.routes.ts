import type { FastifyInstance, FastifyRequest } from "fastify";
import { z } from "zod";
import { looksLikeToken } from "../audit/audit.writer.ts";
import { ENVIRONMENTS, type AccessGuard } from "../core/access.ts";
import type { Auth } from "../core/auth.ts";
import { HttpError, parse } from "../core/errors.ts";
import { fitsUnits, isPlainText, isSingleLine } from "../core/text.ts";
import { INVALID_FIELDS, parseCidr, type ServiceAccountsService } from "./service-accounts.service.ts";
import { isAllowedIssuerUrl, type WorkloadIdentityService } from "./workload-identity.service.ts";

const WORKLOAD_EXCHANGES_PER_MINUTE = 30;

// Names go into audit metadata, whose writer refuses token-shaped text: 400, not 500.
const Name = z
  .string()
  .trim()
  .min(1)
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

const ServiceAccountChanges = z.strictObject({
  name: Name.optional(),
  description: Description.nullable().optional(),
  role: Role.optional(),
  environments: Environments.optional(),
});

const NewToken = z.strictObject({
  name: Name,
  expiresInDays: z.number().int().min(1).max(365).nullable().optional(),
  allowedCidrs: z
    .array(z.string().max(64).refine((text) => parseCidr(text) !== undefined))
    .max(20)
    .optional(),
});

const Text = z.string().min(1).max(500).refine(isSingleLine).refine((text) => !looksLikeToken(text));
const NewTrust = z.strictObject({
  issuer: z.string().max(500).refine(isAllowedIssuerUrl),
  audience: Text,
  subject: Text,
  claims: z
    .record(z.string().min(1).max(100).refine(isSingleLine), z.string().max(500).refine(isSingleLine))
    .refine((claims) => Object.keys(claims).length <= 20)
    .optional(),
});

const BASE = "/api/projects/:projectId/service-accounts";

interface Params {
  projectId: string;
  accountId: string;
  tokenId: string;
  trustId: string;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}

interface Deps {
  auth: Auth;
  access: AccessGuard;
  serviceAccounts: ServiceAccountsService;
  workloadIdentity: WorkloadIdentityService;
}

export function registerServiceAccountRoutes(app: FastifyInstance, { auth, access, serviceAccounts, workloadIdentity }: Deps): void {
  // Browser first: a CLI token or a service token gets the browser-only answer, member or not.
  const guard = [auth.browser, access.route("service_accounts:manage")];
  const params = (req: FastifyRequest) => req.params as Params;

  app.get(BASE, { preHandler: guard }, async (req) => {
    return { serviceAccounts: serviceAccounts.list(auth.caller(req), params(req).projectId) };
  });

  app.post(BASE, { preHandler: guard }, async (req, reply) => {
    const input = parse(NewServiceAccount, req.body, INVALID_FIELDS);
    const serviceAccount = serviceAccounts.create(auth.caller(req), params(req).projectId, input);
    return reply.code(201).send({ serviceAccount });
  });

  app.get(`${BASE}/:accountId`, { preHandler: guard }, async (req) => {
    const { projectId, accountId } = params(req);
    return { serviceAccount: serviceAccounts.get(auth.caller(req), projectId, accountId) };
  });

  app.patch(`${BASE}/:accountId`, { preHandler: guard }, async (req) => {
    const { projectId, accountId } = params(req);
    const body = req.body ?? {};
    if (isPlainObject(body) && Object.keys(body).length === 0) throw new HttpError(400, "Nothing to update.");
    const input = parse(ServiceAccountChanges, body, INVALID_FIELDS);
    return { serviceAccount: serviceAccounts.update(auth.caller(req), projectId, accountId, input) };
  });

  app.delete(`${BASE}/:accountId`, { preHandler: guard }, async (req) => {
    const { projectId, accountId } = params(req);
    serviceAccounts.delete(auth.caller(req), projectId, accountId);
    return { ok: true };
  });

  app.post(`${BASE}/:accountId/tokens`, { preHandler: guard }, async (req, reply) => {
    const { projectId, accountId } = params(req);
    const input = parse(NewToken, req.body, INVALID_FIELDS);
    return reply.code(201).send(serviceAccounts.createToken(auth.caller(req), projectId, accountId, input));
  });

  app.delete(`${BASE}/:accountId/tokens/:tokenId`, { preHandler: guard }, async (req) => {
    const { projectId, accountId, tokenId } = params(req);
    serviceAccounts.revokeToken(auth.caller(req), projectId, accountId, tokenId);
    return { ok: true };
  });

  app.post(`${BASE}/:accountId/trusts`, { preHandler: guard }, async (req, reply) => {
    const { projectId, accountId } = params(req);
    const input = parse(NewTrust, req.body, INVALID_FIELDS);
    return reply.code(201).send({ trust: serviceAccounts.createTrust(auth.caller(req), projectId, accountId, input) });
  });

  app.delete(`${BASE}/:accountId/trusts/:trustId`, { preHandler: guard }, async (req) => {
    const { projectId, accountId, trustId } = params(req);
    serviceAccounts.deleteTrust(auth.caller(req), projectId, accountId, trustId);
    return { ok: true };
  });

  // A bad service credential never reaches this handler (core/auth.ts answers 401 first).
  app.get("/api/service-accounts/me", async (req) => {
    return serviceAccounts.me(auth.serviceAccount(req));
  });

  // No credential: the identity token is the credential. Every attempt counts, per address.
  app.post(
    "/api/auth/workload/token",
    {
      config: {
        rateLimit: { max: WORKLOAD_EXCHANGES_PER_MINUTE, timeWindow: 60_000, keyGenerator: (req: FastifyRequest) => `workload-exchange:${req.ip}` },
      },
    },
    async (req) => {
      const body = isPlainObject(req.body) ? req.body : {};
      return workloadIdentity.exchange({ serviceAccountId: body.serviceAccountId, token: body.token });
    },
  );
}
