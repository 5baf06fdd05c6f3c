// Every audit action, its category and the only metadata keys it may carry. The
// allow-list is what keeps values, tokens and keys out of the log: record() refuses
// any other key.

export const AUDIT_CATEGORIES = ["secrets", "access", "project", "integrations"] as const;
export type AuditCategory = (typeof AUDIT_CATEGORIES)[number];

const SECRET_PLACE = ["key", "environment", "via"] as const;

export const AUDIT_ACTIONS = {
  "secret.created": { category: "secrets", metadata: [...SECRET_PLACE, "version"] },
  "secret.updated": {
    category: "secrets",
    metadata: [...SECRET_PLACE, "previousKey", "keyChanged", "valueChanged", "version"],
  },
  "secret.deleted": { category: "secrets", metadata: [...SECRET_PLACE, "version"] },
  "secret.rolled_back": { category: "secrets", metadata: [...SECRET_PLACE, "restoredFromVersion", "version"] },
  "secret.revealed": { category: "secrets", metadata: [...SECRET_PLACE, "version"] },
  "secret.version_revealed": { category: "secrets", metadata: [...SECRET_PLACE, "versionNumber"] },
  "secrets.exported": { category: "secrets", metadata: ["environment", "via", "count", "format"] },
  // A secret's current value written to the same key in another environment; the target's
  // own secret.created or secret.updated event is written with it.
  "secret.copied": { category: "secrets", metadata: [...SECRET_PLACE, "version", "toEnvironment", "toVersion", "result"] },
  // Keyed digests of values compared across environments: values were decrypted, none left.
  "secrets.compared": { category: "secrets", metadata: ["environments", "via", "count"] },
  "secrets.imported": {
    category: "secrets",
    metadata: ["environment", "via", "created", "updated", "unchanged", "skipped", "failed"],
  },
  "member.role_changed": { category: "access", metadata: ["email", "from", "to"] },
  "member.removed": { category: "access", metadata: ["email", "role"] },
  "member.left": { category: "access", metadata: ["email", "role"] },
  "invitation.created": { category: "access", metadata: ["email", "role", "environments"] },
  // reason "inviter_lost_access": voided because its inviter lost the right to invite (cause says how).
  "invitation.revoked": { category: "access", metadata: ["email", "role", "reason", "inviter", "cause"] },
  // A new link for a pending (or expired) invitation: the old token stops working, the expiry restarts.
  "invitation.link_renewed": { category: "access", metadata: ["email", "role", "expiresAt"] },
  "invitation.accepted": { category: "access", metadata: ["email", "role", "environments", "invitationId"] },
  "environment_access.granted": { category: "access", metadata: ["email", "environment"] },
  "environment_access.revoked": { category: "access", metadata: ["email", "environment"] },
  "service_account.created": { category: "access", metadata: ["name", "role", "environments"] },
  "service_account.updated": {
    category: "access",
    metadata: ["name", "previousName", "role", "previousRole", "environments", "previousEnvironments", "descriptionChanged"],
  },
  "service_account.deleted": { category: "access", metadata: ["name", "role"] },
  "service_token.created": { category: "access", metadata: ["serviceAccountName", "tokenId", "name", "expiresAt", "allowedCidrs"] },
  "service_token.revoked": { category: "access", metadata: ["serviceAccountName", "tokenId", "name", "reason", "createdBy", "cause"] },
  "service_account_trust.created": {
    category: "access",
    metadata: ["serviceAccountName", "trustId", "issuer", "audience", "subject", "claims"],
  },
  "service_account_trust.deleted": { category: "access", metadata: ["serviceAccountName", "trustId", "issuer", "subject"] },
  "service_account.token_exchanged": { category: "access", metadata: ["via", "trustId", "issuer", "subject", "expiresAt"] },
  "project.created": { category: "project", metadata: ["name", "environments"] },
  "project.updated": { category: "project", metadata: ["name", "previousName", "descriptionChanged"] },
  "project.deleted": { category: "project", metadata: ["name"] },
  // A download of the log itself: reading it in the UI is not audited, taking a copy away is.
  "audit.exported": { category: "project", metadata: ["format", "count", "truncated", "filters"] },
  "integration.connected": { category: "integrations", metadata: ["provider", "teamId", "resumed"] },
  "integration.updated": {
    category: "integrations",
    metadata: ["hostProjectId", "hostProjectName", "teamId", "mappings", "conflictPolicy", "autoRedeploy", "hookConfigured"],
  },
  "integration.disconnected": { category: "integrations", metadata: ["provider"] },
  // The person whose token it uses lost integrations:manage: no sync runs until an admin reconnects.
  "integration.paused": { category: "integrations", metadata: ["provider", "reason", "connectedBy", "cause"] },
  "integration.synced": {
    category: "integrations",
    metadata: ["trigger", "created", "updated", "unchanged", "skipped", "deleted", "failed"],
  },
  "integration.sync_failed": { category: "integrations", metadata: ["trigger", "error"] },
  "integration.redeployed": { category: "integrations", metadata: ["trigger", "jobId", "state"] },
} as const satisfies Record<string, { category: AuditCategory; metadata: readonly string[] }>;

export type AuditAction = keyof typeof AUDIT_ACTIONS;

export function isAuditAction(value: string): value is AuditAction {
  return Object.hasOwn(AUDIT_ACTIONS, value);
}
