// What the connection table tells about each dial, and where it goes: the per-rule metrics
// (always), the dial log (--dial-log-size > 0) and, for a denial, the audit line. Called once when
// a dial settles and once when a connected one closes: nothing per packet.
import type { Dial } from './dial.js';
import type { DialLog } from './dial-log.js';
import type { DialTraffic, RuleTraffic } from './dial-traffic.js';
import type { DenialAudit } from './denial-audit.js';

export class DialRecorder {
  constructor(
    private readonly traffic: DialTraffic,
    private readonly audit: DenialAudit,
    readonly dialLog: DialLog | undefined,
  ) {}

  /** A dial settled; returns its rule's counts, which a connected dial's connection adds its bytes to. */
  settled(r: Dial): RuleTraffic {
    const t = this.traffic.of(r.rule);
    t.dials[r.result]++;
    if (r.result === 'connected') {
      t.open++;
      t.latency.observe(r.dialMs / 1000);
    } else if (r.result === 'denied') this.audit.denied(r);
    this.dialLog?.added(r);
    return t;
  }

  /** A connected dial closed; it holds its bytes and duration by now. */
  closed(r: Dial, t: RuleTraffic): void {
    t.open--;
    this.dialLog?.modified(r);
  }
}
