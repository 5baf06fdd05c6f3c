import { and, eq, gt, isNull, lte, or, sql } from "drizzle-orm";
import { type PgStore, pgRow, pgRun } from "../core/postgres.ts";
import { serviceAccounts, serviceAccountTrusts, serviceTokens, users } from "../core/schema.pg.ts";
import type { CredentialRow, ServiceAccountRow, ServiceAccountsRepo, ServiceTokenRow } from "./service-accounts.repo.ts";

/** Live: not expired (revoked tokens are deleted). */
function isLive(nowIso: string) {
  return or(isNull(serviceTokens.expiresAt), gt(serviceTokens.expiresAt, nowIso));
}

/** service-accounts.repo.ts on PostgreSQL: the same statements (drizzle where it used drizzle), the same rows. */
export function createServiceAccountsRepoPg(store: PgStore): ServiceAccountsRepo {
  const db = store.db();
  return {
    async listAccounts(projectId) {
      const rows = await db
        .select({ account: serviceAccounts, createdByEmail: users.email })
        .from(serviceAccounts)
        .leftJoin(users, eq(users.id, serviceAccounts.createdBy))
        .where(eq(serviceAccounts.projectId, projectId));
      return rows.map((r) => ({ ...r.account, createdByEmail: r.createdByEmail }));
    },

    async findAccount(projectId, id) {
      const [row] = await db
        .select({ account: serviceAccounts, createdByEmail: users.email })
        .from(serviceAccounts)
        .leftJoin(users, eq(users.id, serviceAccounts.createdBy))
        .where(and(eq(serviceAccounts.projectId, projectId), eq(serviceAccounts.id, id)));
      return row && { ...row.account, createdByEmail: row.createdByEmail };
    },

    async findAccountById(id) {
      return (await db.select().from(serviceAccounts).where(eq(serviceAccounts.id, id)))[0];
    },

    async insertAccount(row) {
      await db.insert(serviceAccounts).values(row);
    },

    async updateAccount(id, fields) {
      await db.update(serviceAccounts).set(fields).where(eq(serviceAccounts.id, id));
    },

    async deleteAccount(id) {
      await db.delete(serviceAccounts).where(eq(serviceAccounts.id, id));
    },

    async listTokens(accountId, nowIso) {
      const rows = await db
        .select({ token: serviceTokens, createdByEmail: users.email })
        .from(serviceTokens)
        .leftJoin(users, eq(users.id, serviceTokens.createdBy))
        .where(and(eq(serviceTokens.serviceAccountId, accountId), eq(serviceTokens.kind, "service"), isLive(nowIso)))
        .orderBy(serviceTokens.createdAt, serviceTokens.id);
      return rows.map((r) => ({ ...r.token, createdByEmail: r.createdByEmail }));
    },

    async listLiveTokensCreatedBy(projectId, userId, nowIso) {
      const rows = await db
        .select({ token: serviceTokens, serviceAccountName: serviceAccounts.name })
        .from(serviceTokens)
        .innerJoin(serviceAccounts, eq(serviceAccounts.id, serviceTokens.serviceAccountId))
        .where(
          and(
            eq(serviceAccounts.projectId, projectId),
            eq(serviceTokens.createdBy, userId),
            eq(serviceTokens.kind, "service"),
            isLive(nowIso),
          ),
        )
        .orderBy(serviceTokens.createdAt, serviceTokens.id);
      return rows.map((r) => ({ ...r.token, serviceAccountName: r.serviceAccountName }));
    },

    async listOpenTrusts(projectId) {
      const rows = await db
        .select({ trust: serviceAccountTrusts, serviceAccountName: serviceAccounts.name })
        .from(serviceAccountTrusts)
        .innerJoin(serviceAccounts, eq(serviceAccounts.id, serviceAccountTrusts.serviceAccountId))
        .where(and(eq(serviceAccounts.projectId, projectId), eq(serviceAccountTrusts.claims, "{}")))
        .orderBy(serviceAccounts.name, serviceAccountTrusts.createdAt);
      return rows.filter((r) => /^\*+$/.test(r.trust.subject)).map((r) => ({ ...r.trust, serviceAccountName: r.serviceAccountName }));
    },

    async countLiveTokens(accountId, nowIso) {
      // ::int: drizzle reads a bigint (count's type) as a string.
      const [row] = await db
        .select({ n: sql<number>`count(*)::int` })
        .from(serviceTokens)
        .where(and(eq(serviceTokens.serviceAccountId, accountId), eq(serviceTokens.kind, "service"), isLive(nowIso)));
      return row!.n;
    },

    async insertToken(row) {
      await db.insert(serviceTokens).values(row);
    },

    async deleteToken(accountId, tokenId, nowIso) {
      const [row] = await db
        .delete(serviceTokens)
        .where(
          and(
            eq(serviceTokens.serviceAccountId, accountId),
            eq(serviceTokens.id, tokenId),
            eq(serviceTokens.kind, "service"),
            isLive(nowIso),
          ),
        )
        .returning();
      return row;
    },

    async deleteExpiredTokens(accountId, nowIso) {
      await db.delete(serviceTokens).where(and(eq(serviceTokens.serviceAccountId, accountId), lte(serviceTokens.expiresAt, nowIso)));
    },

    // The hot path of every request made with a service credential: one indexed lookup.
    async findCredential(tokenHash) {
      const row = await pgRow<{
        tokenId: string;
        kind: ServiceTokenRow["kind"];
        expiresAt: string | null;
        allowedCidrs: string;
        lastUsedAt: string | null;
        id: string;
        projectId: string;
        name: string;
        description: string | null;
        role: ServiceAccountRow["role"];
        environments: string;
        createdBy: string | null;
        createdAt: string;
        updatedAt: string;
      }>(
        store,
        `SELECT t.id AS "tokenId", t.kind, t.expires_at AS "expiresAt", t.allowed_cidrs AS "allowedCidrs", t.last_used_at AS "lastUsedAt",
           a.id, a.project_id AS "projectId", a.name, a.description, a.role, a.environments, a.created_by AS "createdBy",
           a.created_at AS "createdAt", a.updated_at AS "updatedAt"
         FROM service_tokens t JOIN service_accounts a ON a.id = t.service_account_id
         WHERE t.token_hash = $1`,
        [tokenHash],
      );
      if (!row) return undefined;
      const credential: CredentialRow = {
        tokenId: row.tokenId,
        kind: row.kind,
        expiresAt: row.expiresAt,
        allowedCidrs: row.allowedCidrs,
        lastUsedAt: row.lastUsedAt,
        account: {
          id: row.id,
          projectId: row.projectId,
          name: row.name,
          description: row.description,
          role: row.role,
          environments: row.environments,
          createdBy: row.createdBy,
          createdAt: row.createdAt,
          updatedAt: row.updatedAt,
        },
      };
      return credential;
    },

    async touchToken(tokenId, atIso, ip, unlessSince) {
      await pgRun(
        store,
        "UPDATE service_tokens SET last_used_at = $1, last_used_ip = $2 WHERE id = $3 AND (last_used_at IS NULL OR last_used_at <= $4)",
        [atIso, ip, tokenId, unlessSince],
      );
    },

    async listTrusts(accountId) {
      return db
        .select()
        .from(serviceAccountTrusts)
        .where(eq(serviceAccountTrusts.serviceAccountId, accountId))
        .orderBy(serviceAccountTrusts.createdAt, serviceAccountTrusts.id);
    },

    async insertTrust(row) {
      await db.insert(serviceAccountTrusts).values(row);
    },

    async deleteTrust(accountId, trustId) {
      const [row] = await db
        .delete(serviceAccountTrusts)
        .where(and(eq(serviceAccountTrusts.serviceAccountId, accountId), eq(serviceAccountTrusts.id, trustId)))
        .returning();
      return row;
    },

    async markTrustAudited(trustId, atIso) {
      await db.update(serviceAccountTrusts).set({ lastAuditedAt: atIso }).where(eq(serviceAccountTrusts.id, trustId));
    },

    async counts(projectId, nowIso, unusedSinceIso) {
      const row = await pgRow<{
        accounts: number;
        tokens: number;
        tokensWithoutExpiry: number;
        tokensUnusedFor90Days: number;
        trusts: number;
      }>(
        store,
        `SELECT
           (SELECT count(*) FROM service_accounts WHERE project_id = $1) AS accounts,
           count(t.id) AS tokens,
           count(*) FILTER (WHERE t.expires_at IS NULL) AS "tokensWithoutExpiry",
           count(*) FILTER (WHERE coalesce(t.last_used_at, t.created_at) < $3) AS "tokensUnusedFor90Days",
           (SELECT count(*) FROM service_account_trusts r JOIN service_accounts a ON a.id = r.service_account_id
             WHERE a.project_id = $1) AS trusts
         FROM service_accounts a
         JOIN service_tokens t ON t.service_account_id = a.id AND t.kind = 'service' AND (t.expires_at IS NULL OR t.expires_at > $2)
         WHERE a.project_id = $1`,
        [projectId, nowIso, unusedSinceIso],
      );
      return row!;
    },
  };
}
