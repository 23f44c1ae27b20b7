import { describe, expect, it } from 'vitest';
import { chooseShed, defaultBufferBudget } from './buffer-budget.js';

const h = (name: string, buffered: number, lastProgress: number) => ({ name, buffered, lastProgress });

describe('chooseShed', () => {
  const now = 10_000;
  it('closes targets that stopped reading, largest first, until the total is down to the target', () => {
    const holders = [
      h('small-stopped', 1 << 20, 0),
      h('reading', 30 << 20, now - 10),
      h('big-stopped', 8 << 20, 5000),
      h('mid-stopped', 4 << 20, 0),
    ];
    const total = 43 << 20;
    expect(chooseShed(holders, now, total, 32 << 20, 2000).map((x) => x.name)).toEqual(['big-stopped', 'mid-stopped']);
    expect(chooseShed(holders, now, total, 0, 2000).map((x) => x.name)).toEqual([
      'big-stopped',
      'mid-stopped',
      'small-stopped',
    ]);
  });

  it('never closes a target that is still reading, nor one with nothing waiting', () => {
    expect(chooseShed([h('reading', 64 << 20, now - 1999), h('empty', 0, 0)], now, 64 << 20, 0, 2000)).toEqual([]);
  });

  it('closes nobody while the total is at or under the target', () => {
    expect(chooseShed([h('stopped', 1 << 20, 0)], now, 1 << 20, 1 << 20, 2000)).toEqual([]);
  });
});

describe('defaultBufferBudget', () => {
  it('is a quarter of the container limit, and 256 MiB without one', () => {
    expect(defaultBufferBudget(256 << 20)).toBe(64 << 20);
    expect(defaultBufferBudget(undefined)).toBe(256 << 20);
    expect(defaultBufferBudget(32 << 20)).toBe(16 << 20);
  });
});
