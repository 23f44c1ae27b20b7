// The batched UDP socket (dns/native/udp-batch.c) as the DNS server sees it, or undefined when it was
// not built here (the server then uses dgram). Peers are opaque: a sockaddr handed back to send().
import { nativeAddon } from '../net/native-addon.js';

export interface UdpBatchModule {
  /**
   * Binds address:port (0 picks one); `onBatch` gets each received batch, and how many datagrams of it
   * were too large to read whole (`truncated`, left out of `msgs`). `onBatch` must not throw: a batch
   * whose handler throws is dropped. Throws with `code` (e.g. EADDRINUSE).
   */
  open(
    address: string,
    port: number,
    onBatch: (msgs: Buffer[], peers: Buffer[], truncated: number) => void,
  ): [handle: object, port: number];
  /**
   * One sendmmsg for answers[i] to peers[i]; returns how many the kernel took. What it will not take
   * now (a full socket) is dropped, as UDP does; nothing is sent once the handle is closed.
   */
  send(handle: object, answers: Buffer[], peers: Buffer[]): number;
  close(handle: object): void;
}

/** The compiled module, or undefined where it was not built (the server then uses dgram). */
export function udpBatch(): UdpBatchModule | undefined {
  return nativeAddon<UdpBatchModule>('udp-batch');
}
