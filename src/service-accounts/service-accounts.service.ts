import crypto from "node:crypto";
import net from "node:net";
import type { AuditWriter } from "../audit/audit.writer.ts";
import { type AccessGuard, ENVIRONMENTS, type Environment } from "../core/access.ts";
import { touchDueBefore } from "../core/auth.ts";
import type { Caller, ServiceAccountCaller } from "../core/caller.ts";
import { mappedIpv4, normalizeAddress } from "../core/client-address.ts";
import type { Clock } from "../core/clock.ts";
import { hashToken, randomToken } from "../core/crypto.ts";
import { HttpError, INVALID_FIELDS } from "../core/errors.ts";
import type { LostRights } from "../core/lost-rights.ts";
import { SERVICE_ACCOUNT_NOT_FOUND } from "../core/service-account-rules.ts";
import { type Store, writeTransaction } from "../core/store.ts";
import { nameKey } from "../core/text.ts";
import type { ServiceAccountRow, ServiceAccountsRepo, ServiceTokenRow, TrustRow, WithCreator } from "./service-accounts.repo.ts";

const TOKEN_NOT_FOUND = "Token not found.";
const TRUST_NOT_FOUND = "Trust not found.";
const ACCOUNT_NAME_TAKEN = "A service account with this name already exists.";
const TOO_MANY_TOKENS = "This service account already has 20 tokens. Revoke one first.";
const TOO_MANY_TRUSTS = "This service account already has 10 trusts. Remove one first.";

const MAX_LIVE_TOKENS = 20;
const MAX_TRUSTS = 10;
const SERVICE_TOKEN_PREFIX = "svc_st_";
export const WORKLOAD_TOKEN_PREFIX = "svc_wt_";
const DAY_MS = 24 * 60 * 60 * 1000;
const UNUSED_DAYS = 90;

export type ServiceAccountRole = "viewer" | "member";

export interface Person {
  userId: string;
  email: string | null;
}

export interface TokenView {
  id: string;
  name: string;
  createdAt: string;
  createdBy: Person | null;
  expiresAt: string | null;
  allowedCidrs: string[];
  lastUsedAt: string | null;
  lastUsedIp: string | null;
}

export interface TrustView {
  id: string;
  issuer: string;
  audience: string;
  subject: string;
  claims: Record<string, string>;
  createdAt: string;
}

export interface ServiceAccountView {
  id: string;
  name: string;
  description: string | null;
  role: ServiceAccountRole;
  environments: Environment[];
  createdAt: string;
  createdBy: Person | null;
  tokens: TokenView[];
  trusts: TrustView[];
}

export interface NewServiceAccount {
  name: string;
  description?: string | null;
  role: ServiceAccountRole;
  environments: Environment[];
}

export interface NewToken {
  name: string;
  expiresInDays?: number | null;
  allowedCidrs?: string[];
}

export interface NewTrust {
  issuer: string;
  audience: string;
  subject: string;
  claims?: Record<string, string>;
}

/**
 * `address/prefix` (or a bare address, one host) of either family; undefined when it is none.
 * An IPv4-mapped network is the IPv4 network it covers (prefix - 96), since clients are
 * matched by their IPv4 address; a zone id (fe80::1%eth0) names no network, and a prefix is
 * plain decimal (not "08"), so one text has one meaning.
 */
export function parseCidr(text: string): { address: string; prefix: number; family: "ipv4" | "ipv6" } | undefined {
  const [address = "", prefixText, ...rest] = text.split("/");
  const version = net.isIP(address);
  if (version === 0 || rest.length > 0 || address.includes("%")) return undefined;
  const max = version === 4 ? 32 : 128;
  if (prefixText !== undefined && !/^(0|[1-9][0-9]{0,2})$/.test(prefixText)) return undefined;
  const prefix = prefixText === undefined ? max : Number(prefixText);
  if (prefix > max) return undefined;
  if (version === 4) return { address, prefix, family: "ipv4" };
  const ipv4 = mappedIpv4(address);
  if (ipv4 === undefined) return { address, prefix, family: "ipv6" };
  // Under /96 the network reaches outside the mapped range: refused rather than guessed at.
  if (prefix < 96) return undefined;
  return { address: ipv4, prefix: prefix - 96, family: "ipv4" };
}

