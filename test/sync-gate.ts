// Holding the server's group-commit syncs (src/core/group-commit.ts) in a test, to see what
// waits for the disk: the syncs stay the real ones, each only held before it starts.
import type { TestServer } from "./helpers.ts";
import { storedRows } from "./storage.ts";

/** Lets the server's WAL syncs run, or holds each one before it starts until released. */
export class SyncGate {
  started = 0;
  private holding = false;
  private held: { resolve: () => void; reject: (error: Error) => void }[] = [];
  private onHeld: (() => void)[] = [];

  readonly beforeSync = async (): Promise<void> => {
    this.started += 1;
    if (!this.holding) return;
    await new Promise<void>((resolve, reject) => {
      this.held.push({ resolve, reject });
      for (const notify of this.onHeld.splice(0)) notify();
    });
  };

  hold(): void {
    this.holding = true;
  }

  /** Settles once a sync is waiting at the gate. */
  reached(): Promise<void> {
    if (this.held.length > 0) return Promise.resolve();
    return new Promise((resolve) => this.onHeld.push(resolve));
  }

  /** Lets the syncs waiting now go on, and keeps holding the ones after them. */
  releaseHeld(): void {
    for (const sync of this.held.splice(0)) sync.resolve();
  }

  release(): void {
    this.holding = false;
    for (const sync of this.held.splice(0)) sync.resolve();
  }

  /** The held sync fails as fdatasync does on a failing disk. */
  fail(): void {
    this.holding = false;
    const error = Object.assign(new Error("EIO: i/o error, fdatasync"), { code: "EIO", errno: -5, syscall: "fdatasync" });
    for (const sync of this.held.splice(0)) sync.reject(error);
  }
}

/** Whether the promise settled within `ms`. */
export async function settlesWithin(promise: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const settled = await Promise.race([
    promise.then(
      () => true,
      () => true,
    ),
    new Promise<false>((resolve) => {
      timer = setTimeout(() => resolve(false), ms);
    }),
  ]);
  clearTimeout(timer);
  return settled;
}

/** The secret's current version as another connection reads it from the file: what is committed, synced or not. */
export function committedVersion(server: TestServer, secretId: string): number {
  return storedRows(server.dataDir, "secrets", { id: secretId })[0]!.version as number;
}
