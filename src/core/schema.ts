// The whole database in one place. Timestamps are ISO 8601 UTC text with milliseconds,
// which sorts correctly as text; ids are UUIDs. Migrations are generated from this file
// by drizzle-kit (`npm run db:generate`) into migrations/. It is PostgreSQL's source too:
// `npm run db:generate:pg` derives schema.pg.ts from it (schema.pg.generate.ts says how) and
// then migrations/postgres/; test/postgres-schema.test.ts fails when either is out of date.
import { blob, foreignKey, index, integer, primaryKey, sqliteTable, text, uniqueIndex } from "drizzle-orm/sqlite-core";

/** Verifier of each master key version, so a wrong key refuses to start. */
export const keyChecks = sqliteTable("key_checks", {
  version: integer("version").primaryKey(),
  checkValue: text("check_value").notNull(),
  createdAt: text("created_at").notNull(),
});

export const users = sqliteTable(
  "users",
  {
    id: text("id").primaryKey(),
    email: text("email"),
    emailVerified: integer("email_verified", { mode: "boolean" }).notNull().default(false),
    name: text("name"),
    // Who vouches for this identity: "dev", "local", or an OIDC issuer URL; subject is
    // the e-mail for dev/local and the `sub` claim for OIDC.
    authIssuer: text("auth_issuer").notNull(),
    authSubject: text("auth_subject").notNull(),
    passwordHash: text("password_hash"),
    disabledAt: text("disabled_at"),
    createdAt: text("created_at").notNull(),
    updatedAt: text("updated_at").notNull(),
  },
  (t) => [uniqueIndex("users_identity").on(t.authIssuer, t.authSubject), index("users_email").on(t.email)],
);

export const browserSessions = sqliteTable(
  "browser_sessions",
  {
    id: text("id").primaryKey(),
    userId: text("user_id")
      .notNull()
      .references(() => users.id, { onDelete: "cascade" }),
    tokenHash: text("token_hash").notNull(),
    createdAt: text("created_at").notNull(),
    lastSeenAt: text("last_seen_at").notNull(),
    expiresAt: text("expires_at").notNull(),
  },
  (t) => [uniqueIndex("browser_sessions_token").on(t.tokenHash), index("browser_sessions_user").on(t.userId)],
);

/** One-time links of local accounts: first-run setup, `users add`, password reset. */
export const accountLinks = sqliteTable(
  "account_links",
  {
    id: text("id").primaryKey(),
    tokenHash: text("token_hash").notNull(),
    purpose: text("purpose", { enum: ["setup", "invite", "reset"] }).notNull(),
    email: text("email").notNull(),
    userId: text("user_id").references(() => users.id, { onDelete: "cascade" }),
    createdAt: text("created_at").notNull(),
    expiresAt: text("expires_at").notNull(),
    usedAt: text("used_at"),
  },
  (t) => [uniqueIndex("account_links_token").on(t.tokenHash)],
);

/**
 * Failed local sign-ins, kept in the database so that a restart does not reset the
 * per-account limit. The account is named by a hash of its lower-case e-mail: made-up
 * addresses tried against the server are not stored in the clear.
 */
export const signInFailures = sqliteTable(
  "sign_in_failures",
  {
    id: integer("id").primaryKey({ autoIncrement: true }),
    accountHash: text("account_hash").notNull(),
    /** Hash of the client address the attempt came from (null on rows older than the pair limit). */
    addressHash: text("address_hash"),
    failedAt: text("failed_at").notNull(),
  },
  (t) => [
    index("sign_in_failures_account").on(t.accountHash, t.failedAt),
    index("sign_in_failures_pair").on(t.accountHash, t.addressHash, t.failedAt),
    index("sign_in_failures_at").on(t.failedAt),
  ],
);

export const projects = sqliteTable(
  "projects",
  {
    id: text("id").primaryKey(),
    name: text("name").notNull(),
    description: text("description"),
    createdBy: text("created_by").references(() => users.id, { onDelete: "set null" }),
    createdAt: text("created_at").notNull(),
    updatedAt: text("updated_at").notNull(),
  },
  (t) => [index("projects_updated").on(t.updatedAt)],
);

export const projectEnvironments = sqliteTable(
  "project_environments",
  {
    projectId: text("project_id")
      .notNull()
      .references(() => projects.id, { onDelete: "cascade" }),
    slug: text("slug", { enum: ["development", "staging", "production"] }).notNull(),
    createdAt: text("created_at").notNull(),
  },
  (t) => [primaryKey({ columns: [t.projectId, t.slug] })],
);