/**
 * Whether a client address lies in one of the networks. Total: anything unexpected (a
 * network stored by an older version that parseCidr now refuses) means not allowed, so a
 * bad list refuses its token with the one 401 instead of failing every request with a 500.
 */
function isAddressAllowed(address: string, cidrs: string[]): boolean {
  if (cidrs.length === 0) return true;
  try {
    const client = normalizeAddress(address);
    const family = net.isIP(client);
    if (family === 0) return false;
    const list = new net.BlockList();
    for (const text of cidrs) {
      const cidr = parseCidr(text);
      if (cidr) list.addSubnet(cidr.address, cidr.prefix, cidr.family);
    }
    return list.check(client, family === 4 ? "ipv4" : "ipv6");
  } catch {
    return false;
  }
}

function parseEnvironments(text: string): Environment[] {
  const list = JSON.parse(text) as string[];
  return ENVIRONMENTS.filter((e) => list.includes(e));
}

function creator(userId: string | null, email: string | null): Person | null {
  return userId === null ? null : { userId, email };
}

function toTokenView(row: ServiceTokenRow & WithCreator): TokenView {
  return {
    id: row.id,
    name: row.name,
    createdAt: row.createdAt,
    createdBy: creator(row.createdBy, row.createdByEmail),
    expiresAt: row.expiresAt,
    allowedCidrs: JSON.parse(row.allowedCidrs) as string[],
    lastUsedAt: row.lastUsedAt,
    lastUsedIp: row.lastUsedIp,
  };
}

function toTrustView(row: TrustRow): TrustView {
  return {
    id: row.id,
    issuer: row.issuer,
    audience: row.audience,
    subject: row.subject,
    claims: JSON.parse(row.claims) as Record<string, string>,
    createdAt: row.createdAt,
  };
}

/** The caller a request made with one of the account's credentials acts as. */
export function accountCaller(
  account: ServiceAccountRow,
  via: ServiceAccountCaller["via"],
  tokenId: string,
  expiresAt: string | null,
): ServiceAccountCaller {
  return {
    via,
    serviceAccountId: account.id,
    serviceAccountName: account.name,
    projectId: account.projectId,
    role: account.role,
    environments: parseEnvironments(account.environments),
    tokenId,
    expiresAt,
  };
}

interface Deps {
  db: Store;
  repo: ServiceAccountsRepo;
  /** The projects feature's lookup (app.ts passes the projects repo's). */
  projects: { findById(id: string): Promise<{ name: string } | undefined> };
  access: AccessGuard;
  audit: AuditWriter;
  clock: Clock;
}

