// A Clock (clock/clock.ts) that moves only when a test says so: timers fire in order of due time, each
// seeing now() at its own due time, and what they schedule while firing runs in the same advance.
import type { Clock } from '../../clock/clock.js';

interface Pending {
  at: number;
  seq: number;
  fn: () => void;
}

export class ManualClock implements Clock {
  private time = 0;
  private seq = 0;
  private pending: Pending[] = [];

  now(): number {
    return this.time;
  }

  after(ms: number, fn: () => void): () => void {
    const entry = { at: this.time + Math.max(0, ms), seq: this.seq++, fn };
    this.pending.push(entry);
    return () => {
      this.pending = this.pending.filter((p) => p !== entry);
    };
  }

  /** Timers waiting. */
  get waiting(): number {
    return this.pending.length;
  }

  /** When the next timer is due, or undefined when none waits. */
  nextDue(): number | undefined {
    return this.pending.reduce<number | undefined>(
      (min, p) => (min === undefined || p.at < min ? p.at : min),
      undefined,
    );
  }

  /**
   * Moves time forward by `ms`, firing what falls due on the way; awaits the microtasks each timer
   * starts (promise chains it resolves), so their follow-ups are scheduled before the next one fires.
   */
  async advance(ms: number): Promise<void> {
    const end = this.time + ms;
    for (;;) {
      await settle();
      const next = this.pending.filter((p) => p.at <= end).sort((a, b) => a.at - b.at || a.seq - b.seq)[0];
      if (!next) break;
      this.pending = this.pending.filter((p) => p !== next);
      this.time = next.at;
      next.fn();
    }
    this.time = end;
    await settle();
  }

  /** Moves time to the next due timer and fires it (and any due with it). */
  async advanceToNext(): Promise<void> {
    const due = this.nextDue();
    if (due !== undefined) await this.advance(due - this.time);
  }
}

/** Lets pending promise callbacks run: every microtask queued before the next turn of the event loop. */
function settle(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}
