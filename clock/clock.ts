// Time for logic that waits: the sync loop's backoff, a stream's retirement, a quiet period. Passed in,
// so tests drive it by hand (test/support/manual-clock.ts) instead of sleeping, and a busy machine
// cannot make them late.
export interface Clock {
  /** Milliseconds on a monotonic scale (performance.now() for the system clock). */
  now(): number;
  /**
   * Calls `fn` once `ms` have passed; the returned function cancels it. A pending call does not keep
   * the process alive (the agent's sockets do).
   */
  after(ms: number, fn: () => void): () => void;
}

export const systemClock: Clock = {
  now: () => performance.now(),
  after: (ms, fn) => {
    const timer = setTimeout(fn, ms);
    timer.unref();
    return () => clearTimeout(timer);
  },
};

/** Resolves after `ms` on `clock`, or at once when `cancelled` is called first (it resolves then too). */
export function sleep(clock: Clock, ms: number): { done: Promise<void>; cancel: () => void } {
  let cancel = () => {};
  const done = new Promise<void>((resolve) => {
    const stop = clock.after(ms, resolve);
    cancel = () => {
      stop();
      resolve();
    };
  });
  return { done, cancel };
}
