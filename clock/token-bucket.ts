// A token bucket on a Clock: `burst` tokens at most, refilled at `perSecond`. What rate-limits a
// log line a peer can trigger at will (a hostile hub asking for refused dials), so the log stays
// readable and cheap; the caller counts what it drops.
import type { Clock } from './clock.js';

export class TokenBucket {
  private tokens: number;
  private at: number;

  constructor(
    private readonly clock: Clock,
    private readonly perSecond: number,
    private readonly burst: number,
  ) {
    this.tokens = burst;
    this.at = clock.now();
  }

  /** Takes a token if there is one. */
  take(): boolean {
    const now = this.clock.now();
    this.tokens = Math.min(this.burst, this.tokens + ((now - this.at) / 1000) * this.perSecond);
    this.at = now;
    if (this.tokens < 1) return false;
    this.tokens--;
    return true;
  }
}
