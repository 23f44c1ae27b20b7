// When the sync loop (clientset.ts) tries the next connection to a proxy-server, as a fleet must:
// every agent of every cluster loses its stream to a restarting replica at the same instant, and each
// futile attempt costs the survivors a TLS handshake and a registration. The Go agent's loop
// (pkg/agent/clientset.go) redials at its next tick, ~1 s later, whatever happened: a fleet's redials
// land in the same second, then about once a second per agent while the replica is away, each on a
// replica it holds (a duplicate) or on the one that is down. An agent cannot tell whether it is alone
// behind its balancer or one of thousands, and in the first seconds after a loss the two see the same
// outcomes, so what a lone agent does then, every agent of a fleet does at once (agent/README.md,
// "Proxy-server replicas"; figures: bench/README.md, "Fleet"). Here:
// - after a stream that worked is lost while the agent still holds another replica (it still serves;
//   the one lost is redundancy), the first attempt waits a share of 3 x --sync-interval drawn with a
//   density that falls from its highest at once to none at 3 x: the fleet's first attempts thin out
//   as the retries of those that came early (after a duplicate) come in, so the fleet's rate stays
//   about flat instead of piling up in the third second, and half of the agents have looked within
//   0.9 x; when it held the last one (the cluster is cut off from the hub), a random share of 1/2
//   --sync-interval: back sooner than the Go agent, spread like its ticks;
// - after the first duplicate since then, 1 to 2 x --sync-interval, so that a fleet's second attempts
//   do not pile onto its first; after later ones the Go agent's pause, 1 to 1.1 x: as many attempts
//   as the Go agent makes, never more (the attempt itself is cheaper: clientset.ts offers a held
//   replica's TLS session);
// - after a failure behind an address through which the agent holds a replica (a balancer sent it
//   to the one that is down), 2 to 5 x --sync-interval after the refusal came: the only evidence an
//   attempt gives of the missing replica's state is that it is down (a duplicate says nothing of it:
//   the balancer picks a held replica as often whether the missing one is up or down), so the
//   attempts it answers with a refusal are spaced out, while after a duplicate the search goes on at
//   the Go agent's pace: once the replica is back no more refusals come. The attempt's own time
//   counts toward the wait up to 3 x: haproxy holds such an attempt through three retries a second
//   apart before it gives up (5 to 8 x from its start), a cloud load balancer or kube-proxy passes
//   the refusal on at once (2 to 5 x), and one that hung until the handshake timeout is followed at
//   once;
// - after any other failure, the Go agent's backoff: --sync-interval growing x1.5 up to
//   --sync-interval-cap, with its 10 % jitter;
// - after a success, a random share of --sync-interval before looking for the next missing replica:
//   when a restarted server comes back, the attempts a balancer held for it all succeed together, and
//   agents that still miss another replica would otherwise look for it in the same instant (the Go
//   agent waits ~1 s).
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
  /** Attempts since the last loss or success: the first duplicate after a loss is spread wider. */
  private attempts = 0;

  constructor(private readonly opts: SyncPolicyOptions) {
    this.failures = new Backoff({ initialMs: opts.intervalMs, capMs: opts.capMs }, opts.random);
  }

  /**
   * The wait after an attempt with this outcome, counted from its start; `holding`: a replica is held
   * through the address just tried; `tookMs`: how long the attempt took.
   */
  after(outcome: AttemptOutcome, holding: boolean, tookMs: number): number {
    const { intervalMs, random } = this.opts;
    const first = this.attempts++ === 0;
    if (outcome === 'connected') {
      this.failures.reset();
      this.attempts = 0;
      return intervalMs * random();
    }
    if (outcome === 'failed' && !holding) return this.failures.next();
    this.failures.reset();
    if (outcome === 'failed') return Math.min(tookMs, 3 * intervalMs) + intervalMs * (2 + 3 * random());
    return first ? intervalMs * (1 + random()) : this.failures.steady();
  }

  /** The wait before the first attempt after a connection that worked was lost; `serving`: another is still held. */
  afterLoss(serving: boolean): number {
    this.failures.reset();
    this.attempts = 0;
    const { intervalMs, random } = this.opts;
    // 1 - sqrt(1 - u) of a uniform u: the density 2/3 (1 - t/3) over [0, 3], highest at once.
    return serving ? 3 * intervalMs * (1 - Math.sqrt(1 - random())) : 0.5 * intervalMs * random();
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
