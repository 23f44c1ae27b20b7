// grpc-go's server keepalive enforcement, which grpc-js lacks: a client that pings more often than
// MinTime gets a strike; past two strikes the server sends GOAWAY ENHANCE_YOUR_CALM "too_many_pings"
// and drops the connection. Writing data or headers to the client forgives the strikes.
// (grpc-go internal/transport/http2_server.go handlePing; the Go proxy-server's agent port uses
// MinTime 30 s with PermitWithoutStream, its frontend port grpc-go's defaults.)
import http2 from 'node:http2';
import type { Logger } from '../observability/log.js';
import type { Clock } from '../clock/clock.js';

export interface EnforcementPolicy {
  minTimeMs: number;
  permitWithoutStream: boolean;
}

/** `--agent-port`: keepalive.EnforcementPolicy{MinTime: 30 * time.Second, PermitWithoutStream: true} */
export const agentPortPolicy: EnforcementPolicy = { minTimeMs: 30_000, permitWithoutStream: true };
/** grpc-go's default, which the frontend port keeps. */
export const defaultPolicy: EnforcementPolicy = { minTimeMs: 5 * 60_000, permitWithoutStream: false };

const maxPingStrikes = 2;
/** grpc-go's defaultPingTimeout: the bar for pings on a connection with no stream. */
const idlePingMinMs = 2 * 60 * 60_000;

/** Per connection. */
export class PingStrikes {
  private lastPingAt = -Infinity;
  private strikes = 0;
  private forgiven = false;

  constructor(private readonly policy: EnforcementPolicy) {}

  /** Data or headers went to the client. */
  wrote(): void {
    this.forgiven = true;
  }

  /** True when this ping is one too many and the connection must go. */
  ping(now: number, activeStreams: number): boolean {
    const last = this.lastPingAt;
    this.lastPingAt = now;
    if (this.forgiven) {
      this.forgiven = false;
      this.strikes = 0;
      return false;
    }
    const minMs = activeStreams < 1 && !this.policy.permitWithoutStream ? idlePingMinMs : this.policy.minTimeMs;
    if (last + minMs > now) this.strikes++;
    return this.strikes > maxPingStrikes;
  }
}

/** The key grpc-js's call.getPeer() gives for the connection, so a call can find its strikes. */
function peerOf(socket: { remoteAddress?: string; remotePort?: number } | undefined): string {
  return socket?.remoteAddress && socket.remotePort ? `${socket.remoteAddress}:${socket.remotePort}` : 'unknown';
}

const tooManyPings = Buffer.from('too_many_pings');

/**
 * The payload of grpc-go's BDP-estimator pings (internal/transport/bdp_estimator.go bdpPing). A grpc-go
 * client sends one only on receiving DATA, after the previous one's ack, so that DATA frame left
 * grpc-go's server after the previous ping was handled and always forgives it. Our forgiveness comes
 * from writes *queued* (a frame queued before one ping can leave after its ack and trigger the next),
 * so without this a Go agent or konnectivity-client receiving data got GOAWAY too_many_pings.
 */
const bdpPingPayload = Buffer.from([2, 4, 16, 16, 9, 14, 7, 7]);
const isBdpPing = (payload: Buffer | undefined) => payload !== undefined && bdpPingPayload.equals(payload);

/** Applies the policy to the PING frames of one connection; `byPeer` lets its calls find its strikes. */
export function watchPings(
  session: http2.ServerHttp2Session,
  policy: EnforcementPolicy,
  byPeer: Map<string, PingStrikes>,
  log: Logger,
  clock: Clock,
): void {
  const peer = peerOf(session.socket);
  const strikes = new PingStrikes(policy);
  byPeer.set(peer, strikes);
  let streams = 0;
  session.on('stream', (stream) => {
    streams++;
    stream.once('close', () => streams--);
  });
  session.on('ping', (payload?: Buffer) => {
    if (isBdpPing(payload)) strikes.wrote();
    if (!strikes.ping(clock.now(), streams)) return;
    log.warn({ peer }, 'client pings too often: GOAWAY too_many_pings');
    session.goaway(http2.constants.NGHTTP2_ENHANCE_YOUR_CALM, 0, tooManyPings);
    // Let the GOAWAY frame leave before the connection does.
    clock.after(100, () => session.destroy());
  });
  session.once('close', () => byPeer.delete(peer));
}
