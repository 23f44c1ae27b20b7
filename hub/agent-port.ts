// The agent port: AgentService/Connect, one stream per agent connection (ANP pkg/server/server.go
// Connect, backend_manager.go NewBackend). Checks the agent's metadata, answers with the serverID and
// serverCount headers before any packet, then hands every packet to the switchboard.
import * as grpc from '@grpc/grpc-js';
import type { Logger } from '../observability/log.js';
import { Header, type OutPacket, type Packet } from '../proto/packets.js';
import { parseAgentIdentifiers, noIdentifiers, type Identifiers } from './identifiers.js';
import type { PingStrikes } from './keepalive-policy.js';
import type { AgentLink, Switchboard } from './switchboard.js';

/** Checks a bearer token (Go: a TokenReview); throws with the reason when it is not acceptable. */
export type AgentTokenValidator = (token: string, agentID: string) => Promise<void>;

export interface AgentPortOptions {
  serverID: string;
  serverCount: number;
  switchboard: Switchboard;
  log: Logger;
  /** When set, agents must send `Authorization: Bearer <token>` that this accepts. */
  validateAgentToken?: AgentTokenValidator;
  /** Ping strikes by peer, to forgive them when we write (see keepalive-policy.ts). */
  pingStrikes: Map<string, PingStrikes>;
}

type AgentCall = grpc.ServerDuplexStream<Packet, OutPacket>;

/** Go formats a []string with %v as `[a b]`. */
const goList = (values: string[]) => `[${values.join(' ')}]`;

/**
 * The values of a metadata key. Node's http2 joins repeated header fields with ", " before grpc-js
 * sees them, where grpc-go keeps them apart; splitting restores Go's count.
 */
const valuesOf = (md: grpc.Metadata, key: string) => md.get(key).flatMap((v) => String(v).split(', '));

/** Go's getAgentID and getAgentIdentifiers, with their error texts. */
function readAgentMetadata(md: grpc.Metadata): { agentID: string; identifiers: Identifiers } {
  const ids = valuesOf(md, Header.agentID);
  if (ids.length !== 1) throw new Error(`expected one agent ID in the context, got ${goList(ids)}`);
  const idents = valuesOf(md, Header.agentIdentifiers);
  if (idents.length > 1)
    throw new Error(`expected at most one set of agent identifiers in the context, got ${goList(idents)}`);
  return { agentID: ids[0]!, identifiers: idents.length === 0 ? noIdentifiers() : parseAgentIdentifiers(idents[0]!) };
}

/** Go's authenticateAgentViaToken, with its error texts. */
async function authenticate(md: grpc.Metadata, agentID: string, validate: AgentTokenValidator): Promise<void> {
  const values = valuesOf(md, Header.authorization);
  if (values.length === 0) throw new Error('Authentication context was not found in metadata');
  if (values.length > 1) throw new Error(`too many (${values.length}) tokens are received`);
  const prefix = 'Bearer ';
  const value = values[0]!;
  if (!value.startsWith(prefix)) throw new Error(`received token does not have "${prefix}" prefix`);
  try {
    await validate(value.slice(prefix.length), agentID);
  } catch (err) {
    throw new Error(`Failed to validate authentication token, err:${(err as Error).message}`);
  }
}

/** One agent's Connect stream. */
export class AgentStream implements AgentLink {
  draining = false;
  closed = false;
  private readonly holders = new Set<object>();
  private waiters: (() => void)[] = [];

  constructor(
    readonly agentID: string,
    readonly identifiers: Identifiers,
    readonly serverID: string,
    private readonly call: AgentCall,
    private readonly strikes: PingStrikes | undefined,
    private readonly onClosed: (why: string) => void,
  ) {
    call.on('drain', () => this.wake());
  }

  markDraining(): void {
    this.draining = true;
  }

  send(pkt: OutPacket): boolean {
    if (this.closed) return false;
    this.strikes?.wrote();
    return this.call.write(pkt);
  }

  onceWritable(cb: () => void): void {
    if (this.closed || !this.call.writableNeedDrain) queueMicrotask(cb);
    else this.waiters.push(cb);
  }

  hold(token: object): void {
    this.holders.add(token);
    this.call.pause();
  }

  release(token: object): void {
    this.holders.delete(token);
    if (this.holders.size === 0 && !this.closed) this.call.resume();
  }

  /** Ends the stream with status OK, as Go does for a retired backend. */
  end(): void {
    if (this.closed) return;
    this.call.end();
    this.close('ended by the hub');
  }

  close(why: string): void {
    if (this.closed) return;
    this.closed = true;
    this.wake();
    this.onClosed(why);
  }

  private wake(): void {
    const waiters = this.waiters;
    this.waiters = [];
    for (const cb of waiters) cb();
  }
}

/** The Connect handler; `streams` tracks live agent streams so the hub can end them. */
export function agentConnectHandler(
  opts: AgentPortOptions,
  streams: Set<AgentStream>,
): grpc.handleBidiStreamingCall<Packet, OutPacket> {
  const { switchboard, log } = opts;
  return (call) => {
    const fail = (err: Error) => {
      log.warn({ peer: call.getPeer(), err: err.message }, 'agent refused');
      call.emit('error', { code: grpc.status.UNKNOWN, details: err.message });
    };
    let meta: { agentID: string; identifiers: Identifiers };
    try {
      meta = readAgentMetadata(call.metadata);
    } catch (err) {
      fail(err as Error);
      return;
    }
    const { agentID, identifiers } = meta;
    const authenticated = opts.validateAgentToken
      ? authenticate(call.metadata, agentID, opts.validateAgentToken)
      : Promise.resolve();
    authenticated.then(
      () => {
        if (call.cancelled) return;
        const header = new grpc.Metadata();
        header.set(Header.serverID, opts.serverID);
        header.set(Header.serverCount, String(opts.serverCount));
        call.sendMetadata(header);
        const agent = new AgentStream(
          agentID,
          identifiers,
          opts.serverID,
          call,
          opts.pingStrikes.get(call.getPeer()),
          (why) => {
            streams.delete(agent);
            log.info({ agentID, why }, 'agent stream ended');
            switchboard.removeAgent(agent);
          },
        );
        streams.add(agent);
        log.info({ agentID, identifiers, peer: call.getPeer() }, 'agent connected');
        switchboard.addAgent(agent);
        call.on('data', (pkt: Packet) => {
          if (!agent.closed) switchboard.fromAgent(agent, pkt);
        });
        call.on('end', () => {
          // The agent closed its side: Go's Connect returns nil, which ends ours with OK.
          if (!call.writableEnded) call.end();
          agent.close('agent closed its side');
        });
        call.on('cancelled', () => agent.close('cancelled'));
        call.on('error', (err: Error) => agent.close(err.message));
        call.on('close', () => agent.close('closed'));
      },
      (err: Error) => fail(err),
    );
  };
}
