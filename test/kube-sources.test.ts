// Rules from the Kubernetes API, end to end against a fake API server on loopback: ConfigMap edits and
// Services reach the DNS server, the dial path and the identifiers within seconds; a bad edit keeps the
// last good rules; an API server that errors, drops watches, goes down or compacts history is survived.
import { Resolver as NodeResolver } from 'node:dns/promises';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DialAllowlist } from '../dial-policy/allowlist.js';
import { dialTcp } from '../agent/dialer.js';
import { parseFlags } from '../flags/flags.js';
import { resolveForDial } from '../dial-policy/resolve.js';
import { startDns, type DnsStack } from '../dns/setup.js';
import { kubeFlags } from '../kube/options.js';
import { followRuleIdentifiers } from '../kube/reregister.js';
import { startKubeSources } from '../kube/sources.js';
import { kubeApiClient } from '../kube/config.js';
import { createLogger } from '../observability/log.js';
import { RuleHolder } from '../rules/holder.js';
import { rulesFromFlags } from '../rules/from-flags.js';
import { startTestUpstream, type TestUpstream } from './support/dns-upstream.js';
import { FakeApiServer } from './support/fake-apiserver.js';
import { testDnsValues } from './support/dns-values.js';
import { startEchoServer, type Target } from './support/targets.js';
import { waitUntil, waitUntilAsync } from './support/wait.js';

const log = createLogger(process.env.TEST_LOG_LEVEL ?? 'silent');
const ruleValues = {
  clusterName: 'cluster1',
  agentNamespace: '',
  clusterDomain: 'cluster.test',
  expose: [],
  rulesFile: '',
  nodeName: '',
  nodeIps: [],
};

let api: FakeApiServer;
let echo: Target;
let upstream: TestUpstream;
let dns: DnsStack;
let holder: RuleHolder;
let registry: Registry;
let allowlist: DialAllowlist;
let identifiers = '';
const stops: Array<() => void> = [];

beforeAll(async () => {
  api = await FakeApiServer.start();
  api.configMap('spoke', 'rules', { 'rules.yaml': 'static: [{name: db.cluster1, target: 127.0.0.1}]' });
  api.configMap('spoke', 'unrelated', { 'rules.yaml': 'expose: [nope/*]' });
  api.namespace('team-a', { expose: 'yes' });
  api.namespace('team-b');
  echo = await startEchoServer('127.0.0.1');
  upstream = await startTestUpstream({
    'web.default.svc.cluster.test': [{ type: 1, address: '127.0.0.1' }],
    'api.apps.svc.cluster.test': [{ type: 1, address: '127.0.0.1' }],
    'one.team-a.svc.cluster.test': [{ type: 1, address: '127.0.0.1' }],
  });
  const initial = rulesFromFlags(ruleValues);
  if (!initial.ok) throw new Error(initial.errors.join());
  holder = new RuleHolder(initial.value);
  registry = new Registry();
  dns = await startDns(testDnsValues(`127.0.0.1:${upstream.port}`), holder, registry, log);
  allowlist = new DialAllowlist({ resolveForDial: (host) => resolveForDial(dns.resolver, host), cidrs: [], registry });
  stops.push(holder.onChange((next) => void allowlist.refresh(next)));
  stops.push(
    followRuleIdentifiers({
      holder,
      clients: { setIdentifierGroups: (groups) => (identifiers = groups.join('&')) },
      extra: '',
      debounceMs: 50,
      log,
    }),
  );
  const { values } = parseFlags(kubeFlags, [
    `--kubeconfig=${api.kubeconfigPath}`,
    '--rules-configmap=spoke/rules',
    '--auto-expose',
    '--auto-expose-namespace-selector=expose=yes',
  ]);
  stops.push(
    startKubeSources({
      kube: values,
      ruleFlags: ruleValues,
      holder,
      log,
      registry,
      client: await kubeApiClient(api.kubeconfigPath),
      backoff: { initialMs: 100, capMs: 400 },
    }),
  );
});

