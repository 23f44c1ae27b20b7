// The dial log, its selector, the denial audit's rate limit and the connection table's records,
// without a hub: what a dial records when it settles and when it closes, and what watchers and lists see.
import { duplexPair, type Duplex } from 'node:stream';
import { pino } from 'pino';
import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { systemClock } from '../clock/clock.js';
import { TokenBucket } from '../clock/token-bucket.js';
import { parseSelector } from '../live-log/selector.js';
import { PacketType, type OutPacket, type Packet } from '../proto/packet-types.js';
import { ManualClock } from '../test/support/manual-clock.js';
import { waitUntil } from '../test/support/wait.js';
import { BufferBudget } from './buffer-budget.js';
import { ConnectionTable } from './connection-table.js';
import { connectIDCounter, type Dialer } from './tunnel-context.js';
import { Dial } from './dial.js';
import { type DialEntry, DialLog } from './dial-log.js';
import { DialRecorder } from './dial-recorder.js';
import { dialFields } from './dial-selector.js';
import { DialTraffic } from './dial-traffic.js';
import { TargetDialError } from './dialer.js';
import { AgentMetrics, denialLineBurst } from './metrics.js';
import { DenialAudit } from './denial-audit.js';
import { SendTurns } from './send-turns.js';

const silent = pino({ level: 'silent' });

function record(destination: string, fields: Partial<Dial> = {}): Dial {
  return Object.assign(new Dial(1_700_000_000_000, 0, 'server-a', destination), fields);
}

describe('DialLog', () => {
  it('lists each dial once in its latest state, names it by its first change and versions it by its latest', () => {
    const log = new DialLog({ size: 4 });
    const open = record('web.prod.cluster1:443', { connectID: '1', rule: '--expose=prod/web', address: '10.0.0.5' });
    log.added(open);
    log.added(record('169.254.169.254:80', { result: 'denied', reason: 'not allowed', address: '169.254.169.254' }));
    expect(log.current().map((e) => [e.destination, e.open, e.result])).toEqual([
      ['web.prod.cluster1:443', true, 'connected'],
      ['169.254.169.254:80', false, 'denied'],
    ]);
    Object.assign(open, { bytesToTarget: 5, bytesFromTarget: 7, durationMs: 12.3456, closedBy: 'CLOSE_REQ' });
    log.modified(open);
    const [closed, denied] = log.current();
    expect(closed).toMatchObject({
      id: 1,
      seq: 3,
      open: false,
      bytesToTarget: 5,
      bytesFromTarget: 7,
      durationMs: 12.346,
    });
    expect(denied).toMatchObject({ id: 2, seq: 2 });
    expect(log.nameOf(closed!)).toBe(log.version(1));
    expect([log.changeType(closed!), log.changeType(log.entries()[0]!)]).toEqual(['MODIFIED', 'ADDED']);
    expect(log.get(1)).toMatchObject({ seq: 3, closedBy: 'CLOSE_REQ' });
    expect(log.get(9)).toBeUndefined();
  });

  it('holds at least the last N dials, and lists at most N', () => {
    const log = new DialLog({ size: 2 });
    for (let i = 1; i <= 5; i++) log.added(record(`host-${i}:80`, { result: 'error' }));
    expect(log.current().map((e) => e.destination)).toEqual(['host-4:80', 'host-5:80']);
    expect(log.size).toBe(2);
    expect(log.get(1)).toBeUndefined();
  });

  it('hands watchers the connect and then the close, as two changes', async () => {
    const log = new DialLog({ size: 4, flushMs: 1 });
    const seen: DialEntry[] = [];
    const stop = log.subscribe((batch) => seen.push(...batch));
    const r = record('web:80');
    log.added(r);
    await waitUntil(() => seen.length === 1, 5000, 'the ADDED change');
    r.durationMs = 3;
    log.modified(r);
    await waitUntil(() => seen.length === 2, 5000, 'the MODIFIED change');
    stop();
    expect(seen.map((e) => [log.changeType(e), e.id, e.open])).toEqual([
      ['ADDED', 1, true],
      ['MODIFIED', 1, false],
    ]);
  });
});

