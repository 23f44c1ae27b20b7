// The query log's ring and the peers it decodes, without sockets: what is recorded comes back decoded,
// the ring forgets the oldest, and watchers get batches only while they watch.
import { describe, expect, it } from 'vitest';
import type { Proto } from './metrics.js';
import { type Peer, peerAddress } from './peer.js';
import type { SkipReason } from '../live-log/live-log.js';
import { parseSelector, type Selector } from '../live-log/selector.js';
import { ManualClock } from '../test/support/manual-clock.js';
import { QueryLog, type QueryEntry } from './query-log.js';
import { queryFields } from './query-selector.js';
import { DnsRequest } from './request.js';
import { type BadQuery, encodeQuery, parseQuery, type Query, RCODE, TYPE } from './wire.js';

const sockaddrIn = (ip: number[], port: number) =>
  Buffer.from([2, 0, port >> 8, port & 0xff, ...ip, 0, 0, 0, 0, 0, 0, 0, 0]);
const sockaddrIn6 = (ip: number[], port: number) =>
  Buffer.from([10, 0, port >> 8, port & 0xff, 0, 0, 0, 0, ...ip, 0, 0, 0, 0]);

function query(name: string, qtype: number = TYPE.A) {
  const msg = encodeQuery(name, qtype);
  return { msg, q: parseQuery(msg) as Query };
}

/** A question that could not be read, answered with `rcode`. */
const badQuery = (rcode: number): BadQuery => ({ id: 0, opcode: 0, rd: false, rcode });

/** A request as the resolver leaves it once answered. */
function answered(
  msg: Buffer,
  q: Query | BadQuery,
  proto: Proto,
  peer: Peer,
  at: number,
  answer: Partial<Pick<DnsRequest, 'rcode' | 'truncated' | 'cached' | 'meta' | 'ms'>>,
): DnsRequest<Query | BadQuery> {
  return Object.assign(new DnsRequest(msg, q, proto, () => {}, peer, at, -1), answer);
}

describe('peerAddress', () => {
  it("reads the batched helper's sockaddr bytes, IPv4 and IPv6, and dgram's or TCP's address and port", () => {
    expect(peerAddress(sockaddrIn([10, 0, 3, 7], 53211))).toEqual({ address: '10.0.3.7', port: 53211 });
    expect(peerAddress(sockaddrIn6([0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1], 5353))).toEqual({
      address: 'fd00::1',
      port: 5353,
    });
    expect(peerAddress(sockaddrIn6([0x20, 0x01, 0x0d, 0xb8, 0, 1, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0], 1))).toEqual({
      address: '2001:db8:1::1:0:0',
      port: 1,
    });
    expect(peerAddress(sockaddrIn6([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1], 2)).address).toBe('::1');
    expect(peerAddress(sockaddrIn6([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 192, 0, 2, 1], 3)).address).toBe(
      '192.0.2.1',
    );
    expect(peerAddress({ address: '::ffff:127.0.0.1', port: 40000 })).toEqual({ address: '127.0.0.1', port: 40000 });
    expect(peerAddress({ address: '::1', port: 4 })).toEqual({ address: '::1', port: 4 });
  });
});

