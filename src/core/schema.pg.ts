// GENERATED from src/core/schema.ts by src/core/schema.pg.generate.ts (npm run
// db:generate:pg): do not edit. The tables of schema.ts for PostgreSQL (DATABASE_URL), with
// the same columns, keys and index names and rows that read the same in JavaScript, so one
// set of repos serves both stores; the generator says where the two differ and why.
import { bigint, boolean, customType, foreignKey, index, integer, pgTable, primaryKey, uniqueIndex } from "drizzle-orm/pg-core";

/** `text` compared byte by byte, as SQLite's BINARY collation; the JavaScript value is a string. */
const binaryText = customType<{ data: string; driverData: string }>({
  dataType: () => 'text COLLATE "C"',
});

/** Like pg-core's text(): the enum only narrows the TypeScript type, as in schema.ts. */
function text<const E extends readonly [string, ...string[]] = [string]>(name: string, _config?: { enum: E }) {
  return binaryText(name).$type<E[number]>();
}

/** A blob, read as a Buffer (pg gives bytea as one). */
const bytea = customType<{ data: Buffer; driverData: Buffer }>({
  dataType: () => "bytea",
});

export const accountLinks = pgTable(
  "account_links",
  {
    id: text("id").primaryKey(),
    tokenHash: text("token_hash").notNull(),
    purpose: text("purpose", { enum: ["setup", "invite", "reset"] }).notNull(),
    email: text("email").notNull(),
    userId: text("user_id"),
    createdAt: text("created_at").notNull(),
    expiresAt: text("expires_at").notNull(),
    usedAt: text("used_at"),
  },
  (t) => [
    uniqueIndex("account_links_token").on(t.tokenHash),
    foreignKey({ name: "account_links_user_id_users_id_fk", columns: [t.userId], foreignColumns: [users.id] }).onDelete("cascade"),
  ],
);

export const auditCheckpoint = pgTable("audit_checkpoint", {
  id: integer("id").primaryKey(),
  seq: bigint("seq", { mode: "number" }).notNull(),
  hash: text("hash").notNull(),
  at: text("at").notNull(),
  isKeyed: boolean("is_keyed").notNull(),
  prunedBefore: text("pruned_before").notNull(),
  prunedEvents: bigint("pruned_events", { mode: "number" }).notNull(),
  macKeyVersion: integer("mac_key_version").notNull(),
  mac: text("mac").notNull(),
});

export const auditEvents = pgTable(
  "audit_events",
  {
    seq: bigint("seq", { mode: "number" }).primaryKey().generatedAlwaysAsIdentity(),
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
    macKeyVersion: integer("mac_key_version"),
    serviceAccountId: text("service_account_id"),
    serviceAccountName: text("service_account_name"),
  },
  (t) => [
    index("audit_events_project_at_seq").on(t.projectId, t.at, t.seq),
    index("audit_events_project_category_at_seq").on(t.projectId, t.category, t.at, t.seq),
    index("audit_events_project_action_at_seq").on(t.projectId, t.action, t.at, t.seq),
    index("audit_events_project_actor_at_seq").on(t.projectId, t.actorUserId, t.at, t.seq),
    index("audit_events_project_actor_category_at_seq").on(t.projectId, t.actorUserId, t.category, t.at, t.seq),
    index("audit_events_project_actor_action_at_seq").on(t.projectId, t.actorUserId, t.action, t.at, t.seq),
    index("audit_events_project_service_account_at_seq").on(t.projectId, t.serviceAccountId, t.at, t.seq),
  ],
);

export const browserSessions = pgTable(
  "browser_sessions",
  {
    id: text("id").primaryKey(),
    userId: text("user_id").notNull(),
    tokenHash: text("token_hash").notNull(),
    createdAt: text("created_at").notNull(),
    lastSeenAt: text("last_seen_at").notNull(),
    expiresAt: text("expires_at").notNull(),
  },
  (t) => [
    uniqueIndex("browser_sessions_token").on(t.tokenHash),
    index("browser_sessions_user").on(t.userId),
    foreignKey({ name: "browser_sessions_user_id_users_id_fk", columns: [t.userId], foreignColumns: [users.id] }).onDelete("cascade"),
  ],
);