afterAll(async () => {
  for (const stop of stops) stop();
  await dns?.close();
  await upstream?.close();
  await echo?.close();
  await api?.close();
});

const served = (name: string) => holder.current.match(name) !== undefined;
const metric = async (name: string) => (await registry.getSingleMetricAsString(name)) ?? '';
const rejectedUpdates = async () =>
  Number(/result="rejected"\} (\d+)/.exec(await metric('spoke_agent_kube_rule_updates_total'))?.[1] ?? 0);

async function dialEcho(host: string): Promise<string> {
  const { socket } = await dialTcp(`${host}:${echo.port}`, {
    timeoutMs: 2000,
    resolve: allowlist.resolve,
    authorize: allowlist.authorize,
  });
  try {
    socket.write('ping');
    return await new Promise<string>((resolve, reject) => {
      socket.once('data', (b: Buffer) => resolve(b.toString()));
      socket.once('error', reject);
    });
  } finally {
    socket.destroy();
  }
}

async function rcode(name: string): Promise<string> {
  const r = new NodeResolver({ timeout: 10_000, tries: 1 });
  r.setServers([`127.0.0.1:${dns.listening.port}`]);
  try {
    await r.resolve4(name);
    return 'NOERROR';
  } catch (err) {
    return (err as NodeJS.ErrnoException).code ?? 'error';
  }
}

