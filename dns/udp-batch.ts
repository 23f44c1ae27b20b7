// The batched UDP socket (dns/native/udp-batch.c) as the DNS server sees it, or undefined when it was
// not built here (the server then uses dgram). Peers are opaque: a sockaddr handed back to send().
import { createRequire } from 'node:module';

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

let loaded: UdpBatchModule | null | undefined;

/** The compiled module, from the sources (dns/) or from dist/dns/. */
export function udpBatch(): UdpBatchModule | undefined {
  if (loaded === undefined) {
    const require = createRequire(import.meta.url);
    loaded = null;
    for (const candidate of ['../build/udp-batch.node', '../../build/udp-batch.node']) {
      try {
        loaded = require(candidate) as UdpBatchModule;
        break;
      } catch {
        // not built, or built for another platform: try the next place, then fall back to dgram
      }
    }
  }
  return loaded ?? undefined;
}
