// Exponential backoff with jitter, the shape of k8s wait.Backoff that the Go agent uses
// (factor 1.5, jitter 0.1, capped), with the randomness passed in so it can be tested.
export interface BackoffPolicy {
  initialMs: number;
  capMs: number;
  factor?: number;
  jitter?: number;
}

export class Backoff {
  private currentMs: number;

  constructor(
    private readonly policy: BackoffPolicy,
    private readonly random: () => number = Math.random,
  ) {
    this.currentMs = policy.initialMs;
  }

  /** The wait before the next attempt after a failure; each call grows the next one. */
  next(): number {
    const base = this.currentMs;
    const { capMs } = this.policy;
    this.currentMs = Math.min(base * (this.policy.factor ?? 1.5), capMs);
    return Math.min(
      base * (1 + (this.policy.jitter ?? 0.1) * this.random()),
      capMs * (1 + (this.policy.jitter ?? 0.1)),
    );
  }

  /** After a success the next wait starts from the beginning again. */
  reset(): void {
    this.currentMs = this.policy.initialMs;
  }

  /** A jittered initial interval, without growing: the pause between successful syncs. */
  steady(): number {
    return this.policy.initialMs * (1 + (this.policy.jitter ?? 0.1) * this.random());
  }
}
