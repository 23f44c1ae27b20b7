// The sync loop's decisions on a ManualClock, against replicas behind a fake balancer: when it tries,
// what it does after a failure, a duplicate, a loss, a new count, and that a session ticket of a held
// replica is offered. No sockets, no sleeps: time moves only when the test says so.
import { EventEmitter } from 'node:events';
import { Registry } from 'prom-client';
import { afterEach, describe, expect, it } from 'vitest';
import { createLogger } from '../observability/log.js';
import { makePki } from '../test/support/certs.js';
import { ManualClock } from '../test/support/manual-clock.js';
import { BufferBudget } from './buffer-budget.js';
import { ClientSet } from './clientset.js';
import { AgentMetrics } from './metrics.js';
import { KnownServerError, type ServerConnection, type ServerConnectionOptions } from './server-connection.js';
import { connectIDCounter } from './tunnel-context.js';

const pki = makePki();
const log = createLogger('silent');

class FakeConnection extends EventEmitter<{ closed: [reason: string] }> {
  isClosed = false;
  readonly isDraining = false;
  readonly transportReady = true;
  readonly connectionCount = 0;
  readonly pendingDialCount = 0;
  readonly log = log;
  readonly tlsSession: Buffer;
  lossCause?: 'closed';
  constructor(
    readonly serverID: string,
    readonly serverCount: number,
  ) {
    super();
    this.tlsSession = Buffer.from(`ticket of ${serverID}`);
  }
  setGroups(): void {}
  streams(): [] {
    return [];
  }
  async closeWhenIdle(_ms: number, reason: string): Promise<void> {
    this.close(reason);
  }
  close(reason: string): void {
    if (this.isClosed) return;
    this.isClosed = true;
    this.emit('closed', reason);
  }
}

/** Replicas behind a balancer that hands each attempt to the next one in turn. */
class Replicas {
  readonly up = new Map<string, boolean>();
  /** A replica that is down takes this long to fail (a blackholed address: SYNs until the handshake timeout). */
  hangMs = 0;
  readonly attempts: Array<{ at: number; reached: string; resume?: string; outcome: string }> = [];
  readonly conns: FakeConnection[] = [];
  private turn = 0;

  constructor(
    ids: string[],
    private readonly clock: ManualClock,
    private readonly count = ids.length,
  ) {
    for (const id of ids) this.up.set(id, true);
  }

  open = async (opts: ServerConnectionOptions): Promise<ServerConnection> => {
    const ids = [...this.up.keys()];
    const reached = ids[this.turn++ % ids.length]!;
    const at = this.clock.now();
    if (!this.up.get(reached)) {
      this.attempts.push({ at, reached, outcome: 'failed' });
      if (this.hangMs > 0) await new Promise((resolve) => this.clock.after(this.hangMs, () => resolve(undefined)));
      throw new Error(`connection to ${reached} refused`);
    }
    if (opts.resume?.serverID === reached && opts.resume.held()) {
      this.attempts.push({ at, reached, resume: reached, outcome: 'resumed' });
      throw new KnownServerError(reached);
    }
    this.attempts.push({ at, reached, resume: opts.resume?.serverID, outcome: 'opened' });
    const conn = new FakeConnection(reached, this.count);
    this.conns.push(conn);
    // What the set uses of a ServerConnection: its state, its streams' counts, closing.
    return conn as unknown as ServerConnection;
  };

  /** The replica stops: its connections drop at once. */
  stop(id: string): void {
    this.up.set(id, false);
    for (const c of this.conns) if (c.serverID === id) c.close('connection lost');
  }
}

const sets: ClientSet[] = [];
afterEach(() => {
  for (const s of sets.splice(0)) s.stop();
});

function clientSet(
  replicas: Replicas,
  clock: ManualClock,
  random: () => number,
  extra: { countLeases?: boolean } = {},
) {
  const registry = new Registry();
  const metrics = new AgentMetrics(registry);
  const set = new ClientSet({
    serverAddresses: ['hub.example:8091'],
    credentials: {
      caCert: pki.caCert,
      agentCert: pki.clientCert,
      agentKey: pki.clientKey,
      serviceAccountTokenPath: '',
    },
    agentID: 'agent',
    identifiers: '',
    serverCount: { countLeases: extra.countLeases ?? false, source: 'default' },
    syncIntervalMs: 1000,
    syncIntervalCapMs: 10_000,
    syncForever: false,
    keepaliveMs: 30_000,
    tcp: { keepaliveMs: 0, userTimeoutMs: 0, congestionControl: '' },
    drainTimeoutMs: 1000,
    tunnel: {
      dial: async () => {
        throw new Error('no dials here');
      },
      maxBuffer: 1 << 20,
      budget: new BufferBudget(1 << 30, { stallMs: 1000, clock, metrics, log }),
      connectIDs: connectIDCounter(),
      metrics,
      log,
      clock,
    },
    random,
    open: replicas.open,
  });
  sets.push(set);
  set.start();
  const attempts = async () =>
    Object.fromEntries(
      (await metrics.serverConnectAttempts.get()).values.map((v) => [v.labels.result as string, v.value]),
    );
  return { set, attempts };
}

