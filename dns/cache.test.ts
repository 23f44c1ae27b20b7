// What a cached answer costs in memory: the bytes it keeps alive, not only its own length.
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { describe, expect, it } from 'vitest';
import { ResponseCache } from './cache.js';
import { encodeQuery, encodeResponse, inspectResponse, parseQuery, TYPE, type Query } from './wire.js';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

function arrayBuffersAfterGc(): number {
  gc();
  gc();
  return process.memoryUsage().arrayBuffers;
}

describe('ResponseCache memory', () => {
  it('holds about its own size per small answer, not the pool block the answer was cut from', () => {
    const n = 4000;
    const cache = new ResponseCache<string>({ maxEntries: n, maxTtl: 3600, maxNegativeTtl: 1800 });
    const before = arrayBuffersAfterGc();
    let size = 0;
    for (let i = 0; i < n; i++) {
      const msg = encodeQuery(`host-${i}.example.`, TYPE.A);
      const q = parseQuery(msg) as Query;
      // As on the query path: the answer comes from Node's 8 KiB pool, between short-lived buffers
      // (the reply sent to the client, the next query) that are garbage a moment later.
      const bytes = encodeResponse(msg, q, {
        rcode: 0,
        flags: {},
        answers: [{ type: TYPE.A, address: '127.0.0.1', ttl: 60 }],
      });
      Buffer.allocUnsafe(3000).fill(i);
      size = bytes.length;
      expect(cache.put(q.key, bytes, inspectResponse(bytes)!, 0, '')).toBe(true);
    }
    const perEntry = (arrayBuffersAfterGc() - before) / n;
    expect(cache.size).toBe(n);
    // The answer (~50 bytes) plus its own allocation's rounding; a retained pool block is 8 KiB.
    expect(perEntry, `${perEntry.toFixed(0)} bytes of ArrayBuffers per cached answer of ${size} bytes`).toBeLessThan(
      size * 2 + 64,
    );
  });
});