describe('dialFields', () => {
  const entry = new DialLog({ size: 1 });
  entry.added(record('Web.Prod.cluster1:443', { result: 'denied', rule: '--expose=prod/web', reason: 'x' }));
  const e = entry.current()[0]!;
  const selects = (text: string) => {
    const s = parseSelector(dialFields, text);
    if (typeof s !== 'function') throw new Error(s.error);
    return s(e, entry.nameOf(e));
  };

  it('selects by result, destination (as host names compare), rule and server', () => {
    expect(
      ['result=denied', 'destination=web.prod.cluster1:443', 'rule=--expose\\=prod/web', 'server=server-a'].map(
        selects,
      ),
    ).toEqual([true, true, true, true]);
    expect(['result=connected', 'result!=denied', 'server=server-b', 'rule='].map(selects)).toEqual([
      false,
      false,
      false,
      false,
    ]);
    expect(parseSelector(dialFields, 'status.phase=x')).toEqual({
      error: expect.stringMatching(
        /field label not supported: status.phase \(supported: metadata.name, spec.destination/,
      ),
    });
  });
});

describe('TokenBucket', () => {
  it('gives a burst, then tokens at its rate as the clock moves', async () => {
    const clock = new ManualClock();
    const bucket = new TokenBucket(clock, 2, 3);
    expect([1, 2, 3, 4].map(() => bucket.take())).toEqual([true, true, true, false]);
    await clock.advance(499);
    expect(bucket.take()).toBe(false);
    await clock.advance(1);
    expect([bucket.take(), bucket.take()]).toEqual([true, false]);
    await clock.advance(60_000);
    expect([1, 2, 3, 4].map(() => bucket.take())).toEqual([true, true, true, false]);
  });
});

describe('DenialAudit', () => {
  it('writes a burst of lines, counts the ones it drops, and says how many in the next line', async () => {
    const clock = new ManualClock();
    const lines: Array<Record<string, unknown>> = [];
    const logger = pino({ level: 'warn' }, { write: (l: string) => void lines.push(JSON.parse(l)) });
    const registry = new Registry();
    const audit = new DenialAudit(logger, clock, registry);
    const denied = record('169.254.169.254:80', {
      result: 'denied',
      reason: 'not allowed',
      address: '169.254.169.254',
    });
    for (let i = 0; i < denialLineBurst + 30; i++) audit.denied(denied);
    expect(lines).toHaveLength(denialLineBurst);
    expect(lines[0]).toMatchObject({
      audit: 'dial-denied',
      server: 'server-a',
      destination: '169.254.169.254:80',
      address: '169.254.169.254',
      reason: 'not allowed',
    });
    expect(lines[0]).not.toHaveProperty('suppressedBefore');
    const suppressed = await registry.getSingleMetric('spoke_agent_dial_refusal_lines_suppressed_total')!.get();
    expect(suppressed.values[0]!.value).toBe(30);
    await clock.advance(1000);
    audit.denied(denied);
    expect(lines.at(-1)).toMatchObject({ suppressedBefore: 30 });
  });
});

describe('ConnectionTable with a DialRecorder', () => {
  function setup(dial: Dialer) {
    const sent: OutPacket[] = [];
    const registry = new Registry();
    const metrics = new AgentMetrics(registry);
    const log = new DialLog({ size: 8 });
    const table = new ConnectionTable({
      sink: {
        send: (p) => sent.push(p) > 0,
        sendData: (id, payload) =>
          sent.push({ type: PacketType.DATA, data: { connectID: String(id), data: Buffer.from(payload) } }) > 0,
        turns: new SendTurns({ queued: () => 0, limit: 1 << 20, defer: setImmediate, clock: systemClock }),
      },
      tunnel: {
        dial,
        maxBuffer: 1 << 20,
        budget: new BufferBudget(Infinity, { stallMs: 2000, metrics, log: silent, clock: systemClock }),
        connectIDs: connectIDCounter(),
        clock: systemClock,
        metrics,
        log: silent,
        recorder: new DialRecorder(
          new DialTraffic(registry),
          new DenialAudit(silent, new ManualClock(), registry),
          log,
        ),
      },
      pauseIncoming: () => {},
      resumeIncoming: () => {},
      lingerMs: 50,
      server: () => 'server-a',
    });
    const metric = async (name: string) =>
      (await registry.getSingleMetric(name)!.get()).values.map((v) => [v.labels, v.value]);
    return { table, sent, log, metric };
  }
  const dialReq = (random: string, address: string): Packet => ({
    type: PacketType.DIAL_REQ,
    dialRequest: { random, address, protocol: 'tcp' },
  });

  it('records a connection when it connects and again when it closes, with its bytes, and counts them under its rule', async () => {
    const targets: Duplex[] = [];
    const { table, sent, log, metric } = setup(async () => {
      const [agentSide, targetSide] = duplexPair();
      targets.push(targetSide);
      return { socket: agentSide, route: { rule: '--expose=prod/web', address: '127.0.0.1' } };
    });
    table.handle(dialReq('1', 'web.prod.cluster1:80'));
    await waitUntil(() => log.last === 1 && targets.length === 1, 5000, 'the dial');
    expect(log.current()[0]).toMatchObject({
      server: 'server-a',
      connectID: '1',
      destination: 'web.prod.cluster1:80',
      rule: '--expose=prod/web',
      address: '127.0.0.1',
      result: 'connected',
      open: true,
    });
    const received: Buffer[] = [];
    targets[0]!.on('data', (c: Buffer) => received.push(c));
    table.handle({ type: PacketType.DATA, data: { connectID: '1', data: Buffer.from('hello'), error: '' } });
    await waitUntil(() => received.length > 0, 5000, 'the bytes at the target');
    targets[0]!.write('abc');
    await waitUntil(() => sent.some((p) => p.type === PacketType.DATA), 5000, 'the bytes from the target');
    expect(await metric('spoke_agent_rule_open_connections')).toEqual([[{ rule: '--expose=prod/web' }, 1]]);
    table.handle({ type: PacketType.CLOSE_REQ, closeRequest: { connectID: '1' } });
    await waitUntil(() => log.last === 2, 5000, 'the close');
    expect(log.current()[0]).toMatchObject({
      open: false,
      bytesToTarget: 5,
      bytesFromTarget: 3,
      closedBy: 'CLOSE_REQ',
      durationMs: expect.any(Number),
    });
    expect(await metric('spoke_agent_rule_open_connections')).toEqual([[{ rule: '--expose=prod/web' }, 0]]);
    expect(await metric('spoke_agent_rule_bytes_total')).toEqual([
      [{ rule: '--expose=prod/web', direction: 'to_target' }, 5],
      [{ rule: '--expose=prod/web', direction: 'from_target' }, 3],
    ]);
  });

  it('records denials, errors (a target refusing the connection among them) and DIAL_CLS cancellations, each under "(none)" without a rule', async () => {
    const { table, log, metric } = setup(async (address) => {
      if (address.startsWith('169.254'))
        throw new TargetDialError(`dial tcp ${address}: not allowed`, 'denied', { address: '169.254.169.254' });
      if (address.startsWith('slow')) return new Promise<never>(() => {});
      throw new TargetDialError(`dial tcp ${address}: connect: connection refused`, 'refused');
    });
    table.handle(dialReq('1', '169.254.169.254:80'));
    table.handle(dialReq('2', '127.0.0.1:1'));
    table.handle(dialReq('3', 'slow.example:80'));
    table.handle({ type: PacketType.DIAL_CLS, closeDial: { random: '3' } });
    await waitUntil(() => log.last === 3, 5000, 'three dials settled');
    expect(log.current().map((e) => [e.destination, e.result, e.reason])).toEqual([
      ['slow.example:80', 'cancelled', 'cancelled by DIAL_CLS'],
      ['169.254.169.254:80', 'denied', 'dial tcp 169.254.169.254:80: not allowed'],
      ['127.0.0.1:1', 'error', 'dial tcp 127.0.0.1:1: connect: connection refused'],
    ]);
    const dials = Object.fromEntries(
      (await metric('spoke_agent_rule_dials_total')).map(([l, v]) => [(l as { result: string }).result, v]),
    );
    expect(dials).toEqual({ connected: 0, denied: 1, error: 1, cancelled: 1 });
    expect(
      (await metric('spoke_agent_rule_dials_total')).every(([l]) => (l as { rule: string }).rule === '(none)'),
    ).toBe(true);
  });
});
