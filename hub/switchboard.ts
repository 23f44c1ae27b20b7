// The routing state between agent streams and frontends: pending dials keyed by `random`, established
// connections keyed by (agentID, connectID), and what to do with each packet an agent sends. This is
// the Go server's ProxyServer core (ANP pkg/server/server.go: PendingDialManager, established,
// serveRecvBackend), without its listeners.
import { EventEmitter } from 'node:events';
import type { Logger } from '../observability/log.js';
import { systemClock, type Clock } from '../clock/clock.js';
import { PacketType, packetTypeName, type OutPacket, type Packet } from '../proto/packets.js';
import { Backends, type Backend, type ProxyStrategy } from './backends.js';
import type { Identifiers } from './identifiers.js';

/** One agent stream (Go's Backend), as the switchboard uses it. */
export interface AgentLink extends Backend {
  readonly serverID: string;
  readonly closed: boolean;
  /** After a DRAIN from the agent. */
  markDraining(): void;
  /** Queues a packet; false when the stream is backed up (wait for `onceWritable`). */
  send(pkt: OutPacket): boolean;
  onceWritable(cb: () => void): void;
  /** Stops reading from the agent while `token` (a backed-up frontend) holds it. */
  hold(token: object): void;
  release(token: object): void;
}

/** One frontend dial: a gRPC Proxy stream or an HTTP CONNECT socket (Go's ProxyClientConnection). */
export interface FrontendLink {
  readonly mode: 'grpc' | 'http-connect';
  readonly closed: boolean;
  /** Hands over a packet from the agent; false when the frontend is backed up. */
  deliver(pkt: Packet): boolean;
  onceWritable(cb: () => void): void;
  /** Called once DIAL_RSP without error has been delivered and the connection is established. */
  established?(connection: TunnelledConnection): void;
  /** The agent stream of a pending dial ended (only HTTP CONNECT reacts, as in Go). */
  agentGone?(): void;
}

export interface TunnelledConnection {
  readonly random: string;
  readonly address: string;
  readonly agent: AgentLink;
  readonly frontend: FrontendLink;
  /** When the DIAL_REQ went out, on the switchboard's clock. */
  readonly start: number;
  connectID?: string;
}

/** Go's dial_failure_count reasons. */
export type DialFailureReason =
  | 'no_agent'
  | 'error_response'
  | 'unrecognized_response'
  | 'send_rsp'
  | 'backend_close'
  | 'backend_dial_timeout'
  | 'frontend_close';

export interface HubCounters {
  dialFailures: Record<DialFailureReason, number>;
  /** Packets missing the payload their type calls for, from either side. */
  malformedPackets: number;
  /** DATA or CLOSE_RSP from an agent for a connectID with no frontend. */
  unknownConnectID: number;
  /** Packets a frontend sent after its stream stopped being served. */
  discardedPackets: number;
  /**
   * A key's (agentID's or identifier's) first stream removed while later ones remained: what the Go
   * server logs as "This should not happen. Removed connection that is not the first connection".
   */
  firstStreamRemovedBeforeOthers: number;
}

export interface AgentInfo {
  agentID: string;
  identifiers: Identifiers;
  serverID: string;
  draining: boolean;
}

const agentInfo = (a: AgentLink): AgentInfo => ({
  agentID: a.agentID,
  identifiers: a.identifiers,
  serverID: a.serverID,
  draining: a.draining,
});

export interface SwitchboardEvents {
  agentConnected: [AgentInfo];
  agentDisconnected: [AgentInfo];
  /** Every packet received from an agent, before it is routed. */
  agentPacket: [AgentInfo, Packet];
}

const payloadOf: Record<number, keyof Packet> = {
  [PacketType.DIAL_REQ]: 'dialRequest',
  [PacketType.DIAL_RSP]: 'dialResponse',
  [PacketType.CLOSE_REQ]: 'closeRequest',
  [PacketType.CLOSE_RSP]: 'closeResponse',
  [PacketType.DATA]: 'data',
  [PacketType.DIAL_CLS]: 'closeDial',
};

/** True when the packet carries the payload its type needs (DRAIN and unknown types need none). */
export function wellFormed(pkt: Packet): boolean {
  const key = payloadOf[pkt.type];
  return key === undefined || pkt[key] != null;
}

