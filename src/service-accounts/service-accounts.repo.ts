import { and, eq, gt, isNull, lte, or, sql } from "drizzle-orm";
import { type Db, guard } from "../core/db.ts";
import { serviceAccounts, serviceAccountTrusts, serviceTokens, users } from "../core/schema.ts";
import { isPostgres, type Store } from "../core/store.ts";
import { createServiceAccountsRepoPg } from "./service-accounts.repo.pg.ts";

export type ServiceAccountRow = typeof serviceAccounts.$inferSelect;
export type ServiceTokenRow = typeof serviceTokens.$inferSelect;
export type TrustRow = typeof serviceAccountTrusts.$inferSelect;

export interface WithCreator {
  createdByEmail: string | null;
}

/** A credential with its account, for resolving a Bearer token. */
export interface CredentialRow {
  tokenId: string;
  kind: ServiceTokenRow["kind"];
  expiresAt: string | null;
  allowedCidrs: string;
  lastUsedAt: string | null;
  account: ServiceAccountRow;
}

/** Live: not expired (revoked tokens are deleted). */
function isLive(nowIso: string) {
  return or(isNull(serviceTokens.expiresAt), gt(serviceTokens.expiresAt, nowIso));
}

export type ServiceAccountsRepo = ReturnType<typeof createServiceAccountsRepoSqlite>;

export function createServiceAccountsRepo(store: Store): ServiceAccountsRepo {
  return isPostgres(store) ? createServiceAccountsRepoPg(store) : createServiceAccountsRepoSqlite(store);
}

