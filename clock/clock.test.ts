import { describe, expect, it } from 'vitest';
import { ManualClock } from '../test/support/manual-clock.js';
import { sleep } from './clock.js';

describe('ManualClock', () => {
  it('fires timers in due order, each at its own time, including ones scheduled while firing', async () => {
    const clock = new ManualClock();
    const seen: string[] = [];
    clock.after(30, () => seen.push(`b@${clock.now()}`));
    clock.after(10, () => {
      seen.push(`a@${clock.now()}`);
      clock.after(5, () => seen.push(`c@${clock.now()}`));
    });
    const cancel = clock.after(20, () => seen.push('cancelled'));
    cancel();
    await clock.advance(25);
    expect(seen).toEqual(['a@10', 'c@15']);
    expect(clock.now()).toBe(25);
    await clock.advanceToNext();
    expect(seen).toEqual(['a@10', 'c@15', 'b@30']);
    expect(clock.waiting).toBe(0);
  });

  it('runs what a resolved sleep continues with before the next timer', async () => {
    const clock = new ManualClock();
    const seen: number[] = [];
    void (async () => {
      await sleep(clock, 10).done;
      seen.push(clock.now());
      await sleep(clock, 10).done;
      seen.push(clock.now());
    })();
    await clock.advance(100);
    expect(seen).toEqual([10, 20]);
    const nap = sleep(clock, 50);
    nap.cancel();
    await nap.done;
    expect(clock.waiting).toBe(0);
  });
});