/** Envelope encryption: one random data key per project and master key version, wrapped by that master key. */
export const projectKeys = sqliteTable(
  "project_keys",
  {
    projectId: text("project_id")
      .notNull()
      .references(() => projects.id, { onDelete: "cascade" }),
    keyVersion: integer("key_version").notNull(),
    wrappedKey: blob("wrapped_key", { mode: "buffer" }).notNull(),
    createdAt: text("created_at").notNull(),
  },
  (t) => [primaryKey({ columns: [t.projectId, t.keyVersion] })],
);

export const memberships = sqliteTable(
  "memberships",
  {
    projectId: text("project_id")
      .notNull()
      .references(() => projects.id, { onDelete: "cascade" }),
    userId: text("user_id")
      .notNull()
      .references(() => users.id, { onDelete: "cascade" }),
    role: text("role", { enum: ["owner", "admin", "member", "viewer"] }).notNull(),
    createdAt: text("created_at").notNull(),
    updatedAt: text("updated_at").notNull(),
  },
  (t) => [primaryKey({ columns: [t.projectId, t.userId] }), index("memberships_user").on(t.userId)],
);

/** Per-environment grants of members and viewers; they go with the membership. */
export const environmentGrants = sqliteTable(
  "environment_grants",
  {
    projectId: text("project_id").notNull(),
    userId: text("user_id").notNull(),
    environment: text("environment", { enum: ["development", "staging", "production"] }).notNull(),
    grantedBy: text("granted_by"),
    createdAt: text("created_at").notNull(),
  },
  (t) => [
    primaryKey({ columns: [t.projectId, t.userId, t.environment] }),
    foreignKey({ columns: [t.projectId, t.userId], foreignColumns: [memberships.projectId, memberships.userId] }).onDelete("cascade"),
    foreignKey({
      columns: [t.projectId, t.environment],
      foreignColumns: [projectEnvironments.projectId, projectEnvironments.slug],
    }).onDelete("cascade"),
  ],
);

export const secrets = sqliteTable(
  "secrets",
  {
    id: text("id").primaryKey(),
    projectId: text("project_id").notNull(),
    environment: text("environment", { enum: ["development", "staging", "production"] }).notNull(),
    key: text("key").notNull(),
    /** The current version number; its value lives in secret_versions. */
    version: integer("version").notNull(),
    createdAt: text("created_at").notNull(),
    updatedAt: text("updated_at").notNull(),
  },
  (t) => [
    uniqueIndex("secrets_env_key").on(t.projectId, t.environment, t.key),
    // The list's index: ordered by (updated_at, id), since an import gives hundreds of
    // secrets one updated_at (without id SQLite sorted every list: 1.7 against 0.9 ms of SQL
    // for 1,000 secrets), and holding every column the list returns, so the list never
    // visits the table (0.74 against 0.53 ms of SQL for 1,000).
    index("secrets_env_list").on(t.projectId, t.environment, t.updatedAt, t.id, t.key, t.version, t.createdAt),
    foreignKey({
      columns: [t.projectId, t.environment],
      foreignColumns: [projectEnvironments.projectId, projectEnvironments.slug],
    }).onDelete("cascade"),
  ],
);

/** Every value a secret has had, the current one included, each encrypted on its own. */
export const secretVersions = sqliteTable(
  "secret_versions",
  {
    secretId: text("secret_id")
      .notNull()
      .references(() => secrets.id, { onDelete: "cascade" }),
    versionNumber: integer("version_number").notNull(),
    projectId: text("project_id").notNull(),
    key: text("key").notNull(),
    changeType: text("change_type", { enum: ["CREATED", "UPDATED", "ROLLED_BACK", "BASELINE"] }).notNull(),
    restoredFromVersion: integer("restored_from_version"),
    /** nonce (12 bytes) | ciphertext | GCM tag (16 bytes), with AAD binding it to this row. */
    ciphertext: blob("ciphertext", { mode: "buffer" }).notNull(),
    keyVersion: integer("key_version").notNull(),
    /**
     * vault.digest(projectId, keyVersion, value): compares a new value with this one without
     * decrypting it (import). Null on versions written before it existed until something
     * reads their value for a comparison; recomputed when rotate-key re-encrypts.
     */
    digest: text("digest"),
    changedBy: text("changed_by"),
    /** Set with a null changed_by when a service account wrote the version; kept after it is deleted. */
    changedByServiceAccountId: text("changed_by_service_account_id"),
    changedByServiceAccountName: text("changed_by_service_account_name"),
    createdAt: text("created_at").notNull(),
  },
  (t) => [
    primaryKey({ columns: [t.secretId, t.versionNumber] }),
    index("secret_versions_key_version").on(t.keyVersion),
    index("secret_versions_project").on(t.projectId),
  ],
);

