// The idle collection (src/core/idle-gc.ts): once after a burst of requests, only when idle
// and only when the process grew.
import assert from "node:assert/strict";
import { test } from "node:test";
import { createIdleGc } from "../src/core/idle-gc.ts";

test("idle gc: collects once after requests stop, only when the process grew", () => {
  let resident = 10;
  let calls = 0;
  const idle = createIdleGc(
    { debug() {} },
    {
      idleMs: 1000,
      minGrowthBytes: 5,
      gc: () => {
        calls++;
        resident = 10;
      },
      residentBytes: () => resident,
    },
  );
  assert.equal(idle.available, true);
  const now = Date.now();
  assert.equal(idle.collectIfIdle(now + 5000), false, "no requests yet");
  idle.noteRequest();
  resident = 30;
  assert.equal(idle.collectIfIdle(Date.now() + 10), false, "requests are recent");
  assert.equal(idle.collectIfIdle(Date.now() + 2000), true);
  assert.equal(calls, 1);
  assert.equal(idle.collectIfIdle(Date.now() + 4000), false, "once per burst");
  idle.noteRequest();
  resident = 12;
  assert.equal(idle.collectIfIdle(Date.now() + 2000), false, "the process did not grow enough");
  assert.equal(calls, 1);
  // RSS that fell on its own since (to 4) is the new baseline: growing to 9 counts.
  idle.noteRequest();
  resident = 4;
  assert.equal(idle.collectIfIdle(Date.now() + 2000), false);
  idle.noteRequest();
  resident = 9;
  assert.equal(idle.collectIfIdle(Date.now() + 2000), true, "grown by 5 from the lowest seen");
  assert.equal(calls, 2);
});

test("idle gc: does nothing from source without gc()", {
  skip: (globalThis as { gc?: unknown }).gc ? "node runs with --expose-gc" : false,
}, () => {
  const idle = createIdleGc({ debug() {} });
  assert.equal(idle.available, false);
  idle.noteRequest();
  assert.equal(idle.collectIfIdle(Date.now() + 60_000), false);
});
