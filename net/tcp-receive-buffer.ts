// A fixed receive buffer for a TCP socket the agent reads in turns (its target connections). The
// kernel grows a socket's receive buffer as the application reads large amounts at once (up to
// net.ipv4.tcp_rmem's maximum, 6 MiB by default), so a target the agent reads 256 KiB at a time, in
// its turn, soon has MiBs in flight toward the agent: a burst of a thousand such connections held
// most of a GiB in the kernel, which pushed the whole machine's TCP memory past its pressure mark,
// where every socket over its share drops what arrives (bench/README.md, "Bursts"). A fixed buffer
// bounds that per connection. It bounds one connection's throughput too, to about the buffer per
// round trip: 128 KiB serve 128 MiB/s at a 1 ms round trip, more than a spoke's path to its hub
// usually carries. The kernel doubles what SO_RCVBUF asks (bookkeeping), within net.core.rmem_max.
import type net from 'node:net';
import { withDescriptor } from './tcp-options.js';

/** Sets the kernel's receive buffer of `socket` to about `bytes` (0: leave it to the kernel); returns what went wrong, or undefined. */
export function setReceiveBuffer(socket: net.Socket, bytes: number): string | undefined {
  if (bytes <= 0) return undefined;
  return withDescriptor(socket, (module, fd) => module.setReceiveBuffer(fd, Math.max(1, Math.floor(bytes / 2))));
}