export const cliSessions = pgTable(
  "cli_sessions",
  {
    id: text("id").primaryKey(),
    userId: text("user_id").notNull(),
    deviceName: text("device_name").notNull(),
    createdAt: text("created_at").notNull(),
    lastUsedAt: text("last_used_at").notNull(),
    expiresAt: text("expires_at").notNull(),
    revokedAt: text("revoked_at"),
  },
  (t) => [
    index("cli_sessions_user").on(t.userId),
    foreignKey({ name: "cli_sessions_user_id_users_id_fk", columns: [t.userId], foreignColumns: [users.id] }).onDelete("cascade"),
  ],
);

export const cliTokens = pgTable(
  "cli_tokens",
  {
    id: text("id").primaryKey(),
    sessionId: text("session_id").notNull(),
    kind: text("kind", { enum: ["access", "refresh"] }).notNull(),
    tokenHash: text("token_hash").notNull(),
    createdAt: text("created_at").notNull(),
    expiresAt: text("expires_at").notNull(),
    usedAt: text("used_at"),
  },
  (t) => [
    uniqueIndex("cli_tokens_hash").on(t.tokenHash),
    index("cli_tokens_session").on(t.sessionId),
    foreignKey({ name: "cli_tokens_session_id_cli_sessions_id_fk", columns: [t.sessionId], foreignColumns: [cliSessions.id] }).onDelete(
      "cascade",
    ),
  ],
);

export const deviceRequests = pgTable(
  "cli_device_requests",
  {
    id: text("id").primaryKey(),
    deviceCodeHash: text("device_code_hash").notNull(),
    userCodeHash: text("user_code_hash").notNull(),
    deviceName: text("device_name").notNull(),
    status: text("status", { enum: ["pending", "approved", "denied", "consumed"] }).notNull(),
    approvedBy: text("approved_by"),
    createdAt: text("created_at").notNull(),
    expiresAt: text("expires_at").notNull(),
    lastPolledAt: text("last_polled_at"),
  },
  (t) => [
    uniqueIndex("cli_device_requests_device").on(t.deviceCodeHash),
    index("cli_device_requests_user").on(t.userCodeHash),
    foreignKey({ name: "cli_device_requests_approved_by_users_id_fk", columns: [t.approvedBy], foreignColumns: [users.id] }).onDelete(
      "cascade",
    ),
  ],
);

export const environmentGrants = pgTable(
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
    foreignKey({
      name: "environment_grants_membership_fk",
      columns: [t.projectId, t.userId],
      foreignColumns: [memberships.projectId, memberships.userId],
    }).onDelete("cascade"),
    foreignKey({
      name: "environment_grants_environment_fk",
      columns: [t.projectId, t.environment],
      foreignColumns: [projectEnvironments.projectId, projectEnvironments.slug],
    }).onDelete("cascade"),
  ],
);

export const integrationVars = pgTable(
  "integration_vars",
  {
    projectId: text("project_id").notNull(),
    target: text("target").notNull(),
    key: text("key").notNull(),
    hostEnvId: text("host_env_id").notNull(),
    createdAt: text("created_at").notNull(),
  },
  (t) => [
    primaryKey({ columns: [t.projectId, t.target, t.key] }),
    foreignKey({ name: "integration_vars_project_id_projects_id_fk", columns: [t.projectId], foreignColumns: [projects.id] }).onDelete(
      "cascade",
    ),
  ],
);

