// The event the members feature raises and others (invitations, Vercel, service accounts)
// listen to; declared here so the listeners need not import the members feature.
import type { Caller } from "./caller.ts";

/** How a person's rights in a project just shrank or ended. */
export type LostRightsCause = "role_changed" | "removed" | "left" | "disabled";

export interface LostRights {
  projectId: string;
  userId: string;
  cause: LostRightsCause;
  /** Who caused it (the admin who changed the role, the person leaving); null for the operator's users command. */
  actor: Caller | null;
}

/**
 * Runs inside the transaction that changed the membership, after the change: what the person
 * created on their authority (invitations, a Vercel connection) is checked against their
 * rights as they are now, and voided or paused in the same commit.
 */
export type LostRightsListener = (lost: LostRights) => void | Promise<void>;
