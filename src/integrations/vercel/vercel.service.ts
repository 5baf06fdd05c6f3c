import type { AuditWriter } from "../../audit/audit.writer.ts";
import type { AccessGuard, Environment, ProjectAccess } from "../../core/access.ts";
import type { Caller } from "../../core/caller.ts";
import type { Clock } from "../../core/clock.ts";
import { shuttingDown } from "../../core/connections.ts";
import { HttpError } from "../../core/errors.ts";
import { type Store, writeTransaction } from "../../core/store.ts";
import { DecryptError, integrationAad, type Vault } from "../../core/vault.ts";
import type { UsersService } from "../../users/users.service.ts";
import { deployHookProblem, deployHookProjectId, type NamedItem, SHUTDOWN, type VercelClient, VercelError } from "./vercel.client.ts";
import { type Deployment, isStoppedForChange, openToken, SYNC_ERRORS, type SyncSummary } from "./vercel.executor.ts";
import type { PauseReason } from "./vercel.pause.ts";
import { parseMappings } from "./vercel.plan.ts";
import type { IntegrationRow, VercelRepo } from "./vercel.repo.ts";
import type { VercelSync } from "./vercel.sync.ts";

export const TARGETS = ["development", "preview", "production"] as const;
export type Target = (typeof TARGETS)[number];

export const MESSAGES = {
  enterToken: "Enter a Vercel access token.",
  teamShape: "Team ID should look like team_xxxxxxxx.",
  tokenRejected: "Vercel did not accept this access token. Check it and try again.",
  teamNotFound: "This access token cannot reach that Vercel team. Check the team ID.",
  unreachable: "Vercel could not be reached. Try again in a few minutes.",
  notConnected: "Connect Vercel first.",
  savedTokenRejected: "Vercel rejected the saved access token. Reconnect Vercel with a new token.",
  linkFirst: "Link a Vercel project first.",
  reconnect: "Reconnect Vercel before syncing.",
  busy: "A sync is already running. It will pick up your changes.",
  projectNotFound: "That Vercel project was not found for this token and team.",
  chooseProject: "Choose a Vercel project (hostProjectId).",
  mappingsRequired: "Map at least one environment to a Vercel target (development, preview or production).",
  mappingTarget: "Vercel targets are development, preview and production.",
  mappingTwice: "Two environments cannot sync to the same Vercel target.",
  conflictPolicy: "conflictPolicy must be skip or overwrite.",
  autoRedeploy: "autoRedeploy must be true or false.",
  autoRedeployNeedsHook: "Automatic redeploy needs a deploy hook URL.",
  hookOtherProject: "This deploy hook belongs to another Vercel project.",
  redeployNeedsHook: "Add a deploy hook URL before asking for a redeploy.",
  syncBody: "Send no body, or { redeploy: true | false }.",
  paused: SYNC_ERRORS.paused,
  badBody: "Send a JSON object with the documented fields only.",
} as const;

export interface RunView {
  status: "running" | SyncSummary["status"];
  trigger: SyncSummary["trigger"];
  startedAt: string;
  [field: string]: unknown;
}

export type ConnectionView =
  | { connected: false }
  | {
      connected: true;
      status: IntegrationRow["status"];
      hostProjectId: string | null;
      hostProjectName: string | null;
      teamId: string | null;
      mappings: Record<string, string>;
      autoRedeploy: boolean;
      hookConfigured: boolean;
      conflictPolicy: IntegrationRow["conflictPolicy"];
      lastSyncAt: string | null;
      lastSyncStatus: string | null;
      lastError: string | null;
      syncing: boolean;
      pending: number;
      environments: Environment[];
      lastRun: RunView | null;
      lastDeployment: Deployment | null;
      /** Who saved the token; null for connections made before this was recorded. */
      connectedBy: { userId: string; email: string | null } | null;
      /** True while no sync runs because connectedBy lost integrations:manage. */
      paused: boolean;
      pausedAt: string | null;
      pausedReason: PauseReason | null;
    };

