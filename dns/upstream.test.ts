// The upstream's UDP timeout on a clock the test moves: a query nobody answers fails as a timeout once
// --dns-upstream-timeout has passed on that clock, not before; an answer cancels its timeout.
import dgram from 'node:dgram';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../test/support/manual-clock.js';
import { waitUntil } from '../test/support/wait.js';
import { Upstream } from './upstream.js';

/** `a.` IN A, recursion desired. */
const query = Buffer.from([0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0, 1, 0x61, 0, 0, 1, 0, 1]);

const closers: Array<() => void> = [];
afterEach(() => {
  for (const close of closers.splice(0)) close();
});

/** A UDP server on loopback that keeps what it receives and, when `answering`, echoes it back as a response. */
async function udpServer(answering: boolean) {
  const received: Buffer[] = [];
  const socket = dgram.createSocket('udp4');
  socket.on('message', (msg, from) => {
    received.push(msg);
    if (!answering) return;
    const response = Buffer.from(msg);
    response[2] = response[2]! | 0x80; // QR: a response
    socket.send(response, from.port, from.address);
  });
  await new Promise<void>((resolve) => socket.bind(0, '127.0.0.1', resolve));
  closers.push(() => socket.close());
  return { port: (socket.address() as AddressInfo).port, received };
}

describe('the upstream over UDP', () => {
  it('fails a query nobody answers as a timeout once the timeout has passed on its clock', async () => {
    const server = await udpServer(false);
    const clock = new ManualClock();
    const upstream = new Upstream({ host: '127.0.0.1', port: server.port }, 300, clock);
    closers.push(() => upstream.close());
    let settled = false;
    const answer = upstream.exchange(query, false);
    answer.catch(() => {}).finally(() => (settled = true));
    await waitUntil(() => server.received.length === 1, 10_000, 'the query at the upstream');
    await clock.advance(299);
    expect(settled).toBe(false);
    await clock.advance(1);
    await expect(answer).rejects.toMatchObject({ reason: 'timeout' });
  });

  it('resolves with the answer, under the query ID, and cancels its timeout', async () => {
    const server = await udpServer(true);
    const clock = new ManualClock();
    const upstream = new Upstream({ host: '127.0.0.1', port: server.port }, 300, clock);
    closers.push(() => upstream.close());
    const response = await upstream.exchange(query, false);
    expect(response.readUInt16BE(0)).toBe(0x1234);
    expect(clock.waiting).toBe(0);
  });
});
