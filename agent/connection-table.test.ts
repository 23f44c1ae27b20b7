import net from 'node:net';
import { duplexPair, type Duplex } from 'node:stream';
import { Registry } from 'prom-client';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { PacketType, type OutPacket, type Packet } from '../proto/packet-types.js';
import { BufferBudget } from './buffer-budget.js';
import { dialTcp } from './dialer.js';
import { AgentMetrics } from './metrics.js';
import { ConnectionTable } from './connection-table.js';
import { SendTurns } from './send-turns.js';
import { connectIDCounter, type Dialer } from './tunnel-context.js';
import { ManualClock } from '../test/support/manual-clock.js';
import { waitUntil } from '../test/support/wait.js';

const log = pino({ level: 'silent' });
/** Lets what the last step queued run (in-memory streams, dial promises): turns of the event loop, not time. */
async function tick(): Promise<void> {
  for (let i = 0; i < 20; i++) await new Promise((r) => setImmediate(r));
}
/** A budget shared by several tunnels, with the metrics they all report to and the clock they all run on. */
const budgetParts = new WeakMap<BufferBudget, { metrics: AgentMetrics; clock: ManualClock }>();
function sharedBudget(limit: number, stallMs: number): BufferBudget {
  const metrics = new AgentMetrics(new Registry());
  const clock = new ManualClock();
  const budget = new BufferBudget(limit, { stallMs, clock, metrics, log });
  budgetParts.set(budget, { metrics, clock });
  return budget;
}

function setup(
  opts: {
    dial?: Dialer;
    maxBuffer?: number;
    stallMs?: number;
    /** Bytes the stream holds unwritten, as its turns see them. */
    queued?: () => number;
    lingerMs?: number;
    budget?: BufferBudget;
  } = {},
) {
  const sent: OutPacket[] = [];
  const brakes: string[] = [];
  const deferred: Array<() => void> = [];
  const targets: Duplex[] = [];
  // The stall limit and the linger run on a clock the test moves.
  const { metrics, clock } = opts.budget
    ? budgetParts.get(opts.budget)!
    : { metrics: new AgentMetrics(new Registry()), clock: new ManualClock() };
  const turns = new SendTurns({
    queued: opts.queued ?? (() => 0),
    limit: 1000,
    defer: (fn) => deferred.push(fn),
    clock,
  });
  const budget = opts.budget ?? new BufferBudget(Infinity, { stallMs: opts.stallMs ?? 2000, clock, metrics, log });
  const dial: Dialer =
    opts.dial ??
    (async () => {
      const [agentSide, targetSide] = duplexPair();
      targets.push(targetSide);
      return { socket: agentSide, route: {} };
    });
  const table = new ConnectionTable({
    sink: {
      send: (p) => sent.push(p),
      sendData: (id, payload) => {
        sent.push({ type: PacketType.DATA, data: { connectID: String(id), data: Buffer.from(payload) } });
      },
      turns,
    },
    tunnel: { dial, maxBuffer: opts.maxBuffer ?? 1 << 20, budget, connectIDs: connectIDCounter(), metrics, log, clock },
    stallMs: opts.stallMs ?? 2000,
    pauseIncoming: () => brakes.push('pause'),
    resumeIncoming: () => brakes.push('resume'),
    lingerMs: opts.lingerMs ?? 50,
  });
  return { table, sent, targets, turns, deferred, metrics, brakes, budget, clock };
}

