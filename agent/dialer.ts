// Dials a target for a DIAL_REQ: resolve and authorize (the dial policy's contract,
// dial-policy/contract.ts), connect, within a timeout and cancellable (DIAL_CLS). It returns the way
// the dial went (the policy's route, with the address tried) with the socket, or on the error.
// Errors read like Go's net errors, which is what hub clients of the Go agent see.
import { applyTcpFaultDetection, type TcpFaultDetection } from '../net/tcp-fault-detection.js';
import { setReceiveBuffer } from '../net/tcp-receive-buffer.js';
import { promises as dnsPromises } from 'node:dns';
import net from 'node:net';
import { joinHostPort, splitHostPort } from '../net/address.js';
import type { DialAuthorizer, DialRoute, HostResolver } from '../dial-policy/contract.js';
import { systemClock, type Clock } from '../clock/clock.js';
import { holdTargetReads, targetReads } from './target-reads.js';

/**
 * Cancels a dial (the hub's DIAL_CLS, or its stream going away). What an AbortSignal does, without
 * the EventTarget bookkeeping: with one listener added and removed, an AbortController costs ~7 us
 * per dial, on the path the hub waits on for DIAL_RSP (bench/README.md, "Fresh and warm").
 */
export class DialCancel {
  cancelled = false;
  /** Set by the stage of the dial in progress (lookup, then connect), which clears it when done. */
  onCancel: (() => void) | undefined = undefined;

  cancel(): void {
    if (this.cancelled) return;
    this.cancelled = true;
    const stop = this.onCancel;
    this.onCancel = undefined;
    stop?.();
  }
}

export interface TargetDialOptions {
  /** For the lookup and the connect together, on `clock` (default the system clock). */
  timeoutMs: number;
  clock?: Clock;
  cancel?: DialCancel;
  resolve?: HostResolver;
  authorize?: DialAuthorizer;
  /**
   * Read into the buffer shared by all target connections instead of emitting 'data'
   * (target-reads.ts): the caller must take the reads with relayTargetReads (the agent's endpoint
   * connections do).
   */
  sharedReads?: boolean;
  /** Keepalive probes and TCP_USER_TIMEOUT on the connected socket, so a target gone silent mid-stream is let go. */
  tcp?: TcpFaultDetection;
  /** The connected socket's fixed kernel receive buffer (net/tcp-receive-buffer.ts); 0 or none: the kernel's. */
  receiveBufferBytes?: number;
}

/** Why a dial failed (`denied`: by the dial policy; `refused`: by the target, ECONNREFUSED), and how far it got. */
export class TargetDialError extends Error {
  constructor(
    message: string,
    readonly reason: 'timeout' | 'refused' | 'unresolvable' | 'denied' | 'cancelled' | 'unknown',
    readonly route: DialRoute = {},
  ) {
    super(message);
  }
}

const systemResolver: HostResolver = async (host) => ({
  addresses: (await dnsPromises.lookup(host, { all: true, verbatim: true })).map((a) => a.address),
});

/** Resolves (unless the host is an IP), authorizes every address, then connects to the first that answers. */
export async function dialTcp(
  address: string,
  opts: TargetDialOptions,
): Promise<{ socket: net.Socket; route: DialRoute }> {
  const target = splitHostPort(address);
  if (typeof target === 'string') throw new TargetDialError(`dial tcp ${target}`, 'unknown');
  const clock = opts.clock ?? systemClock;
  const deadline = clock.now() + opts.timeoutMs;
  const found = net.isIP(target.host) ? { addresses: [target.host] } : await lookup(target.host, deadline, clock, opts);
  if ('denied' in found) throw new TargetDialError(`dial tcp ${address}: ${found.denied}`, 'denied');
  // The policy's route, carried on to the dial's record: the dialer adds the address it tries.
  const { addresses, route = {} } = found;
  for (const ip of addresses) {
    const denied = opts.authorize?.(target.host, ip, target.port);
    if (denied) {
      route.address = ip;
      throw new TargetDialError(`dial tcp ${address}: ${denied}`, 'denied', route);
    }
  }
  let lastError: TargetDialError | undefined;
  for (const ip of addresses) {
    route.address = ip;
    try {
      return { socket: await connect(ip, target.port, address, deadline, clock, opts, route), route };
    } catch (err) {
      lastError = err as TargetDialError;
      if (lastError.reason === 'timeout' || lastError.reason === 'cancelled') throw lastError;
    }
  }
  throw lastError!;
}

