/**
 * Runs at most `limit` of the functions given to it at once; the others wait their turn,
 * first come first served. A finishing call hands its place straight to the next waiting
 * one, so a newcomer cannot overtake the queue.
 */
export function limitConcurrency(limit: number): <T>(work: () => Promise<T>) => Promise<T> {
  let running = 0;
  const waiting: (() => void)[] = [];
  return async (work) => {
    if (running < limit) running += 1;
    else await new Promise<void>((resolve) => waiting.push(resolve));
    try {
      return await work();
    } finally {
      const next = waiting.shift();
      if (next) next();
      else running -= 1;
    }
  };
}
