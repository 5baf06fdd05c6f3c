// The export memo (src/secrets/export-memo.ts) on its own: when it opens the values again
// and when it answers from what it remembered. test/secrets-export-etag.test.ts and
// test/secrets.test.ts prove the exports themselves over HTTP.
import assert from "node:assert/strict";
import { test } from "node:test";
import { createExportMemo } from "../src/secrets/export-memo.ts";
import type { SecretWithCiphertext } from "../src/secrets/secrets.repo.ts";

function row(id: string, key: string, version: number, ciphertext: string): SecretWithCiphertext {
  const at = "2026-11-28T00:00:00.000Z";
  return {
    id,
    projectId: "p1",
    environment: "production",
    key,
    version,
    createdAt: at,
    updatedAt: at,
    ciphertext: Buffer.from(ciphertext),
    keyVersion: 1,
    digest: null,
  } as SecretWithCiphertext;
}

function counting(values: string[]) {
  const calls = { n: 0 };
  const openAll = (rows: SecretWithCiphertext[]) => async () => {
    calls.n++;
    return rows.map((r, i) => ({ key: r.key, value: values[i] ?? "" }));
  };
  return { calls, openAll };
}

test("export memo: the same rows are opened once; any field that makes the value changes that", async () => {
  const memo = createExportMemo();
  const rows = [row("s1", "A", 1, "sealed-a"), row("s2", "B", 3, "sealed-b")];
  const { calls, openAll } = counting(["a", "b"]);
  const first = await memo.values("p1", "production", memo.ticket("p1"), rows, openAll(rows));
  const second = await memo.values("p1", "production", memo.ticket("p1"), rows, openAll(rows));
  assert.deepEqual(second, first);
  assert.deepEqual(second, [
    { key: "A", value: "a" },
    { key: "B", value: "b" },
  ]);
  assert.equal(calls.n, 1);

  const variants: SecretWithCiphertext[][] = [
    [row("s1", "A", 1, "sealed-a"), row("s2", "B", 3, "sealed-c")], // a byte of the sealed value
    [row("s1", "A", 1, "sealed-a"), row("s2", "B", 4, "sealed-b")], // the version (the AAD)
    [row("s1", "A", 1, "sealed-a"), row("s3", "B", 3, "sealed-b")], // the id (the AAD)
    [row("s1", "A", 1, "sealed-a"), row("s2", "C", 3, "sealed-b")], // the key (in the answer)
    [{ ...row("s1", "A", 1, "sealed-a"), keyVersion: 2 }, row("s2", "B", 3, "sealed-b")], // the data key
    [row("s1", "A", 1, "sealed-a")], // a row gone
  ];
  for (const [i, variant] of variants.entries()) {
    await memo.values("p1", "production", memo.ticket("p1"), variant, openAll(variant));
    assert.equal(calls.n, 2 + i, `variant ${i} was answered from memory`);
  }
  // Another environment or project with the very same rows is its own entry.
  await memo.values("p1", "staging", memo.ticket("p1"), rows, openAll(rows));
  await memo.values("p2", "production", memo.ticket("p2"), rows, openAll(rows));
  assert.equal(calls.n, 1 + variants.length + 2);
});

test("export memo: a failed opening is not remembered, a deleted project is dropped and never stored again, the oldest of 33 goes", async () => {
  const memo = createExportMemo();
  const rows = [row("s1", "A", 1, "sealed-a")];
  const { calls, openAll } = counting(["a"]);
  await assert.rejects(
    memo.values("p1", "production", memo.ticket("p1"), rows, async () => {
      throw new Error("does not open");
    }),
    /does not open/,
  );
  await memo.values("p1", "production", memo.ticket("p1"), rows, openAll(rows));
  assert.equal(calls.n, 1);
  await memo.values("p10", "production", memo.ticket("p10"), rows, openAll(rows));
  assert.equal(calls.n, 2);

  // p1 deleted: its entry goes, and an export from a read snapshot older than the deletion
  // (PostgreSQL) is answered but not stored. p10, whose id starts the same, is left alone.
  memo.forget("p1");
  await memo.values("p1", "production", memo.ticket("p1"), rows, openAll(rows));
  await memo.values("p1", "production", memo.ticket("p1"), rows, openAll(rows));
  assert.equal(calls.n, 4);
  await memo.values("p10", "production", memo.ticket("p10"), rows, openAll(rows));
  assert.equal(calls.n, 4);

  // p2 (used after p10) survives 31 more environments; p10, older, does not.
  await memo.values("p2", "production", memo.ticket("p2"), rows, openAll(rows));
  assert.equal(calls.n, 5);
  for (let i = 0; i < 31; i++) await memo.values(`q${i}`, "production", memo.ticket(`q${i}`), rows, openAll(rows));
  const before = calls.n;
  await memo.values("p2", "production", memo.ticket("p2"), rows, openAll(rows));
  assert.equal(calls.n, before);
  await memo.values("p10", "production", memo.ticket("p10"), rows, openAll(rows));
  assert.equal(calls.n, before + 1);
});

test("export memo: an environment is forgotten alone; values of rows read before a change are not stored; over 16 MiB is not kept", async () => {
  const memo = createExportMemo();
  const rows = [row("s1", "A", 1, "sealed-a")];
  const { calls, openAll } = counting(["a"]);
  await memo.values("p1", "production", memo.ticket("p1"), rows, openAll(rows));
  await memo.values("p1", "staging", memo.ticket("p1"), rows, openAll(rows));
  memo.forget("p1", "production");
  await memo.values("p1", "staging", memo.ticket("p1"), rows, openAll(rows));
  assert.equal(calls.n, 2, "staging was forgotten with production");
  await memo.values("p1", "production", memo.ticket("p1"), rows, openAll(rows));
  assert.equal(calls.n, 3);

  // The ticket is taken before the rows are read; a secret of the environment changes before
  // they are opened (the Vercel sync waits for the disk in between): not stored.
  const ticket = memo.ticket("p2");
  memo.forget("p2", "production");
  await memo.values("p2", "production", ticket, rows, openAll(rows));
  await memo.values("p2", "production", memo.ticket("p2"), rows, openAll(rows));
  assert.equal(calls.n, 5, "values of rows read before the change were kept");
  await memo.values("p2", "production", memo.ticket("p2"), rows, openAll(rows));
  assert.equal(calls.n, 5);

  const large = [{ key: "A", value: "x".repeat(17 * 1024 * 1024) }];
  let opened = 0;
  for (let i = 0; i < 2; i++) {
    const values = await memo.values("p3", "production", memo.ticket("p3"), rows, async () => {
      opened++;
      return large;
    });
    assert.equal(values[0]!.value.length, large[0]!.value.length);
  }
  assert.equal(opened, 2, "an environment over 16 MiB was remembered");
});
