// How a TCP connection whose packets vanish without a RST or FIN (a balancer's idle timeout, a NAT or
// conntrack entry flushed, a link that went dark) is found: keepalive probes once it has been idle for
// `keepaliveMs` (one a second after that, as libuv sets them), and TCP_USER_TIMEOUT, so the kernel
// drops the connection once nothing sent has been acknowledged for `userTimeoutMs`, idle (the probes)
// or busy (data waiting for acknowledgement, where keepalive never fires and retransmissions alone
// would go on for ~15 minutes). Both are the kernel's: no timer or wake-up in the process, and no
// packet at all while the connection carries traffic. Node has no call for TCP_USER_TIMEOUT; the
// helper net/native/tcp-options.c sets it, and without that helper keepalive probes alone find a
// dead idle connection, ten unanswered probes later.
import type net from 'node:net';
import { withDescriptor } from './tcp-options.js';

export interface TcpFaultDetection {
  /** Idle time before keepalive probes start; 0: no probes. */
  keepaliveMs: number;
  /** Unacknowledged time after which the kernel drops the connection; 0: the kernel's default. */
  userTimeoutMs: number;
}

/**
 * Applies both to a socket; call it on 'connect' (the file descriptor exists from then on). Returns
 * what could not be applied, or undefined.
 */
export function applyTcpFaultDetection(socket: net.Socket, opts: TcpFaultDetection): string | undefined {
  if (opts.keepaliveMs > 0) socket.setKeepAlive(true, opts.keepaliveMs);
  if (!(opts.userTimeoutMs > 0)) return undefined;
  return withDescriptor(socket, (module, fd) => module.setUserTimeout(fd, opts.userTimeoutMs));
}
