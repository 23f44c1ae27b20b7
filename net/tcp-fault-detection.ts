// How a TCP connection whose packets vanish without a RST or FIN (a balancer's idle timeout, a NAT or
// conntrack entry flushed, a link that went dark) is found: keepalive probes once it has been idle for
// `keepaliveMs` (one a second after that, as libuv sets them), and TCP_USER_TIMEOUT, so the kernel
// drops the connection once nothing sent has been acknowledged for `userTimeoutMs`, idle (the probes)
// or busy (data waiting for acknowledgement, where keepalive never fires and retransmissions alone
// would go on for ~15 minutes). Both are the kernel's: no timer or wake-up in the process, and no
// packet at all while the connection carries traffic. Node has no call for TCP_USER_TIMEOUT; the
// helper net/native/tcp-user-timeout.c sets it, and without that helper keepalive probes alone find a
// dead idle connection, ten unanswered probes later.
import { nativeAddon } from './native-addon.js';
import type net from 'node:net';

export interface TcpFaultDetection {
  /** Idle time before keepalive probes start; 0: no probes. */
  keepaliveMs: number;
  /** Unacknowledged time after which the kernel drops the connection; 0: the kernel's default. */
  userTimeoutMs: number;
}

interface UserTimeoutModule {
  setUserTimeout(fd: number, ms: number): void;
}

const userTimeoutModule = () => nativeAddon<UserTimeoutModule>('tcp-user-timeout');

/** Why TCP_USER_TIMEOUT cannot be set here, or undefined when it can. */
export function userTimeoutUnavailable(): string | undefined {
  if (process.platform !== 'linux') return 'TCP_USER_TIMEOUT is a Linux option';
  return userTimeoutModule() ? undefined : 'build/tcp-user-timeout.node is not built (npm run build:native)';
}

/**
 * Applies both to a socket; call it on 'connect' (the file descriptor exists from then on). Returns
 * what could not be applied, or undefined.
 */
export function applyTcpFaultDetection(socket: net.Socket, opts: TcpFaultDetection): string | undefined {
  if (opts.keepaliveMs > 0) socket.setKeepAlive(true, opts.keepaliveMs);
  if (!(opts.userTimeoutMs > 0)) return undefined;
  const module = userTimeoutModule();
  if (!module) return userTimeoutUnavailable();
  // libuv's TCP handle exposes its descriptor; Node has no public accessor for it.
  const fd = (socket as unknown as { _handle?: { fd?: number } })._handle?.fd;
  if (typeof fd !== 'number' || fd < 0) return 'the socket has no file descriptor';
  try {
    module.setUserTimeout(fd, opts.userTimeoutMs);
  } catch (err) {
    return (err as Error).message;
  }
  return undefined;
}
