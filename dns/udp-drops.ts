// UDP queries the DNS server drops instead of answering: counted in spoke_agent_dns_udp_dropped_total
// and logged at most once per interval, with the counts since the last line, so a flood of oversized
// queries or a full socket cannot flood the log.
import type { Counter } from 'prom-client';
import { type Clock, systemClock } from '../clock/clock.js';
import type { Logger } from '../observability/log.js';

/**
 * truncated: a query larger than the batched socket reads (4096 bytes); failed: handling it threw (a
 * bug: logged with the error); unsent: the socket would not take the answer (full, or a send error).
 */
export type UdpDropReason = 'truncated' | 'failed' | 'unsent';

export class UdpDrops {
  private pending: Record<UdpDropReason, number> = { truncated: 0, failed: 0, unsent: 0 };
  private lastError: unknown;
  private lastLine = Number.NEGATIVE_INFINITY;
  private cancelFlush?: () => void;

  constructor(
    private readonly counter: Counter<'reason'>,
    private readonly log: Logger,
    private readonly intervalMs = 10_000,
    private readonly clock: Clock = systemClock,
  ) {}

  add(reason: UdpDropReason, datagrams: number, err?: unknown): void {
    if (datagrams <= 0) return;
    this.counter.inc({ reason }, datagrams);
    this.pending[reason] += datagrams;
    if (err !== undefined) this.lastError = err;
    if (this.cancelFlush) return; // a line is already due at the end of this interval
    const wait = this.lastLine + this.intervalMs - this.clock.now();
    if (wait <= 0) this.flush();
    else this.cancelFlush = this.clock.after(wait, () => this.flush());
  }

  /** Stops the pending line's timer; what it would have said is in the metric. */
  close(): void {
    this.cancelFlush?.();
    this.cancelFlush = undefined;
  }

  private flush(): void {
    this.cancelFlush = undefined;
    this.lastLine = this.clock.now();
    const dropped = this.pending;
    const err = this.lastError;
    this.pending = { truncated: 0, failed: 0, unsent: 0 };
    this.lastError = undefined;
    const fields = err !== undefined ? { dropped, err } : { dropped };
    if (dropped.failed > 0) this.log.error(fields, 'DNS UDP queries dropped');
    else this.log.warn(fields, 'DNS UDP queries dropped');
  }
}
