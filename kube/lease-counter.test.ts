// The Lease count against the fake API server (test/leases.test.ts meets the Go v0.36 proxy-servers and
// a real kube-apiserver): validity as the Go agent judges it, a recount when a Lease expires with no
// event, a refusal that leaves the count to the header until RBAC allows the list, and the last count
// kept while the API server cannot be reached.
import { pino } from 'pino';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { agentFlags } from '../agent/options.js';
import { parseFlags } from '../flags/flags.js';
import { FakeApiServer } from '../test/support/fake-apiserver.js';
import { ManualClock } from '../test/support/manual-clock.js';
import { waitUntil, waitUntilAsync } from '../test/support/wait.js';
import { kubeApiClient } from './config.js';
import { countLeases, leaseExpiry, LeaseCounter, leaseSelector } from './lease-counter.js';

const log = pino({ level: 'silent' });
const lease = (renew?: string, acquire?: string, seconds: number | null = 30) => ({
  spec: { renewTime: renew, acquireTime: acquire, leaseDurationSeconds: seconds ?? undefined },
});

describe('counting Leases', () => {
  it('judges a Lease by renewTime, else acquireTime, plus its duration; none valid counts 1', () => {
    const now = Date.parse('2026-12-01T10:00:00Z');
    expect(leaseExpiry(lease('2026-12-01T09:59:45Z'))).toBe(now + 15_000);
    expect(leaseExpiry(lease(undefined, '2026-12-01T09:59:50Z'))).toBe(now + 20_000);
    expect(leaseExpiry(lease(undefined, undefined))).toBeUndefined();
    expect(leaseExpiry(lease('2026-12-01T09:59:50Z', undefined, null))).toBeUndefined();
    const leases = [
      lease('2026-12-01T09:59:45Z'),
      lease('2026-12-01T09:59:55Z'),
      lease('2026-12-01T09:59:00Z'),
      lease(undefined, undefined),
    ];
    expect(countLeases(leases, now)).toEqual({ count: 2, nextExpiry: now + 15_000 });
    expect(countLeases([], now)).toEqual({ count: 1, nextExpiry: undefined });
    expect(countLeases([lease('2026-12-01T09:59:00Z')], now)).toEqual({ count: 1, nextExpiry: undefined });
  });
});

describe("the Leases' selector", () => {
  it('--lease-label-selector takes the full syntax and is checked at start; --lease-label is its alias', () => {
    const flags = (...args: string[]) => parseFlags(agentFlags, args).values;
    expect(leaseSelector(flags('--lease-label-selector=k8s-app in (konnectivity-server),!canary'))).toBe(
      'k8s-app in (konnectivity-server),!canary',
    );
    expect(leaseSelector(flags('--lease-label=app=proxy,tier!=canary'))).toBe('app=proxy,tier!=canary');
    expect(leaseSelector(flags())).toBe('k8s-app=konnectivity-server');
    expect(leaseSelector(flags('--lease-label=a=b', '--lease-label-selector=c=d'))).toBe('c=d');
    expect(() => flags('--lease-label-selector=*notavalidlabel*')).toThrow(/--lease-label-selector.*notavalidlabel/);
    expect(() => flags('--lease-label=a in (b')).toThrow(/--lease-label.*unbalanced/);
  });
});

