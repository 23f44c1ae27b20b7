import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { dialTcp } from './dialer.js';
import { maxReadBytes, minReadBytes, nextReadSize, readMost, relayTargetReads } from './target-reads.js';

const servers: net.Server[] = [];
afterEach(() => {
  for (const s of servers.splice(0)) s.close();
});

async function source(bytes: Buffer): Promise<string> {
  const server = net.createServer((s) => s.end(bytes));
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return `127.0.0.1:${(server.address() as net.AddressInfo).port}`;
}

describe('target reads', () => {
  it('grow while reads fill them, and start over after one that does not', () => {
    expect(nextReadSize(minReadBytes, minReadBytes)).toBe(2 * minReadBytes);
    expect(nextReadSize(maxReadBytes, maxReadBytes)).toBe(maxReadBytes);
    expect(nextReadSize(128 << 10, 1000)).toBe(minReadBytes);
  });

  it('hand a shared-read socket its bytes in order, no read above the largest size, and leave other sockets emitting data', async () => {
    const body = Buffer.alloc(3_000_000);
    for (let i = 0; i < body.length; i++) body[i] = (i * 7) & 0xff;
    const address = await source(body);
    const { socket: shared } = await dialTcp(address, { timeoutMs: 1000, sharedReads: true });
    const copies: Buffer[] = [];
    expect(
      relayTargetReads(shared, (chunk) => {
        copies.push(Buffer.from(chunk));
        return true;
      }),
    ).toBe(true);
    await new Promise((r) => shared.once('end', r).resume());
    expect(Buffer.concat(copies).equals(body)).toBe(true);
    expect(Math.max(...copies.map((c) => c.length))).toBeLessThanOrEqual(maxReadBytes);
    // The first read is a small one: a crowd of new sockets brings little each.
    expect(copies[0]!.length).toBeLessThanOrEqual(minReadBytes);

    const { socket: plain } = await dialTcp(address, { timeoutMs: 1000 });
    expect(relayTargetReads(plain, () => true)).toBe(false);
    let got = 0;
    plain.on('data', (c: Buffer) => (got += c.length));
    await new Promise((r) => plain.once('end', r));
    expect(got).toBe(body.length);
  });

  it('pausing for a turn loses nothing: every byte arrives once the relay lets the socket read again', async () => {
    const body = Buffer.alloc(1_500_000, 0x5a);
    for (let i = 0; i < body.length; i += 4099) body[i] = i & 0xff;
    const address = await source(body);
    const { socket } = await dialTcp(address, { timeoutMs: 1000, sharedReads: true });
    const copies: Buffer[] = [];
    let paused = 0;
    relayTargetReads(socket, (chunk) => {
      copies.push(Buffer.from(chunk));
      // Every other read waits for its "turn", which comes on the next turn of the event loop.
      if (copies.length % 2 === 0) return true;
      paused++;
      setImmediate(() => socket.resume());
      return false;
    });
    await new Promise((r) => socket.once('end', r));
    expect(paused).toBeGreaterThan(1);
    expect(Buffer.concat(copies).equals(body)).toBe(true);
  });
});

describe('a turn after waiting', () => {
  it('reads with the largest buffer, every byte intact, even before the socket has read at all', async () => {
    const body = Buffer.alloc(2_000_000);
    for (let i = 0; i < body.length; i++) body[i] = (i * 13 + 5) & 0xff;
    const address = await source(body);
    const { socket } = await dialTcp(address, { timeoutMs: 1000, sharedReads: true });
    socket.pause(); // held back before its first read, as a connection queued behind others is
    const copies: Buffer[] = [];
    relayTargetReads(socket, (chunk) => {
      copies.push(Buffer.from(chunk));
      return true;
    });
    const ended = new Promise((r) => socket.once('end', r));
    readMost(socket);
    socket.resume();
    await ended;
    expect(Buffer.concat(copies).equals(body)).toBe(true);
  });
});