export const deviceRequests = sqliteTable(
  "cli_device_requests",
  {
    id: text("id").primaryKey(),
    deviceCodeHash: text("device_code_hash").notNull(),
    userCodeHash: text("user_code_hash").notNull(),
    deviceName: text("device_name").notNull(),
    status: text("status", { enum: ["pending", "approved", "denied", "consumed"] }).notNull(),
    approvedBy: text("approved_by").references(() => users.id, { onDelete: "cascade" }),
    createdAt: text("created_at").notNull(),
    expiresAt: text("expires_at").notNull(),
    lastPolledAt: text("last_polled_at"),
  },
  (t) => [uniqueIndex("cli_device_requests_device").on(t.deviceCodeHash), index("cli_device_requests_user").on(t.userCodeHash)],
);

/** A CLI sign-in: groups a token pair and all the pairs that refreshing it produced. */
export const cliSessions = sqliteTable(
  "cli_sessions",
  {
    id: text("id").primaryKey(),
    userId: text("user_id")
      .notNull()
      .references(() => users.id, { onDelete: "cascade" }),
    deviceName: text("device_name").notNull(),
    createdAt: text("created_at").notNull(),
    lastUsedAt: text("last_used_at").notNull(),
    expiresAt: text("expires_at").notNull(),
    revokedAt: text("revoked_at"),
  },
  (t) => [index("cli_sessions_user").on(t.userId)],
);

export const cliTokens = sqliteTable(
  "cli_tokens",
  {
    id: text("id").primaryKey(),
    sessionId: text("session_id")
      .notNull()
      .references(() => cliSessions.id, { onDelete: "cascade" }),
    kind: text("kind", { enum: ["access", "refresh"] }).notNull(),
    tokenHash: text("token_hash").notNull(),
    createdAt: text("created_at").notNull(),
    expiresAt: text("expires_at").notNull(),
    /** Set when a refresh token has been exchanged; presenting it again revokes the session. */
    usedAt: text("used_at"),
  },
  (t) => [uniqueIndex("cli_tokens_hash").on(t.tokenHash), index("cli_tokens_session").on(t.sessionId)],
);

export const invitations = sqliteTable(
  "invitations",
  {
    id: text("id").primaryKey(),
    projectId: text("project_id")
      .notNull()
      .references(() => projects.id, { onDelete: "cascade" }),
    email: text("email").notNull(),
    role: text("role", { enum: ["admin", "member", "viewer"] }).notNull(),
    /** JSON array of environment slugs granted on acceptance. */
    environments: text("environments").notNull().default("[]"),
    tokenHash: text("token_hash").notNull(),
    invitedBy: text("invited_by"),
    createdAt: text("created_at").notNull(),
    expiresAt: text("expires_at").notNull(),
    acceptedAt: text("accepted_at"),
    acceptedBy: text("accepted_by"),
    /** "not_configured", "sent" or "failed": whether the e-mail reached the mail server. */
    deliveryStatus: text("delivery_status").notNull().default("not_configured"),
  },
  (t) => [
    uniqueIndex("invitations_token").on(t.tokenHash),
    index("invitations_project").on(t.projectId),
    index("invitations_email").on(t.email),
  ],
);

/**
 * Append-only and hash-chained (hash = SHA-256 of prev_hash and the event's content).
 * No foreign key on project_id: events outlive the project they describe.
 */
