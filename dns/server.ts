// The DNS transports: UDP and TCP (RFC 7766 framing, pipelined) on one port. They hand raw messages to
// the resolver and write back what it answers; nothing here decodes DNS. UDP is batched (recvmmsg in,
// sendmmsg out, dns/native/udp-batch.c) where that helper is built, else Node's dgram.
import dgram from 'node:dgram';
import net from 'node:net';
import type { Logger } from '../observability/log.js';
import type { Resolver } from './resolver.js';
import { udpBatch, type UdpBatchModule } from './udp-batch.js';
import { enlargeReceiveBuffer } from './udp-buffer.js';
import { UdpDrops } from './udp-drops.js';

export interface DnsServerOptions {
  address: string;
  /** 0 picks a free port (the same one for UDP and TCP). */
  port: number;
  resolver: Resolver;
  log: Logger;
  /** RFC 7766 §6.2.3 suggests seconds; idle TCP connections are closed after this. */
  tcpIdleTimeoutMs?: number;
  maxTcpConnections?: number;
  /** Batched UDP when the helper is built (default); false: always dgram. */
  batchedUdp?: boolean;
}

/** A bound UDP socket serving the resolver. */
interface UdpTransport {
  kind: 'batched' | 'dgram';
  port: number;
  close(): Promise<void>;
}

export class DnsServer {
  private udp?: UdpTransport;
  private tcp?: net.Server;
  private readonly connections = new Set<net.Socket>();
  private readonly drops: UdpDrops;

  constructor(private readonly opts: DnsServerOptions) {
    this.drops = new UdpDrops(opts.resolver.metrics.udpDropped, opts.log);
  }

  /** How UDP is served: batched (the native helper) or dgram. */
  get udpKind(): UdpTransport['kind'] | undefined {
    return this.udp?.kind;
  }

  /** Binds both transports; rejects (instead of hanging, as dns2's listen does) when the port is taken. */
  async start(): Promise<{ address: string; port: number }> {
    // With port 0, TCP picks the port and UDP follows: a TCP port chosen by UDP may be held by one of
    // the (many, after a burst of dials) TIME_WAIT connections, which TCP's own choice skips. Another
    // process may still hold UDP on it, so retry.
    for (let attempt = 0; ; attempt++) {
      const tcp = await this.listenTcp(this.opts.port);
      const port = (tcp.address() as net.AddressInfo).port;
      try {
        const batch = this.opts.batchedUdp === false ? undefined : udpBatch();
        this.udp = batch ? this.bindBatched(batch, port) : await this.bindDgram(port);
        this.tcp = tcp;
        return { address: this.opts.address, port };
      } catch (err) {
        await new Promise((done) => tcp.close(done));
        if (this.opts.port !== 0 || attempt >= 5) throw err;
      }
    }
  }

  /**
   * Each received batch goes through the resolver at once; the answers it gives synchronously (cache
   * hits, the rules) leave together in one sendmmsg, later ones (upstream lookups) one by one. A query
   * whose handling throws is dropped and counted, and the rest of its batch is still served: the
   * handler never throws into the helper, which would drop the whole batch.
   */
  private bindBatched(batch: UdpBatchModule, port: number): UdpTransport {
    let current: { answers: Buffer[]; peers: Buffer[] } | undefined;
    let closed = false;
    const send = (answers: Buffer[], peers: Buffer[]) => {
      if (closed) return; // answers that come after stop() (upstream lookups failed by it) go nowhere
      try {
        this.drops.add('unsent', answers.length - batch.send(handle, answers, peers));
      } catch (err) {
        this.drops.add('failed', answers.length, err);
      }
    };
    const [handle, bound] = batch.open(this.opts.address, port, (msgs, peers, truncated) => {
      this.drops.add('truncated', truncated);
      const out: { answers: Buffer[]; peers: Buffer[] } = { answers: [], peers: [] };
      current = out;
      for (let i = 0; i < msgs.length; i++) {
        const peer = peers[i]!;
        const reply = (answer: Buffer) => {
          if (current === out) {
            out.answers.push(answer);
            out.peers.push(peer);
          } else send([answer], [peer]);
        };
        try {
          this.opts.resolver.handle(msgs[i]!, 'udp', reply, peer);
        } catch (err) {
          this.drops.add('failed', 1, err);
        }
      }
      current = undefined;
      if (out.answers.length > 0) send(out.answers, out.peers);
    });
    const close = async () => {
      closed = true;
      batch.close(handle);
    };
    return { kind: 'batched', port: bound, close };
  }

