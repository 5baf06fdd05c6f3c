// limitConcurrency (src/core/limit-concurrency.ts), which keeps password hashing to two
// scrypt calls at once (src/sign-in/passwords.ts).
import assert from "node:assert/strict";
import { test } from "node:test";
import { setImmediate as turn } from "node:timers/promises";
import { limitConcurrency } from "../src/core/limit-concurrency.ts";

test("limitConcurrency: at most the limit run at once, the rest in arrival order, failures free their place", async () => {
  const limited = limitConcurrency(2);
  const started: number[] = [];
  const finish = new Map<number, { resolve: () => void; reject: (error: Error) => void }>();
  const calls = [0, 1, 2, 3, 4].map((i) =>
    limited(
      () =>
        new Promise<number>((resolve, reject) => {
          started.push(i);
          finish.set(i, { resolve: () => resolve(i), reject });
        }),
    ),
  );
  await turn();
  assert.deepEqual(started, [0, 1]);
  finish.get(1)!.reject(new Error("scrypt failed"));
  await assert.rejects(calls[1]!, /scrypt failed/);
  await turn();
  assert.deepEqual(started, [0, 1, 2]);
  // A newcomer queues behind those already waiting.
  const late = limited(async () => {
    started.push(5);
    return 5;
  });
  finish.get(0)!.resolve();
  assert.equal(await calls[0], 0);
  await turn();
  assert.deepEqual(started, [0, 1, 2, 3]);
  finish.get(2)!.resolve();
  await turn();
  assert.deepEqual(started, [0, 1, 2, 3, 4]);
  finish.get(3)!.resolve();
  await turn();
  assert.deepEqual(started, [0, 1, 2, 3, 4, 5]);
  finish.get(4)!.resolve();
  assert.deepEqual(await Promise.all([calls[2], calls[3], calls[4], late]), [2, 3, 4, 5]);
  // All places free again: two start at once.
  const again: number[] = [];
  const hold = new Promise<void>((resolve) => setTimeout(resolve, 20));
  const both = [7, 8, 9].map((i) =>
    limited(async () => {
      again.push(i);
      await hold;
    }),
  );
  await turn();
  assert.deepEqual(again, [7, 8]);
  await Promise.all(both);
  assert.deepEqual(again, [7, 8, 9]);
  // A function that throws before returning a promise frees its place too.
  await assert.rejects(
    limited(() => {
      throw new Error("at once");
    }),
    /at once/,
  );
  await assert.rejects(
    limited(() => {
      throw new Error("at once");
    }),
    /at once/,
  );
  assert.equal(await limited(async () => "still two places"), "still two places");
});
