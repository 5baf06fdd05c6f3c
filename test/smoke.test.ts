import assert from "node:assert/strict";
import { test } from "node:test";
import { startServer } from "./helpers.ts";

test("health answers once the database is open and migrated", async (t) => {
  const server = await startServer(t);
  const res = await server.client().json("GET", "/healthz");
  assert.equal(res.status, 200);
  assert.deepEqual(res.body, { ok: true });
});
