// When the sync loop (clientset.ts) tries the next connection to a proxy-server, as a fleet must:
// every agent of every cluster loses its stream to a restarting replica at the same instant, and each
// futile attempt costs the survivors a TLS handshake and a registration. The Go agent's loop
// (pkg/agent/clientset.go) redials at its next tick, ~1 s later, whatever happened, so a fleet's
// redials arrive together. Here (bench/README.md, "Fleet", has the figures):
// - after a stream that worked is lost, the first attempt waits a random share of `spreadMs`, so a
//   fleet's redials are spread over it instead of landing in the same second;
// - after a failure (nobody answered, or a refusal), the Go agent's backoff: --sync-interval growing
//   x1.5 up to --sync-interval-cap, with its 10 % jitter;
// - after a duplicate (a replica already held answered), 0.75 to 1.75 x --sync-interval: about the Go
//   agent's pace, spread so that a fleet stays spread out;
// - after a success, a short random pause before looking for the next missing replica.
// Pure: the randomness is passed in; the loop owns the clock.
import { Backoff } from '../clock/backoff.js';

export interface SyncPolicyOptions {
  /** --sync-interval */
  intervalMs: number;
  /** --sync-interval-cap */
  capMs: number;
  /** How far a fleet's first attempts after losing a replica are spread (default 3 x --sync-interval). */
  spreadMs?: number;
  random: () => number;
}

export type AttemptOutcome = 'connected' | 'duplicate' | 'failed';

export class SyncPolicy {
  private readonly failures: Backoff;

  constructor(private readonly opts: SyncPolicyOptions) {
    this.failures = new Backoff({ initialMs: opts.intervalMs, capMs: opts.capMs }, opts.random);
  }

  /** The wait after an attempt with this outcome. */
  after(outcome: AttemptOutcome): number {
    const { intervalMs, random } = this.opts;
    switch (outcome) {
      case 'connected':
        this.failures.reset();
        return 20 * random();
      case 'duplicate':
        this.failures.reset();
        return intervalMs * (0.75 + random());
      case 'failed':
        return this.failures.next();
    }
  }

  /** The wait before the first attempt after a connection that worked was lost. */
  afterLoss(): number {
    this.failures.reset();
    return (this.opts.spreadMs ?? 3 * this.opts.intervalMs) * this.opts.random();
  }

  /** New TLS material: try at once, from the start of the backoff. */
  reset(): void {
    this.failures.reset();
  }

  /** The pause between looks when nothing but the TLS files can change and they cannot be watched. */
  steady(): number {
    return this.failures.steady();
  }
}
