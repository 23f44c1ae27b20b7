// Encoded responses, kept as long as their TTLs say and reused for any query with the same key (see
// wire.ts `Query.key`). Bounded: when full, the oldest entry goes first. Insertion order rather than
// LRU keeps a hit to one Map lookup, which is what the query path can afford. Each answer is kept in
// a buffer of its own exact size: the one it arrives in is often a slice of Node's shared 8 KiB pool
// (or of a larger read), and keeping the slice would keep that whole block alive (~3.3 KB held per
// answer of under 300 bytes, measured).
import { type ResponseInfo, RCODE } from './wire.js';

export interface CacheEntry<M> {
  bytes: Buffer;
  info: Pick<ResponseInfo, 'ttlOffsets' | 'ttls'>;
  storedAt: number;
  expiresAt: number;
  /** What the debug log and /debug/resolve say about the answer. */
  meta: M;
}

export interface CacheLimits {
  maxEntries: number;
  /** Longest time an answer is kept, in seconds (CoreDNS cache: 3600). */
  maxTtl: number;
  /** Longest time NXDOMAIN / NODATA is kept, in seconds (CoreDNS cache: 1800). */
  maxNegativeTtl: number;
}

export class ResponseCache<M> {
  private readonly entries = new Map<string, CacheEntry<M>>();

  constructor(private readonly limits: CacheLimits) {}

  get(key: string, now: number): CacheEntry<M> | undefined {
    const entry = this.entries.get(key);
    if (entry === undefined || entry.expiresAt > now) return entry;
    this.entries.delete(key);
    return undefined;
  }

  /** Stores a NOERROR or NXDOMAIN response that says how long it is valid; returns whether it did. */
  put(key: string, bytes: Buffer, info: ResponseInfo, now: number, meta: M): boolean {
    if (this.limits.maxEntries <= 0 || info.tc || info.ttl === undefined) return false;
    if (info.rcode !== RCODE.NOERROR && info.rcode !== RCODE.NXDOMAIN) return false;
    const negative = info.rcode === RCODE.NXDOMAIN || bytes.readUInt16BE(6) === 0;
    const ttl = Math.min(info.ttl, negative ? this.limits.maxNegativeTtl : this.limits.maxTtl);
    if (ttl <= 0) return false;
    this.entries.delete(key);
    if (this.entries.size >= this.limits.maxEntries) this.entries.delete(this.entries.keys().next().value!);
    this.entries.set(key, { bytes: ownCopy(bytes), info, storedAt: now, expiresAt: now + ttl * 1000, meta });
    return true;
  }

  clear(): void {
    this.entries.clear();
  }

  get size(): number {
    return this.entries.size;
  }
}

/** `bytes` in an ArrayBuffer of exactly its length (outside the pool), copied only when it is not already. */
function ownCopy(bytes: Buffer): Buffer {
  if (bytes.byteOffset === 0 && bytes.buffer.byteLength === bytes.length) return bytes;
  const own = Buffer.allocUnsafeSlow(bytes.length);
  bytes.copy(own);
  return own;
}
