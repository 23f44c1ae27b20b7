// The upstream resolver (the cluster DNS): queries go out as raw bytes, so any record type is forwarded,
// including those no codec here knows (dns2's own client answers SERVFAIL for HTTPS/SVCB). One UDP
// socket carries every query, each under a fresh random ID; TCP opens a connection per query.
import dgram from 'node:dgram';
import { randomInt } from 'node:crypto';
import { isIP, Socket } from 'node:net';
import { type Clock, systemClock } from '../clock/clock.js';
import { joinHostPort } from '../net/address.js';
import { enlargeReceiveBuffer } from './udp-buffer.js';
import { sameQuestion } from './wire.js';

export interface UpstreamAddress {
  host: string;
  port: number;
}

export class UpstreamError extends Error {
  constructor(
    message: string,
    readonly reason: 'timeout' | 'network' | 'mismatch' | 'rcode',
  ) {
    super(message);
  }
}

/** `HOST`, `HOST:PORT` or `[IPV6]:PORT`; HOST must be an IP (resolving the resolver would be circular). */
export function parseUpstream(text: string): UpstreamAddress | string {
  const m =
    /^\[([^\]]+)\](?::(\d+))?$/.exec(text) ??
    (isIP(text) === 6 ? [text, text, undefined] : /^([^:]+)(?::(\d+))?$/.exec(text));
  const port = m?.[2] === undefined ? 53 : Number(m[2]);
  if (!m || isIP(m[1]!) === 0) return `want IP, IP:PORT or [IPv6]:PORT, got "${text}"`;
  if (port < 1 || port > 65535) return `port ${port} out of range`;
  return { host: m[1]!, port };
}

/** The first `nameserver` of a resolv.conf: in a pod, the cluster DNS. */
export function upstreamFromResolvConf(text: string): UpstreamAddress | undefined {
  for (const line of text.split('\n')) {
    const m = /^\s*nameserver\s+(\S+)/.exec(line);
    const host = m?.[1]?.replace(/%.*$/, ''); // drop an IPv6 zone
    if (host && isIP(host)) return { host, port: 53 };
  }
  return undefined;
}

interface Pending {
  query: Buffer;
  resolve: (response: Buffer) => void;
  reject: (err: Error) => void;
  /** Cancels the query's timeout. */
  cancelTimeout: () => void;
}

/** Where the resolver sends what it forwards and the targets of its rules. */
export interface UpstreamClient {
  /** Sends `query` and returns the response with the query's own ID. */
  exchange(query: Buffer, tcp: boolean): Promise<Buffer>;
  describe(): string;
  close(): void;
}

/**
 * No upstream at all (no --dns-upstream and no nameserver in resolv.conf, as in a bare container):
 * the rules with IP targets still answer; every query that needs an upstream fails, saying why.
 */
export class NoUpstream implements UpstreamClient {
  constructor(private readonly why: string) {}

  exchange(): Promise<Buffer> {
    return Promise.reject(new UpstreamError(`no upstream: ${this.why}`, 'network'));
  }

  describe(): string {
    return `none (${this.why})`;
  }

  close(): void {}
}

export class Upstream implements UpstreamClient {
  private socket?: dgram.Socket;
  private readonly pending = new Map<number, Pending>();

  constructor(
    readonly address: UpstreamAddress,
    private readonly timeoutMs: number,
    /** What a UDP query's timeout waits on (a TCP query's is its socket's idle timeout). */
    private readonly clock: Clock = systemClock,
  ) {}

  /** Sends `query` and returns the response with the query's own ID; rejects after the timeout. */
  exchange(query: Buffer, tcp: boolean): Promise<Buffer> {
    return tcp ? this.exchangeTcp(query) : this.exchangeUdp(query);
  }

  private udpSocket(): dgram.Socket {
    if (this.socket) return this.socket;
    const socket = dgram.createSocket(isIP(this.address.host) === 6 ? 'udp6' : 'udp4');
    socket.on('message', (msg) => this.onUdpMessage(msg));
    // Errors of a send are reported to its callback; what reaches here (e.g. ICMP unreachable on Linux) fails nothing in particular.
    socket.on('error', () => undefined);
    // Answers to a burst of forwarded queries (up to a whole batch) queue here while the loop is busy.
    socket.once('listening', () => enlargeReceiveBuffer(socket));
    socket.unref();
    this.socket = socket;
    return socket;
  }

  private exchangeUdp(query: Buffer): Promise<Buffer> {
    if (this.pending.size >= 0x8000) return Promise.reject(new UpstreamError('too many queries in flight', 'network'));
    let id: number;
    do id = randomInt(0x10000);
    while (this.pending.has(id));
    const out = Buffer.from(query);
    out.writeUInt16BE(id, 0);
    return new Promise((resolve, reject) => {
      const cancelTimeout = this.clock.after(this.timeoutMs, () => {
        this.pending.delete(id);
        reject(new UpstreamError(`no answer from ${this.describe()} within ${this.timeoutMs}ms`, 'timeout'));
      });
      this.pending.set(id, { query, resolve, reject, cancelTimeout });
      this.udpSocket().send(out, this.address.port, this.address.host, (err) => {
        if (!err || !this.pending.delete(id)) return;
        cancelTimeout();
        reject(new UpstreamError(`${this.describe()}: ${err.message}`, 'network'));
      });
    });
  }

  private onUdpMessage(msg: Buffer): void {
    if (msg.length < 12) return;
    const p = this.pending.get(msg.readUInt16BE(0));
    // A response must echo the question too (RFC 5452 §9.1): an ID alone is easy to guess.
    if (!p || !sameQuestion(p.query, msg)) return;
    this.pending.delete(msg.readUInt16BE(0));
    p.cancelTimeout();
    p.query.copy(msg, 0, 0, 2);
    p.resolve(msg);
  }

  private exchangeTcp(query: Buffer): Promise<Buffer> {
    return new Promise((resolve, reject) => {
      const socket = new Socket();
      let buffered = Buffer.alloc(0);
      const fail = (err: UpstreamError) => {
        socket.destroy();
        reject(err);
      };
      socket.setTimeout(this.timeoutMs, () =>
        fail(new UpstreamError(`no answer from ${this.describe()} over TCP within ${this.timeoutMs}ms`, 'timeout')),
      );
      socket.on('error', (err) => fail(new UpstreamError(`${this.describe()}: ${err.message}`, 'network')));
      socket.on('data', (chunk) => {
        buffered = Buffer.concat([buffered, chunk]);
        if (buffered.length < 2 || buffered.length < 2 + buffered.readUInt16BE(0)) return;
        const response = buffered.subarray(2, 2 + buffered.readUInt16BE(0));
        socket.destroy();
        if (
          response.length < 12 ||
          response.readUInt16BE(0) !== query.readUInt16BE(0) ||
          !sameQuestion(query, response)
        ) {
          reject(new UpstreamError(`${this.describe()} answered another question over TCP`, 'mismatch'));
        } else resolve(response);
      });
      socket.on('end', () =>
        fail(new UpstreamError(`${this.describe()} closed the TCP connection without an answer`, 'network')),
      );
      socket.connect(this.address.port, this.address.host, () => {
        const len = Buffer.alloc(2);
        len.writeUInt16BE(query.length);
        socket.end(Buffer.concat([len, query]));
      });
    });
  }

  describe(): string {
    return joinHostPort(this.address.host, this.address.port);
  }

  close(): void {
    for (const p of this.pending.values()) {
      p.cancelTimeout();
      p.reject(new UpstreamError('upstream closed', 'network'));
    }
    this.pending.clear();
    this.socket?.close();
    this.socket = undefined;
  }
}