function createServiceAccountsRepoSqlite(db: Db) {
  const sqlite = db.$client;
  // The hot path of every request made with a service credential: one indexed lookup.
  const findCredential = sqlite.prepare(
    `SELECT t.id AS token_id, t.kind, t.expires_at, t.allowed_cidrs, t.last_used_at, a.*
     FROM service_tokens t JOIN service_accounts a ON a.id = t.service_account_id
     WHERE t.token_hash = CAST(? AS TEXT)`,
  );
  const countsStatement = sqlite.prepare(
    `SELECT
       (SELECT count(*) FROM service_accounts WHERE project_id = @projectId) AS accounts,
       count(t.id) AS tokens,
       coalesce(sum(t.expires_at IS NULL), 0) AS tokensWithoutExpiry,
       coalesce(sum(coalesce(t.last_used_at, t.created_at) < @unusedSince), 0) AS tokensUnusedFor90Days,
       (SELECT count(*) FROM service_account_trusts r JOIN service_accounts a ON a.id = r.service_account_id
         WHERE a.project_id = @projectId) AS trusts
     FROM service_accounts a
     JOIN service_tokens t ON t.service_account_id = a.id AND t.kind = 'service' AND (t.expires_at IS NULL OR t.expires_at > @now)
     WHERE a.project_id = @projectId`,
  );
  // Conditional: requests that arrive together all read the old time, and only one of them writes.
  const touchToken = sqlite.prepare(
    "UPDATE service_tokens SET last_used_at = ?, last_used_ip = ? WHERE id = ? AND (last_used_at IS NULL OR last_used_at <= ?)",
  );

  return guard(db, {
    listAccounts(projectId: string): (ServiceAccountRow & WithCreator)[] {
      return db
        .select({ account: serviceAccounts, createdByEmail: users.email })
        .from(serviceAccounts)
        .leftJoin(users, eq(users.id, serviceAccounts.createdBy))
        .where(eq(serviceAccounts.projectId, projectId))
        .all()
        .map((r) => ({ ...r.account, createdByEmail: r.createdByEmail }));
    },

    findAccount(projectId: string, id: string): (ServiceAccountRow & WithCreator) | undefined {
      const row = db
        .select({ account: serviceAccounts, createdByEmail: users.email })
        .from(serviceAccounts)
        .leftJoin(users, eq(users.id, serviceAccounts.createdBy))
        .where(and(eq(serviceAccounts.projectId, projectId), eq(serviceAccounts.id, id)))
        .get();
      return row && { ...row.account, createdByEmail: row.createdByEmail };
    },

    /** Any project: the workload exchange names the account alone. */
    findAccountById(id: string): ServiceAccountRow | undefined {
      return db.select().from(serviceAccounts).where(eq(serviceAccounts.id, id)).get();
    },

    insertAccount(row: typeof serviceAccounts.$inferInsert): void {
      db.insert(serviceAccounts).values(row).run();
    },

    updateAccount(
      id: string,
      fields: Partial<Pick<ServiceAccountRow, "name" | "description" | "role" | "environments" | "updatedAt">>,
    ): void {
      db.update(serviceAccounts).set(fields).where(eq(serviceAccounts.id, id)).run();
    },

    /** Foreign keys cascade to its tokens, access tokens and trusts. */
    deleteAccount(id: string): void {
      db.delete(serviceAccounts).where(eq(serviceAccounts.id, id)).run();
    },

    /** Live service tokens (not workload access tokens) of an account, oldest first. */
    listTokens(accountId: string, nowIso: string): (ServiceTokenRow & WithCreator)[] {
      return db
        .select({ token: serviceTokens, createdByEmail: users.email })
        .from(serviceTokens)
        .leftJoin(users, eq(users.id, serviceTokens.createdBy))
        .where(and(eq(serviceTokens.serviceAccountId, accountId), eq(serviceTokens.kind, "service"), isLive(nowIso)))
        .orderBy(serviceTokens.createdAt, serviceTokens.id)
        .all()
        .map((r) => ({ ...r.token, createdByEmail: r.createdByEmail }));
    },

    /** Live service tokens one person created in a project, with their account's name. */
    listLiveTokensCreatedBy(projectId: string, userId: string, nowIso: string): (ServiceTokenRow & { serviceAccountName: string })[] {
      return db
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
        .orderBy(serviceTokens.createdAt, serviceTokens.id)
        .all()
        .map((r) => ({ ...r.token, serviceAccountName: r.serviceAccountName }));
    },

    /** Trusts of a project's accounts whose subject is only `*` and that require no claim. */
    listOpenTrusts(projectId: string): (TrustRow & { serviceAccountName: string })[] {
      return db
        .select({ trust: serviceAccountTrusts, serviceAccountName: serviceAccounts.name })
        .from(serviceAccountTrusts)
        .innerJoin(serviceAccounts, eq(serviceAccounts.id, serviceAccountTrusts.serviceAccountId))
        .where(and(eq(serviceAccounts.projectId, projectId), eq(serviceAccountTrusts.claims, "{}")))
        .orderBy(serviceAccounts.name, serviceAccountTrusts.createdAt)
        .all()
        .filter((r) => /^\*+$/.test(r.trust.subject))
        .map((r) => ({ ...r.trust, serviceAccountName: r.serviceAccountName }));
    },

    countLiveTokens(accountId: string, nowIso: string): number {
      return db
        .select({ n: sql<number>`count(*)` })
        .from(serviceTokens)
        .where(and(eq(serviceTokens.serviceAccountId, accountId), eq(serviceTokens.kind, "service"), isLive(nowIso)))
        .get()!.n;
    },

    insertToken(row: typeof serviceTokens.$inferInsert): void {
      db.insert(serviceTokens).values(row).run();
    },

    /** Removes one live service token of the account; undefined when there was none (an expired one is listed nowhere). */
    deleteToken(accountId: string, tokenId: string, nowIso: string): ServiceTokenRow | undefined {
      return db
        .delete(serviceTokens)
        .where(
          and(
            eq(serviceTokens.serviceAccountId, accountId),
            eq(serviceTokens.id, tokenId),
            eq(serviceTokens.kind, "service"),
            isLive(nowIso),
          ),
        )
        .returning()
        .get();
    },

    /** Expired tokens of an account are dead weight: dropped whenever a new one is written. */
    deleteExpiredTokens(accountId: string, nowIso: string): void {
      db.delete(serviceTokens)
        .where(and(eq(serviceTokens.serviceAccountId, accountId), lte(serviceTokens.expiresAt, nowIso)))
        .run();
    },

    findCredential(tokenHash: string): CredentialRow | undefined {
      const row = findCredential.get(tokenHash) as
        | ({
            token_id: string;
            kind: ServiceTokenRow["kind"];
            expires_at: string | null;
            allowed_cidrs: string;
            last_used_at: string | null;
          } & Record<string, unknown>)
        | undefined;
      if (!row) return undefined;
      return {
        tokenId: row.token_id,
        kind: row.kind,
        expiresAt: row.expires_at,
        allowedCidrs: row.allowed_cidrs,
        lastUsedAt: row.last_used_at,
        account: {
          id: row.id as string,
          projectId: row.project_id as string,
          name: row.name as string,
          description: row.description as string | null,
          role: row.role as ServiceAccountRow["role"],
          environments: row.environments as string,
          createdBy: row.created_by as string | null,
          createdAt: row.created_at as string,
          updatedAt: row.updated_at as string,
        },
      };
    },

    /** Records a use unless one was recorded after `unlessSince` (core/auth.ts TOUCH_INTERVAL_MS). */
    touchToken(tokenId: string, atIso: string, ip: string, unlessSince: string): void {
      touchToken.run(atIso, ip, tokenId, unlessSince);
    },

    listTrusts(accountId: string): TrustRow[] {
      return db
        .select()
        .from(serviceAccountTrusts)
        .where(eq(serviceAccountTrusts.serviceAccountId, accountId))
        .orderBy(serviceAccountTrusts.createdAt, serviceAccountTrusts.id)
        .all();
    },

    insertTrust(row: typeof serviceAccountTrusts.$inferInsert): void {
      db.insert(serviceAccountTrusts).values(row).run();
    },

    /** Removes one trust of the account (and the access tokens it issued); undefined when there was none. */
    deleteTrust(accountId: string, trustId: string): TrustRow | undefined {
      return db
        .delete(serviceAccountTrusts)
        .where(and(eq(serviceAccountTrusts.serviceAccountId, accountId), eq(serviceAccountTrusts.id, trustId)))
        .returning()
        .get();
    },

    markTrustAudited(trustId: string, atIso: string): void {
      db.update(serviceAccountTrusts).set({ lastAuditedAt: atIso }).where(eq(serviceAccountTrusts.id, trustId)).run();
    },

    /** The security overview's counts; live tokens only. */
    counts(projectId: string, nowIso: string, unusedSinceIso: string) {
      return countsStatement.get({ projectId, now: nowIso, unusedSince: unusedSinceIso }) as {
        accounts: number;
        tokens: number;
        tokensWithoutExpiry: number;
        tokensUnusedFor90Days: number;
        trusts: number;
      };
    },
  });
}