export class Switchboard {
  readonly backends: Backends<AgentLink>;
  private readonly agents = new Set<AgentLink>();
  private readonly pending = new Map<string, TunnelledConnection>();
  private readonly established = new Map<string, Map<string, TunnelledConnection>>();
  readonly counters: HubCounters = {
    dialFailures: {
      no_agent: 0,
      error_response: 0,
      unrecognized_response: 0,
      send_rsp: 0,
      backend_close: 0,
      backend_dial_timeout: 0,
      frontend_close: 0,
    },
    malformedPackets: 0,
    unknownConnectID: 0,
    discardedPackets: 0,
    firstStreamRemovedBeforeOthers: 0,
  };

  readonly events = new EventEmitter<SwitchboardEvents>();

  constructor(
    strategies: readonly ProxyStrategy[],
    private readonly log: Logger,
    /** What the frontends' backend dial timeouts wait on, and what times a dial (TunnelledConnection.start) for the log. */
    readonly clock: Clock = systemClock,
    random?: () => number,
  ) {
    this.backends = new Backends(strategies, random, (key) => {
      this.counters.firstStreamRemovedBeforeOthers++;
      this.log.debug(
        { key },
        'removed the first stream of a key while later ones remain (the Go server logs "This should not happen. Removed connection that is not the first connection")',
      );
    });
  }

  listAgents(): AgentInfo[] {
    return [...this.agents].map(agentInfo);
  }

  findAgents(agentID: string): AgentLink[] {
    return [...this.agents].filter((a) => a.agentID === agentID);
  }

  addAgent(agent: AgentLink): void {
    this.agents.add(agent);
    this.backends.add(agent);
    this.events.emit('agentConnected', agentInfo(agent));
  }

  /**
   * The agent stream ended: established connections through it get CLOSE_RSP. Pending dials stay
   * pending (Go's TODO #126) but their frontend hears of it.
   */
  removeAgent(agent: AgentLink): void {
    if (!this.agents.delete(agent)) return;
    this.backends.remove(agent);
    for (const connection of this.pending.values()) if (connection.agent === agent) connection.frontend.agentGone?.();
    const conns = this.established.get(agent.agentID);
    for (const [connectID, connection] of conns ?? []) {
      if (connection.agent !== agent) continue;
      conns!.delete(connectID);
      this.deliver(connection, { type: PacketType.CLOSE_RSP, closeResponse: { error: '', connectID } });
    }
    if (conns?.size === 0) this.established.delete(agent.agentID);
    this.events.emit('agentDisconnected', agentInfo(agent));
  }

  dialFailed(reason: DialFailureReason): void {
    this.counters.dialFailures[reason]++;
  }

  addPending(connection: TunnelledConnection): void {
    this.pending.set(connection.random, connection);
  }

  removePending(random: string): TunnelledConnection | undefined {
    const connection = this.pending.get(random);
    this.pending.delete(random);
    return connection;
  }

  /** Forgets every dial and connection of a frontend that went away; the caller tells the agents. */
  removeForFrontend(frontend: FrontendLink): { pending: TunnelledConnection[]; established: TunnelledConnection[] } {
    const pending = [...this.pending.values()].filter((t) => t.frontend === frontend);
    for (const t of pending) this.pending.delete(t.random);
    const established: TunnelledConnection[] = [];
    for (const [agentID, conns] of this.established) {
      for (const [connectID, t] of conns) {
        if (t.frontend !== frontend) continue;
        conns.delete(connectID);
        established.push(t);
      }
      if (conns.size === 0) this.established.delete(agentID);
    }
    return { pending, established };
  }

  private addEstablished(connection: TunnelledConnection, connectID: string): void {
    connection.connectID = connectID;
    const agentID = connection.agent.agentID;
    let conns = this.established.get(agentID);
    if (!conns) {
      conns = new Map();
      this.established.set(agentID, conns);
    }
    conns.set(connectID, connection);
  }

  private removeEstablished(agentID: string, connectID: string): TunnelledConnection | undefined {
    const conns = this.established.get(agentID);
    const connection = conns?.get(connectID);
    if (!connection) return undefined;
    conns!.delete(connectID);
    if (conns!.size === 0) this.established.delete(agentID);
    return connection;
  }