/** A loopback target that keeps its side open after the agent's FIN (it never closes by itself). */
async function halfOpenTarget(): Promise<{ server: net.Server; accepted: Promise<net.Socket> }> {
  let accept!: (s: net.Socket) => void;
  const accepted = new Promise<net.Socket>((r) => (accept = r));
  const server = net.createServer({ allowHalfOpen: true }, (s) => {
    s.on('error', () => {});
    server.once('close', () => s.destroy());
    accept(s);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { server, accepted };
}

/** Rejected packets by reason and late packets by type. */
async function counts(metrics: AgentMetrics) {
  const by = async (c: AgentMetrics['rejectedPackets'] | AgentMetrics['latePackets'], label: string) =>
    Object.fromEntries((await c.get()).values.map((v) => [(v.labels as Record<string, string>)[label], v.value]));
  return { rejected: await by(metrics.rejectedPackets, 'reason'), late: await by(metrics.latePackets, 'type') };
}

const dialReq = (random: string, address = '127.0.0.1:80', protocol = 'tcp'): Packet => ({
  type: PacketType.DIAL_REQ,
  dialRequest: { random, address, protocol },
});
const data = (connectID: string, bytes: string): Packet => ({
  type: PacketType.DATA,
  data: { connectID, data: Buffer.from(bytes), error: '' },
});
const closeReq = (connectID: string): Packet => ({ type: PacketType.CLOSE_REQ, closeRequest: { connectID } });

describe('ConnectionTable', () => {
  it('answers a dial with connectID 1 and relays DATA both ways', async () => {
    const { table, sent, targets } = setup();
    table.handle(dialReq('9007199254740993'));
    await tick();
    expect(sent[0]).toEqual({
      type: PacketType.DIAL_RSP,
      dialResponse: { random: '9007199254740993', connectID: '1' },
    });
    const target = targets[0]!;
    const received: Buffer[] = [];
    target.on('data', (c: Buffer) => received.push(c));
    table.handle(data('1', 'ping'));
    target.write('pong');
    await tick();
    expect(Buffer.concat(received).toString()).toBe('ping');
    expect(sent[1]).toMatchObject({ type: PacketType.DATA, data: { connectID: '1' } });
    expect((sent[1] as { data: { data: Buffer } }).data.data.toString()).toBe('pong');
  });

  it('reports a failed dial in DIAL_RSP and keeps serving', async () => {
    let calls = 0;
    const { table, sent } = setup({
      dial: async () => {
        if (calls++ === 0) throw new Error('dial tcp 127.0.0.1:1: connect: connection refused');
        return { socket: duplexPair()[0], route: {} };
      },
    });
    table.handle(dialReq('5'));
    table.handle(dialReq('6'));
    await tick();
    expect(sent).toContainEqual({
      type: PacketType.DIAL_RSP,
      dialResponse: { random: '5', error: 'dial tcp 127.0.0.1:1: connect: connection refused' },
    });
    expect(sent).toContainEqual({ type: PacketType.DIAL_RSP, dialResponse: { random: '6', connectID: '1' } });
  });

  it('gives the Go agent replies for unknown connectIDs', async () => {
    const { table, sent, metrics } = setup();
    table.handle(data('42', 'garbage'));
    table.handle(closeReq('43'));
    expect(sent).toEqual([
      { type: PacketType.CLOSE_RSP, closeResponse: { connectID: '42', error: 'unrecognized connectID' } },
      { type: PacketType.CLOSE_RSP, closeResponse: { connectID: '43', error: 'Unknown connectID' } },
    ]);
    expect(await counts(metrics)).toEqual({ rejected: { unknown_connect_id: 2 }, late: {} });
  });

  it('answers CLOSE_REQ once, flushes to the target, and counts a duplicate as late, not rejected', async () => {
    const { table, sent, targets, metrics } = setup();
    table.handle(dialReq('1'));
    await tick();
    const target = targets[0]!;
    const chunks: Buffer[] = [];
    let ended = false;
    target.on('data', (c: Buffer) => chunks.push(c));
    target.on('end', () => (ended = true));
    table.handle(data('1', 'last words'));
    table.handle(closeReq('1'));
    table.handle(closeReq('1'));
    await tick();
    expect(Buffer.concat(chunks).toString()).toBe('last words');
    expect(ended).toBe(true);
    expect(sent.slice(1)).toEqual([
      { type: PacketType.CLOSE_RSP, closeResponse: { connectID: '1' } },
      { type: PacketType.CLOSE_RSP, closeResponse: { connectID: '1', error: 'Unknown connectID' } },
    ]);
    expect(table.connectionCount).toBe(0);
    expect(await counts(metrics)).toEqual({ rejected: {}, late: { CLOSE_REQ: 1 } });
  });

  it("the close race (target closes, then the hub's DATA and CLOSE_REQ arrive) is late, not rejected; an id never used still is", async () => {
    const { table, sent, targets, metrics } = setup();
    table.handle(dialReq('1'));
    await tick();
    targets[0]!.end();
    await tick();
    table.handle(data('1', 'in flight'));
    table.handle(closeReq('1'));
    // Answered as the Go agent answers an id it does not hold.
    expect(sent.slice(-2)).toEqual([
      { type: PacketType.CLOSE_RSP, closeResponse: { connectID: '1', error: 'unrecognized connectID' } },
      { type: PacketType.CLOSE_RSP, closeResponse: { connectID: '1', error: 'Unknown connectID' } },
    ]);
    expect(await counts(metrics)).toEqual({ rejected: {}, late: { DATA: 1, CLOSE_REQ: 1 } });
    table.handle(closeReq('2'));
    expect(await counts(metrics)).toEqual({ rejected: { unknown_connect_id: 1 }, late: { DATA: 1, CLOSE_REQ: 1 } });
  });

  it('DIAL_CLS that crosses our DIAL_RSP is late; one for a dial never requested is rejected', async () => {
    const { table, metrics } = setup();
    table.handle(dialReq('77'));
    await tick();
    table.handle({ type: PacketType.DIAL_CLS, closeDial: { random: '77' } });
    table.handle({ type: PacketType.DIAL_CLS, closeDial: { random: '78' } });
    expect(await counts(metrics)).toEqual({ rejected: { unknown_dial: 1 }, late: { DIAL_CLS: 1 } });
    expect(table.connectionCount).toBe(1);
  });

  it('sends CLOSE_RSP when the target closes (remote EOF)', async () => {
    const { table, sent, targets } = setup();
    table.handle(dialReq('1'));
    await tick();
    targets[0]!.end();
    await tick();
    expect(sent.at(-1)).toEqual({ type: PacketType.CLOSE_RSP, closeResponse: { connectID: '1' } });
    expect(table.connectionCount).toBe(0);
  });

  it('cancels a pending dial on DIAL_CLS and closes the socket it produced', async () => {
    let release!: () => void;
    let produced: Duplex | undefined;
    let aborted = false;
    const { table, sent, metrics } = setup({
      dial: (_address, cancel) =>
        new Promise((resolve) => {
          cancel.onCancel = () => (aborted = true);
          release = () => {
            produced = duplexPair()[0];
            resolve({ socket: produced, route: {} });
          };
        }),
    });
    table.handle(dialReq('77'));
    table.handle({ type: PacketType.DIAL_CLS, closeDial: { random: '77' } });
    expect(aborted).toBe(true);
    release();
    await tick();
    expect(produced!.destroyed).toBe(true);
    expect(sent).toEqual([]);
    expect(table.pendingDialCount).toBe(0);
    expect((await metrics.dialCancellations.get()).values[0]!.value).toBe(1);
  });

  it('logs and counts malformed and unexpected packets without disturbing open connections', async () => {
    const { table, sent, targets, metrics } = setup();
    table.handle(dialReq('1'));
    await tick();
    table.handle({ malformed: 'index out of range' });
    table.handle({ type: PacketType.DATA } as Packet);
    table.handle({ type: PacketType.DIAL_RSP, dialResponse: { random: '1', connectID: '9', error: '' } });
    table.handle({ type: 99 as PacketType });
    const got: Buffer[] = [];
    targets[0]!.on('data', (c: Buffer) => got.push(c));
    table.handle(data('1', 'still here'));
    await tick();
    expect(Buffer.concat(got).toString()).toBe('still here');
    expect(sent).toHaveLength(1);
    const rejected = await metrics.rejectedPackets.get();
    expect(Object.fromEntries(rejected.values.map((v) => [v.labels.reason, v.value]))).toEqual({
      malformed: 2,
      unexpected_type: 2,
    });
  });

  it('closes a connection whose target stopped reading once its budget is exceeded, without braking the stream', async () => {
    const { table, sent, metrics, brakes, clock } = setup({ maxBuffer: 64 << 10, stallMs: 30 });
    table.handle(dialReq('1'));
    table.handle(dialReq('2'));
    await tick();
    // Nobody reads target 1: its writes pile up in the agent-side write buffer, and wait there for
    // longer than the stall limit before the budget is exceeded.
    for (let i = 0; i < 4; i++) table.handle(data('1', 'x'.repeat(16 << 10)));
    await clock.advance(40);
    for (let i = 0; i < 6; i++) table.handle(data('1', 'x'.repeat(16 << 10)));
    expect(sent).toContainEqual({
      type: PacketType.CLOSE_RSP,
      closeResponse: {
        connectID: '1',
        error: `target stopped reading: more than ${64 << 10} bytes buffered and none accepted for 30ms`,
      },
    });
    expect(table.connectionCount).toBe(1);
    expect(brakes).toEqual([]);
    expect((await metrics.bufferOverflows.get()).values[0]!.value).toBe(1);
  });

  it('brakes the stream for a target that is over budget but still reading, and releases it when drained', async () => {
    const { table, sent, targets, brakes } = setup({ maxBuffer: 64 << 10, stallMs: 5000 });
    table.handle(dialReq('1'));
    await tick();
    for (let i = 0; i < 10; i++) table.handle(data('1', 'x'.repeat(16 << 10)));
    expect(brakes).toEqual(['pause']);
    let got = 0;
    targets[0]!.on('data', (c: Buffer) => (got += c.length));
    await tick();
    expect(got).toBe(160 << 10);
    expect(brakes).toEqual(['pause', 'resume']);
    expect(sent.filter((p) => p.type === PacketType.CLOSE_RSP)).toEqual([]);
  });

  it('closes a braking connection whose target then stops reading, and releases the stream', async () => {
    const { table, sent, brakes, clock } = setup({ maxBuffer: 64 << 10, stallMs: 40 });
    table.handle(dialReq('1'));
    await tick();
    for (let i = 0; i < 10; i++) table.handle(data('1', 'x'.repeat(16 << 10)));
    expect(brakes).toEqual(['pause']);
    await clock.advance(39);
    expect(brakes).toEqual(['pause']);
    await clock.advance(10); // the next check past the stall limit
    expect(brakes).toEqual(['pause', 'resume']);
    expect(sent.at(-1)).toMatchObject({
      type: PacketType.CLOSE_RSP,
      closeResponse: { connectID: '1', error: expect.stringContaining('target stopped reading') },
    });
  });

  it('sheds the largest stopped target across streams when the agent budget is exhausted, and keeps the rest', async () => {
    const budget = sharedBudget(512 << 10, 40);
    const a = setup({ budget, maxBuffer: 8 << 20, stallMs: 40 });
    const b = setup({ budget, maxBuffer: 8 << 20, stallMs: 40 });
    a.table.handle(dialReq('1'));
    a.table.handle(dialReq('2'));
    b.table.handle(dialReq('3'));
    await tick();
    // Connection 2 of stream a and connection 1 of stream b stop reading, b's with the most waiting;
    // connection 1 of stream a reads.
    let got = 0;
    a.targets[0]!.on('data', (c: Buffer) => (got += c.length));
    for (let i = 0; i < 5; i++) a.table.handle(data('2', 'x'.repeat(16 << 10)));
    for (let i = 0; i < 24; i++) b.table.handle(data('1', 'x'.repeat(16 << 10)));
    await a.clock.advance(60);
    const before = budget.total;
    expect(before).toBeLessThanOrEqual(budget.limit);
    // Stream a's reading target pushes the total over 512 KiB.
    let sentToReader = 0;
    while (b.table.connectionCount > 0 && sentToReader < 40) {
      a.table.handle(data('1', 'y'.repeat(16 << 10)));
      sentToReader++;
    }
    const closes = (t: typeof a) => t.sent.filter((p) => p.type === PacketType.CLOSE_RSP);
    expect(closes(b)).toEqual([
      {
        type: PacketType.CLOSE_RSP,
        closeResponse: { connectID: '1', error: expect.stringContaining('agent buffer budget exhausted') },
      },
    ]);
    expect(closes(a)).toEqual([]);
    expect(b.table.connectionCount).toBe(0);
    expect(a.table.connectionCount).toBe(2);
    expect(budget.total).toBeLessThan(before);
    const metrics = b.metrics;
    expect((await metrics.bufferShed.get()).values[0]!.value).toBe(1);
    expect((await metrics.bufferedBytes.get()).values[0]!.value).toBe(budget.total);
    await tick();
    expect(got).toBe(sentToReader * (16 << 10));
    expect([a.brakes, b.brakes]).toEqual([[], []]);
  });

  it('pauses every stream while over the budget with no stopped target, then sheds the one that stops', async () => {
    const budget = sharedBudget(256 << 10, 40);
    const a = setup({ budget, maxBuffer: 8 << 20, stallMs: 40 });
    const b = setup({ budget, maxBuffer: 8 << 20, stallMs: 40 });
    a.table.handle(dialReq('1'));
    await tick();
    for (let i = 0; i < 20; i++) a.table.handle(data('1', 'x'.repeat(16 << 10)));
    expect([a.brakes, b.brakes]).toEqual([['pause'], ['pause']]);
    await a.clock.advance(39);
    expect(a.sent.at(-1)?.type).not.toBe(PacketType.CLOSE_RSP);
    await a.clock.advance(10); // the brake's next check past the stall limit
    expect(a.sent.at(-1)).toMatchObject({
      type: PacketType.CLOSE_RSP,
      closeResponse: { connectID: '1', error: expect.stringContaining('agent buffer budget exhausted') },
    });
    expect([a.brakes, b.brakes]).toEqual([
      ['pause', 'resume'],
      ['pause', 'resume'],
    ]);
    expect(budget.total).toBe(0);
    expect((await a.metrics.bufferBrakes.get()).values[0]!.value).toBe(1);
  });

  it('releases a target socket right after CLOSE_REQ once its final bytes are flushed, though the target keeps its side open', async () => {
    const { server, accepted } = await halfOpenTarget();
    const sockets: net.Socket[] = [];
    const { table, metrics } = setup({
      lingerMs: undefined,
      dial: async (address) => {
        const dialled = await dialTcp(address, { timeoutMs: 1000 });
        sockets.push(dialled.socket);
        return dialled;
      },
    });
    try {
      table.handle(dialReq('1', `127.0.0.1:${(server.address() as net.AddressInfo).port}`));
      await waitUntil(() => table.connectionCount === 1, 20_000, 'the dial');
      const target = await accepted;
      const got: Buffer[] = [];
      target.on('data', (c: Buffer) => got.push(c));
      table.handle(data('1', 'last words'));
      table.handle(closeReq('1'));
      await waitUntil(() => sockets[0]!.destroyed, 20_000, 'the target socket to be released (it used to stay 10 s)');
      await waitUntil(() => Buffer.concat(got).toString() === 'last words', 20_000, 'the final bytes');
      expect((await metrics.closingEndpointConnections.get()).values[0]!.value).toBe(0);
    } finally {
      server.close();
    }
  });

  it('counts a closed socket whose target does not take its final bytes, and destroys it after the grace', async () => {
    const { server, accepted } = await halfOpenTarget();
    const sockets: net.Socket[] = [];
    const { table, metrics, clock } = setup({
      lingerMs: 300,
      dial: async (address) => {
        const dialled = await dialTcp(address, { timeoutMs: 1000 });
        sockets.push(dialled.socket);
        return dialled;
      },
    });
    const closing = async () => (await metrics.closingEndpointConnections.get()).values[0]!.value;
    try {
      table.handle(dialReq('1', `127.0.0.1:${(server.address() as net.AddressInfo).port}`));
      await waitUntil(() => table.connectionCount === 1, 20_000, 'the dial');
      (await accepted).pause();
      // More than loopback's kernel buffers take from a target that reads nothing.
      const mib: Packet = { type: PacketType.DATA, data: { connectID: '1', data: Buffer.alloc(1 << 20), error: '' } };
      for (let i = 0; i < 16; i++) table.handle(mib);
      table.handle(closeReq('1'));
      expect(table.connectionCount).toBe(0);
      expect(await closing()).toBe(1);
      await clock.advance(299);
      expect(sockets[0]!.destroyed).toBe(false);
      await clock.advance(1);
      expect(sockets[0]!.destroyed).toBe(true);
      await tick();
      expect(await closing()).toBe(0);
    } finally {
      server.close();
    }
  });

  it('stops reading a target while the stream is full, and reads it again in its turn', async () => {
    let queued = 0;
    const { table, sent, targets, turns, deferred } = setup({ queued: () => queued });
    table.handle(dialReq('1'));
    table.handle(dialReq('2'));
    await tick();
    queued = 5000; // past the limit: the next connection to send waits for its turn
    targets[0]!.write('a');
    await tick();
    targets[0]!.write('b');
    targets[1]!.write('c');
    await tick();
    const data = () => sent.filter((p) => p.type === PacketType.DATA).map((p) => String(p.data!.data));
    expect(data()).toEqual(['a', 'c']);
    expect(turns.waitingCount).toBe(2);
    queued = 0;
    turns.drained();
    for (const run of deferred.splice(0)) run();
    await tick();
    expect(data()).toEqual(['a', 'c', 'b']);
  });

  it("tells the hub in CLOSE_RSP's error when a target fails mid-connection (a reset), so its client sees a cut, not an end", async () => {
    let agentSide: Duplex | undefined;
    const { table, sent } = setup({
      dial: async () => {
        const [a] = duplexPair();
        agentSide = a;
        return { socket: a, route: {} };
      },
    });
    table.handle(dialReq('1'));
    await tick();
    agentSide!.destroy(Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' }));
    await tick();
    expect(sent.at(-1)).toEqual({
      type: PacketType.CLOSE_RSP,
      closeResponse: { connectID: '1', error: 'target error: read ECONNRESET' },
    });
  });

  it('cut by its stream closing while the stream still carries packets: each client is told why (CLOSE_RSP, and DIAL_RSP for a pending dial)', async () => {
    let dials = 0;
    const { table, sent } = setup({
      dial: async () => {
        if (dials++ > 0) return new Promise(() => {});
        return { socket: duplexPair()[0], route: {} };
      },
    });
    table.handle(dialReq('1'));
    await tick();
    table.handle(dialReq('2'));
    await tick();
    table.abortAll('the agent closed its stream with this connection open (draining)');
    expect(sent.slice(-2)).toEqual([
      {
        type: PacketType.DIAL_RSP,
        dialResponse: { random: '2', error: 'the agent closed its stream with this connection open (draining)' },
      },
      {
        type: PacketType.CLOSE_RSP,
        closeResponse: { connectID: '1', error: 'the agent closed its stream with this connection open (draining)' },
      },
    ]);
  });

  it('refuses protocols other than tcp', () => {
    const { table, sent } = setup();
    table.handle(dialReq('3', '127.0.0.1:53', 'udp'));
    expect(sent[0]).toMatchObject({
      type: PacketType.DIAL_RSP,
      dialResponse: { random: '3', error: expect.stringContaining('unsupported protocol') },
    });
  });
});
