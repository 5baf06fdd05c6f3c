import crypto from "node:crypto";
import type { AuditWriter } from "../audit/audit.writer.ts";
import {
  type AccessGuard,
  type Environment,
  memberAccess,
  type Permission,
  PROJECT_NOT_FOUND,
  type ProjectAccess,
  type Role,
} from "../core/access.ts";
import { type Caller, isServiceAccount, type Principal } from "../core/caller.ts";
import type { Clock } from "../core/clock.ts";
import { HttpError } from "../core/errors.ts";
import { readTransaction, type Store, writeTransaction } from "../core/store.ts";
import type { Vault } from "../core/vault.ts";
import type { ProjectRow, ProjectsRepo } from "./projects.repo.ts";

export interface ProjectView {
  id: string;
  role: Role;
  permissions: Permission[];
  name: string;
  description?: string;
  environments: Environment[];
  secretCounts: Record<string, number>;
  createdAt: string;
  updatedAt: string;
}

const NAME_TAKEN = "A project with this name already exists.";

/**
 * What projects need of the members feature: whose projects are whose, and the creator's
 * membership. The members repo, passed in by app.ts; members write audit events and need no
 * projects, so this is declared here rather than imported.
 */
export interface ProjectMemberships {
  listMembershipsOf(userId: string): Promise<{ projectId: string; role: Role; grants: Environment[] }[]>;
  listProjectIdsOf(userId: string): Promise<string[]>;
  insertMember(projectId: string, userId: string, role: Role, now: string): Promise<void>;
}

/**
 * What the project views need of the secrets feature: how many secrets each environment
 * holds. The secrets repo, passed in by app.ts, declared here for the same reason.
 */
export interface ProjectSecretCounts {
  countPerEnvironment(projectId: string, environments: Environment[]): Promise<Record<string, number>>;
  countPerEnvironmentOf(projectIds: string[]): Promise<Map<string, Record<string, number>>>;
}

interface Deps {
  db: Store;
  repo: ProjectsRepo;
  memberships: ProjectMemberships;
  secrets: ProjectSecretCounts;
  access: AccessGuard;
  audit: AuditWriter;
  vault: Vault;
  /** The secrets feature's memo of exported values (secrets/export-memo.ts), emptied of a deleted project. */
  exportMemo: { forget(projectId: string): void };
  clock: Clock;
}

export function createProjectsService({ db, repo, memberships, secrets, access, audit, vault, exportMemo, clock }: Deps) {
  /** Whether one of the user's projects (other than `exceptId`) has this name, ignoring case. */
  async function isNameTakenForUser(userId: string, name: string, exceptId?: string): Promise<boolean> {
    return repo.isNameTakenAmong(
      (await memberships.listProjectIdsOf(userId)).filter((id) => id !== exceptId),
      name,
    );
  }

  function toView(
    row: Pick<ProjectRow, "id" | "name" | "description" | "createdAt" | "updatedAt">,
    projectAccess: ProjectAccess,
    counts: Record<string, number>,
  ): ProjectView {
    return {
      id: row.id,
      role: projectAccess.role,
      permissions: projectAccess.permissions,
      name: row.name,
      ...(row.description ? { description: row.description } : {}),
      environments: projectAccess.environments,
      // Only the listed environments, each with a count (0 when it holds no secret).
      secretCounts: Object.fromEntries(projectAccess.environments.map((e) => [e, counts[e] ?? 0])),
      createdAt: row.createdAt,
      updatedAt: row.updatedAt,
    };
  }

  /** The check and the rows in one snapshot: a project deleted meanwhile is a 404, not a missing row. */
  function view(caller: Principal, projectId: string): Promise<ProjectView> {
    return readTransaction(db, async () => {
      const projectAccess = await access.require(caller, projectId, "project:read");
      const row = await repo.findById(projectId);
      if (!row) throw new HttpError(404, PROJECT_NOT_FOUND);
      return toView(row, projectAccess, await secrets.countPerEnvironment(row.id, projectAccess.environments));
    });
  }

  return {
    async list(caller: Principal): Promise<ProjectView[]> {
      // A service account belongs to exactly one project.
      if (isServiceAccount(caller)) {
        const row = await repo.findById(caller.projectId);
        const projectAccess = row && (await access.find(caller, row.id));
        return row && projectAccess
          ? [toView(row, projectAccess, await secrets.countPerEnvironment(row.id, projectAccess.environments))]
          : [];
      }
      // One snapshot, so every project's counts and grants are of the same moment as its row;
      // three statements for any number of projects.
      return readTransaction(db, async () => {
        const byProject = new Map((await memberships.listMembershipsOf(caller.userId)).map((m) => [m.projectId, m]));
        const ids = [...byProject.keys()];
        const counts = await secrets.countPerEnvironmentOf(ids);
        return (await repo.listByIds(ids)).map((row) => {
          const membership = byProject.get(row.id)!;
          return toView(row, memberAccess(row.id, membership.role, row.environments, membership.grants), counts.get(row.id) ?? {});
        });
      });
    },

    get: view,

    async create(caller: Caller, input: { name: string; description?: string; environments: Environment[] }): Promise<ProjectView> {
      const id = crypto.randomUUID();
      await writeTransaction(db, async () => {
        if (await isNameTakenForUser(caller.userId, input.name)) throw new HttpError(409, NAME_TAKEN);
        const now = clock.now().toISOString();
        await repo.insert(
          { id, name: input.name, description: input.description || null, createdBy: caller.userId, createdAt: now, updatedAt: now },
          input.environments,
        );
        await memberships.insertMember(id, caller.userId, "owner", now);
        await vault.createProjectKey(id);
        await audit.record(caller, {
          projectId: id,
          action: "project.created",
          targetType: "project",
          targetId: id,
          metadata: { name: input.name, environments: input.environments },
        });
      });
      return view(caller, id);
    },

    async update(caller: Caller, projectId: string, input: { name?: string; description?: string | null }): Promise<ProjectView> {
      await writeTransaction(db, async () => {
        await access.require(caller, projectId, "project:update");
        const row = (await repo.findById(projectId))!;
        const name = input.name ?? row.name;
        const description = input.description === undefined ? row.description : input.description || null;
        const nameChanged = name !== row.name;
        const descriptionChanged = description !== row.description;
        if (!nameChanged && !descriptionChanged) return;
        if (nameChanged && (await isNameTakenForUser(caller.userId, name, projectId))) throw new HttpError(409, NAME_TAKEN);
        await repo.update(projectId, { name, description, updatedAt: clock.now().toISOString() });
        await audit.record(caller, {
          projectId,
          action: "project.updated",
          targetType: "project",
          targetId: projectId,
          metadata: { name, previousName: nameChanged ? row.name : undefined, descriptionChanged },
        });
      });
      return view(caller, projectId);
    },

    async delete(caller: Caller, projectId: string): Promise<void> {
      await writeTransaction(db, async () => {
        await access.require(caller, projectId, "project:delete");
        const row = (await repo.findById(projectId))!;
        await repo.delete(projectId);
        await audit.record(caller, {
          projectId,
          action: "project.deleted",
          targetType: "project",
          targetId: projectId,
          metadata: { name: row.name },
        });
      });
      vault.forget(projectId);
      exportMemo.forget(projectId);
    },
  };
}

export type ProjectsService = ReturnType<typeof createProjectsService>;
