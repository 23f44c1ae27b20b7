// The hub must not buffer without bound: a reader that stops must stop the writer on the other side,
// through the hub, in both directions and through both frontends.
import type { Duplex } from 'node:stream';
import * as grpc from '@grpc/grpc-js';
import { afterEach, describe, expect, it } from 'vitest';
import { dialThroughProxy } from '../client/dial.js';
import { AgentService, PacketType, type OutPacket, type Packet } from '../proto/packets.js';
import { waitUntilAsync } from '../test/support/wait.js';
import { ProxyHub } from './proxy-server.js';

const chunk = Buffer.alloc(64 * 1024, 7);
/** Far above what the windows and queues on the way should hold, far below a runaway. */
const bound = 48 * 1024 * 1024;

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** An agent that accepts every dial, then either floods the frontend or never reads from the hub. */
function agent(port: number, behaviour: 'flood' | 'stall') {
  const client = new AgentService(`127.0.0.1:${port}`, grpc.credentials.createInsecure(), {
    'grpc.use_local_subchannel_pool': 1,
  });
  const md = new grpc.Metadata();
  md.set('agentID', behaviour);
  const call = (
    client as unknown as { Connect(md: grpc.Metadata): grpc.ClientDuplexStream<OutPacket, Packet> }
  ).Connect(md);
  call.on('error', () => {});
  cleanups.push(() => call.cancel());
  const stats = { sent: 0 };
  const flood = () => {
    while (call.write({ type: PacketType.DATA, data: { connectID: '1', data: chunk } })) stats.sent += chunk.length;
    stats.sent += chunk.length;
    call.once('drain', flood);
  };
  call.on('data', (pkt: Packet) => {
    if (pkt.type !== PacketType.DIAL_REQ) return;
    call.write({ type: PacketType.DIAL_RSP, dialResponse: { random: pkt.dialRequest!.random, connectID: '1' } });
    if (behaviour === 'flood') flood();
    else call.pause();
  });
  return stats;
}

/** Writes as long as the stream takes it; returns how much it took. */
function fill(stream: Duplex): { accepted: number } {
  const stats = { accepted: 0 };
  const go = () => {
    while (stream.write(chunk)) stats.accepted += chunk.length;
    stats.accepted += chunk.length;
    stream.once('drain', go);
  };
  go();
  return stats;
}

/**
 * What `read()` settles at: the same at two looks 500 ms apart (the time a runaway writer has to show
 * itself, however long settling takes on a busy machine); fails once it passes `bound`.
 */
async function settled(read: () => number, what: string): Promise<number> {
  let last = -1;
  await waitUntilAsync(
    async () => {
      const now = read();
      if (now > bound) throw new Error(`${what}: ${now} bytes, past ${bound}: nothing holds it back`);
      const same = now === last;
      last = now;
      return same;
    },
    25_000,
    `${what} to stop`,
    500,
  );
  return last;
}

describe.each(['grpc', 'http-connect'] as const)('%s frontend flow control', (mode) => {
  const start = async (behaviour: 'flood' | 'stall') => {
    const hub = await ProxyHub.start({ agentPort: 0, serverPort: 0, httpConnectPort: 0 });
    cleanups.push(() => hub.close());
    const stats = agent(hub.ports.agent, behaviour);
    await hub.waitForAgent();
    const stream = await dialThroughProxy({
      mode,
      proxyHost: '127.0.0.1',
      proxyPort: mode === 'grpc' ? hub.ports.server! : hub.ports.httpConnect!,
      address: 'target:1',
    });
    cleanups.push(() => stream.destroy());
    return { stats, stream };
  };

  it('a frontend that stops reading stops the agent', async () => {
    const { stats, stream } = await start('flood');
    stream.pause();
    const first = await settled(() => stats.sent, 'what the agent sends');
    // And it resumes.
    let got = 0;
    stream.on('data', (c: Buffer) => (got += c.length));
    stream.resume();
    await expect.poll(() => got, { timeout: 20_000 }).toBeGreaterThan(first);
  });

  it('an agent that stops reading stops the frontend', async () => {
    const { stream } = await start('stall');
    const stats = fill(stream);
    await settled(() => stats.accepted, 'what the frontend takes');
  });
});