describe('the Lease counter', () => {
  let api: FakeApiServer;
  beforeAll(async () => {
    api = await FakeApiServer.start();
  });
  afterAll(() => api.close());

  it('counts the valid Leases its selector picks, and counts again when one expires unrenewed', async () => {
    // Lease times are the API server's wall clock; the counter reads them against this one, which moves by hand.
    const clock = new ManualClock();
    const startedAt = Date.now();
    api.lease('kube-system', 'konnectivity-proxy-server-a');
    api.lease('kube-system', 'konnectivity-proxy-server-b', { renewTime: new Date(Date.now() - 29_000) }); // 1 s left
    api.lease('kube-system', 'unrelated', { labels: { app: 'other' } });
    const counts: number[] = [];
    const counter = new LeaseCounter({
      client: (await kubeApiClient(api.kubeconfigPath))!,
      namespace: 'kube-system',
      selector: 'k8s-app=konnectivity-server',
      onCount: (n) => counts.push(n),
      log,
      registry: new Registry(),
      resyncMs: 60_000,
      clock,
      now: () => startedAt + clock.now(),
    });
    counter.start();
    try {
      await waitUntil(() => counts.length > 0, 30_000, 'the first count');
      expect(counts).toEqual([2]);
      // b's expiry is the next thing the counter waits for: a second on, not the minute's relist.
      expect(clock.nextDue()).toBeLessThan(2000);
      await clock.advanceToNext();
      expect(counts).toEqual([2, 1]);
      api.lease('kube-system', 'konnectivity-proxy-server-c');
      api.lease('kube-system', 'konnectivity-proxy-server-b');
      await waitUntil(() => counts.at(-1) === 3, 30_000, 'the new and the renewed Leases');
      expect(
        api.requests.some((r) =>
          r.startsWith(
            'GET /apis/coordination.k8s.io/v1/namespaces/kube-system/leases?labelSelector=k8s-app%3Dkonnectivity-server',
          ),
        ),
      ).toBe(true);
    } finally {
      counter.stop();
    }
  });

  it('while forbidden reports nothing (the header counts) and says so once, naming the Role; keeps the last count while the API server is away', {
    timeout: 90_000,
  }, async () => {
    const path = '/apis/coordination.k8s.io/v1/namespaces/kube-system/leases';
    api.forbidden.add(path);
    const from = api.requests.length;
    const warnings: string[] = [];
    const spy = pino({ level: 'warn' }, { write: (line: string) => void warnings.push(JSON.parse(line).msg) });
    const counts: number[] = [];
    const registry = new Registry();
    const counter = new LeaseCounter({
      client: (await kubeApiClient(api.kubeconfigPath))!,
      namespace: 'kube-system',
      selector: 'k8s-app=konnectivity-server',
      onCount: (n) => counts.push(n),
      log: spy,
      registry,
      resyncMs: 60_000,
      backoff: { initialMs: 20, capMs: 50 },
    });
    counter.start();
    try {
      // Three refusals as the agent counted them (the server sees a request before the agent has read its answer).
      const refused = async () =>
        (await registry.getSingleMetric('konnectivity_network_proxy_agent_lease_lists_total')!.get()).values.find(
          (v) => v.labels.http_response_code === '403' && v.labels.reason === 'Forbidden',
        )?.value ?? 0;
      await waitUntilAsync(async () => (await refused()) >= 3, 30_000, 'three refused lists');
      expect(api.requests.slice(from).filter((r) => r.startsWith(`GET ${path}`)).length).toBeGreaterThanOrEqual(3);
      expect(counts).toEqual([]);
      expect(warnings).toHaveLength(1);
      expect(warnings[0]).toMatch(
        /forbidden to list and watch .*leases: counting proxy-servers by the serverCount header meanwhile; --count-server-leases needs a Role in kube-system granting get, list and watch on leases/,
      );
      api.forbidden.delete(path);
      await waitUntil(() => counts.length > 0, 30_000, 'the count once allowed');
      expect(counts).toEqual([3]);
      // Cut off: no renewals seen, but the count stays where it was rather than decay to 1. The agent
      // has noticed once its watch failed twice more.
      const failures = async () =>
        (await registry.getSingleMetric('spoke_agent_kube_watch_errors_total')!.get()).values.reduce(
          (n, v) => n + v.value,
          0,
        );
      const before = await failures();
      await api.down();
      await waitUntilAsync(async () => (await failures()) >= before + 2, 30_000, 'two failed watches');
      expect(counts).toEqual([3]);
      await api.up();
    } finally {
      counter.stop();
    }
  });
});
