// Every agent metric declared in one place (agentMetricDeclarations); each is built by what keeps
// its counts: AgentMetrics the tunnel's, DialTraffic (dial-traffic.ts) the per-rule ones, DenialAudit
// (denial-audit.ts) its own. Names under konnectivity_network_proxy_agent_* keep the Go agent's
// meaning (pkg/agent/metrics/metrics.go), so existing dashboards keep working; what the Go agent has
// no metric for is under spoke_agent_*.
import type { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { counter, gauge, histogram, type MetricDeclaration, type MetricDeclarations } from '../observability/metric.js';
import { PacketType, packetTypeName } from '../proto/packet-types.js';
import type { TurnsObserver } from './send-turns.js';

const goPrefix = 'konnectivity_network_proxy_agent_';
const latencyBuckets = [0.005, 0.025, 0.1, 0.5, 2.5, 10, 30];

/** The rule label of dials no rule served (IP literals, names the system resolves). */
export const noRule = '(none)';
/** Denied-dial audit lines a second at most, after a burst of this many (denial-audit.ts): its metric's help says so. */
export const denialLinesPerSecond = 5;
export const denialLineBurst = 20;

export type Segment = 'from_agent' | 'to_agent';

/**
 * Packet counts by type, one slot per type of client.proto and one for every other value: a server
 * sending made-up types must not mint a label value (and a series) for each.
 */
const unknownTypeSlot = Math.max(...Object.values(PacketType).filter((v): v is number => typeof v === 'number')) + 1;
const newPacketCounts = (): number[] => new Array<number>(unknownTypeSlot + 1).fill(0);

export const agentMetricDeclarations = {
  dialDuration: {
    type: 'histogram',
    name: `${goPrefix}dial_duration_seconds`,
    help: 'Latency of dial to the remote endpoint in seconds',
    buckets: latencyBuckets,
  },
  dialFailures: {
    type: 'counter',
    name: `${goPrefix}endpoint_dial_failure_total`,
    help: 'Number of failures dialing the remote endpoint, by reason (timeout, refused, unresolvable, denied, unknown).',
    labelNames: ['reason'],
  },
  openServerConnections: {
    type: 'gauge',
    name: `${goPrefix}open_server_connections`,
    help: 'Current number of open server connections.',
  },
  knownServerCount: {
    type: 'gauge',
    name: `${goPrefix}known_server_count`,
    help: 'Current number of servers agent is trying to connect to.',
  },
  streamPackets: {
    type: 'counter',
    name: `${goPrefix}stream_packets_total`,
    help: 'Count of packets processed, by segment and packet type (example: from_agent, DIAL_REQ).',
    labelNames: ['segment', 'packet_type'],
  },
  streamErrors: {
    type: 'counter',
    name: `${goPrefix}stream_errors_total`,
    help: 'Count of gRPC stream errors, by segment, grpc Code, packet type.',
    labelNames: ['segment', 'code', 'packet_type'],
  },
  rejectedPackets: {
    type: 'counter',
    name: 'spoke_agent_rejected_packets_total',
    help: 'Packets from the server that were logged and dropped, by reason (malformed, unexpected_type, unknown_connect_id, unknown_dial): each is a server or protocol fault. A packet for a connection this agent closed moments ago is not one (see spoke_agent_late_packets_total).',
    labelNames: ['reason'],
  },
  latePackets: {
    type: 'counter',
    name: 'spoke_agent_late_packets_total',
    help: 'Packets from the server for a connection or dial this agent had just closed (the ordinary race of both sides closing at once), by packet type (CLOSE_REQ, DATA, DIAL_CLS); answered as the Go agent does.',
    labelNames: ['type'],
  },
  dialCancellations: {
    type: 'counter',
    name: 'spoke_agent_dial_cancellations_total',
    help: 'Pending dials cancelled by DIAL_CLS before they completed.',
  },
  serverConnectAttempts: {
    type: 'counter',
    name: 'spoke_agent_server_connect_attempts_total',
    help: "Attempts to connect to a proxy-server, by result: connected (a replica not held yet), duplicate (a replica already held answered; known after the TLS handshake when it resumed that replica's session), failed (no answer, a refusal, a failed handshake). The Go agent has no such metric (its server_connection_failure_count counts stream errors).",
    labelNames: ['result'],
  },
  serverConnectionsLost: {
    type: 'counter',
    name: 'spoke_agent_server_connections_lost_total',
    help: 'Connections to a proxy-server that went away without the agent closing them, by cause: timeout (the kernel gave up: nothing acknowledged for --tcp-user-timeout, or keepalive probes unanswered: the path went silent), ping (an HTTP/2 PING unanswered for 20s: the server process), goaway (the server is going away), closed (a FIN or a RST, or the server ended the stream), error (another socket error). Each is followed by a reconnect.',
    labelNames: ['cause'],
  },
  drains: {
    type: 'counter',
    name: 'spoke_agent_drains_sent_total',
    help: 'DRAIN packets sent to proxy-servers.',
  },
  bufferHighWater: {
    type: 'histogram',
    name: 'spoke_agent_connection_buffer_high_water_bytes',
    help: 'Per connection, the most bytes ever waiting to be written to its target, observed when it closes.',
    buckets: [16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20],
  },
  bufferOverflows: {
    type: 'counter',
    name: 'spoke_agent_connection_buffer_overflows_total',
    help: 'Connections closed because their target read slower than the hub sent and --max-connection-buffer was exceeded.',
  },
  bufferShed: {
    type: 'counter',
    name: 'spoke_agent_buffer_budget_shed_connections_total',
    help: 'Connections closed with an error because the buffer budget was exhausted and their target had stopped reading.',
  },
  bufferShedBytes: {
    type: 'counter',
    name: 'spoke_agent_buffer_budget_shed_bytes_total',
    help: 'Bytes dropped with the connections the buffer budget closed.',
  },
  bufferBrakes: {
    type: 'counter',
    name: 'spoke_agent_buffer_budget_brakes_total',
    help: 'Times every server stream was paused because the buffer budget was reached while no target had stopped reading yet.',
  },
  dialLogSkipped: {
    type: 'counter',
    name: 'spoke_agent_dial_log_skipped_total',
    help: 'Dial log changes a watcher did not get, by reason: overwritten (more dials than --dial-log-size between two batches) or slow (the watcher read too slowly).',
    labelNames: ['reason'],
  },
  turnWait: {
    type: 'histogram',
    name: 'spoke_agent_turn_wait_seconds',
    help: 'How long a connection waited for its turn to read its target (target -> hub) because its server stream held more than it may: the time its target went unread. Long waits mean the hub takes bytes slower than the targets send them.',
    buckets: [0.01, 0.05, 0.25, 1, 5, 15, 60],
  },
  bytes: {
    type: 'counter',
    name: 'spoke_agent_tunnel_bytes_total',
    help: 'Payload bytes carried, by direction (to_target, from_target).',
    labelNames: ['direction'],
  },
  openEndpointConnections: {
    type: 'gauge',
    name: `${goPrefix}open_endpoint_connections`,
    help: 'Current number of open endpoint connections.',
  },
  closingEndpointConnections: {
    type: 'gauge',
    name: 'spoke_agent_closing_endpoint_connections',
    help: 'Target sockets of closed connections not yet released: flushing their final bytes, for at most 1s.',
  },
  bufferedBytes: {
    type: 'gauge',
    name: 'spoke_agent_buffered_bytes',
    help: 'Bytes waiting to be written to targets, across all connections (bounded by --max-total-buffer).',
  },
  bufferBudgetBytes: {
    type: 'gauge',
    name: 'spoke_agent_buffer_budget_bytes',
    help: 'The total of bytes that may wait for targets across all connections (--max-total-buffer, or its default from the container memory limit).',
  },
  connectionsWaiting: {
    type: 'gauge',
    name: 'spoke_agent_connections_waiting_turn',
    help: 'Connections waiting for their turn to read their target (target -> hub): their server stream is full.',
  },
  // Per rule (dial-traffic.ts): the dials' counts, kept per rule and handed over when scraped.
  ruleDials: {
    type: 'counter',
    name: 'spoke_agent_rule_dials_total',
    help: `Dials the hub asked for, by the rule the destination resolved through ("${noRule}": IP literals and names no rule serves) and result (connected, denied by the dial policy, error, cancelled by DIAL_CLS).`,
    labelNames: ['rule', 'result'],
  },
  ruleBytes: {
    type: 'counter',
    name: 'spoke_agent_rule_bytes_total',
    help: 'Payload bytes carried, by rule and direction (to_target, from_target).',
    labelNames: ['rule', 'direction'],
  },
  ruleOpenConnections: {
    type: 'gauge',
    name: 'spoke_agent_rule_open_connections',
    help: 'Tunnelled connections open, by rule.',
    labelNames: ['rule'],
  },
  ruleDialDuration: {
    type: 'histogram',
    name: 'spoke_agent_rule_dial_duration_seconds',
    help: 'How long dials that connected took (resolve, authorize, connect), by rule.',
    labelNames: ['rule'],
    buckets: [0.001, 0.005, 0.025, 0.1, 0.5, 2.5, 10],
  },
  // The denied-dial audit (denial-audit.ts).
  denialLinesSuppressed: {
    type: 'counter',
    name: 'spoke_agent_dial_refusal_lines_suppressed_total',
    help: `Denied-dial audit lines not written because more than ${denialLinesPerSecond} a second came (after a burst of ${denialLineBurst}); the next line written says how many.`,
  },
} as const satisfies MetricDeclarations;

export class AgentMetrics implements TurnsObserver {
  readonly dialDuration: Histogram;
  readonly dialFailures: Counter<'reason'>;
  readonly openServerConnections: Gauge;
  readonly knownServerCount: Gauge;
  readonly openEndpointConnections: Gauge;
  readonly streamPackets: Counter<'segment' | 'packet_type'>;
  readonly streamErrors: Counter<'segment' | 'code' | 'packet_type'>;
  readonly rejectedPackets: Counter<'reason'>;
  readonly latePackets: Counter<'type'>;
  readonly dialCancellations: Counter;
  readonly serverConnectAttempts: Counter<'result'>;
  readonly serverConnectionsLost: Counter<'cause'>;
  readonly drains: Counter;
  readonly bufferHighWater: Histogram;
  readonly bufferOverflows: Counter;
  readonly closingEndpointConnections: Gauge;
  readonly bufferedBytes: Gauge;
  readonly bufferBudgetBytes: Gauge;
  readonly bufferShed: Counter;
  readonly bufferShedBytes: Counter;
  readonly bufferBrakes: Counter;
  readonly dialLogSkipped: Counter<'reason'>;
  readonly turnWait: Histogram;
  readonly connectionsWaiting: Gauge;
  private budget?: { total: number; limit: number };
  readonly bytes: Counter<'direction'>;
  /**
   * The data-path counts are plain additions, handed to prom-client when it is scraped: a
   * prom-client child's inc() validates and hashes its labels on every call (a visible share of
   * the agent's CPU per packet).
   */
  private readonly packetCounts: Record<Segment, number[]> = {
    from_agent: newPacketCounts(),
    to_agent: newPacketCounts(),
  };
  private readonly byteCounts = { to_target: 0, from_target: 0 };
  /** Endpoint connections open, and closed but still flushing (changed per connection, read per scrape). */
  readonly endpointCounts = { open: 0, closing: 0 };
  /** Connections waiting for their turn to read their target, across streams (send-turns.ts). */
  private waitingTurns = 0;

  constructor(registry: Registry) {
    this.dialDuration = histogram(agentMetricDeclarations.dialDuration, registry);
    this.dialFailures = counter(agentMetricDeclarations.dialFailures, registry);
    this.openServerConnections = gauge(agentMetricDeclarations.openServerConnections, registry);
    this.knownServerCount = gauge(agentMetricDeclarations.knownServerCount, registry);
    const counts = this.endpointCounts;
    this.openEndpointConnections = gaugeOf(
      agentMetricDeclarations.openEndpointConnections,
      registry,
      () => counts.open,
    );
    const packetCounts = this.packetCounts;
    this.streamPackets = counter(agentMetricDeclarations.streamPackets, registry, function () {
      this.reset();
      for (const segment of ['from_agent', 'to_agent'] as const) {
        packetCounts[segment].forEach((n, slot) => {
          if (n > 0) this.inc({ segment, packet_type: slot === unknownTypeSlot ? 'UNKNOWN' : packetTypeName(slot) }, n);
        });
      }
    });
    this.streamErrors = counter(agentMetricDeclarations.streamErrors, registry);
    this.rejectedPackets = counter(agentMetricDeclarations.rejectedPackets, registry);
    this.latePackets = counter(agentMetricDeclarations.latePackets, registry);
    this.dialCancellations = counter(agentMetricDeclarations.dialCancellations, registry);
    this.serverConnectAttempts = counter(agentMetricDeclarations.serverConnectAttempts, registry);
    this.serverConnectionsLost = counter(agentMetricDeclarations.serverConnectionsLost, registry);
    this.drains = counter(agentMetricDeclarations.drains, registry);
    this.bufferHighWater = histogram(agentMetricDeclarations.bufferHighWater, registry);
    this.bufferOverflows = counter(agentMetricDeclarations.bufferOverflows, registry);
    this.closingEndpointConnections = gaugeOf(
      agentMetricDeclarations.closingEndpointConnections,
      registry,
      () => counts.closing,
    );
    this.bufferedBytes = gaugeOf(agentMetricDeclarations.bufferedBytes, registry, () => this.budget?.total ?? 0);
    this.bufferBudgetBytes = gaugeOf(
      agentMetricDeclarations.bufferBudgetBytes,
      registry,
      () => this.budget?.limit ?? 0,
    );
    this.bufferShed = counter(agentMetricDeclarations.bufferShed, registry);
    this.bufferShedBytes = counter(agentMetricDeclarations.bufferShedBytes, registry);
    this.bufferBrakes = counter(agentMetricDeclarations.bufferBrakes, registry);
    this.dialLogSkipped = counter(agentMetricDeclarations.dialLogSkipped, registry);
    this.turnWait = histogram(agentMetricDeclarations.turnWait, registry);
    this.connectionsWaiting = gaugeOf(agentMetricDeclarations.connectionsWaiting, registry, () => this.waitingTurns);
    const byteCounts = this.byteCounts;
    this.bytes = counter(agentMetricDeclarations.bytes, registry, function () {
      this.reset();
      for (const [direction, n] of Object.entries(byteCounts)) this.inc({ direction }, n);
    });
  }

  /** The budget whose total and limit the gauges report. */
  watchBufferBudget(budget: { total: number; limit: number }): void {
    this.budget = budget;
  }

  observePacket(segment: Segment, type: number): void {
    this.packetCounts[segment][type >= 0 && type < unknownTypeSlot ? type : unknownTypeSlot]!++;
  }

  countBytesToTarget(n: number): void {
    this.byteCounts.to_target += n;
  }

  countBytesFromTarget(n: number): void {
    this.byteCounts.from_target += n;
  }

  waiting(delta: number): void {
    this.waitingTurns += delta;
  }

  waited(ms: number): void {
    this.turnWait.observe(ms / 1000);
  }
}

/** A gauge read when scraped, for values the agent keeps as plain numbers anyway. */
function gaugeOf(d: MetricDeclaration & { type: 'gauge' }, registry: Registry, read: () => number): Gauge {
  return gauge(d, registry, function () {
    this.set(read());
  });
}
