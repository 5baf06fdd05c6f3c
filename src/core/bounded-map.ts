// Maps that callers can grow (a key per client address, per issuer a user names) and that
// must not grow without end: expired entries go first, then the oldest.

/** Deletes the entries `isStale` says have expired. */
export function dropStale<V>(map: Map<string, V>, isStale: (value: V) => boolean): void {
  for (const [key, value] of map) if (isStale(value)) map.delete(key);
}

/** Makes room for one more entry: the expired ones go, then, while still full, the oldest (a Map keeps the order entries were set in). */
export function makeRoom<V>(map: Map<string, V>, max: number, isStale: (value: V) => boolean): void {
  dropStale(map, isStale);
  for (const key of map.keys()) {
    if (map.size < max) break;
    map.delete(key);
  }
}