export interface LinkInput {
  hostProjectId: string;
  teamId?: string;
  mappings: Record<string, Target>;
  conflictPolicy: "skip" | "overwrite";
  autoRedeploy: boolean;
  /** undefined keeps the stored hook, null removes it. */
  deployHookUrl?: string | null;
}

interface Deps {
  db: Store;
  repo: VercelRepo;
  /** The e-mail of whoever connected, for the connection view. */
  users: Pick<UsersService, "findById">;
  access: AccessGuard;
  audit: AuditWriter;
  vault: Vault;
  clock: Clock;
  client: VercelClient;
  sync: VercelSync;
  vercelApiUrl: string;
}

export type VercelService = ReturnType<typeof createVercelService>;

export function createVercelService({ db, repo, users, access, audit, vault, clock, client, sync, vercelApiUrl }: Deps) {
  function parseJson<T>(text: string | null): T | null {
    if (!text) return null;
    try {
      return JSON.parse(text) as T;
    } catch {
      return null;
    }
  }

  /** After a reconnect or a relink: changes counted while the connection could not sync get their run. */
  function sendWaiting(projectId: string, view: ConnectionView): void {
    if (view.connected && view.status === "active" && view.pending > 0) sync.schedule(projectId);
  }

  async function toView(row: IntegrationRow | undefined, projectAccess: ProjectAccess): Promise<ConnectionView> {
    if (!row) return { connected: false };
    return {
      connected: true,
      status: row.status,
      hostProjectId: row.hostProjectId,
      hostProjectName: row.hostProjectName,
      teamId: row.teamId,
      mappings: parseMappings(row),
      autoRedeploy: row.autoRedeploy,
      hookConfigured: row.hookCiphertext !== null,
      conflictPolicy: row.conflictPolicy,
      lastSyncAt: row.lastSyncAt,
      lastSyncStatus: row.lastSyncStatus,
      lastError: row.lastError,
      syncing: row.syncStartedAt !== null,
      pending: row.pending,
      environments: projectAccess.projectEnvironments,
      lastRun: parseJson<RunView>(row.lastRun),
      lastDeployment: parseJson<Deployment>(row.lastDeployment),
      connectedBy:
        row.connectedBy === null ? null : { userId: row.connectedBy, email: (await users.findById(row.connectedBy))?.email ?? null },
      paused: row.pausedAt !== null,
      pausedAt: row.pausedAt,
      pausedReason: row.pausedReason as PauseReason | null,
    };
  }

  /** The saved token, or the connection moves to attention when it cannot be opened. */
  async function savedToken(row: IntegrationRow): Promise<string> {
    try {
      return await openToken(vault, row);
    } catch (error) {
      if (!(error instanceof DecryptError)) throw error;
      await markAttention(row, SYNC_ERRORS["token-unreadable"]);
      throw new HttpError(400, SYNC_ERRORS["token-unreadable"]);
    }
  }

  /** Only while `used` (the row whose token failed) still holds the saved token: a reconnect since replaced it. */
  async function markAttention(used: IntegrationRow, message: string): Promise<void> {
    await writeTransaction(db, async () => {
      const current = await repo.find(used.projectId);
      if (!current?.tokenCiphertext.equals(used.tokenCiphertext)) return;
      await repo.update(used.projectId, { status: "attention", lastError: message, updatedAt: clock.now().toISOString() });
    });
  }

  /** Vercel not reached: 502, unless the server is stopping and cut the call (503, as every request then). */
  function unreachable(error: VercelError): HttpError {
    return error.code === SHUTDOWN ? shuttingDown() : new HttpError(502, MESSAGES.unreachable);
  }

  /** Turns a failed call with the saved token into the answer; a rejection means attention. */
  async function savedTokenFailure(used: IntegrationRow, error: unknown): Promise<never> {
    if (error instanceof VercelError) {
      if (error.failure === "rejected") {
        await markAttention(used, SYNC_ERRORS.rejected);
        throw new HttpError(400, MESSAGES.savedTokenRejected);
      }
      if (error.failure === "scope") throw new HttpError(400, MESSAGES.teamNotFound);
      throw unreachable(error);
    }
    throw error;
  }

  async function requireConnection(projectId: string): Promise<IntegrationRow> {
    const row = await repo.find(projectId);
    if (!row) throw new HttpError(400, MESSAGES.notConnected);
    return row;
  }

  /** The saved token is a former manager's: it is not used for anything until an admin reconnects. */
  function requireNotPaused(row: IntegrationRow): void {
    if (row.pausedAt !== null) throw new HttpError(400, MESSAGES.paused);
  }

  return {
    async get(caller: Caller, projectId: string): Promise<ConnectionView> {
      const projectAccess = await access.require(caller, projectId, "integrations:manage");
      return toView(await repo.find(projectId), projectAccess);
    },

    /** Checks the token (and team) with Vercel before anything is saved. */
    async connect(caller: Caller, projectId: string, input: { token: string; teamId?: string }): Promise<ConnectionView> {
      await access.require(caller, projectId, "integrations:manage");
      const teamId = input.teamId ?? null;
      try {
        await client.getUser(input.token);
        if (teamId !== null && !(await client.listTeams(input.token)).some((t) => t.id === teamId)) {
          throw new HttpError(400, MESSAGES.teamNotFound);
        }
      } catch (error) {
        if (!(error instanceof VercelError)) throw error;
        // Fixed sentences: Vercel's own text is never passed on, and the token never is.
        if (error.failure === "rejected" || error.failure === "invalid" || error.failure === "not_found") {
          throw new HttpError(400, MESSAGES.tokenRejected);
        }
        if (error.failure === "scope") throw new HttpError(400, MESSAGES.teamNotFound);
        throw unreachable(error);
      }

      // Reconnecting keeps the link only if the new token still reaches the linked project.
      const before = await repo.find(projectId);
      let keepLink = false;
      if (before?.hostProjectId) {
        try {
          keepLink = (await client.findProject(input.token, teamId, before.hostProjectId)) !== undefined;
        } catch (error) {
          if (!(error instanceof VercelError)) throw error;
          if (error.failure === "rejected") throw new HttpError(400, MESSAGES.tokenRejected);
          if (error.failure !== "scope") throw unreachable(error);
        }
      }

      const view = await writeTransaction(db, async () => {
        const projectAccess = await access.require(caller, projectId, "integrations:manage");
        const sealed = await vault.seal(projectId, integrationAad(projectId, "token"), input.token);
        const now = clock.now().toISOString();
        const existing = await repo.find(projectId);
        if (!existing) {
          await repo.insert({
            projectId,
            provider: "vercel",
            status: "connected",
            tokenCiphertext: sealed.ciphertext,
            tokenKeyVersion: sealed.keyVersion,
            teamId,
            connectedBy: caller.userId,
            createdAt: now,
            updatedAt: now,
          });
        } else {
          const linked = keepLink && existing.hostProjectId === before?.hostProjectId;
          // The vars recorded as ours (and claims) are the old link's: none of them is ours in
          // the project linked next, even where a key and value match.
          if (!linked) await repo.forgetVars(projectId);
          await repo.update(projectId, {
            status: linked ? "active" : "connected",
            tokenCiphertext: sealed.ciphertext,
            tokenKeyVersion: sealed.keyVersion,
            teamId,
            lastError: null,
            // A token saved by someone who holds integrations:manage now: a pause ends here.
            connectedBy: caller.userId,
            pausedAt: null,
            pausedReason: null,
            ...(linked
              ? {}
              : {
                  hostProjectId: null,
                  hostProjectName: null,
                  mappings: "{}",
                  autoRedeploy: false,
                  hookCiphertext: null,
                  hookKeyVersion: null,
                }),
            updatedAt: now,
          });
        }
        await audit.record(caller, {
          projectId,
          action: "integration.connected",
          targetType: "integration",
          targetId: projectId,
          metadata: { provider: "vercel", teamId, ...(existing?.pausedAt ? { resumed: true } : {}) },
        });
        return toView(await repo.find(projectId), projectAccess);
      });
      // Changes that waited while the connection needed attention go out now.
      sendWaiting(projectId, view);
      return view;
    },

    async options(caller: Caller, projectId: string, query: { teamId?: string }): Promise<{ teams: NamedItem[]; projects: NamedItem[] }> {
      await access.require(caller, projectId, "integrations:manage");
      const row = await requireConnection(projectId);
      requireNotPaused(row);
      const token = await savedToken(row);
      try {
        const teams = await client.listTeams(token);
        const projects = await client.listProjects(token, query.teamId ?? row.teamId);
        return {
          teams: teams.map(({ id, name }) => ({ id, name })),
          projects: projects.map(({ id, name }) => ({ id, name })),
        };
      } catch (error) {
        return await savedTokenFailure(row, error);
      }
    },

    async link(caller: Caller, projectId: string, input: LinkInput): Promise<ConnectionView> {
      const projectAccess = await access.require(caller, projectId, "integrations:manage");
      for (const environment of Object.keys(input.mappings)) {
        if (!(projectAccess.projectEnvironments as string[]).includes(environment)) {
          throw new HttpError(400, `Mappings may only name this project's environments: ${projectAccess.projectEnvironments.join(", ")}.`);
        }
      }
      if (input.deployHookUrl && deployHookProblem(input.deployHookUrl, vercelApiUrl)) {
        throw new HttpError(400, `The deploy hook URL must look like ${vercelApiUrl}/v1/integrations/deploy/prj_…/…`);
      }
      const row = await requireConnection(projectId);
      requireNotPaused(row);
      if (row.status === "attention") throw new HttpError(400, MESSAGES.savedTokenRejected);
      const keepsHook = input.deployHookUrl === undefined && row.hookCiphertext !== null;
      if (input.autoRedeploy && !input.deployHookUrl && !keepsHook) throw new HttpError(400, MESSAGES.autoRedeployNeedsHook);

      const teamId = input.teamId ?? row.teamId;
      const token = await savedToken(row);
      let project: NamedItem | undefined;
      try {
        project = await client.findProject(token, teamId, input.hostProjectId);
      } catch (error) {
        await savedTokenFailure(row, error);
      }
      if (!project) throw new HttpError(400, MESSAGES.projectNotFound);
      if (input.deployHookUrl && deployHookProjectId(input.deployHookUrl, vercelApiUrl) !== project.id) {
        throw new HttpError(400, MESSAGES.hookOtherProject);
      }
      const hostProject = project;

      const view = await writeTransaction(db, async () => {
        const current = await access.require(caller, projectId, "integrations:manage");
        const existing = await requireConnection(projectId);
        requireNotPaused(existing);
        let hook: Partial<IntegrationRow> = {};
        if (input.deployHookUrl === null) hook = { hookCiphertext: null, hookKeyVersion: null };
        else if (input.deployHookUrl !== undefined) {
          const sealed = await vault.seal(projectId, integrationAad(projectId, "deploy-hook"), new URL(input.deployHookUrl).href);
          hook = { hookCiphertext: sealed.ciphertext, hookKeyVersion: sealed.keyVersion };
        } else if (existing.hostProjectId !== hostProject.id) {
          // A kept hook belongs to the previously linked project: drop it with the old link.
          hook = { hookCiphertext: null, hookKeyVersion: null };
        }
        const hookConfigured = hook.hookCiphertext !== undefined ? hook.hookCiphertext !== null : existing.hookCiphertext !== null;
        if (input.autoRedeploy && !hookConfigured) throw new HttpError(400, MESSAGES.autoRedeployNeedsHook);
        // The vars recorded as ours (and claims) are the old project's, never the new one's.
        if (existing.hostProjectId !== hostProject.id) await repo.forgetVars(projectId);
        await repo.update(projectId, {
          status: existing.status === "attention" ? "attention" : "active",
          teamId,
          hostProjectId: hostProject.id,
          hostProjectName: hostProject.name,
          mappings: JSON.stringify(input.mappings),
          conflictPolicy: input.conflictPolicy,
          autoRedeploy: input.autoRedeploy,
          ...hook,
          updatedAt: clock.now().toISOString(),
        });
        await audit.record(caller, {
          projectId,
          action: "integration.updated",
          targetType: "integration",
          targetId: projectId,
          metadata: {
            hostProjectId: hostProject.id,
            hostProjectName: hostProject.name,
            teamId,
            mappings: input.mappings,
            conflictPolicy: input.conflictPolicy,
            autoRedeploy: input.autoRedeploy,
            hookConfigured,
          },
        });
        return toView(await repo.find(projectId), current);
      });
      // Relinked (after the old project was not found, say): what waited goes out now.
      sendWaiting(projectId, view);
      return view;
    },

    async sync(caller: Caller, projectId: string, input: { redeploy: boolean }): Promise<{ summary: SyncSummary }> {
      await access.require(caller, projectId, "integrations:manage");
      const row = await repo.find(projectId);
      if (!row?.hostProjectId) throw new HttpError(400, MESSAGES.linkFirst);
      requireNotPaused(row);
      if (row.status === "attention") throw new HttpError(400, MESSAGES.reconnect);
      if (input.redeploy && row.hookCiphertext === null) throw new HttpError(400, MESSAGES.redeployNeedsHook);
      const outcome = await sync.run(projectId, { trigger: "manual", caller, redeploy: input.redeploy });
      switch (outcome.kind) {
        case "done":
          return { summary: outcome.summary };
        case "busy":
          throw new HttpError(409, MESSAGES.busy);
        case "not-linked":
          throw new HttpError(400, MESSAGES.linkFirst);
        case "attention":
          throw new HttpError(400, MESSAGES.reconnect);
        case "paused":
          throw new HttpError(400, MESSAGES.paused);
        case "failed":
          // Disconnected during the run: no sync follows, there is nothing linked to sync to.
          if (outcome.failure === "lease-lost" && !(await repo.find(projectId))?.hostProjectId)
            throw new HttpError(400, MESSAGES.linkFirst);
          // Another server process took the run over after this one stopped renewing its lease,
          // or the link or the token changed under it: either way a run that follows picks the changes up.
          if (outcome.failure === "lease-lost" || isStoppedForChange(outcome.failure)) throw new HttpError(409, MESSAGES.busy);
          if (outcome.failure === "interrupted") throw new HttpError(503, SYNC_ERRORS.interrupted);
          if (outcome.failure === "unavailable" || outcome.failure === "refused") throw new HttpError(502, SYNC_ERRORS[outcome.failure]);
          if (outcome.failure === "unexpected") throw new HttpError(500, SYNC_ERRORS.unexpected);
          throw new HttpError(400, SYNC_ERRORS[outcome.failure]);
      }
    },

    /** Removes the connection, its token and hook; vars already at Vercel stay. */
    async disconnect(caller: Caller, projectId: string): Promise<void> {
      await writeTransaction(db, async () => {
        await access.require(caller, projectId, "integrations:manage");
        if (!(await repo.delete(projectId))) return;
        await audit.record(caller, {
          projectId,
          action: "integration.disconnected",
          targetType: "integration",
          targetId: projectId,
          metadata: { provider: "vercel" },
        });
      });
      sync.cancel(projectId);
    },
  };
}