describe('QueryLog', () => {
  it('gives back what was recorded: name as asked, type, client, rcode, the rule and the answer, latency (when timed), time', () => {
    const log = new QueryLog({ size: 4 });
    const { msg, q } = query('Search.Default.cluster1', TYPE.AAAA);
    const meta = {
      source: 'rule' as const,
      rule: '--expose=default/search',
      target: 'search.default.svc.cluster.test',
      answer: ['CNAME search.default.svc.cluster.test'],
    };
    log.record(
      answered(msg, q, 'udp', sockaddrIn([10, 0, 3, 7], 53211), 1_700_000_000_123, {
        rcode: RCODE.NOERROR,
        meta,
        ms: 0.04123,
      }),
    );
    log.record(
      answered(msg, badQuery(RCODE.FORMERR), 'tcp', { address: '::ffff:10.0.3.8', port: 1000 }, 1_700_000_000_124, {
        rcode: RCODE.FORMERR,
        truncated: true,
        meta: { source: 'error' },
      }),
    );
    log.record(
      answered(msg, q, 'udp', sockaddrIn([10, 0, 3, 7], 53212), 1_700_000_000_125, {
        rcode: RCODE.NOERROR,
        cached: true,
        meta,
      }),
    );
    expect(log.entries()).toEqual([
      {
        seq: 1,
        time: 1_700_000_000_123,
        name: 'Search.Default.cluster1',
        type: 'AAAA',
        client: '10.0.3.7',
        clientPort: 53211,
        transport: 'udp',
        rcode: 'NOERROR',
        source: 'rule',
        rule: meta.rule,
        target: meta.target,
        answer: meta.answer,
        truncated: false,
        cached: false,
        ms: 0.041,
      },
      {
        seq: 2,
        time: 1_700_000_000_124,
        name: '',
        type: '',
        client: '10.0.3.8',
        clientPort: 1000,
        transport: 'tcp',
        rcode: 'FORMERR',
        source: 'error',
        truncated: true,
        cached: false,
      },
      {
        seq: 3,
        time: 1_700_000_000_125,
        name: 'Search.Default.cluster1',
        type: 'AAAA',
        client: '10.0.3.7',
        clientPort: 53212,
        transport: 'udp',
        rcode: 'NOERROR',
        source: 'rule',
        rule: meta.rule,
        target: meta.target,
        answer: meta.answer,
        truncated: false,
        cached: true,
      },
    ]);
    expect(log.get(2)?.rcode).toBe('FORMERR');
    expect([log.get(0), log.get(4), log.get(1.5)]).toEqual([undefined, undefined, undefined]);
  });

  it('holds the last `size` queries: older ones are gone, and a long name fits its slot', () => {
    const log = new QueryLog({ size: 3 });
    const long = `${'a'.repeat(63)}.${'b'.repeat(63)}.${'c'.repeat(63)}.${'d'.repeat(61)}`;
    for (const name of ['one.cluster1', 'two.cluster1', long, 'four.cluster1', 'five.cluster1']) {
      const { msg, q } = query(name);
      log.record(
        answered(msg, q, 'udp', { address: '127.0.0.1', port: 1 }, 0, {
          rcode: RCODE.NXDOMAIN,
          meta: { source: 'zone' },
          ms: 0,
        }),
      );
    }
    expect([log.oldest, log.last]).toEqual([3, 5]);
    expect(log.entries().map((e) => [e.seq, e.name])).toEqual([
      [3, long],
      [4, 'four.cluster1'],
      [5, 'five.cluster1'],
    ]);
    expect(log.entries(4).map((e) => e.seq)).toEqual([5]);
    expect(log.get(2)).toBeUndefined();
  });

  it('batches new entries to watchers every flushMs, only while someone watches, counting what a burst overwrote', async () => {
    const clock = new ManualClock();
    const skipped: Array<[SkipReason, number]> = [];
    const log = new QueryLog({
      size: 2,
      flushMs: 100,
      clock,
      onSkipped: (reason, n) => skipped.push([reason, n]),
    });
    const { msg, q } = query('x.cluster1');
    const record = () =>
      log.record(
        answered(msg, q, 'udp', { address: '127.0.0.1', port: 1 }, 0, { cached: true, meta: { source: 'rule' } }),
      );
    record();
    expect(clock.waiting).toBe(0);
    const batches: number[][] = [];
    const stop = log.subscribe((batch) => batches.push(batch.map((e) => e.seq)));
    expect(log.watchers).toBe(1);
    record();
    record();
    expect(batches).toEqual([]);
    await clock.advance(100);
    expect(batches).toEqual([[2, 3]]);
    for (let i = 0; i < 5; i++) record(); // 4..8, of which the ring keeps 7 and 8
    await clock.advance(100);
    expect(batches).toEqual([
      [2, 3],
      [7, 8],
    ]);
    expect(skipped).toEqual([['overwritten', 3]]);
    await clock.advance(1000);
    expect(batches).toHaveLength(2);
    stop();
    record();
    expect([log.watchers, clock.waiting]).toEqual([0, 0]);
  });

  it("names versions after its instance, and starts a watch after its own, from everything without one, from now after another's", () => {
    const log = new QueryLog({ size: 10 });
    const { msg, q } = query('x.cluster1');
    for (let i = 0; i < 3; i++)
      log.record(answered(msg, q, 'udp', { address: '127.0.0.1', port: 1 }, 0, { meta: { source: 'rule' } }));
    expect(log.version(2)).toBe(`${log.instance}-2`);
    expect([
      log.watchAfter(log.version(2)),
      log.watchAfter(undefined),
      log.watchAfter('0'),
      log.watchAfter(''),
    ]).toEqual([2, 0, 0, 0]);
    expect([log.watchAfter(new QueryLog({ size: 1 }).version(1)), log.watchAfter('12345')]).toEqual([3, 3]);
  });

  it('refuses a size below 1 (0 means no log at all)', () => {
    expect(() => new QueryLog({ size: 0 })).toThrow(/at least 1/);
  });
});

describe('parseSelector over queryFields', () => {
  const parseQuerySelector = (text: string) => parseSelector(queryFields, text);
  const entry: QueryEntry = {
    seq: 7,
    time: 0,
    name: 'Search.Default.cluster1',
    type: 'AAAA',
    client: '10.0.3.7',
    clientPort: 1,
    transport: 'udp',
    rcode: 'NXDOMAIN',
    source: 'rule',
    rule: '--expose=default/search',
    truncated: false,
    cached: false,
  };
  const selects = (text: string) => {
    const s = parseQuerySelector(text);
    if (typeof s !== 'function') throw new Error(s.error);
    return (s as Selector<QueryEntry>)(entry, 'abcd1234-7');
  };

  it('selects by name (as DNS compares names), rcode and client, by path or short field, all terms at once', () => {
    expect(
      [
        '',
        'name=search.default.cluster1.',
        'spec.name==SEARCH.default.cluster1',
        'rcode=nxdomain',
        'status.rcode!=NOERROR',
        'client=10.0.3.7',
        'spec.client=10.0.3.7,rcode=NXDOMAIN',
        'type=aaaa',
        'metadata.name=abcd1234-7',
        'transport=UDP',
        'source=rule',
      ].map(selects),
    ).toEqual(Array(11).fill(true));
    expect(
      [
        'name=search.cluster1',
        'rcode=NOERROR',
        'client=10.0.3.8',
        'client=10.0.3.7,rcode=NOERROR',
        'name!=search.default.cluster1',
        'metadata.name=abcd1234-8',
      ].map(selects),
    ).toEqual(Array(6).fill(false));
  });

  it('takes escapes in values as the API server does, and says what is wrong', () => {
    expect(selects('rule=--expose\\=default/search')).toBe(true);
    expect(parseQuerySelector('rule=--expose=default/search')).toEqual({
      error: expect.stringMatching(/unescaped "=" in the value/),
    });
    expect(parseQuerySelector('rcode')).toEqual({ error: expect.stringMatching(/want FIELD=VALUE/) });
    expect(parseQuerySelector('status.phase=Running')).toEqual({
      error: expect.stringMatching(/^field label not supported: status.phase \(supported: metadata.name, spec.name, /),
    });
    expect(parseQuerySelector('name=a\\b')).toEqual({ error: expect.stringMatching(/invalid escape sequence/) });
  });
});