const held = (set: ClientSet) => new Set(set.serverIDs());

describe('ClientSet sync loop (ManualClock)', () => {
  it('at start: tries at once, then a random share of --sync-interval before each next missing replica', async () => {
    const clock = new ManualClock();
    const replicas = new Replicas(['a', 'b', 'c'], clock);
    const { set, attempts } = clientSet(replicas, clock, () => 0.5);
    await clock.advance(0);
    expect(held(set)).toEqual(new Set(['a']));
    await clock.advance(1000);
    expect(held(set)).toEqual(new Set(['a', 'b', 'c']));
    expect(replicas.attempts.map((a) => a.at)).toEqual([0, 500, 1000]);
    // Holding every replica, the loop waits for an event: time passes without an attempt.
    await clock.advance(60_000);
    expect(replicas.attempts.length).toBe(3);
    expect(await attempts()).toEqual({ connected: 3 });
  });

  it('after a failure, the Go agent backoff: 1, 1.5, 2.25 ... s up to --sync-interval-cap', async () => {
    const clock = new ManualClock();
    const replicas = new Replicas(['a'], clock);
    replicas.up.set('a', false);
    const { set, attempts } = clientSet(replicas, clock, () => 0);
    await clock.advance(30_000);
    const times = replicas.attempts.map((a) => a.at);
    expect(times).toEqual([0, 1000, 2500, 4750, 8125, 13_187.5, 20_781.25, 30_000].slice(0, times.length));
    expect(times.length).toBe(7);
    // Gaps never beyond the cap (10 s, plus its 10 % jitter with random() = 0: exactly 10 s).
    replicas.up.set('a', true);
    await clock.advance(10_000);
    expect(held(set)).toEqual(new Set(['a']));
    expect(await attempts()).toEqual({ failed: 7, connected: 1 });
  });

  it('an attempt that hangs until its timeout counts that time toward the backoff (attempts start a backoff apart)', async () => {
    const clock = new ManualClock();
    const replicas = new Replicas(['a'], clock);
    replicas.up.set('a', false);
    replicas.hangMs = 4000;
    const { set } = clientSet(replicas, clock, () => 0);
    await clock.advance(40_000);
    // Backoff 1, 1.5, 2.25, 3.375 s is shorter than the 4 s an attempt takes: the next starts as one fails;
    // then 5.06, 7.59, 10 s from the start of the previous one.
    expect(replicas.attempts.map((a) => a.at)).toEqual([0, 4000, 8000, 12_000, 16_000, 21_062.5, 28_656.25, 38_656.25]);
    replicas.up.set('a', true);
    await clock.advance(10_000);
    expect(held(set)).toEqual(new Set(['a']));
  });

  it('after losing a replica while holding others, the first attempt within 3 x --sync-interval, early ones likelier, then finds it', async () => {
    // 3 s x (1 - sqrt(1 - random())): a density falling from its highest at once to none at 3 s.
    for (const [r, expected] of [
      [0.19, 300],
      [0.75, 1500],
      [0.96, 2400],
    ] as const) {
      const clock = new ManualClock();
      const replicas = new Replicas(['a', 'b', 'c'], clock);
      const { set } = clientSet(replicas, clock, () => r);
      await clock.advance(3000);
      expect(held(set)).toEqual(new Set(['a', 'b', 'c']));
      const before = replicas.attempts.length;
      const lostAt = clock.now();
      replicas.stop('b');
      replicas.up.set('b', true);
      await clock.advance(expected - 1);
      expect(replicas.attempts.length, `random ${r}: no attempt before ${expected} ms`).toBe(before);
      await clock.advance(1);
      const first = replicas.attempts.slice(before).map((a) => a.at - lostAt);
      expect(first).toHaveLength(1);
      expect(first[0]).toBeCloseTo(expected, 6);
      // The balancer's next turn may be a held replica (a duplicate): keep looking until b is back.
      await clock.advance(10_000);
      expect(held(set)).toEqual(new Set(['a', 'b', 'c']));
    }
  });

  it('after losing the only replica (cut off from the hub), the first attempt within 1/2 --sync-interval, then the Go backoff', async () => {
    const clock = new ManualClock();
    const replicas = new Replicas(['a'], clock);
    const { set } = clientSet(replicas, clock, () => 0.9);
    await clock.advance(100);
    expect(held(set)).toEqual(new Set(['a']));
    const lostAt = clock.now();
    replicas.stop('a');
    await clock.advance(5000);
    // 0.9 x 500 ms, then 1 s x (1 + 0.1 x 0.9) and 1.5 s x 1.09 after the refusals.
    expect(replicas.attempts.slice(1).map((a) => a.at - lostAt)).toEqual([450, 1540, 3175]);
    replicas.up.set('a', true);
    await clock.advance(10_000);
    expect(held(set)).toEqual(new Set(['a']));
  });

  it('a duplicate of a held replica is told by its resumed TLS session: the ticket of a held replica is offered', async () => {
    const clock = new ManualClock();
    const replicas = new Replicas(['a', 'b', 'c'], clock);
    const { set, attempts } = clientSet(replicas, clock, () => 0.5);
    await clock.advance(2000);
    expect(held(set)).toEqual(new Set(['a', 'b', 'c']));
    replicas.stop('c');
    await clock.advance(20_000);
    expect(held(set)).toEqual(new Set(['a', 'b']));
    const during = replicas.attempts.filter((a) => a.at > 2000);
    // Every attempt after the start offers a held replica's ticket; those that reach it end at the handshake.
    expect(during.every((a) => a.outcome === 'failed' || a.resume !== undefined)).toBe(true);
    expect(during.filter((a) => a.outcome === 'resumed').length).toBeGreaterThan(0);
    // While c is away, with random() = 0.5: after the first attempt since the loss, when a duplicate,
    // 1-2 x --sync-interval (1.5 s); after later duplicates the Go agent's 1-1.1 x (1.05 s);
    // after a refusal (a balancer sending the agent to the replica that is down, refusing at once)
    // 2-5 x (3.5 s); no growth.
    const gaps = during.slice(1).map((a, i) => ({ gap: a.at - during[i]!.at, after: during[i]!.outcome, i }));
    expect(gaps.length).toBeGreaterThan(3);
    for (const { gap, after, i } of gaps) expect(gap).toBeCloseTo(after === 'failed' ? 3500 : i === 0 ? 1500 : 1050, 6);
    expect(gaps.some((g) => g.after === 'failed')).toBe(true);
    expect(gaps.some((g) => g.after !== 'failed' && g.i > 0)).toBe(true);
    const counted = await attempts();
    expect(counted.duplicate).toBe(during.filter((a) => a.outcome !== 'failed').length);
    // c back: the balancer's next turn on it finds it.
    replicas.up.set('c', true);
    await clock.advance(10_000);
    expect(held(set)).toEqual(new Set(['a', 'b', 'c']));
  });

  it('a replica newly counted (the Leases) is looked for at once, and a flapping count does not cut a backoff short', async () => {
    const clock = new ManualClock();
    const replicas = new Replicas(['a', 'b'], clock, 1);
    const { set } = clientSet(replicas, clock, () => 0, { countLeases: true });
    set.setLeaseCount(1);
    await clock.advance(5000);
    expect(held(set)).toEqual(new Set(['a']));
    const before = replicas.attempts.length;
    set.setLeaseCount(2);
    await clock.advance(0);
    expect(replicas.attempts.length).toBe(before + 1);
    expect(held(set)).toEqual(new Set(['a', 'b']));
  });

  it('a count that flaps (every rise wakes the loop) does not cut the backoff of a hub that does not answer', async () => {
    const clock = new ManualClock();
    const replicas = new Replicas(['a'], clock);
    replicas.up.set('a', false);
    const { set } = clientSet(replicas, clock, () => 0, { countLeases: true });
    for (let i = 0; i < 100; i++) {
      set.setLeaseCount(1 + (i % 2));
      await clock.advance(50);
    }
    expect(replicas.attempts.map((a) => a.at)).toEqual([0, 1000, 2500, 4750]);
  });
});
