import type { AuditWriter } from "../../audit/audit.writer.ts";
import type { AccessGuard } from "../../core/access.ts";
import type { Caller } from "../../core/caller.ts";
import type { Clock } from "../../core/clock.ts";
import type { VercelRepo } from "./vercel.repo.ts";

/** Stored in paused_reason and returned as pausedReason: how the person who connected Vercel lost the right. */
export const PAUSE_REASONS = {
  role_changed: "connector_role_changed",
  removed: "connector_removed",
  left: "connector_left",
  disabled: "connector_disabled",
} as const;

export type PauseReason = (typeof PAUSE_REASONS)[keyof typeof PAUSE_REASONS];

interface Deps {
  repo: VercelRepo;
  access: AccessGuard;
  audit: AuditWriter;
  clock: Clock;
}

export type VercelPause = ReturnType<typeof createVercelPause>;

/**
 * A Vercel connection syncs with the token of the person who saved it, on their authority.
 * When that person loses integrations:manage (or leaves, or is disabled), syncing pauses
 * until someone who holds the right now saves a token of their own. Kept apart from the
 * service so the users command can run it without a Vercel client.
 */
export function createVercelPause({ repo, access, audit, clock }: Deps) {
  return {
    /** A members rights-lost listener; runs inside the transaction that changed the membership. */
    async pauseForLostRights(lost: {
      projectId: string;
      userId: string;
      cause: keyof typeof PAUSE_REASONS;
      actor: Caller | null;
    }): Promise<void> {
      const row = await repo.find(lost.projectId);
      // Connections from before connected_by was recorded have no one to check: they keep running.
      if (!row || row.connectedBy !== lost.userId || row.pausedAt !== null) return;
      if (await access.holds(lost.userId, lost.projectId, "integrations:manage")) return;
      const now = clock.now().toISOString();
      await repo.update(lost.projectId, { pausedAt: now, pausedReason: PAUSE_REASONS[lost.cause], updatedAt: now });
      await audit.record(lost.actor, {
        projectId: lost.projectId,
        action: "integration.paused",
        targetType: "integration",
        targetId: lost.projectId,
        metadata: { provider: row.provider, reason: "connector_lost_access", connectedBy: lost.userId, cause: lost.cause },
      });
    },
  };
}