  closeOnAgent(agent: AgentLink, connectID: string, reason: string): void {
    this.log.debug({ agentID: agent.agentID, connectID, reason }, 'CLOSE_REQ to agent');
    agent.send({ type: PacketType.CLOSE_REQ, closeRequest: { connectID } });
  }

  /**
   * False when the frontend is gone (Go's failed send). A backed-up frontend pauses the agent stream
   * it reads from, as Go's blocking Send does.
   */
  private deliver(connection: TunnelledConnection, pkt: Packet | OutPacket): boolean {
    const { frontend, agent } = connection;
    if (frontend.closed) return false;
    if (!frontend.deliver(pkt as Packet)) {
      agent.hold(frontend);
      frontend.onceWritable(() => agent.release(frontend));
    }
    return true;
  }

  /** Routes one packet from an agent (Go's serveRecvBackend). */
  fromAgent(agent: AgentLink, pkt: Packet): void {
    this.events.emit('agentPacket', agentInfo(agent), pkt);
    const log = this.log;
    if (!wellFormed(pkt)) {
      this.counters.malformedPackets++;
      log.warn(
        { agentID: agent.agentID, type: packetTypeName(pkt.type) },
        'packet from agent without its payload; dropped',
      );
      return;
    }
    switch (pkt.type) {
      case PacketType.DIAL_RSP: {
        const { random, connectID, error } = pkt.dialResponse!;
        const connection = this.removePending(random);
        if (!connection) {
          log.info({ agentID: agent.agentID, random, connectID }, 'DIAL_RSP not recognized; dropped');
          this.dialFailed('unrecognized_response');
          if (connectID !== '0') this.closeOnAgent(agent, connectID, 'unknown dial id');
          return;
        }
        if (error) {
          log.info({ agentID: agent.agentID, random, error }, 'DIAL_RSP contains failure');
          this.dialFailed('error_response');
        }
        if (!this.deliver(connection, pkt)) {
          if (!error) this.dialFailed('send_rsp');
          this.closeOnAgent(agent, connectID, 'dial error');
          return;
        }
        if (error) return;
        this.addEstablished(connection, connectID);
        log.debug(
          {
            agentID: agent.agentID,
            random,
            connectID,
            address: connection.address,
            ms: Math.round(this.clock.now() - connection.start),
          },
          'proxy connection established',
        );
        connection.frontend.established?.(connection);
        return;
      }
      case PacketType.DIAL_CLS: {
        const connection = this.removePending(pkt.closeDial!.random);
        if (!connection) {
          log.info({ agentID: agent.agentID, random: pkt.closeDial!.random }, 'DIAL_CLS not recognized; dropped');
          return;
        }
        this.deliver(connection, pkt);
        this.dialFailed('backend_close');
        return;
      }
      case PacketType.DATA: {
        const { connectID } = pkt.data!;
        if (connectID === '0') {
          this.counters.malformedPackets++;
          log.warn({ agentID: agent.agentID }, 'DATA from agent without connectID; dropped');
          return;
        }
        const connection = this.established.get(agent.agentID)?.get(connectID);
        if (!connection) {
          this.counters.unknownConnectID++;
          log.info({ agentID: agent.agentID, connectID }, 'DATA for unknown connectID; closing it on the agent');
          this.closeOnAgent(agent, connectID, 'missing frontend');
          return;
        }
        this.deliver(connection, pkt);
        return;
      }
      case PacketType.CLOSE_RSP: {
        const connection = this.removeEstablished(agent.agentID, pkt.closeResponse!.connectID);
        if (!connection) {
          // Normal after the frontend already went away.
          this.counters.unknownConnectID++;
          log.debug(
            { agentID: agent.agentID, connectID: pkt.closeResponse!.connectID },
            'CLOSE_RSP for unknown connectID',
          );
          return;
        }
        this.deliver(connection, pkt);
        return;
      }
      case PacketType.DRAIN:
        log.info({ agentID: agent.agentID }, 'agent is draining');
        agent.markDraining();
        return;
      default:
        log.debug({ agentID: agent.agentID, type: packetTypeName(pkt.type) }, 'ignoring packet from agent');
    }
  }
}
