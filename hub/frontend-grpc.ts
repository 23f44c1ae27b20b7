// The gRPC frontend: ProxyService/Proxy, one dial per stream (ANP pkg/server/server.go Proxy,
// serveRecvFrontend). After a failed dial, a CLOSE_REQ or a protocol error the stream is no longer
// served: later packets are discarded until the client ends it, as Go's drained channel does.
import type * as grpc from '@grpc/grpc-js';
import type { Logger } from '../observability/log.js';
import { PacketType, packetTypeName, type OutPacket, type Packet } from '../proto/packets.js';
import { noAgentAvailable } from './backends.js';
import {
  wellFormed,
  type AgentLink,
  type FrontendLink,
  type Switchboard,
  type TunnelledConnection,
} from './switchboard.js';

export interface GrpcFrontendOptions {
  switchboard: Switchboard;
  log: Logger;
  /** Go's --backend-dial-timeout; 0 waits for the agent forever. */
  backendDialTimeoutMs: number;
}

type ProxyCall = grpc.ServerDuplexStream<Packet, OutPacket>;

/** Go's errBackendDialTimeout text. */
export const backendDialTimeoutError = 'timed out waiting for backend dial';

class GrpcFrontend implements FrontendLink {
  readonly mode = 'grpc';
  private waiters: (() => void)[] = [];

  constructor(private readonly call: ProxyCall) {
    call.on('drain', () => this.wake());
  }

  get closed(): boolean {
    return this.call.cancelled || this.call.writableEnded || this.call.destroyed;
  }

  deliver(pkt: Packet | OutPacket): boolean {
    return this.call.write(pkt as OutPacket);
  }

  onceWritable(cb: () => void): void {
    if (this.closed || !this.call.writableNeedDrain) queueMicrotask(cb);
    else this.waiters.push(cb);
  }

  wake(): void {
    const waiters = this.waiters;
    this.waiters = [];
    for (const cb of waiters) cb();
  }
}

export function proxyHandler(opts: GrpcFrontendOptions): grpc.handleBidiStreamingCall<Packet, OutPacket> {
  const { switchboard, log } = opts;
  return (call) => {
    const frontend = new GrpcFrontend(call);
    const userAgent = call.metadata.get('user-agent').join(', ');
    let agent: AgentLink | undefined;
    let firstConnID = '0';
    let serving = true;
    log.debug({ userAgent, peer: call.getPeer() }, 'proxy stream from frontend');

    const closeFrontend = (connectID: string, error: string) =>
      frontend.deliver({ type: PacketType.CLOSE_RSP, closeResponse: { connectID, error } });

    const dialRequest = (pkt: Packet) => {
      const { random, address } = pkt.dialRequest!;
      agent = switchboard.backends.pick(address);
      if (!agent) {
        log.info({ random, address }, 'no agent for dial');
        switchboard.dialFailed('no_agent');
        frontend.deliver({ type: PacketType.DIAL_RSP, dialResponse: { random, error: noAgentAvailable } });
        serving = false;
        return;
      }
      const connection: TunnelledConnection = { random, address, agent, frontend, start: switchboard.clock.now() };
      switchboard.addPending(connection);
      if (agent.closed) {
        switchboard.removePending(random);
        switchboard.dialFailed('backend_close');
        frontend.deliver({ type: PacketType.DIAL_RSP, dialResponse: { random, error: 'context canceled' } });
        serving = false;
        return;
      }
      agent.send(pkt as OutPacket);
      if (opts.backendDialTimeoutMs > 0) {
        const stopTimer = switchboard.clock.after(opts.backendDialTimeoutMs, () => {
          if (!switchboard.removePending(random)) return;
          switchboard.dialFailed('backend_dial_timeout');
          frontend.deliver({ type: PacketType.DIAL_RSP, dialResponse: { random, error: backendDialTimeoutError } });
        });
        call.once('close', stopTimer);
      }
    };

    const data = (pkt: Packet) => {
      const { connectID } = pkt.data!;
      if (!agent) {
        closeFrontend(connectID, 'backend not initialized');
        serving = false;
        return;
      }
      if (connectID === '0') {
        switchboard.counters.malformedPackets++;
        log.warn('DATA from frontend without connectID; dropped');
        return;
      }
      if (firstConnID === '0') firstConnID = connectID;
      else if (firstConnID !== connectID) {
        // Something went very wrong: close both to avoid leaks, as Go does.
        log.error({ firstConnID, connectID }, 'DATA does not match the first connectID');
        for (const id of [connectID, firstConnID]) switchboard.closeOnAgent(agent, id, 'mismatched connection IDs');
        for (const id of [connectID, firstConnID]) closeFrontend(id, 'mismatched connection IDs');
        serving = false;
        return;
      }
      if (!agent.send(pkt as OutPacket)) {
        // The agent stream is backed up: stop reading this frontend until it drains.
        call.pause();
        agent.onceWritable(() => call.resume());
      }
    };

    call.on('data', (pkt: Packet) => {
      if (!serving) {
        switchboard.counters.discardedPackets++;
        return;
      }
      if (!wellFormed(pkt)) {
        switchboard.counters.malformedPackets++;
        log.warn({ type: packetTypeName(pkt.type) }, 'packet from frontend without its payload; dropped');
        return;
      }
      switch (pkt.type) {
        case PacketType.DIAL_REQ:
          return dialRequest(pkt);
        case PacketType.DATA:
          return data(pkt);
        case PacketType.CLOSE_REQ: {
          const { connectID } = pkt.closeRequest!;
          if (!agent) {
            closeFrontend(connectID, 'backend uninitialized');
            return;
          }
          if (agent.closed) closeFrontend(connectID, 'CLOSE_REQ to backend failed');
          else agent.send(pkt as OutPacket);
          serving = false;
          return;
        }
        case PacketType.DIAL_CLS: {
          // Dropped here only: Go does not tell the agent about a cancelled dial.
          const { random } = pkt.closeDial!;
          if (switchboard.removePending(random)) switchboard.dialFailed('frontend_close');
          else log.info({ random }, 'unrecognized dial cancelled (DIAL_CLS) by frontend');
          return;
        }
        default:
          log.debug({ type: packetTypeName(pkt.type) }, 'ignoring packet from frontend');
      }
    });

    let cleaned = false;
    const cleanup = () => {
      if (cleaned) return;
      cleaned = true;
      frontend.wake();
      // The frontend will never close what it left open: tell the agents (Go: DIAL_CLS is "TODO: add agent support").
      const left = switchboard.removeForFrontend(frontend);
      for (const t of left.pending) t.agent.send({ type: PacketType.DIAL_CLS, closeDial: { random: t.random } });
      for (const t of left.established) switchboard.closeOnAgent(t.agent, t.connectID!, 'frontend stream shutdown');
    };
    call.on('end', () => {
      // The client closed its side: Go's Proxy returns, ending the stream with OK.
      if (!call.writableEnded) call.end();
      cleanup();
    });
    call.on('cancelled', cleanup);
    call.on('error', cleanup);
    call.on('close', cleanup);
  };
}
