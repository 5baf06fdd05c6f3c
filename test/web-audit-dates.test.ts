// The audit page's From/To days as the API's bounds (web/src/audit-dates.ts), in time zones
// on both sides of UTC: the API reads years 0000 to 9999 only.
import assert from "node:assert/strict";
import { test } from "node:test";
import { localDayBound } from "../web/src/audit-dates.ts";

function inZone<T>(zone: string, fn: () => T): T {
  const before = process.env.TZ;
  process.env.TZ = zone;
  try {
    return fn();
  } finally {
    if (before === undefined) delete process.env.TZ;
    else process.env.TZ = before;
  }
}

test("a picked day is that day in the browser's zone, kept within the years the API reads", () => {
  assert.equal(
    inZone("Asia/Tokyo", () => localDayBound("2026-01-05", false)),
    "2026-01-04T15:00:00.000Z",
  );
  assert.equal(
    inZone("America/Los_Angeles", () => localDayBound("2026-01-05", true)),
    "2026-01-06T07:59:59.999Z",
  );
  // West of UTC the last day ends in year 10000; east of it the first starts in year -1.
  assert.equal(
    inZone("America/Los_Angeles", () => localDayBound("9999-12-31", true)),
    "9999-12-31T23:59:59.999Z",
  );
  assert.equal(
    inZone("Asia/Tokyo", () => localDayBound("0000-01-01", false)),
    "0000-01-01T00:00:00.000Z",
  );
  // Years 0 to 99 stay themselves (a guard: setFullYear already kept them).
  assert.equal(
    inZone("UTC", () => localDayBound("0050-03-01", false)),
    "0050-03-01T00:00:00.000Z",
  );
});