export const integrations = pgTable(
  "integrations",
  {
    projectId: text("project_id").primaryKey(),
    provider: text("provider").notNull().default("vercel"),
    status: text("status", { enum: ["connected", "active", "attention"] }).notNull(),
    tokenCiphertext: bytea("token_ciphertext").notNull(),
    tokenKeyVersion: integer("token_key_version").notNull(),
    teamId: text("team_id"),
    hostProjectId: text("host_project_id"),
    hostProjectName: text("host_project_name"),
    mappings: text("mappings").notNull().default("{}"),
    conflictPolicy: text("conflict_policy", { enum: ["skip", "overwrite"] })
      .notNull()
      .default("skip"),
    autoRedeploy: boolean("auto_redeploy").notNull().default(false),
    hookCiphertext: bytea("hook_ciphertext"),
    hookKeyVersion: integer("hook_key_version"),
    lastSyncAt: text("last_sync_at"),
    lastSyncStatus: text("last_sync_status"),
    lastError: text("last_error"),
    syncStartedAt: text("sync_started_at"),
    syncOwner: text("sync_owner"),
    syncHeartbeatAt: text("sync_heartbeat_at"),
    pending: integer("pending").notNull().default(0),
    lastRun: text("last_run"),
    lastDeployment: text("last_deployment"),
    deployDue: boolean("deploy_due").notNull().default(false),
    connectedBy: text("connected_by"),
    pausedAt: text("paused_at"),
    pausedReason: text("paused_reason"),
    createdAt: text("created_at").notNull(),
    updatedAt: text("updated_at").notNull(),
  },
  (t) => [
    foreignKey({ name: "integrations_project_id_projects_id_fk", columns: [t.projectId], foreignColumns: [projects.id] }).onDelete(
      "cascade",
    ),
  ],
);

export const invitations = pgTable(
  "invitations",
  {
    id: text("id").primaryKey(),
    projectId: text("project_id").notNull(),
    email: text("email").notNull(),
    role: text("role", { enum: ["admin", "member", "viewer"] }).notNull(),
    environments: text("environments").notNull().default("[]"),
    tokenHash: text("token_hash").notNull(),
    invitedBy: text("invited_by"),
    createdAt: text("created_at").notNull(),
    expiresAt: text("expires_at").notNull(),
    acceptedAt: text("accepted_at"),
    acceptedBy: text("accepted_by"),
    deliveryStatus: text("delivery_status").notNull().default("not_configured"),
  },
  (t) => [
    uniqueIndex("invitations_token").on(t.tokenHash),
    index("invitations_project").on(t.projectId),
    index("invitations_email").on(t.email),
    foreignKey({ name: "invitations_project_id_projects_id_fk", columns: [t.projectId], foreignColumns: [projects.id] }).onDelete(
      "cascade",
    ),
  ],
);

export const keyChecks = pgTable("key_checks", {
  version: integer("version").primaryKey(),
  checkValue: text("check_value").notNull(),
  createdAt: text("created_at").notNull(),
});

export const leases = pgTable("leases", {
  name: text("name").primaryKey(),
  owner: text("owner").notNull(),
  heartbeatAt: text("heartbeat_at").notNull(),
});

export const memberships = pgTable(
  "memberships",
  {
    projectId: text("project_id").notNull(),
    userId: text("user_id").notNull(),
    role: text("role", { enum: ["owner", "admin", "member", "viewer"] }).notNull(),
    createdAt: text("created_at").notNull(),
    updatedAt: text("updated_at").notNull(),
  },
  (t) => [
    primaryKey({ columns: [t.projectId, t.userId] }),
    index("memberships_user").on(t.userId),
    foreignKey({ name: "memberships_project_id_projects_id_fk", columns: [t.projectId], foreignColumns: [projects.id] }).onDelete(
      "cascade",
    ),
    foreignKey({ name: "memberships_user_id_users_id_fk", columns: [t.userId], foreignColumns: [users.id] }).onDelete("cascade"),
  ],
);

