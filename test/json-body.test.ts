// Response bodies written in slices (src/core/json-body.ts) are byte for byte what one
// JSON.stringify would have sent, for the API's envelopes and for everything else.
import assert from "node:assert/strict";
import { test } from "node:test";
import { z } from "zod";
import { jsonBody, serializerCompiler } from "../src/core/json-body.ts";
import { generatedValues } from "./generated-values.ts";

function bytes(body: string | Buffer): Buffer {
  return typeof body === "string" ? Buffer.from(body, "utf8") : body;
}

function assertSame(value: unknown): void {
  const expected = Buffer.from(JSON.stringify(value), "utf8");
  assert.ok(bytes(jsonBody(value)).equals(expected), `differs for ${JSON.stringify(value).slice(0, 120)}`);
}

const values = generatedValues(7, 1_500);
const rows = (n: number) =>
  Array.from({ length: n }, (_, i) => ({
    id: `id-${i}`,
    key: `KEY_${i}`,
    value: values[i % values.length],
    version: i,
    at: new Date(Date.UTC(2026, 0, 1, 0, 0, i)),
    missing: undefined,
  }));

test("an envelope with a long array is sent as a Buffer holding exactly JSON.stringify's bytes", () => {
  for (const n of [256, 257, 383, 384, 385, 1_000]) {
    const body = jsonBody({ secrets: rows(n) });
    assert.ok(Buffer.isBuffer(body), `a Buffer for ${n} rows`);
    assertSame({ secrets: rows(n) });
  }
  // Other members before and after, left-out ones, several long arrays, odd keys and items.
  assertSame({ before: 1, skipped: undefined, fn: () => 1, events: rows(300), 'key "quoted" ✓': [1, 2], after: null });
  assertSame({ a: rows(600), b: rows(256), c: "text" });
  assertSame({ skipped: undefined, list: rows(256) });
  assertSame({ sparse: Object.assign(new Array(700), { 5: "x", 600: { y: [undefined, () => 1] } }) });
  assertSame({ nested: { deep: rows(500) }, list: Array.from({ length: 512 }, (_, i) => (i % 3 ? `s${i}` : i)) });
  assertSame(Object.assign(Object.create(null), { list: rows(260) }));
  // A long array with a toJSON of its own beside one without: the first is stringified whole.
  assertSame({ own: Object.assign(rows(300), { toJSON: () => ["own"] }), plain: rows(300) });
});

test("anything else is one JSON.stringify, returned as the string", () => {
  for (const value of [
    { secrets: rows(255) },
    { error: "Not found." },
    rows(600),
    "text",
    42,
    null,
    {},
    { toJSON: () => ({ replaced: rows(300) }) },
    new Map([["a", 1]]),
    { list: Object.assign(rows(300), { toJSON: () => "own" }) },
  ]) {
    const body = jsonBody(value);
    assert.equal(typeof body, "string");
    assert.equal(body, JSON.stringify(value));
  }
});

test("the serializer encodes with the route's schema first: an answer outside it is an error, not a body", () => {
  const serialize = serializerCompiler({
    schema: z.object({ secrets: z.array(z.object({ key: z.string(), version: z.number().int() })) }),
    method: "GET",
    url: "/api/x",
  });
  const list = Array.from({ length: 400 }, (_, i) => ({ key: `K${i}`, version: i, extra: "dropped" }));
  assert.equal(
    bytes(serialize({ secrets: list })).toString("utf8"),
    JSON.stringify({ secrets: list.map(({ key, version }) => ({ key, version })) }),
  );
  assert.throws(() => serialize({ secrets: [{ key: 1, version: 0 }] }), /Response doesn't match the schema/);
});