describe('rules from the Kubernetes API', () => {
  it('lists and watches only the one ConfigMap, by a field selector on its name', async () => {
    await waitUntil(() => served('db.cluster1'), 20_000, 'the ConfigMap rules');
    expect(await dialEcho('db.cluster1')).toBe('ping');
    const cm = api.requests.filter((r) => r.includes('/configmaps'));
    expect(cm.length).toBeGreaterThanOrEqual(2);
    for (const r of cm)
      expect(r).toMatch(/^GET \/api\/v1\/namespaces\/spoke\/configmaps\?.*fieldSelector=metadata.name%3Drules/);
    expect(cm.some((r) => r.includes('watch=true'))).toBe(true);
  });

  it('applies a ConfigMap edit within seconds: the new name resolves and is dialable', async () => {
    api.configMap('spoke', 'rules', {
      'rules.yaml': 'expose: [default/web]\nstatic: [{name: db.cluster1, target: 127.0.0.1}]',
    });
    await waitUntil(() => served('web.default.cluster1'), 20_000, 'web.default.cluster1');
    expect(await rcode('web.default.cluster1')).toBe('NOERROR');
    await waitUntil(() => identifiers.includes('host=web.default.cluster1'), 20_000, 'the new identifier');
    expect(await dialEcho('web.default.cluster1')).toBe('ping');
  });

  it('rejects a bad edit whole, says why, and keeps the last good rules', async () => {
    api.configMap('spoke', 'rules', {
      'rules.yaml': 'expose: [default/web, "Bad/Name"]\nstatic: [{name: other.cluster1, target: 127.0.0.1}]',
    });
    await expect
      .poll(() => metric('spoke_agent_kube_rule_updates_total'), { timeout: 20_000 })
      .toMatch(/result="rejected"\} [1-9]/);
    expect(await metric('spoke_agent_kube_rules_rejected')).toContain('spoke_agent_kube_rules_rejected 1');
    expect(served('other.cluster1')).toBe(false);
    expect(served('web.default.cluster1')).toBe(true);
    expect(served('db.cluster1')).toBe(true);
    expect(await dialEcho('db.cluster1')).toBe('ping');
    // a ConfigMap without a rules key is a bad edit too: once it is counted, the rules are unchanged
    const before = await rejectedUpdates();
    api.configMap('spoke', 'rules', { 'rule.yaml': 'expose: []' });
    await waitUntilAsync(async () => (await rejectedUpdates()) > before, 20_000, 'the second bad edit to be rejected');
    expect(served('web.default.cluster1')).toBe(true);
  });

  it('exposes annotated Services and selected namespaces, and withdraws a deleted Service: NXDOMAIN, identifier gone', async () => {
    api.service('apps', 'api', { 'spoke-agent.io/expose': 'true' });
    api.service('team-a', 'one');
    api.service('team-a', 'hidden', { 'spoke-agent.io/expose': 'false' });
    api.service('team-b', 'two');
    await waitUntil(
      () => served('api.apps.cluster1') && served('one.team-a.cluster1'),
      20_000,
      'auto-exposed Services',
    );
    expect(served('hidden.team-a.cluster1')).toBe(false);
    expect(served('two.team-b.cluster1')).toBe(false);
    await waitUntil(() => identifiers.includes('host=api.apps.cluster1'), 20_000, 'the Service identifier');
    expect(await dialEcho('api.apps.cluster1')).toBe('ping');
    // a namespace that gains the label brings its Services
    api.namespace('team-b', { expose: 'yes' });
    await waitUntil(() => served('two.team-b.cluster1'), 20_000, 'the newly selected namespace');
    // Services apply, but the ConfigMap as it is now is still the bad edit of the test before.
    expect(await metric('spoke_agent_kube_rules_rejected')).toContain('spoke_agent_kube_rules_rejected 1');

    api.delete('services', 'apps', 'api');
    await waitUntil(() => !served('api.apps.cluster1'), 20_000, 'the deleted Service to go');
    expect(await rcode('api.apps.cluster1')).toBe('ENOTFOUND');
    await waitUntil(() => !identifiers.includes('host=api.apps.cluster1'), 20_000, 'the identifier to go');
    await expect(dialEcho('api.apps.cluster1')).rejects.toThrow(/no such host/);
  });

  it('keeps the last rules while the API server errors or is down, and resumes when it is back', async () => {
    api.configMap('spoke', 'rules', {
      'rules.yaml': 'static: [{name: db.cluster1, target: 127.0.0.1}, {name: v1.cluster1, target: 127.0.0.1}]',
    });
    await waitUntil(() => served('v1.cluster1'), 20_000, 'v1');
    expect(await metric('spoke_agent_kube_rules_rejected')).toContain('spoke_agent_kube_rules_rejected 0');

    // 500s on the next list and watch: the informer stops; the restart with backoff recovers
    api.failNext(4, 500, (p) => p.includes('/configmaps'));
    api.dropWatches();
    await expect
      .poll(() => metric('spoke_agent_kube_watch_errors_total'), { timeout: 20_000 })
      .toMatch(/resource="configmap"\} [1-9]/);
    api.configMap('spoke', 'rules', {
      'rules.yaml': 'static: [{name: db.cluster1, target: 127.0.0.1}, {name: v2.cluster1, target: 127.0.0.1}]',
    });
    await waitUntil(() => served('v2.cluster1'), 20_000, 'v2 after the 500s');

    // down: rules stay in force and dials keep working
    await api.down();
    await expect
      .poll(() => metric('spoke_agent_kube_watch_synced'), { timeout: 20_000 })
      .toContain('spoke_agent_kube_watch_synced{resource="configmap"} 0');
    expect(served('v2.cluster1')).toBe(true);
    expect(served('web.default.cluster1')).toBe(false); // the edit above dropped it: state is the last good list
    expect(await dialEcho('v2.cluster1')).toBe('ping');
    // changed while we could not see it, and the history compacted: the resumed watch gets 410 and relists
    api.configMap('spoke', 'rules', { 'rules.yaml': 'static: [{name: v3.cluster1, target: 127.0.0.1}]' });
    api.compact();
    await api.up();
    await waitUntil(() => served('v3.cluster1') && !served('v2.cluster1'), 20_000, 'v3 after the API server came back');
    await expect
      .poll(() => metric('spoke_agent_kube_watch_synced'), { timeout: 20_000 })
      .toContain('spoke_agent_kube_watch_synced{resource="configmap"} 1');
    // and the watch is live again
    api.configMap('spoke', 'rules', { 'rules.yaml': 'static: [{name: v4.cluster1, target: 127.0.0.1}]' });
    await waitUntil(() => served('v4.cluster1'), 20_000, 'v4 over the resumed watch');
  });
});
