// Wires the agent together: metrics, what every layer of the tunnel shares (tunnel-context.ts: the
// dialer, the dial recorder, the buffer budget, ...), the set of server connections, and readiness.
// What decides where a dial may go (the embedded resolver, the allowlist) is passed in.
import { randomUUID } from 'node:crypto';
import { Registry } from 'prom-client';
import { systemClock, type Clock } from '../clock/clock.js';
import type { Logger } from '../observability/log.js';
import type { ReadinessCheck } from '../observability/health-server.js';
import { BufferBudget, defaultBufferBudget } from './buffer-budget.js';
import { ClientSet } from './clientset.js';
import { DialLog } from './dial-log.js';
import { DialRecorder } from './dial-recorder.js';
import { DialTraffic } from './dial-traffic.js';
import { DenialAudit } from './denial-audit.js';
import { dialTcp } from './dialer.js';
import type { DialAuthorizer, HostResolver } from '../dial-policy/contract.js';
import { AgentMetrics } from './metrics.js';
import { defaultStallMs } from './connection-table.js';
import type { AgentFlagValues } from './options.js';
import { tcpOptionsUnavailable } from '../net/tcp-options.js';
import { connectIDCounter, type TunnelContext } from './tunnel-context.js';

/**
 * A target that goes silent mid-stream (its node gone, a flow dropped on the way) is let go, and the
 * hub's client told, instead of holding a tunnelled connection until the hub gives up: the Go agent's
 * keepalive (Go's dialer default, 15 s: the same probes per idle connection), and TCP_USER_TIMEOUT, which
 * the Go agent leaves at the kernel's ~15 minutes. Longer than the hub side's: a target may be slow.
 */
const targetFaultDetection = { keepaliveMs: 15_000, userTimeoutMs: 30_000 };

export interface AgentDeps {
  log: Logger;
  registry?: Registry;
  /** Resolves dial host names (default: the system resolver). */
  resolve?: HostResolver;
  /** Refuses dial addresses before any connection attempt. */
  authorize?: DialAuthorizer;
  /** The agent's own identifiers (default --agent-identifiers) and the rule names (rules/identifiers.ts). */
  identifiers?: { own: string; groups: readonly string[] };
  /** The container's memory limit in bytes, when there is one: the default --max-total-buffer derives from it. */
  memoryLimit?: number;
  /** What the connection logic waits on (default the system clock; tests pass a ManualClock). */
  clock?: Clock;
}

export class Agent {
  readonly agentID: string;
  readonly registry: Registry;
  readonly metrics: AgentMetrics;
  readonly clients: ClientSet;
  readonly budget: BufferBudget;
  /** The dial log; undefined with --dial-log-size=0. */
  readonly dialLog: DialLog | undefined;
  /** The agent's own identifiers and the rule names' groups it registers. */
  readonly identifiers: { own: string; groups: readonly string[] };
  /** The container's memory limit in bytes, when there is one. */
  readonly memoryLimit: number | undefined;

  constructor(
    readonly options: AgentFlagValues,
    serverAddresses: string[],
    deps: AgentDeps,
  ) {
    this.agentID = options.agentID || randomUUID();
    const noUserTimeout = options.tcpUserTimeout > 0 ? tcpOptionsUnavailable() : undefined;
    if (noUserTimeout)
      deps.log.warn(
        { reason: noUserTimeout, tcpKeepaliveTime: options.tcpKeepaliveTime },
        '--tcp-user-timeout is not in force: a silent path to a proxy-server is found by keepalive probes alone (about 10 s after --tcp-keepalive-time when idle, never while data is outstanding)',
      );
    const noReceiveBuffer = options.targetReceiveBuffer > 0 ? tcpOptionsUnavailable() : undefined;
    if (noReceiveBuffer)
      deps.log.warn(
        { reason: noReceiveBuffer },
        "--target-receive-buffer is not in force: the kernel sizes each target connection's receive buffer",
      );
    this.identifiers = deps.identifiers ?? { own: options.agentIdentifiers, groups: [] };
    this.memoryLimit = deps.memoryLimit;
    this.registry = deps.registry ?? new Registry();
    this.metrics = new AgentMetrics(this.registry);
    const clock = deps.clock ?? systemClock;
    this.budget = new BufferBudget(options.maxTotalBuffer || defaultBufferBudget(deps.memoryLimit), {
      stallMs: defaultStallMs,
      clock,
      metrics: this.metrics,
      log: deps.log,
    });
    const metrics = this.metrics;
    this.dialLog =
      options.dialLogSize > 0
        ? new DialLog({
            size: options.dialLogSize,
            onSkipped: (reason, n) => metrics.dialLogSkipped.inc({ reason }, n),
          })
        : undefined;
    // What every layer of the tunnel shares, passed whole from the set of connections down (tunnel-context.ts).
    const tunnel: TunnelContext = {
      dial: (address, cancel) =>
        dialTcp(address, {
          timeoutMs: options.dialTimeout,
          clock,
          cancel,
          resolve: deps.resolve,
          authorize: deps.authorize,
          sharedReads: true,
          tcp: targetFaultDetection,
          receiveBufferBytes: options.targetReceiveBuffer,
        }),
      recorder: new DialRecorder(
        new DialTraffic(this.registry),
        new DenialAudit(deps.log, clock, this.registry),
        this.dialLog,
      ),
      budget: this.budget,
      maxBuffer: options.maxConnectionBuffer,
      connectIDs: connectIDCounter(),
      metrics: this.metrics,
      log: deps.log,
      clock,
    };
    this.clients = new ClientSet({
      serverAddresses,
      credentials: options,
      agentID: this.agentID,
      identifiers: this.identifiers.own,
      groups: this.identifiers.groups,
      serverCount: {
        countLeases: options.countServerLeases,
        source: options.serverCountSource === 'max' ? 'max' : 'default',
      },
      syncIntervalMs: options.syncInterval,
      syncIntervalCapMs: options.syncIntervalCap,
      syncForever: options.syncForever,
      keepaliveMs: options.keepaliveTime,
      tcp: {
        keepaliveMs: options.tcpKeepaliveTime,
        userTimeoutMs: options.tcpUserTimeout,
        congestionControl: options.tcpCongestionControl,
      },
      drainTimeoutMs: options.drainTimeout,
      tunnel,
    });
  }

  /** The Go agent's `server-connected` check; red while draining so no new traffic is sent here. */
  readonly readiness: ReadinessCheck = {
    name: 'server-connected',
    check: () => {
      if (this.clients.isDraining) return 'agent is draining';
      return this.clients.healthyCount > 0 ? undefined : 'no servers connected';
    },
  };

  start(): void {
    this.clients.start();
  }

  drain(timeoutMs: number): Promise<void> {
    return this.clients.drain(timeoutMs);
  }

  stop(): void {
    this.clients.stop();
    this.budget.close();
  }
}
