// What every layer of the tunnel shares, built once in agent.ts and passed whole from the set of
// server connections down to each connection: the set (clientset.ts), each server connection, each
// stream, its connection table and its connections take this one object, so a collaborator they all
// need is added here and where agent.ts builds it, not to an options type per layer.
import type { Duplex } from 'node:stream';
import type { Clock } from '../clock/clock.js';
import type { Logger } from '../observability/log.js';
import type { BufferBudget } from './buffer-budget.js';
import type { DialRecorder } from './dial-recorder.js';
import type { DialRoute } from '../dial-policy/contract.js';
import type { DialCancel } from './dialer.js';
import type { AgentMetrics } from './metrics.js';

/** Dials a DIAL_REQ's address: the socket and the way the dial went, or a TargetDialError with how far it got. */
export type Dialer = (address: string, cancel: DialCancel) => Promise<{ socket: Duplex; route: DialRoute }>;

export interface TunnelContext {
  /** The target dialer (dialer.ts with the dial policy and --dial-timeout); tests pass their own. */
  dial: Dialer;
  /** Where each dial is told when it settles and when it closes (per-rule metrics, the dial log, denial audit lines). */
  recorder?: DialRecorder;
  /** The agent-wide bound on bytes waiting for targets; its brake pauses every stream. */
  budget: BufferBudget;
  /** --max-connection-buffer: the most bytes one target may have waiting. */
  maxBuffer: number;
  /**
   * Hands out connectIDs. The proxy-server keys established connections by (agentID, connectID) (ANP
   * server.go addEstablished): every stream of every server connection draws from one counter.
   */
  connectIDs: () => string;
  metrics: AgentMetrics;
  /** The agent's logger; a server connection's layers log on its child, with the proxy-server's address. */
  log: Logger;
  /** What every wait of the tunnel runs on (the system clock; tests pass a ManualClock). */
  clock: Clock;
}

/** connectIDs from 1, for one agent. */
export function connectIDCounter(): () => string {
  let next = 1;
  return () => String(next++);
}
