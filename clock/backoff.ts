// Exponential backoff with jitter, the shape of k8s wait.Backoff that the Go agent uses
// (factor 1.5, jitter 0.1, capped), with the randomness passed in so it can be tested.
export interface BackoffPolicy {
  initialMs: number;
  capMs: number;
  factor?: number;
  jitter?: number;
  /**
   * Where the waits start after a reset, doubling up to `initialMs` before the usual growth: a
   * server that restarts is back within a few short retries, and one that stays down is soon
   * retried at the usual backing-off rate. Default `initialMs` (no short retries).
   */
  firstMs?: number;
}

export class Backoff {
  private currentMs: number;

  constructor(
    private readonly policy: BackoffPolicy,
    private readonly random: () => number = Math.random,
  ) {
    this.currentMs = this.start();
  }

  /** The wait before the next attempt after a failure; each call grows the next one. */
  next(): number {
    const base = this.currentMs;
    const { initialMs, capMs } = this.policy;
    this.currentMs =
      base < initialMs ? Math.min(base * 2, initialMs) : Math.min(base * (this.policy.factor ?? 1.5), capMs);
    return Math.min(
      base * (1 + (this.policy.jitter ?? 0.1) * this.random()),
      capMs * (1 + (this.policy.jitter ?? 0.1)),
    );
  }

  /** After a success the next wait starts from the beginning again. */
  reset(): void {
    this.currentMs = this.start();
  }

  /** A jittered initial interval, without growing: the pause between successful syncs. */
  steady(): number {
    return this.policy.initialMs * (1 + (this.policy.jitter ?? 0.1) * this.random());
  }

  private start(): number {
    return Math.min(this.policy.firstMs ?? this.policy.initialMs, this.policy.initialMs);
  }
}
