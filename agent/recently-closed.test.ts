import { describe, expect, it } from 'vitest';
import { RecentlyClosed } from './recently-closed.js';

describe('RecentlyClosed', () => {
  it('remembers ids closed within the window, and forgets them after it', () => {
    let now = 0;
    const recent = new RecentlyClosed(10, 1000, () => now);
    recent.add('1');
    now = 500;
    recent.add('2');
    expect([recent.has('1'), recent.has('2'), recent.has('3')]).toEqual([true, true, false]);
    now = 1200;
    expect([recent.has('1'), recent.has('2')]).toEqual([false, true]);
    now = 1600;
    expect(recent.has('2')).toBe(false);
  });

  it('keeps only the newest `capacity` ids', () => {
    const recent = new RecentlyClosed(3, 60_000, () => 0);
    for (const id of ['1', '2', '3', '4', '5']) recent.add(id);
    expect(['1', '2', '3', '4', '5'].map((id) => recent.has(id))).toEqual([false, false, true, true, true]);
  });

  it('an id closed again moves to the newest place', () => {
    let now = 0;
    const recent = new RecentlyClosed(2, 1000, () => now);
    recent.add('a');
    recent.add('b');
    now = 900;
    recent.add('a');
    recent.add('c'); // evicts b, the oldest
    expect([recent.has('a'), recent.has('b'), recent.has('c')]).toEqual([true, false, true]);
    now = 1500;
    expect([recent.has('a'), recent.has('c')]).toEqual([true, true]);
  });
});