/** The host's addresses (at least one) or the policy's denial; a failed lookup is the hub's "no such host". */
async function lookup(host: string, deadline: number, clock: Clock, opts: TargetDialOptions) {
  let found: Awaited<ReturnType<HostResolver>>;
  try {
    found = await withDeadline((opts.resolve ?? systemResolver)(host), deadline, clock, host, opts.cancel);
  } catch (err) {
    if (err instanceof TargetDialError) throw err;
    throw new TargetDialError(`dial tcp: lookup ${host}: no such host`, 'unresolvable');
  }
  if (!('denied' in found) && found.addresses.length === 0)
    throw new TargetDialError(`dial tcp: lookup ${host}: no such host`, 'unresolvable', found.route);
  return found;
}

function connect(
  ip: string,
  port: number,
  address: string,
  deadline: number,
  clock: Clock,
  opts: TargetDialOptions,
  route: DialRoute,
): Promise<net.Socket> {
  const { cancel } = opts;
  return new Promise((resolve, reject) => {
    if (cancel?.cancelled)
      return reject(new TargetDialError(`dial tcp ${address}: operation was canceled`, 'cancelled', route));
    const socket = net.connect({
      host: ip,
      port,
      noDelay: true,
      ...(opts.sharedReads ? { onread: targetReads } : {}),
    });
    if (opts.sharedReads) holdTargetReads(socket);
    const fail = (err: TargetDialError) => {
      cleanup();
      socket.destroy();
      reject(err);
    };
    const onError = (err: NodeJS.ErrnoException) =>
      fail(
        new TargetDialError(
          `dial tcp ${joinHostPort(ip, port)}: connect: ${describe(err)}`,
          err.code === 'ECONNREFUSED' ? 'refused' : 'unknown',
          route,
        ),
      );
    const onAbort = () => fail(new TargetDialError(`dial tcp ${address}: operation was canceled`, 'cancelled', route));
    const stopTimer = clock.after(Math.max(0, deadline - clock.now()), () =>
      fail(new TargetDialError(`dial tcp ${address}: i/o timeout`, 'timeout', route)),
    );
    const cleanup = () => {
      stopTimer();
      socket.off('error', onError);
      if (cancel) cancel.onCancel = undefined;
    };
    socket.once('error', onError);
    if (cancel) cancel.onCancel = onAbort;
    socket.once('connect', () => {
      cleanup();
      if (opts.tcp) applyTcpFaultDetection(socket, opts.tcp);
      if (opts.receiveBufferBytes) setReceiveBuffer(socket, opts.receiveBufferBytes);
      resolve(socket);
    });
  });
}

function withDeadline<T>(
  work: Promise<T>,
  deadline: number,
  clock: Clock,
  host: string,
  cancel?: DialCancel,
): Promise<T> {
  return new Promise((resolve, reject) => {
    if (cancel?.cancelled) return reject(new TargetDialError('dial tcp: operation was canceled', 'cancelled'));
    const stopTimer = clock.after(Math.max(0, deadline - clock.now()), () =>
      reject(new TargetDialError(`dial tcp: lookup ${host}: i/o timeout`, 'timeout')),
    );
    if (cancel) cancel.onCancel = () => reject(new TargetDialError('dial tcp: operation was canceled', 'cancelled'));
    work.then(resolve, reject).finally(() => {
      stopTimer();
      if (cancel) cancel.onCancel = undefined;
    });
  });
}

/** Go-style wording for the common errno codes. */
function describe(err: NodeJS.ErrnoException): string {
  switch (err.code) {
    case 'ECONNREFUSED':
      return 'connection refused';
    case 'EHOSTUNREACH':
      return 'no route to host';
    case 'ENETUNREACH':
      return 'network is unreachable';
    case 'ECONNRESET':
      return 'connection reset by peer';
    default:
      return err.message;
  }
}
