// When the sync loop (clientset.ts) tries the next connection to a proxy-server, as a fleet must:
// every agent of every cluster loses its stream to a restarting replica at the same instant, and each
// futile attempt costs the survivors a TLS handshake and a registration. The Go agent's loop
// (pkg/agent/clientset.go) redials at its next tick, ~1 s later, whatever happened: a fleet's redials
// arrive together, and then once a second per agent for as long as the replica is away, each landing
// on a replica it holds (a duplicate) or on the one that is down. Here (bench/README.md, "Fleet"):
// - after a stream that worked is lost, the first attempt waits a random share of 3 x --sync-interval,
//   so a fleet's redials are spread out instead of landing in the same second;
// - behind an address through which it holds replicas already, the agent looks in rounds: as many
//   attempts back to back as there are replicas (the server count), which a round-robin balancer
//   hands to each replica in turn, then a pause of 1/2 to 1 x --sync-interval-cap; a duplicate or a
//   refusal there says a replica is away, not that the hub is;
// - where it holds nothing, a failure backs off as the Go agent does: --sync-interval growing x1.5 up
//   to --sync-interval-cap, with its 10 % jitter;
// - after a success, a short random pause before looking for the next missing replica.
// Pure: the randomness is passed in; the loop owns the clock.
import { Backoff } from '../clock/backoff.js';

export interface SyncPolicyOptions {
  /** --sync-interval */
  intervalMs: number;
  /** --sync-interval-cap */
  capMs: number;
  random: () => number;
}

export type AttemptOutcome = 'connected' | 'duplicate' | 'failed';

export class SyncPolicy {
  private readonly failures: Backoff;
  /** Attempts made in the current round. */
  private inRound = 0;

  constructor(private readonly opts: SyncPolicyOptions) {
    this.failures = new Backoff({ initialMs: opts.intervalMs, capMs: opts.capMs }, opts.random);
  }

  /**
   * The wait after an attempt with this outcome. `replicas`: the server count; `holding`: the agent
   * holds a replica through the address it just tried.
   */
  after(outcome: AttemptOutcome, replicas: number, holding: boolean): number {
    const { capMs, random } = this.opts;
    if (outcome === 'connected') {
      this.failures.reset();
      this.inRound = 0;
      return 20 * random();
    }
    if (!holding) {
      this.inRound = 0;
      return outcome === 'duplicate' ? this.opts.intervalMs : this.failures.next();
    }
    this.failures.reset();
    if (++this.inRound < replicas) return 20 * random();
    this.inRound = 0;
    return capMs * (0.5 + 0.5 * random());
  }

  /** The wait before the first attempt after a connection that worked was lost. */
  afterLoss(): number {
    this.failures.reset();
    this.inRound = 0;
    return 3 * this.opts.intervalMs * this.opts.random();
  }

  /** New TLS material: try at once, from the start of the backoff. */
  reset(): void {
    this.failures.reset();
    this.inRound = 0;
  }

  /** The pause between looks when nothing but the TLS files can change and they cannot be watched. */
  steady(): number {
    return this.failures.steady();
  }
}
