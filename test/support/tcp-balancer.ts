// A loopback TCP load balancer over several backends (round-robin or random), like the single
// Service address in front of proxy-server replicas. Backends can be taken out and put back.
// "Random" is a fixed pseudo-random sequence: the same picks every run (the first four with three
// backends: 1, 0, 1, 2, so one repeat), so how long a test takes does not depend on luck.
import net from 'node:net';
import { seededRandom } from './seeded-random.js';

export class TcpBalancer {
  private readonly server: net.Server;
  private readonly sockets = new Set<net.Socket>();
  private readonly pairs = new Set<[net.Socket, net.Socket]>();
  private next = 0;
  private readonly random = seededRandom(1);
  port = 0;

  constructor(
    private backends: number[],
    private readonly policy: 'round-robin' | 'random' = 'round-robin',
  ) {
    this.server = net.createServer((client) => {
      const live = this.backends;
      if (live.length === 0) return client.destroy();
      const port =
        this.policy === 'random' ? live[Math.floor(this.random() * live.length)]! : live[this.next++ % live.length]!;
      const upstream = net.connect(port, '127.0.0.1');
      for (const s of [client, upstream]) {
        this.sockets.add(s);
        s.on('close', () => this.sockets.delete(s));
        s.on('error', () => {
          client.destroy();
          upstream.destroy();
        });
      }
      const pair: [net.Socket, net.Socket] = [client, upstream];
      this.pairs.add(pair);
      client.on('close', () => this.pairs.delete(pair));
      client.pipe(upstream).pipe(client);
    });
  }

  async listen(): Promise<number> {
    await new Promise<void>((r) => this.server.listen(0, '127.0.0.1', () => r()));
    this.port = (this.server.address() as net.AddressInfo).port;
    return this.port;
  }

  setBackends(ports: number[]): void {
    this.backends = ports;
  }

  /** Stops carrying bytes on every open connection without closing it: a peer gone silent. */
  freeze(): void {
    for (const [client, upstream] of this.pairs) {
      client.unpipe(upstream).pause();
      upstream.unpipe(client).pause();
    }
  }

  /** Ends every open connection with a RST towards the client, as a middlebox that forgot the flow does. */
  reset(): void {
    for (const [client, upstream] of this.pairs) {
      client.resetAndDestroy();
      upstream.destroy();
    }
  }

  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((r) => this.server.close(() => r()));
  }
}