export const auditEvents = sqliteTable(
  "audit_events",
  {
    seq: integer("seq").primaryKey({ autoIncrement: true }),
    id: text("id").notNull(),
    projectId: text("project_id"),
    at: text("at").notNull(),
    action: text("action").notNull(),
    category: text("category").notNull(),
    actorUserId: text("actor_user_id"),
    targetType: text("target_type").notNull(),
    targetId: text("target_id").notNull(),
    metadata: text("metadata").notNull().default("{}"),
    prevHash: text("prev_hash").notNull(),
    hash: text("hash").notNull(),
    /** Master key version whose derived MAC key chained this event; null: plain SHA-256 (older events). */
    macKeyVersion: integer("mac_key_version"),
    /** The service account that caused the event (actor_user_id is then null), as of the event. */
    serviceAccountId: text("service_account_id"),
    serviceAccountName: text("service_account_name"),
  },
  (t) => [
    // No index on id alone: nothing looks an event up by it, and every index is written on
    // every audited read (the ids are unique by construction: time, counter, random bits).
    // The list order is (at, seq), the chain's: seq is the rowid, which SQLite keeps as the
    // last column of every index, so each of these walks in that order.
    index("audit_events_project_at_seq").on(t.projectId, t.at),
    index("audit_events_project_category_at_seq").on(t.projectId, t.category, t.at),
    index("audit_events_project_action_at_seq").on(t.projectId, t.action, t.at),
    index("audit_events_project_actor_at_seq").on(t.projectId, t.actorUserId, t.at),
    // Actor combined with a category or an action: one seek instead of scanning all of a
    // busy actor's events for a rare action (bench/audit.bench.ts).
    index("audit_events_project_actor_category_at_seq").on(t.projectId, t.actorUserId, t.category, t.at),
    index("audit_events_project_actor_action_at_seq").on(t.projectId, t.actorUserId, t.action, t.at),
    index("audit_events_project_service_account_at_seq").on(t.projectId, t.serviceAccountId, t.at),
  ],
);

/**
 * Where the audit chain starts once retention pruned its oldest events: the last pruned
 * event's seq, hash and time, signed with an HMAC under the audit key of `mac_key_version`
 * so nobody without the master key can move it (one row, id 1).
 */
export const auditCheckpoint = sqliteTable("audit_checkpoint", {
  id: integer("id").primaryKey(),
  seq: integer("seq").notNull(),
  hash: text("hash").notNull(),
  at: text("at").notNull(),
  /** Whether the chain was keyed at that event: hash-only events may not follow a keyed one. */
  isKeyed: integer("is_keyed", { mode: "boolean" }).notNull(),
  /** Cut-off of the prune that last moved the checkpoint: events before it are gone. */
  prunedBefore: text("pruned_before").notNull(),
  prunedEvents: integer("pruned_events").notNull(),
  macKeyVersion: integer("mac_key_version").notNull(),
  mac: text("mac").notNull(),
});

/**
 * Rate-limit windows, shared by every server process on the file and kept across restarts:
 * a route's own limit is counted here exactly, the global one merged in every few seconds
 * (core/rate-limit-store.ts).
 */
export const rateLimitWindows = sqliteTable(
  "rate_limit_windows",
  {
    /** The limit's scope (route or "global") and the caller's key, joined by a newline. */
    key: text("key").primaryKey(),
    count: integer("count").notNull(),
    startedAt: text("started_at").notNull(),
    expiresAt: text("expires_at").notNull(),
  },
  (t) => [index("rate_limit_windows_expires").on(t.expiresAt)],
);

/**
 * Work that one server process at a time may do (the automatic Vercel syncs): the holder
 * renews heartbeat_at, and another process takes the row over once it is stale.
 */
export const leases = sqliteTable("leases", {
  name: text("name").primaryKey(),
  owner: text("owner").notNull(),
  heartbeatAt: text("heartbeat_at").notNull(),
});

/** The Vercel connection of a project. The token and deploy hook are encrypted like values. */
export const integrations = sqliteTable("integrations", {
  projectId: text("project_id")
    .primaryKey()
    .references(() => projects.id, { onDelete: "cascade" }),
  provider: text("provider").notNull().default("vercel"),
  status: text("status", { enum: ["connected", "active", "attention"] }).notNull(),
  tokenCiphertext: blob("token_ciphertext", { mode: "buffer" }).notNull(),
  tokenKeyVersion: integer("token_key_version").notNull(),
  teamId: text("team_id"),
  hostProjectId: text("host_project_id"),
  hostProjectName: text("host_project_name"),
  /** JSON object: environment slug to target. */
  mappings: text("mappings").notNull().default("{}"),
  conflictPolicy: text("conflict_policy", { enum: ["skip", "overwrite"] })
    .notNull()
    .default("skip"),
  autoRedeploy: integer("auto_redeploy", { mode: "boolean" }).notNull().default(false),
  hookCiphertext: blob("hook_ciphertext", { mode: "buffer" }),
  hookKeyVersion: integer("hook_key_version"),
  lastSyncAt: text("last_sync_at"),
  lastSyncStatus: text("last_sync_status"),
  lastError: text("last_error"),
  /** Set while a sync runs: the database, not memory, decides that only one runs. */
  syncStartedAt: text("sync_started_at"),
  /** The server process running the sync (random per process) and its last sign of life. */
  syncOwner: text("sync_owner"),
  syncHeartbeatAt: text("sync_heartbeat_at"),
  pending: integer("pending").notNull().default(0),
  /** JSON: the last run and the last deployment, documented in the README. */
  lastRun: text("last_run"),
  lastDeployment: text("last_deployment"),
  /** A run changed vars at Vercel that no deployment has picked up yet: the next automatic redeploy is not for nothing. */
  deployDue: integer("deploy_due", { mode: "boolean" }).notNull().default(false),
  /** Who saved the token: syncing pauses when that person loses integrations:manage or leaves. */
  connectedBy: text("connected_by"),
  pausedAt: text("paused_at"),
  pausedReason: text("paused_reason"),
  createdAt: text("created_at").notNull(),
  updatedAt: text("updated_at").notNull(),
});

