// Rate-limit counters are kept across a restart of the server on the same DATA_DIR
// (export: 30 per minute per user).
import assert from "node:assert/strict";
import { test } from "node:test";
import { startServer } from "./helpers.ts";

test("a restart does not reset a rate limit: the 31st export of the minute is still 429 with the window's Retry-After", async (t) => {
  const server = await startServer(t);
  const owner = await server.signIn("olivia@example.test");
  const project = await owner.createProject({ name: "api", environments: ["development"] });
  const url = `/api/projects/${project.id}/environments/development/export`;
  for (let i = 0; i < 30; i++) assert.equal((await owner.get(url)).status, 200, `export ${i + 1}`);

  server.clock.advance(20_000);
  const restarted = await server.restart();
  t.after(() => restarted.stop());
  const refused = await owner.get(url);
  assert.equal(refused.status, 429);
  // The window opened 20 s (of the test clock) and the 30 exports' real time before the
  // restart: 40 s of it are left, less that real time.
  const retryAfter = Number(refused.headers.get("retry-after"));
  assert.ok(retryAfter > 30 && retryAfter <= 40, `Retry-After ${retryAfter}`);
  assert.deepEqual(await refused.json(), { error: `Too many requests. Try again in ${retryAfter} seconds.` });
  // Another caller has their own allowance.
  const other = await restarted.signIn("oscar@example.test");
  const own = await other.createProject({ name: "web", environments: ["development"] });
  assert.equal((await other.get(`/api/projects/${own.id}/environments/development/export`)).status, 200);

  // Once the window has passed, exports are allowed again, and a second restart keeps that.
  restarted.clock.advance(40_000);
  assert.equal((await owner.get(url)).status, 200);
  const again = await restarted.restart();
  t.after(() => again.stop());
  assert.equal((await owner.get(url)).status, 200);
});
