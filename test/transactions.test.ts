// The connection's gate (core/db.ts): one SQLite connection serves every request, so an open
// transaction owns it until it ends. These tests make transactions wait for real time (a
// timer), which the server's own never do, to show what the gate guarantees if one did.
import assert from "node:assert/strict";
import { test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { type Db, guard } from "../src/core/db.ts";
import { inTransaction, onRollback, readTransaction, writeTransaction } from "../src/core/store.ts";
import { startServer } from "./helpers.ts";
import { scratchCounter } from "./storage.ts";

test("two read-then-write transactions that wait in between are serialised: no lost update", async (t) => {
  const server = await startServer(t);
  const db = server.app.db as Db;
  const counter = guard(db, scratchCounter(server));
  const increment = () =>
    writeTransaction(db, async () => {
      const value = await counter.read();
      await sleep(20);
      await counter.write(value + 1);
    });
  await Promise.all([increment(), increment(), increment()]);
  assert.equal(await counter.read(), 3);
});

test("a repo call from outside waits for the open transaction and sees only what it committed", async (t) => {
  const server = await startServer(t);
  const db = server.app.db as Db;
  const counter = guard(db, scratchCounter(server));
  let wrote!: () => void;
  const written = new Promise<void>((resolve) => {
    wrote = resolve;
  });
  const failing = writeTransaction(db, async () => {
    await counter.write(41);
    wrote();
    await sleep(30);
    throw new Error("rolled back");
  });
  await written;
  // From the test's own context, as another request would be: outside the transaction.
  assert.equal(inTransaction(db), false);
  const readOutside = counter.read();
  await assert.rejects(failing, /rolled back/);
  assert.equal(await readOutside, 0, "the uncommitted 41 was never seen outside");
});

test("calls and transactions reach the connection in arrival order", async (t) => {
  const server = await startServer(t);
  const db = server.app.db as Db;
  const order: string[] = [];
  const raw = scratchCounter(server);
  const counter = guard(db, {
    read: () => {
      order.push("repo call");
      return raw.read();
    },
  });
  const first = writeTransaction(db, async () => {
    await sleep(20);
    order.push("first transaction");
  });
  const call = counter.read();
  const second = writeTransaction(db, () => {
    order.push("second transaction");
  });
  await Promise.all([first, call, second]);
  assert.deepEqual(order, ["first transaction", "repo call", "second transaction"]);
});

test("a savepoint SQLite rolled back with its whole transaction fails that transaction with the error that did it", async (t) => {
  const server = await startServer(t);
  const db = server.app.db as Db;
  const counter = guard(db, scratchCounter(server));
  const full = Object.assign(new Error("database or disk is full"), { code: "SQLITE_FULL" });
  await assert.rejects(
    writeTransaction(db, async () => {
      await counter.write(1);
      await assert.rejects(
        writeTransaction(db, async () => {
          await counter.write(2);
          // What SQLite does on a full disk or an I/O error: the whole transaction ends.
          db.$client.exec("ROLLBACK");
          throw full;
        }),
        (error) => error === full,
        "the caller sees the disk's error, not the savepoint's",
      );
      // Caught and went on: what it writes now must not be committed, statement by statement
      // or as if the transaction were whole.
      await counter.write(5);
    }),
    (error) => error === full,
  );
  assert.equal(await counter.read(), 0);
  assert.equal(inTransaction(db), false);
});

test("nested transactions are savepoints: an inner failure undoes only the inner part; overlapping ones are refused", async (t) => {
  const server = await startServer(t);
  const db = server.app.db as Db;
  const counter = guard(db, scratchCounter(server));
  let rollbacks = 0;
  onRollback(db, () => rollbacks++);
  await writeTransaction(db, async () => {
    await counter.write(1);
    await assert.rejects(
      writeTransaction(db, async () => {
        await counter.write(2);
        // Nested in the nested one: sequential, allowed.
        await writeTransaction(db, () => counter.write(3));
        throw new Error("inner failed");
      }),
      /inner failed/,
    );
    assert.equal(await counter.read(), 1, "the inner writes are undone, the outer one stays");
    assert.equal(inTransaction(db), true);
    const overlapping = [writeTransaction(db, () => sleep(10)), writeTransaction(db, () => sleep(10))];
    await assert.rejects(Promise.all(overlapping), /must run one after the other/);
    // The first one is still open: left running, it would end after the outer commit and
    // count a rollback of its own.
    await Promise.allSettled(overlapping);
  });
  assert.equal(await counter.read(), 1);
  assert.equal(rollbacks, 1, "the rolled-back savepoint told the caches; the committed ones did not");
  assert.equal(inTransaction(db), false);

  const before = rollbacks;
  await assert.rejects(
    readTransaction(db, () => {
      throw new Error("read failed");
    }),
    /read failed/,
  );
  assert.equal(rollbacks, before + 1, "a read's rollback tells the caches too");
});
