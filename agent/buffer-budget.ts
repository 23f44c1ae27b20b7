// The agent-wide bound on bytes waiting to be written to targets (hub -> target), across every
// connection of every server stream. --max-connection-buffer bounds one connection; without a total,
// 40 targets that stop reading hold 40 times that and the kernel kills the agent at the container's
// memory limit, taking every connection through the node's agent with it.
// Past the total: the connections whose targets stopped reading (nothing accepted for the stall
// limit), largest first, are closed with an error until the total is back under half the budget.
// While none qualifies yet, every server stream is paused (no new bytes arrive), until enough has
// drained or the offenders show themselves. Every other connection stays open.
import type { Clock } from '../clock/clock.js';
import type { Logger } from '../observability/log.js';
import type { AgentMetrics } from './metrics.js';

/** What the budget needs of a connection. */
export interface ShedCandidate {
  /** Bytes waiting to be written to its target. */
  readonly buffered: number;
  /** When its target last accepted bytes (or when bytes started waiting), on the budget's clock. */
  readonly lastProgress: number;
}

export interface BufferHolder extends ShedCandidate {
  /** Closes the connection with `reason` (sent to the hub) and releases its bytes now. */
  shed(reason: string): void;
}

/** The stream-wide brake of one server stream. */
export interface Brake {
  pause(): void;
  resume(): void;
}

/**
 * Whom to close so that `total` falls to `target`: connections whose targets accepted nothing for
 * `stallMs`, largest first. Targets still reading are never chosen (they get the brake instead).
 */
export function chooseShed<T extends ShedCandidate>(
  holders: Iterable<T>,
  now: number,
  total: number,
  target: number,
  stallMs: number,
): T[] {
  const stopped = [...holders]
    .filter((h) => h.buffered > 0 && now - h.lastProgress >= stallMs)
    .sort((a, b) => b.buffered - a.buffered);
  const chosen: T[] = [];
  for (const h of stopped) {
    if (total <= target) break;
    chosen.push(h);
    total -= h.buffered;
  }
  return chosen;
}

/** The default total: a quarter of the container's memory limit, or 256 MiB outside a container. */
export function defaultBufferBudget(memoryLimit: number | undefined): number {
  return memoryLimit === undefined ? 256 << 20 : Math.max(16 << 20, Math.floor(memoryLimit / 4));
}

export interface BufferBudgetOptions {
  /** A target that accepted nothing for this long has stopped reading. */
  stallMs: number;
  /** What the stall limit and the brake's checks are measured on. */
  clock: Clock;
  metrics: AgentMetrics;
  log: Logger;
}

export class BufferBudget {
  /** Bytes held across all connections now. */
  total = 0;
  private readonly holders = new Set<BufferHolder>();
  private readonly brakes = new Set<Brake>();
  private braked = false;
  private cancelCheck = () => {};

  constructor(
    readonly limit: number,
    private readonly opts: BufferBudgetOptions,
  ) {
    opts.metrics.watchBufferBudget(this);
  }

  register(holder: BufferHolder): void {
    this.holders.add(holder);
  }

  unregister(holder: BufferHolder): void {
    this.holders.delete(holder);
  }

  /** A holder's bytes changed by `delta`. */
  add(delta: number): void {
    this.total += delta;
    if (delta > 0 && this.total > this.limit && !this.braked) this.enforce();
  }

  /** A server stream joins; it is paused at once if the budget is braking. Returns its removal. */
  addBrake(brake: Brake): () => void {
    this.brakes.add(brake);
    if (this.braked) brake.pause();
    return () => this.brakes.delete(brake);
  }

  private enforce(): void {
    const lowWater = this.limit / 2;
    if (this.total > lowWater) {
      // Either over the limit, or braking: free everyone at the expense of the targets that stopped.
      for (const h of chooseShed(this.holders, this.opts.clock.now(), this.total, lowWater, this.opts.stallMs)) {
        const { buffered } = h;
        this.opts.metrics.bufferShed.inc();
        this.opts.metrics.bufferShedBytes.inc(buffered);
        this.opts.log.warn(
          { total: this.total, limit: this.limit, buffered },
          'agent buffer budget exhausted: closing a connection whose target stopped reading',
        );
        h.shed(
          `agent buffer budget exhausted: ${this.total} bytes waiting for targets across all connections (--max-total-buffer ${this.limit}); this target accepted nothing for ${this.opts.stallMs}ms with ${buffered} bytes waiting, the largest such connection`,
        );
      }
    }
    if (!this.braked && this.total > this.limit) {
      this.braked = true;
      this.opts.metrics.bufferBrakes.inc();
      this.opts.log.warn(
        { total: this.total, limit: this.limit },
        'agent buffer budget reached and no target has stopped reading yet: pausing every server stream',
      );
      for (const b of this.brakes) b.pause();
      this.scheduleCheck();
    } else if (this.braked && this.total <= lowWater) {
      this.braked = false;
      this.cancelCheck();
      for (const b of this.brakes) b.resume();
    }
  }

  /** While braking, enforces again every quarter of the stall limit: a target may stop meanwhile. */
  private scheduleCheck(): void {
    this.cancelCheck = this.opts.clock.after(Math.max(10, this.opts.stallMs / 4), () => {
      this.enforce();
      if (this.braked) this.scheduleCheck();
    });
  }

  /** Stops the brake's checks (the agent is stopping). */
  close(): void {
    this.cancelCheck();
  }
}