  private bindDgram(port: number): Promise<UdpTransport> {
    // Replies go to rinfo.address, an IP literal of the socket's own family: an identity lookup skips
    // dgram's dns.lookup call and the tick it defers each send by (a few percent of a send's CPU).
    const family = net.isIPv6(this.opts.address) ? 6 : 4;
    const lookup = (
      address: string,
      _family: unknown,
      callback: (err: null, address: string, family: number) => void,
    ) => callback(null, address, family);
    const socket = dgram.createSocket({ type: family === 6 ? 'udp6' : 'udp4', lookup });
    return new Promise((resolve, reject) => {
      socket.once('error', reject);
      socket.bind(port, this.opts.address, () => {
        socket.off('error', reject);
        socket.on('error', (err) => this.drops.add('unsent', 1, err)); // a send's: dgram reports no others here
        enlargeReceiveBuffer(socket);
        socket.on('message', (msg, rinfo) => {
          try {
            this.opts.resolver.handle(
              msg,
              'udp',
              (response) => socket.send(response, rinfo.port, rinfo.address),
              rinfo,
            );
          } catch (err) {
            this.drops.add('failed', 1, err);
          }
        });
        resolve({
          kind: 'dgram',
          port: socket.address().port,
          close: () => new Promise((done) => socket.close(() => done())),
        });
      });
    });
  }

  private listenTcp(port: number): Promise<net.Server> {
    // allowHalfOpen: a client may send its query and shut its side; the answer still goes out.
    const server = net.createServer({ allowHalfOpen: true, noDelay: true }, (socket) => this.serveTcp(socket));
    server.maxConnections = this.opts.maxTcpConnections ?? 1024;
    return new Promise((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, this.opts.address, () => {
        server.off('error', reject);
        server.on('error', (err) => this.opts.log.error({ err }, 'dns tcp server error'));
        resolve(server);
      });
    });
  }

  private serveTcp(socket: net.Socket): void {
    this.connections.add(socket);
    const peer = { address: socket.remoteAddress ?? '', port: socket.remotePort ?? 0 };
    let buffered = Buffer.alloc(0);
    let inFlight = 0;
    let peerEnded = false;
    const reply = (response: Buffer) => {
      inFlight--;
      if (socket.destroyed) return;
      const frame = Buffer.allocUnsafe(2 + response.length);
      frame.writeUInt16BE(response.length, 0);
      response.copy(frame, 2);
      socket.write(frame);
      if (peerEnded && inFlight === 0) socket.end();
    };
    socket.setTimeout(this.opts.tcpIdleTimeoutMs ?? 10_000, () => socket.destroy());
    socket.on('data', (chunk) => {
      buffered = buffered.length === 0 ? chunk : Buffer.concat([buffered, chunk]);
      while (buffered.length >= 2) {
        const length = buffered.readUInt16BE(0);
        if (buffered.length < 2 + length) break;
        const msg = buffered.subarray(2, 2 + length);
        buffered = buffered.subarray(2 + length);
        inFlight++;
        if (!this.opts.resolver.handle(msg, 'tcp', reply, peer)) inFlight--;
      }
    });
    socket.on('end', () => {
      peerEnded = true;
      if (inFlight === 0) socket.end();
    });
    socket.on('error', () => socket.destroy());
    socket.on('close', () => this.connections.delete(socket));
  }

  async stop(): Promise<void> {
    const udp = this.udp;
    const tcp = this.tcp;
    this.udp = undefined;
    this.tcp = undefined;
    this.drops.close();
    for (const socket of this.connections) socket.destroy();
    await Promise.all([udp?.close(), tcp && new Promise<void>((resolve) => tcp.close(() => resolve()))]);
  }
}
