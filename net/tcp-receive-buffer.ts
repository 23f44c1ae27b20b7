// A fixed receive buffer for a TCP socket the agent reads in turns (its target connections). The
// kernel grows a socket's receive buffer as the application reads large amounts at once (up to
// net.ipv4.tcp_rmem's maximum, 6 MiB by default), so a target the agent reads 256 KiB at a time, in
// its turn, soon has MiBs in flight toward the agent: a burst of a thousand such connections held
// most of a GiB in the kernel, which pushed the whole machine's TCP memory past its pressure mark,
// where every socket over its share drops what arrives (bench/README.md, "Bursts"). A fixed buffer
// bounds that per connection. It bounds one connection's throughput too, to about the buffer per
// round trip, the agent's own pauses included: 128 KiB cost a single download a fifth of its speed on
// loopback, 512 KiB (the default) nothing measurable. The kernel doubles what SO_RCVBUF asks
// (bookkeeping), within net.core.rmem_max.
import type net from 'node:net';
import { withDescriptor } from './tcp-options.js';

/** Sets the kernel's receive buffer of `socket` to about `bytes` (0: leave it to the kernel); returns what went wrong, or undefined. */
export function setReceiveBuffer(socket: net.Socket, bytes: number): string | undefined {
  if (bytes <= 0) return undefined;
  return withDescriptor(socket, (module, fd) => module.setReceiveBuffer(fd, Math.max(1, Math.floor(bytes / 2))));
}
