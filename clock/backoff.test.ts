import { describe, expect, it } from 'vitest';
import { Backoff } from './backoff.js';

describe('Backoff', () => {
  it('grows by 1.5 up to the cap, with jitter on top, and resets', () => {
    const b = new Backoff({ initialMs: 1000, capMs: 3000 }, () => 0);
    expect([b.next(), b.next(), b.next(), b.next()]).toEqual([1000, 1500, 2250, 3000]);
    b.reset();
    expect(b.next()).toBe(1000);
    const jittered = new Backoff({ initialMs: 1000, capMs: 3000 }, () => 1);
    expect(jittered.next()).toBeCloseTo(1100);
    expect(jittered.steady()).toBeCloseTo(1100);
  });
});