export function createServiceAccountsService({ db, repo, projects, access, audit, clock }: Deps) {
  async function toView(row: ServiceAccountRow & WithCreator): Promise<ServiceAccountView> {
    return {
      id: row.id,
      name: row.name,
      description: row.description,
      role: row.role,
      environments: parseEnvironments(row.environments),
      createdAt: row.createdAt,
      createdBy: creator(row.createdBy, row.createdByEmail),
      tokens: (await repo.listTokens(row.id, clock.now().toISOString())).map(toTokenView),
      trusts: (await repo.listTrusts(row.id)).map(toTrustView),
    };
  }

  /** Owners and admins only; a non-member learns nothing (404), not even whether the account exists. */
  function requireManage(caller: Caller, projectId: string) {
    return access.require(caller, projectId, "service_accounts:manage");
  }

  async function findOrFail(projectId: string, id: string): Promise<ServiceAccountRow & WithCreator> {
    const row = await repo.findAccount(projectId, id);
    if (!row) throw new HttpError(404, SERVICE_ACCOUNT_NOT_FOUND);
    return row;
  }

  async function isNameTaken(projectId: string, name: string, exceptId?: string): Promise<boolean> {
    // Compared here, not with SQLite's lower(), which folds only ASCII.
    const wanted = nameKey(name);
    return (await repo.listAccounts(projectId)).some((row) => row.id !== exceptId && nameKey(row.name) === wanted);
  }

  /** Each environment must be one of the project's; order is canonical. */
  function checkEnvironments(projectEnvironments: Environment[], environments: Environment[]): Environment[] {
    if (environments.some((e) => !projectEnvironments.includes(e))) throw new HttpError(400, INVALID_FIELDS);
    return ENVIRONMENTS.filter((e) => environments.includes(e));
  }

  return {
    async list(caller: Caller, projectId: string): Promise<ServiceAccountView[]> {
      await requireManage(caller, projectId);
      // The id last: names that collate equal (one with a zero-width space, say) must not
      // come in the order the store happens to keep, which differs between SQLite and PostgreSQL.
      const rows = (await repo.listAccounts(projectId)).sort(
        (a, b) =>
          a.name.toLowerCase().localeCompare(b.name.toLowerCase()) ||
          a.name.localeCompare(b.name) ||
          (a.id < b.id ? -1 : a.id > b.id ? 1 : 0),
      );
      const views: ServiceAccountView[] = [];
      for (const row of rows) views.push(await toView(row));
      return views;
    },

    async get(caller: Caller, projectId: string, id: string): Promise<ServiceAccountView> {
      await requireManage(caller, projectId);
      return toView(await findOrFail(projectId, id));
    },

    async create(caller: Caller, projectId: string, input: NewServiceAccount): Promise<ServiceAccountView> {
      const id = crypto.randomUUID();
      await writeTransaction(db, async () => {
        const projectAccess = await requireManage(caller, projectId);
        const environments = checkEnvironments(projectAccess.projectEnvironments, input.environments);
        if (await isNameTaken(projectId, input.name)) throw new HttpError(409, ACCOUNT_NAME_TAKEN);
        const now = clock.now().toISOString();
        await repo.insertAccount({
          id,
          projectId,
          name: input.name,
          description: input.description || null,
          role: input.role,
          environments: JSON.stringify(environments),
          createdBy: caller.userId,
          createdAt: now,
          updatedAt: now,
        });
        await audit.record(caller, {
          projectId,
          action: "service_account.created",
          targetType: "service_account",
          targetId: id,
          metadata: { name: input.name, role: input.role, environments },
        });
      });
      return toView(await findOrFail(projectId, id));
    },

    async update(caller: Caller, projectId: string, id: string, input: Partial<NewServiceAccount>): Promise<ServiceAccountView> {
      await writeTransaction(db, async () => {
        const projectAccess = await requireManage(caller, projectId);
        const row = await findOrFail(projectId, id);
        const before = parseEnvironments(row.environments);
        const name = input.name ?? row.name;
        const description = input.description === undefined ? row.description : input.description || null;
        const role = input.role ?? row.role;
        const environments = input.environments ? checkEnvironments(projectAccess.projectEnvironments, input.environments) : before;
        const nameChanged = name !== row.name;
        const environmentsChanged = environments.join(",") !== before.join(",");
        const descriptionChanged = description !== row.description;
        if (!nameChanged && !environmentsChanged && !descriptionChanged && role === row.role) return;
        if (nameChanged && (await isNameTaken(projectId, name, id))) throw new HttpError(409, ACCOUNT_NAME_TAKEN);
        await repo.updateAccount(id, {
          name,
          description,
          role,
          environments: JSON.stringify(environments),
          updatedAt: clock.now().toISOString(),
        });
        await audit.record(caller, {
          projectId,
          action: "service_account.updated",
          targetType: "service_account",
          targetId: id,
          metadata: {
            name,
            previousName: nameChanged ? row.name : undefined,
            role,
            previousRole: role !== row.role ? row.role : undefined,
            environments,
            previousEnvironments: environmentsChanged ? before : undefined,
            descriptionChanged,
          },
        });
      });
      return toView(await findOrFail(projectId, id));
    },

    async delete(caller: Caller, projectId: string, id: string): Promise<void> {
      await writeTransaction(db, async () => {
        await requireManage(caller, projectId);
        const row = await findOrFail(projectId, id);
        await repo.deleteAccount(id);
        await audit.record(caller, {
          projectId,
          action: "service_account.deleted",
          targetType: "service_account",
          targetId: id,
          metadata: { name: row.name, role: row.role },
        });
      });
    },

    /** The only place the token exists in the clear: it is returned once and only its hash is kept. */
    async createToken(caller: Caller, projectId: string, id: string, input: NewToken): Promise<{ token: string; tokenInfo: TokenView }> {
      const token = `${SERVICE_TOKEN_PREFIX}${randomToken(32)}`;
      const tokenId = crypto.randomUUID();
      // The answer is read in the same transaction: a revoke or delete right after the commit
      // must not turn the token just minted into a 404 or a missing row.
      const tokenInfo = await writeTransaction(db, async () => {
        await requireManage(caller, projectId);
        const account = await findOrFail(projectId, id);
        const now = clock.now();
        const nowIso = now.toISOString();
        if ((await repo.countLiveTokens(id, nowIso)) >= MAX_LIVE_TOKENS) throw new HttpError(409, TOO_MANY_TOKENS);
        await repo.deleteExpiredTokens(id, nowIso);
        const expiresAt = input.expiresInDays ? new Date(now.getTime() + input.expiresInDays * DAY_MS).toISOString() : null;
        const allowedCidrs = input.allowedCidrs ?? [];
        await repo.insertToken({
          id: tokenId,
          serviceAccountId: id,
          kind: "service",
          tokenHash: hashToken(token),
          name: input.name,
          allowedCidrs: JSON.stringify(allowedCidrs),
          createdBy: caller.userId,
          createdAt: nowIso,
          expiresAt,
        });
        await audit.record(caller, {
          projectId,
          action: "service_token.created",
          targetType: "service_account",
          targetId: id,
          metadata: { serviceAccountName: account.name, tokenId, name: input.name, expiresAt, allowedCidrs },
        });
        return (await toView(await findOrFail(projectId, id))).tokens.find((t) => t.id === tokenId)!;
      });
      return { token, tokenInfo };
    },

    async revokeToken(caller: Caller, projectId: string, id: string, tokenId: string): Promise<void> {
      await writeTransaction(db, async () => {
        await requireManage(caller, projectId);
        const account = await findOrFail(projectId, id);
        const row = await repo.deleteToken(id, tokenId, clock.now().toISOString());
        if (!row) throw new HttpError(404, TOKEN_NOT_FOUND);
        await audit.record(caller, {
          projectId,
          action: "service_token.revoked",
          targetType: "service_account",
          targetId: id,
          metadata: { serviceAccountName: account.name, tokenId, name: row.name },
        });
      });
    },

    async createTrust(caller: Caller, projectId: string, id: string, input: NewTrust): Promise<TrustView> {
      const trustId = crypto.randomUUID();
      return writeTransaction(db, async () => {
        await requireManage(caller, projectId);
        const account = await findOrFail(projectId, id);
        if ((await repo.listTrusts(id)).length >= MAX_TRUSTS) throw new HttpError(409, TOO_MANY_TRUSTS);
        const claims = input.claims ?? {};
        await repo.insertTrust({
          id: trustId,
          serviceAccountId: id,
          issuer: input.issuer,
          audience: input.audience,
          subject: input.subject,
          claims: JSON.stringify(claims),
          createdBy: caller.userId,
          createdAt: clock.now().toISOString(),
        });
        await audit.record(caller, {
          projectId,
          action: "service_account_trust.created",
          targetType: "service_account",
          targetId: id,
          metadata: {
            serviceAccountName: account.name,
            trustId,
            issuer: input.issuer,
            audience: input.audience,
            subject: input.subject,
            claims,
          },
        });
        // In the same transaction, like a new token's view: a delete right after cannot take it away.
        return toTrustView((await repo.listTrusts(id)).find((t) => t.id === trustId)!);
      });
    },

    async deleteTrust(caller: Caller, projectId: string, id: string, trustId: string): Promise<void> {
      await writeTransaction(db, async () => {
        await requireManage(caller, projectId);
        const account = await findOrFail(projectId, id);
        const row = await repo.deleteTrust(id, trustId);
        if (!row) throw new HttpError(404, TRUST_NOT_FOUND);
        await audit.record(caller, {
          projectId,
          action: "service_account_trust.deleted",
          targetType: "service_account",
          targetId: id,
          metadata: { serviceAccountName: account.name, trustId, issuer: row.issuer, subject: row.subject },
        });
      });
    },

    /**
     * A members rights-lost listener (src/lost-rights.ts), inside the transaction that changed
     * the membership. A service token is shown once to the person who created it, who may have
     * kept a copy: when they no longer hold service_accounts:manage in the project, the live
     * tokens they created there are revoked, as a revocation by hand does, audited with the
     * reason. Trusts stay: they hold no secret the person could have kept.
     */
    async revokeForLostRights(lost: LostRights): Promise<void> {
      if (await access.holds(lost.userId, lost.projectId, "service_accounts:manage")) return;
      const nowIso = clock.now().toISOString();
      for (const row of await repo.listLiveTokensCreatedBy(lost.projectId, lost.userId, nowIso)) {
        await repo.deleteToken(row.serviceAccountId, row.id, nowIso);
        await audit.record(lost.actor, {
          projectId: lost.projectId,
          action: "service_token.revoked",
          targetType: "service_account",
          targetId: row.serviceAccountId,
          metadata: {
            serviceAccountName: row.serviceAccountName,
            tokenId: row.id,
            name: row.name,
            reason: "creator_lost_access",
            createdBy: lost.userId,
            cause: lost.cause,
          },
        });
      }
    },

    /** Names of the project's accounts with a trust that accepts any workload of its issuer. */
    async openTrustAccounts(projectId: string): Promise<string[]> {
      return [...new Set((await repo.listOpenTrusts(projectId)).map((row) => row.serviceAccountName))];
    },

    /** /api/service-accounts/me: the account behind the credential, as of this request. */
    async me(caller: ServiceAccountCaller) {
      const projectEnvironments = (await access.find(caller, caller.projectId))?.environments ?? [];
      return {
        serviceAccount: {
          id: caller.serviceAccountId,
          name: caller.serviceAccountName,
          projectId: caller.projectId,
          projectName: (await projects.findById(caller.projectId))?.name ?? "",
          role: caller.role,
          environments: projectEnvironments,
        },
        expiresAt: caller.expiresAt,
      };
    },

    /**
     * Every request made with a svc_st_/svc_wt_ token comes here (core/auth.ts). Refused
     * (null) when unknown, revoked (deleted), expired, of a deleted account, of the other
     * kind than its prefix says, or presented from outside its allowed networks.
     */
    async resolve(token: string, clientIp: string): Promise<ServiceAccountCaller | null> {
      const row = await repo.findCredential(hashToken(token));
      if (!row) return null;
      const expectedKind = token.startsWith(WORKLOAD_TOKEN_PREFIX) ? "workload" : "service";
      if (row.kind !== expectedKind) return null;
      const now = clock.now();
      if (row.expiresAt !== null && Date.parse(row.expiresAt) <= now.getTime()) return null;
      if (!isAddressAllowed(clientIp, JSON.parse(row.allowedCidrs) as string[])) return null;
      const dueBefore = touchDueBefore(now);
      if (row.lastUsedAt === null || row.lastUsedAt <= dueBefore) {
        await repo.touchToken(row.tokenId, now.toISOString(), normalizeAddress(clientIp), dueBefore);
      }
      return accountCaller(row.account, row.kind === "workload" ? "workload" : "service_token", row.tokenId, row.expiresAt);
    },

    /** The security overview's `access.serviceAccounts`. */
    async counts(projectId: string) {
      const now = clock.now();
      return repo.counts(projectId, now.toISOString(), new Date(now.getTime() - UNUSED_DAYS * DAY_MS).toISOString());
    },
  };
}

export type ServiceAccountsService = ReturnType<typeof createServiceAccountsService>;