export const projectEnvironments = pgTable(
  "project_environments",
  {
    projectId: text("project_id").notNull(),
    slug: text("slug", { enum: ["development", "staging", "production"] }).notNull(),
    createdAt: text("created_at").notNull(),
  },
  (t) => [
    primaryKey({ columns: [t.projectId, t.slug] }),
    foreignKey({ name: "project_environments_project_id_projects_id_fk", columns: [t.projectId], foreignColumns: [projects.id] }).onDelete(
      "cascade",
    ),
  ],
);

export const projectKeys = pgTable(
  "project_keys",
  {
    projectId: text("project_id").notNull(),
    keyVersion: integer("key_version").notNull(),
    wrappedKey: bytea("wrapped_key").notNull(),
    createdAt: text("created_at").notNull(),
  },
  (t) => [
    primaryKey({ columns: [t.projectId, t.keyVersion] }),
    foreignKey({ name: "project_keys_project_id_projects_id_fk", columns: [t.projectId], foreignColumns: [projects.id] }).onDelete(
      "cascade",
    ),
  ],
);

export const projects = pgTable(
  "projects",
  {
    id: text("id").primaryKey(),
    name: text("name").notNull(),
    description: text("description"),
    createdBy: text("created_by"),
    createdAt: text("created_at").notNull(),
    updatedAt: text("updated_at").notNull(),
  },
  (t) => [
    index("projects_updated").on(t.updatedAt),
    foreignKey({ name: "projects_created_by_users_id_fk", columns: [t.createdBy], foreignColumns: [users.id] }).onDelete("set null"),
  ],
);

export const rateLimitWindows = pgTable(
  "rate_limit_windows",
  {
    key: text("key").primaryKey(),
    count: integer("count").notNull(),
    startedAt: text("started_at").notNull(),
    expiresAt: text("expires_at").notNull(),
  },
  (t) => [index("rate_limit_windows_expires").on(t.expiresAt)],
);

export const secretVersions = pgTable(
  "secret_versions",
  {
    secretId: text("secret_id").notNull(),
    versionNumber: integer("version_number").notNull(),
    projectId: text("project_id").notNull(),
    key: text("key").notNull(),
    changeType: text("change_type", { enum: ["CREATED", "UPDATED", "ROLLED_BACK", "BASELINE"] }).notNull(),
    restoredFromVersion: integer("restored_from_version"),
    ciphertext: bytea("ciphertext").notNull(),
    keyVersion: integer("key_version").notNull(),
    digest: text("digest"),
    changedBy: text("changed_by"),
    changedByServiceAccountId: text("changed_by_service_account_id"),
    changedByServiceAccountName: text("changed_by_service_account_name"),
    createdAt: text("created_at").notNull(),
  },
  (t) => [
    primaryKey({ columns: [t.secretId, t.versionNumber] }),
    index("secret_versions_key_version").on(t.keyVersion),
    index("secret_versions_project").on(t.projectId),
    foreignKey({ name: "secret_versions_secret_id_secrets_id_fk", columns: [t.secretId], foreignColumns: [secrets.id] }).onDelete(
      "cascade",
    ),
  ],
);

export const secrets = pgTable(
  "secrets",
  {
    id: text("id").primaryKey(),
    projectId: text("project_id").notNull(),
    environment: text("environment", { enum: ["development", "staging", "production"] }).notNull(),
    key: text("key").notNull(),
    version: integer("version").notNull(),
    createdAt: text("created_at").notNull(),
    updatedAt: text("updated_at").notNull(),
  },
  (t) => [
    uniqueIndex("secrets_env_key").on(t.projectId, t.environment, t.key),
    index("secrets_env_list").on(t.projectId, t.environment, t.updatedAt, t.id, t.key, t.version, t.createdAt),
    foreignKey({
      name: "secrets_environment_fk",
      columns: [t.projectId, t.environment],
      foreignColumns: [projectEnvironments.projectId, projectEnvironments.slug],
    }).onDelete("cascade"),
  ],
);

