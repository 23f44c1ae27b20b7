// The DNS server's and the upstream client's UDP sockets: bursts queue in the kernel while the event
// loop is busy, and the default receive buffer (~208 KiB) drops them early. (dns/native/udp-batch.c
// asks the same 4 MiB for its socket.)
import type dgram from 'node:dgram';

/** Call once the socket is bound. */
export function enlargeReceiveBuffer(socket: dgram.Socket): void {
  try {
    socket.setRecvBufferSize(4 << 20);
  } catch {
    // capped by net.core.rmem_max: keep what we got
  }
}
