// Shared by the secrets test files: a project with one user of each role, all joined through
// the real invitation round trip, and CLI tokens through the real device flow.
import assert from "node:assert/strict";
import { type Client, cliLogin, startServer, type TestServer } from "./helpers.ts";

export const ISO_MS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
export const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

export interface Team {
  server: TestServer;
  projectId: string;
  owner: Client;
  admin: Client;
  /** Member granted development only. */
  member: Client;
  /** Viewer granted development only. */
  viewer: Client;
  outsider: Client;
}

/** Creates an invitation; returns it with the token from its devAcceptUrl fragment. */
export async function createInvitation(by: Client, projectId: string, email: string, role: string, environments?: string[]) {
  const res = await by.json("POST", `/api/projects/${projectId}/invitations`, { email, role, ...(environments ? { environments } : {}) });
  assert.equal(res.status, 201, JSON.stringify(res.body));
  return { invitation: res.body.invitation, token: new URL(res.body.devAcceptUrl as string).hash.slice(1) };
}

/** Creates an invitation and returns the token from its devAcceptUrl fragment. */
export async function invite(by: Client, projectId: string, email: string, role: string, environments?: string[]): Promise<string> {
  return (await createInvitation(by, projectId, email, role, environments)).token;
}

/** Creates an invitation and accepts it as `invitee` (signed in with the invited address); returns the invitation. */
export async function addMember(owner: Client, invitee: Client, projectId: string, role: string, environments?: string[]): Promise<any> {
  const { invitation, token } = await createInvitation(owner, projectId, invitee.user!.email, role, environments);
  const accepted = await invitee.json("POST", "/api/invitations/accept", { token });
  assert.equal(accepted.status, 200, JSON.stringify(accepted.body));
  return invitation;
}

/** Signs `email` in and brings them into the project through the invitation round trip. */
export async function joinProject(
  server: TestServer,
  owner: Client,
  projectId: string,
  email: string,
  role: string,
  grants?: string[],
): Promise<Client> {
  const client = await server.signIn(email);
  const token = await invite(owner, projectId, email, role, grants);
  const res = await client.json("POST", "/api/invitations/accept", { token });
  assert.equal(res.status, 200, JSON.stringify(res.body));
  return client;
}

/** A project with development, staging and production (unless told otherwise) and one user per role. */
export async function startTeam(
  t: Parameters<typeof startServer>[0],
  options: { environments?: string[]; env?: Record<string, string | undefined> } = {},
): Promise<Team> {
  const server = await startServer(t, { env: options.env });
  const owner = await server.signIn("olivia@example.test", "Olivia Owner");
  const project = await owner.createProject({
    name: "api",
    environments: options.environments ?? ["development", "staging", "production"],
  });
  const join = (email: string, role: string, grants?: string[]) => joinProject(server, owner, project.id, email, role, grants);
  return {
    server,
    projectId: project.id,
    owner,
    admin: await join("adam@example.test", "admin"),
    member: await join("mia@example.test", "member", ["development"]),
    viewer: await join("vic@example.test", "viewer", ["development"]),
    outsider: await server.signIn("otto@example.test"),
  };
}

/** The client's user, signed in through the CLI's device flow. */
export async function cliFor(server: TestServer, client: Client): Promise<Client> {
  return client.withBearer((await cliLogin(server, client)).accessToken);
}

export function envPath(projectId: string, env: string): string {
  return `/api/projects/${projectId}/environments/${env}`;
}

export async function createSecret(client: Client, projectId: string, env: string, key: string, value: string): Promise<any> {
  const res = await client.json("POST", `${envPath(projectId, env)}/secrets`, { key, value });
  assert.equal(res.status, 201, JSON.stringify(res.body));
  return res.body.secret;
}

/**
 * How many secrets and stored versions the project holds, as an owner or admin (`reader`, a
 * browser session: version histories are browser only) sees them: every environment's list
 * and every secret's history. Neither listing is audited, so reading does not change the log.
 */
export async function secretCounts(reader: Client, projectId: string): Promise<{ secrets: number; versions: number }> {
  let secrets = 0;
  let versions = 0;
  for (const [env, list] of await secretLists(reader, projectId)) {
    for (const secret of list) {
      secrets++;
      versions += await versionCount(reader, projectId, env, secret.id);
    }
  }
  return { secrets, versions };
}

/** How many secrets the project holds in all its environments, as `reader` lists them. */
export async function secretCount(reader: Client, projectId: string): Promise<number> {
  return [...(await secretLists(reader, projectId)).values()].reduce((sum, list) => sum + list.length, 0);
}

async function secretLists(reader: Client, projectId: string): Promise<Map<string, { id: string; version: number }[]>> {
  const project = await reader.json("GET", `/api/projects/${projectId}`);
  assert.equal(project.status, 200, JSON.stringify(project.body));
  const lists = new Map<string, { id: string; version: number }[]>();
  for (const env of project.body.project.environments as string[]) {
    const list = await reader.json("GET", `${envPath(projectId, env)}/secrets`);
    assert.equal(list.status, 200, JSON.stringify(list.body));
    lists.set(env, list.body.secrets);
  }
  return lists;
}

/** How many versions a secret's history lists. */
export async function versionCount(reader: Client, projectId: string, env: string, secretId: string): Promise<number> {
  const history = await reader.json("GET", `${envPath(projectId, env)}/secrets/${secretId}/versions`);
  assert.equal(history.status, 200, JSON.stringify(history.body));
  return history.body.versions.length;
}