export const serviceAccountTrusts = pgTable(
  "service_account_trusts",
  {
    id: text("id").primaryKey(),
    serviceAccountId: text("service_account_id").notNull(),
    issuer: text("issuer").notNull(),
    audience: text("audience").notNull(),
    subject: text("subject").notNull(),
    claims: text("claims").notNull().default("{}"),
    createdBy: text("created_by"),
    createdAt: text("created_at").notNull(),
    lastAuditedAt: text("last_audited_at"),
  },
  (t) => [
    index("service_account_trusts_account").on(t.serviceAccountId),
    foreignKey({ name: "service_account_trusts_account_fk", columns: [t.serviceAccountId], foreignColumns: [serviceAccounts.id] }).onDelete(
      "cascade",
    ),
  ],
);

export const serviceAccounts = pgTable(
  "service_accounts",
  {
    id: text("id").primaryKey(),
    projectId: text("project_id").notNull(),
    name: text("name").notNull(),
    description: text("description"),
    role: text("role", { enum: ["viewer", "member"] }).notNull(),
    environments: text("environments").notNull(),
    createdBy: text("created_by"),
    createdAt: text("created_at").notNull(),
    updatedAt: text("updated_at").notNull(),
  },
  (t) => [
    index("service_accounts_project").on(t.projectId),
    foreignKey({ name: "service_accounts_project_id_projects_id_fk", columns: [t.projectId], foreignColumns: [projects.id] }).onDelete(
      "cascade",
    ),
  ],
);

export const serviceTokens = pgTable(
  "service_tokens",
  {
    id: text("id").primaryKey(),
    serviceAccountId: text("service_account_id").notNull(),
    kind: text("kind", { enum: ["service", "workload"] }).notNull(),
    tokenHash: text("token_hash").notNull(),
    name: text("name").notNull(),
    allowedCidrs: text("allowed_cidrs").notNull().default("[]"),
    trustId: text("trust_id"),
    createdBy: text("created_by"),
    createdAt: text("created_at").notNull(),
    expiresAt: text("expires_at"),
    lastUsedAt: text("last_used_at"),
    lastUsedIp: text("last_used_ip"),
  },
  (t) => [
    uniqueIndex("service_tokens_hash").on(t.tokenHash),
    index("service_tokens_account").on(t.serviceAccountId, t.kind),
    foreignKey({
      name: "service_tokens_service_account_id_service_accounts_id_fk",
      columns: [t.serviceAccountId],
      foreignColumns: [serviceAccounts.id],
    }).onDelete("cascade"),
    foreignKey({
      name: "service_tokens_trust_id_service_account_trusts_id_fk",
      columns: [t.trustId],
      foreignColumns: [serviceAccountTrusts.id],
    }).onDelete("cascade"),
  ],
);

export const signInFailures = pgTable(
  "sign_in_failures",
  {
    id: bigint("id", { mode: "number" }).primaryKey().generatedAlwaysAsIdentity(),
    accountHash: text("account_hash").notNull(),
    addressHash: text("address_hash"),
    failedAt: text("failed_at").notNull(),
  },
  (t) => [
    index("sign_in_failures_account").on(t.accountHash, t.failedAt),
    index("sign_in_failures_pair").on(t.accountHash, t.addressHash, t.failedAt),
    index("sign_in_failures_at").on(t.failedAt),
  ],
);

export const users = pgTable(
  "users",
  {
    id: text("id").primaryKey(),
    email: text("email"),
    emailVerified: boolean("email_verified").notNull().default(false),
    name: text("name"),
    authIssuer: text("auth_issuer").notNull(),
    authSubject: text("auth_subject").notNull(),
    passwordHash: text("password_hash"),
    disabledAt: text("disabled_at"),
    createdAt: text("created_at").notNull(),
    updatedAt: text("updated_at").notNull(),
  },
  (t) => [uniqueIndex("users_identity").on(t.authIssuer, t.authSubject), index("users_email").on(t.email)],
);
