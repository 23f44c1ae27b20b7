// The sync loop's waits, outcome by outcome, as agent/README.md ("Proxy-server replicas") states them.
import { describe, expect, it } from 'vitest';
import { SyncPolicy } from './sync-policy.js';

/** A policy at --sync-interval=1s, --sync-interval-cap=10s, whose random() is whatever `r.value` says. */
function policy() {
  const r = { value: 0.5 };
  return { r, p: new SyncPolicy({ intervalMs: 1000, capMs: 10_000, random: () => r.value }) };
}

describe('SyncPolicy', () => {
  it('after losing a replica while serving: within 3 x --sync-interval, early waits likelier than late', () => {
    const { r, p } = policy();
    const wait = (u: number) => {
      r.value = u;
      return p.afterLoss(true);
    };
    expect(wait(0)).toBe(0);
    expect(wait(0.5)).toBeCloseTo(3000 * (1 - Math.SQRT1_2), 6);
    expect(wait(0.75)).toBeCloseTo(1500, 6);
    expect(wait(0.999_999)).toBeLessThan(3000);
    // The first second gets 5/9 of a fleet's first attempts, the second 3/9, the third 1/9.
    expect(wait(5 / 9)).toBeCloseTo(1000, 6);
    expect(wait(8 / 9)).toBeCloseTo(2000, 6);
  });

  it('after losing the last replica: a random share of 1/2 --sync-interval', () => {
    const { r, p } = policy();
    r.value = 0.8;
    expect(p.afterLoss(false)).toBe(400);
  });

  it('after duplicates: the first since the loss 1-2 x --sync-interval, later ones the Go agent 1-1.1 x', () => {
    const { r, p } = policy();
    p.afterLoss(true);
    r.value = 0.5;
    expect(p.after('duplicate', true, 5)).toBe(1500);
    expect(p.after('duplicate', true, 5)).toBe(1050);
    r.value = 1;
    expect(p.after('duplicate', true, 5)).toBe(1100);
    // A loss starts over.
    p.afterLoss(true);
    expect(p.after('duplicate', true, 5)).toBe(2000);
  });

  it('after a refusal behind an address that serves the agent: 2-5 x --sync-interval after it came, without growing', () => {
    const { r, p } = policy();
    r.value = 0;
    // Refused at once (a cloud load balancer, kube-proxy to a closed port): 2-5 x from the attempt's start.
    expect([p.after('failed', true, 5), p.after('failed', true, 5), p.after('failed', true, 5)]).toEqual([
      2005, 2005, 2005,
    ]);
    r.value = 1;
    expect(p.after('failed', true, 5)).toBe(5005);
    // Held by haproxy through its three retries (~3 s), then refused: 5-8 x from the start, 2-5 x after.
    expect(p.after('failed', true, 3020)).toBe(8000);
    r.value = 0;
    expect(p.after('failed', true, 3020)).toBe(5000);
    // Hung until the handshake timeout: the next attempt is already due.
    expect(p.after('failed', true, 10_000)).toBeLessThan(10_000);
  });

  it('after other failures: the Go agent backoff, reset by a duplicate or a success', () => {
    const { r, p } = policy();
    r.value = 0;
    expect([1, 2, 3, 4].map(() => p.after('failed', false, 5))).toEqual([1000, 1500, 2250, 3375]);
    p.after('duplicate', true, 5);
    expect(p.after('failed', false, 5)).toBe(1000);
    p.after('failed', false, 5);
    p.after('connected', true, 5);
    expect(p.after('failed', false, 5)).toBe(1000);
  });

  it('after a success: a random share of --sync-interval, and the next duplicate is a first one again', () => {
    const { r, p } = policy();
    p.after('duplicate', true, 5);
    p.after('duplicate', true, 5);
    r.value = 0.3;
    expect(p.after('connected', true, 5)).toBe(300);
    r.value = 0.5;
    expect(p.after('duplicate', true, 5)).toBe(1500);
  });
});
