import net from 'node:net';
import * as grpc from '@grpc/grpc-js';
import { afterEach, describe, expect, it } from 'vitest';
import { PacketType, ProxyService, type OutPacket, type Packet } from '../proto/packets.js';
import { ManualClock } from '../test/support/manual-clock.js';
import { waitUntil } from '../test/support/wait.js';
import { dialThroughProxy } from './dial.js';

// A proxy-server that takes the dial and never answers it: the client's backstop is what ends it.
describe('a dial the proxy-server never answers', () => {
  const cleanups: (() => void)[] = [];
  afterEach(() => {
    for (const c of cleanups.splice(0)) c();
  });

  it('fails after its timeout on the clock, in HTTP CONNECT mode', async () => {
    const server = net.createServer(() => {});
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    cleanups.push(() => server.close());
    let requested = false;
    server.on('connection', (socket) => socket.once('data', () => (requested = true)));
    const clock = new ManualClock();
    const dial = dialThroughProxy({
      mode: 'http-connect',
      proxyHost: '127.0.0.1',
      proxyPort: (server.address() as net.AddressInfo).port,
      address: '127.0.0.1:9',
      timeoutMs: 5000,
      clock,
    });
    dial.catch(() => {});
    await waitUntil(() => requested, 10_000, 'the CONNECT request to arrive');
    await clock.advance(5000);
    await expect(dial).rejects.toThrow('dial timeout after 5000 ms');
  });

  it('fails after its timeout on the clock and sends DIAL_CLS, in gRPC mode', async () => {
    const received: OutPacket[] = [];
    const server = new grpc.Server();
    server.addService(ProxyService.service, {
      Proxy: (call: grpc.ServerDuplexStream<OutPacket, Packet>) => {
        call.on('data', (pkt: OutPacket) => received.push(pkt));
        call.on('end', () => call.end());
        call.on('error', () => {});
      },
    });
    const port = await new Promise<number>((resolve, reject) =>
      server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, p) =>
        err ? reject(err) : resolve(p),
      ),
    );
    cleanups.push(() => server.forceShutdown());
    const clock = new ManualClock();
    const dial = dialThroughProxy({
      mode: 'grpc',
      proxyHost: '127.0.0.1',
      proxyPort: port,
      address: '127.0.0.1:9',
      timeoutMs: 5000,
      clock,
    });
    dial.catch(() => {});
    await waitUntil(() => received.length === 1, 10_000, 'the DIAL_REQ to arrive');
    await clock.advance(4999);
    expect(received.map((p) => p.type)).toEqual([PacketType.DIAL_REQ]);
    await clock.advance(1);
    await expect(dial).rejects.toThrow('dial timeout after 5000 ms');
    await waitUntil(() => received.length === 2, 10_000, 'the DIAL_CLS to arrive');
    expect(received[1]).toMatchObject({ type: PacketType.DIAL_CLS });
  });
});

// A proxy-server whose agent answers the dial, sends a little, then ends the connection with CLOSE_RSP.
describe('a connection the agent ends', () => {
  const cleanups: (() => void)[] = [];
  afterEach(() => {
    for (const c of cleanups.splice(0)) c();
  });

  async function hubThatCloses(closeError: string): Promise<number> {
    const server = new grpc.Server();
    server.addService(ProxyService.service, {
      Proxy: (call: grpc.ServerDuplexStream<OutPacket, Packet>) => {
        call.on('error', () => {});
        call.once('data', (pkt: OutPacket) => {
          const { random } = (pkt as Packet).dialRequest!;
          call.write({ type: PacketType.DIAL_RSP, dialResponse: { random, connectID: '7', error: '' } } as Packet);
          call.write({
            type: PacketType.DATA,
            data: { connectID: '7', data: Buffer.from('partial'), error: '' },
          } as Packet);
          call.write({ type: PacketType.CLOSE_RSP, closeResponse: { connectID: '7', error: closeError } } as Packet);
        });
        call.on('end', () => call.end());
      },
    });
    const port = await new Promise<number>((resolve, reject) =>
      server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, p) =>
        err ? reject(err) : resolve(p),
      ),
    );
    cleanups.push(() => server.forceShutdown());
    return port;
  }

  async function readToEnd(port: number): Promise<{ got: string; end: string }> {
    const conn = await dialThroughProxy({ mode: 'grpc', proxyHost: '127.0.0.1', proxyPort: port, address: 'x:1' });
    let got = '';
    conn.on('data', (c: Buffer) => (got += c.toString()));
    const end = await new Promise<string>((resolve) => {
      conn.once('end', () => resolve('end'));
      conn.once('error', (err) => resolve(err.message));
    });
    return { got, end };
  }

  it('with no error: a clean end after every byte', async () => {
    expect(await readToEnd(await hubThatCloses(''))).toEqual({ got: 'partial', end: 'end' });
  });

  it('with an error (the target reset, the agent cut it): the reader gets that error, not a clean end', async () => {
    const { got, end } = await readToEnd(await hubThatCloses('target error: read ECONNRESET'));
    expect(got).toBe('partial');
    expect(end).toBe('connection cut by the agent: target error: read ECONNRESET');
  });
});
