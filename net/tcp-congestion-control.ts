// The congestion control of the agent's connections to the proxy-servers. One such connection
// carries every tunnelled connection of a stream, so how it behaves when the hub's side drops
// packets decides how the whole tunnel does. BBR (v1), which many nodes use by default, does not
// slow down for loss: when a burst of downloads pushed a hub's TCP memory past its pressure mark,
// where the kernel drops what arrives for sockets over their share, it kept sending a full window,
// lost most of it, and fell into one retransmission timeout after another (a burst of 1000 took
// twice as long as with cubic, which backs off on loss; bench/README.md, "Bursts"). So the agent
// asks for cubic on those connections, and the operator may ask for another, or for the node's own
// choice (--tcp-congestion-control).
import type net from 'node:net';
import { withDescriptor } from './tcp-options.js';

/** Sets TCP_CONGESTION on `socket` ('': leave the system's); returns what went wrong, or undefined. */
export function setCongestionControl(socket: net.Socket, name: string): string | undefined {
  if (name === '') return undefined;
  return withDescriptor(socket, (module, fd) => module.setCongestionControl(fd, name));
}
