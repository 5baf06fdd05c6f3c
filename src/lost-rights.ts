import type { AuditWriter } from "./audit/audit.writer.ts";
import type { AccessGuard } from "./core/access.ts";
import type { Clock } from "./core/clock.ts";
import type { Config } from "./core/config.ts";
import type { Store } from "./core/store.ts";
import { createVercelPause, type VercelPause } from "./integrations/vercel/vercel.pause.ts";
import { createVercelRepo } from "./integrations/vercel/vercel.repo.ts";
import { createInvitationsRepo } from "./invitations/invitations.repo.ts";
import { createInvitationsService, describeInvitation, type InvitationsService } from "./invitations/invitations.service.ts";
import type { MembersRepo } from "./members/members.repo.ts";
import { createMembersService, type MembersService } from "./members/members.service.ts";
import { createProjectsRepo } from "./projects/projects.repo.ts";
import { createServiceAccountsRepo } from "./service-accounts/service-accounts.repo.ts";
import { createServiceAccountsService, type ServiceAccountsService } from "./service-accounts/service-accounts.service.ts";
import { createUsersRepo } from "./users/users.repo.ts";

/**
 * What a person created on their own authority and must not outlive it: when their rights in
 * a project shrink or end (role change, removal, leaving, a disabled account), their pending
 * invitations that no longer stand are voided, a Vercel connection syncing with their token
 * is paused, and the service tokens they created (and saw, once) are revoked when they no
 * longer manage service accounts. The one list of listeners, for the server (app.ts) and the
 * users command alike.
 */
export function wireLostRights(
  members: MembersService,
  handlers: {
    invitations: Pick<InvitationsService, "voidForLostRights">;
    vercel: VercelPause;
    serviceTokens: Pick<ServiceAccountsService, "revokeForLostRights">;
  },
): void {
  members.onRightsLost((lost) => handlers.invitations.voidForLostRights(lost));
  members.onRightsLost((lost) => handlers.vercel.pauseForLostRights(lost));
  members.onRightsLost((lost) => handlers.serviceTokens.revokeForLostRights(lost));
}

/** For the users command, which runs without the server: the members service with the listeners above. */
export function createMembersForCommand(deps: {
  db: Store;
  repo: MembersRepo;
  access: AccessGuard;
  audit: AuditWriter;
  clock: Clock;
  config: Config;
}): MembersService {
  const members = createMembersService(deps);
  wireLostRights(members, {
    invitations: createInvitationsService({
      ...deps,
      repo: createInvitationsRepo(deps.db),
      memberships: deps.repo,
      context: describeInvitation(createProjectsRepo(deps.db), createUsersRepo(deps.db)),
    }),
    vercel: createVercelPause({ repo: createVercelRepo(deps.db), access: deps.access, audit: deps.audit, clock: deps.clock }),
    serviceTokens: createServiceAccountsService({
      db: deps.db,
      repo: createServiceAccountsRepo(deps.db),
      projects: createProjectsRepo(deps.db),
      access: deps.access,
      audit: deps.audit,
      clock: deps.clock,
    }),
  });
  return members;
}