/** Env vars this server created at Vercel, so it can tell its own from others'. */
export const integrationVars = sqliteTable(
  "integration_vars",
  {
    projectId: text("project_id")
      .notNull()
      .references(() => projects.id, { onDelete: "cascade" }),
    target: text("target").notNull(),
    key: text("key").notNull(),
    hostEnvId: text("host_env_id").notNull(),
    createdAt: text("created_at").notNull(),
  },
  (t) => [primaryKey({ columns: [t.projectId, t.target, t.key] })],
);

/** A machine caller of one project: the secret permissions of its role, in its environments only. */
export const serviceAccounts = sqliteTable(
  "service_accounts",
  {
    id: text("id").primaryKey(),
    projectId: text("project_id")
      .notNull()
      .references(() => projects.id, { onDelete: "cascade" }),
    name: text("name").notNull(),
    description: text("description"),
    role: text("role", { enum: ["viewer", "member"] }).notNull(),
    /** JSON array of environment slugs, each one of the project's. */
    environments: text("environments").notNull(),
    createdBy: text("created_by"),
    createdAt: text("created_at").notNull(),
    updatedAt: text("updated_at").notNull(),
  },
  (t) => [index("service_accounts_project").on(t.projectId)],
);

/**
 * Bearer credentials of service accounts, stored as SHA-256 hashes: long-lived service
 * tokens (svc_st_) and the short-lived access tokens a workload exchange issues (svc_wt_,
 * with the trust that issued them). A revoked token is deleted.
 */
export const serviceTokens = sqliteTable(
  "service_tokens",
  {
    id: text("id").primaryKey(),
    serviceAccountId: text("service_account_id")
      .notNull()
      .references(() => serviceAccounts.id, { onDelete: "cascade" }),
    kind: text("kind", { enum: ["service", "workload"] }).notNull(),
    tokenHash: text("token_hash").notNull(),
    name: text("name").notNull(),
    /** JSON array of CIDR strings; empty: any address. */
    allowedCidrs: text("allowed_cidrs").notNull().default("[]"),
    trustId: text("trust_id").references(() => serviceAccountTrusts.id, { onDelete: "cascade" }),
    createdBy: text("created_by"),
    createdAt: text("created_at").notNull(),
    expiresAt: text("expires_at"),
    lastUsedAt: text("last_used_at"),
    lastUsedIp: text("last_used_ip"),
  },
  (t) => [uniqueIndex("service_tokens_hash").on(t.tokenHash), index("service_tokens_account").on(t.serviceAccountId, t.kind)],
);

/** Identity-token issuers a workload may present to act as the account. */
export const serviceAccountTrusts = sqliteTable(
  "service_account_trusts",
  {
    id: text("id").primaryKey(),
    serviceAccountId: text("service_account_id")
      .notNull()
      .references(() => serviceAccounts.id, { onDelete: "cascade" }),
    issuer: text("issuer").notNull(),
    audience: text("audience").notNull(),
    subject: text("subject").notNull(),
    /** JSON object of claim name to exact string value. */
    claims: text("claims").notNull().default("{}"),
    createdBy: text("created_by"),
    createdAt: text("created_at").notNull(),
    /** When the last exchange was audited: at most one event a minute per trust. */
    lastAuditedAt: text("last_audited_at"),
  },
  (t) => [index("service_account_trusts_account").on(t.serviceAccountId)],
);
