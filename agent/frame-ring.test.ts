import { describe, expect, it } from 'vitest';
import { FrameRing } from './frame-ring.js';

const KiB = 1024;

describe('FrameRing', () => {
  it('leaves small frames to the allocator, and those larger than the ring', () => {
    const ring = new FrameRing(256 * KiB);
    expect(ring.take(1000)).toBeUndefined();
    expect(ring.take(300 * KiB)).toBeUndefined();
  });

  it('hands out frames one after another and reuses their bytes once written out, oldest first', () => {
    const ring = new FrameRing(100 * KiB);
    const a = ring.take(40 * KiB)!;
    const b = ring.take(40 * KiB)!;
    expect(ring.owns(a) && ring.owns(b)).toBe(true);
    expect(b.byteOffset - a.byteOffset).toBe(40 * KiB);
    expect(ring.take(40 * KiB)).toBeUndefined(); // 20 KiB left at the end, nothing freed yet
    ring.release(); // a is out
    const c = ring.take(30 * KiB)!; // wraps to the start, where a was
    expect(c.byteOffset).toBe(a.byteOffset);
    expect(ring.owns(Buffer.alloc(30 * KiB))).toBe(false);
  });

  it('never hands out bytes of a frame still in flight (random sizes, in-order releases)', () => {
    const ring = new FrameRing(512 * KiB);
    let seed = 42;
    const random = () => {
      seed = (seed * 1103515245 + 12345) & 0x7fffffff;
      return seed / 0x7fffffff;
    };
    const inFlight: Buffer[] = [];
    let taken = 0;
    for (let step = 0; step < 5000; step++) {
      if (inFlight.length > 0 && random() < 0.45) {
        inFlight.shift();
        ring.release();
        continue;
      }
      const frame = ring.take(16 * KiB + Math.floor(random() * 200 * KiB));
      if (!frame) continue;
      taken++;
      for (const other of inFlight) {
        const overlap =
          frame.byteOffset < other.byteOffset + other.length && other.byteOffset < frame.byteOffset + frame.length;
        expect(overlap).toBe(false);
      }
      inFlight.push(frame);
    }
    expect(taken).toBeGreaterThan(1000);
  });
});
