// Service accounts and their tokens, made through the API as an owner or admin would.
import assert from "node:assert/strict";
import type { Client } from "./helpers.ts";

export function serviceAccountsPath(projectId: string): string {
  return `/api/projects/${projectId}/service-accounts`;
}

/** Creates a service account (201 asserted) and returns it as the API shows it. */
export async function createServiceAccount(by: Client, projectId: string, input: Record<string, unknown>): Promise<any> {
  const res = await by.json("POST", serviceAccountsPath(projectId), input);
  assert.equal(res.status, 201, JSON.stringify(res.body));
  return res.body.serviceAccount;
}

/** Issues a service token (201 asserted): the token, shown this once, and its description. */
export async function createServiceToken(
  by: Client,
  projectId: string,
  accountId: string,
  input: Record<string, unknown> = { name: "ci" },
) {
  const res = await by.json("POST", `${serviceAccountsPath(projectId)}/${accountId}/tokens`, input);
  assert.equal(res.status, 201, JSON.stringify(res.body));
  return res.body as { token: string; tokenInfo: any };
}
