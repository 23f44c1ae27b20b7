// Denied dials as audit lines: one structured warn line per dial the dial policy denied (server,
// destination, the address denied, the reason), rate limited by a token bucket on the agent's
// clock so a hub asking for denied dials in a loop cannot flood the log. Lines dropped are counted
// (spoke_agent_dial_refusal_lines_suppressed_total: the metric keeps its name for dashboards), and
// the next line written says how many.
import type { Counter, Registry } from 'prom-client';
import type { Clock } from '../clock/clock.js';
import { TokenBucket } from '../clock/token-bucket.js';
import type { Logger } from '../observability/log.js';
import { counter } from '../observability/metric.js';
import type { Dial } from './dial.js';
import { agentMetricDeclarations, denialLineBurst, denialLinesPerSecond } from './metrics.js';

export class DenialAudit {
  private readonly bucket: TokenBucket;
  private suppressed = 0;
  private readonly suppressedLines: Counter;

  constructor(
    private readonly log: Logger,
    clock: Clock,
    registry: Registry,
  ) {
    this.bucket = new TokenBucket(clock, denialLinesPerSecond, denialLineBurst);
    this.suppressedLines = counter(agentMetricDeclarations.denialLinesSuppressed, registry);
  }

  denied(r: Dial): void {
    if (!this.bucket.take()) {
      this.suppressed++;
      this.suppressedLines.inc();
      return;
    }
    this.log.warn(
      {
        audit: 'dial-denied',
        server: r.server,
        destination: r.destination,
        address: r.address,
        reason: r.reason,
        ...(this.suppressed > 0 ? { suppressedBefore: this.suppressed } : {}),
      },
      'dial denied by the dial policy',
    );
    this.suppressed = 0;
  }
}
