// A small map whose entries expire, bounded in size (the oldest entry goes first): the brief memory
// of delegated authentication and authorization decisions, so a busy caller costs a review per
// period rather than one per request.
export interface TtlCacheOptions {
  ttlMs: number;
  maxEntries?: number;
  now?: () => number;
}

export class TtlCache<V> {
  private readonly entries = new Map<string, { value: V; expires: number }>();
  private readonly maxEntries: number;
  private readonly now: () => number;

  constructor(private readonly opts: TtlCacheOptions) {
    this.maxEntries = opts.maxEntries ?? 1024;
    this.now = opts.now ?? Date.now;
  }

  get(key: string): V | undefined {
    const hit = this.entries.get(key);
    if (!hit) return undefined;
    if (hit.expires > this.now()) return hit.value;
    this.entries.delete(key);
    return undefined;
  }

  /** `ttlMs`: this entry's lifetime, when it is not the cache's (e.g. allowed and denied decisions differ). */
  set(key: string, value: V, ttlMs = this.opts.ttlMs): void {
    this.entries.delete(key);
    if (this.entries.size >= this.maxEntries) this.entries.delete(this.entries.keys().next().value!);
    this.entries.set(key, { value, expires: this.now() + ttlMs });
  }
}
