// What a dial through the proxy-server is given and how it fails, shared by both modes (dial-grpc.ts,
// dial-http-connect.ts) and by dial.ts, which picks one.
import type { SecureContext } from 'node:tls';
import { secureContextFor } from './secure-context.js';
import { systemClock, type Clock } from '../clock/clock.js';

export interface DialOptions {
  /** `grpc`: one ProxyService/Proxy stream per dial. `http-connect`: a CONNECT request. */
  mode: 'grpc' | 'http-connect';
  proxyHost: string;
  proxyPort: number;
  /**
   * A Unix socket to reach the proxy-server's frontend on instead of proxyHost:proxyPort (its
   * --uds-name, as kube-apiserver's egress uses it); plaintext, as the Go proxy-server serves it.
   */
  proxyUds?: string;
  /**
   * PEM text. TLS is used when any of them is given (`ca` to verify the proxy-server, `cert`+`key`
   * for mTLS); with none, the connection to the proxy-server is plaintext.
   */
  ca?: string | Buffer;
  cert?: string | Buffer;
  key?: string | Buffer;
  /** `host:port` to reach from the agent's side. */
  address: string;
  /** Until the agent answers the dial; default 30 s, the Go client's backstop. */
  timeoutMs?: number;
  /** Timings and packets, for `--verbose`. */
  onEvent?: (event: DialEvent) => void;
  /** What the timeouts and timings run on; default the system clock. */
  clock?: Clock;
}

/** `ms` is the time since the dial started. */
export type DialEvent =
  | { kind: 'connected'; ms: number; to: string }
  | { kind: 'sent' | 'received'; ms: number; packet: string; detail?: string }
  | { kind: 'established'; ms: number; connectID?: string }
  | { kind: 'closed'; ms: number; reason: string };

/** A dial that failed; the message is the proxy-server's or the agent's text where there is one. */
export class DialError extends Error {
  constructor(
    message: string,
    /** The HTTP status of a refused CONNECT. */
    readonly httpStatus?: number,
  ) {
    super(message);
    this.name = 'DialError';
  }
}

export const defaultDialTimeoutMs = 30_000;

/** TLS (the parsed material) or plaintext, and the clock, for both modes. */
export interface DialContext {
  tls: SecureContext | undefined;
  timeoutMs: number;
  clock: Clock;
  event: (e: DialEvent) => void;
  elapsed: () => number;
}

/** Throws a DialError when the TLS material does not parse. */
export function dialContext(opts: DialOptions): DialContext {
  const clock = opts.clock ?? systemClock;
  const start = clock.now();
  const elapsed = () => Math.round((clock.now() - start) * 10) / 10;
  let tls: SecureContext | undefined;
  if (opts.ca !== undefined || opts.cert !== undefined || opts.key !== undefined) {
    try {
      tls = secureContextFor(opts);
    } catch (err) {
      throw new DialError(`TLS credentials for the proxy-server: ${(err as Error).message}`);
    }
  }
  return {
    tls,
    timeoutMs: opts.timeoutMs ?? defaultDialTimeoutMs,
    clock,
    event: opts.onEvent ?? (() => {}),
    elapsed,
  };
}
