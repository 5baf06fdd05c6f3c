// Shared by the secrets test files: a project with one user of each role, all joined through
// the real invitation round trip, and CLI tokens through the real device flow.
import assert from "node:assert/strict";
import path from "node:path";
import Database from "better-sqlite3";
import { DATABASE_FILE } from "../src/core/db.ts";
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

export function count(server: TestServer, sql: string, ...params: unknown[]): number {
  return server.app.db.$client
    .prepare(sql)
    .pluck()
    .get(...params) as number;
}

/** A second connection to the database file, as an attacker or an operator with file access would have. */
export function openFile(server: TestServer): Database.Database {
  return new Database(path.join(server.dataDir, DATABASE_FILE));
}
