/** `value(item)` of each item, grouped by `key(item)`, groups in first-seen order. */
export function groupBy<T, K, V>(items: Iterable<T>, key: (item: T) => K, value: (item: T) => V): Map<K, V[]> {
  const groups = new Map<K, V[]>();
  for (const item of items) {
    const k = key(item);
    const group = groups.get(k);
    if (group) group.push(value(item));
    else groups.set(k, [value(item)]);
  }
  return groups;
}

/**
 * `cache`'s value for `key`, made by `make` when missing; the map is kept as an LRU of at most
 * `max` entries (a hit moves to the end, Map keeping insertion order; past `max` the oldest goes).
 */
export function lruGet<K, V>(cache: Map<K, V>, key: K, max: number, make: () => V): V {
  const hit = cache.get(key);
  if (hit !== undefined) {
    cache.delete(key);
    cache.set(key, hit);
    return hit;
  }
  const made = make();
  cache.set(key, made);
  if (cache.size > max) cache.delete(cache.keys().next().value!);
  return made;
}

/**
 * Remembers which values were already said (logged once each), for values a sender chooses: at
 * most `max` of them, each by a copy of its first `keyChars` characters (a slice would keep the
 * whole string alive, and a value can be as long as a body). `first` returns that key the first
 * time a value is seen and room is left, else null.
 */
export class SaidOnce {
  private readonly said = new Set<string>();

  constructor(
    private readonly max = 100,
    private readonly keyChars = 100,
  ) {}

  first(value: string): string | null {
    const key = value.length <= this.keyChars ? value : Buffer.from(value.slice(0, this.keyChars)).toString();
    if (this.said.size >= this.max || this.said.has(key)) return null;
    this.said.add(key);
    return key;
  }
}
