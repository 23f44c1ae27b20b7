// manifests/monitoring against the real thing: the alert rules through Prometheus's own promtool
// (check rules, and alerts.test.yaml's unit tests that fire and clear every alert), and every query of
// the rules and the Grafana dashboard against the metrics the agent really exports: the entry point
// run with a local hub, the DNS server and a rules ConfigMap on a fake API server, scraped after a
// little traffic. test/support/global-setup.ts installs promtool (Debian's prometheus) when missing.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { Resolver } from 'node:dns/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse as parseYaml, stringify as stringifyYaml } from 'yaml';
import { DialTraffic } from '../agent/dial-traffic.js';
import { AgentMetrics } from '../agent/metrics.js';
import { DenialAudit } from '../agent/denial-audit.js';
import { systemClock } from '../clock/clock.js';
import { DialAllowlist } from '../dial-policy/allowlist.js';
import { dialThroughProxy } from '../client/dial.js';
import { prometheusRule, prometheusRulePath, rulesPath } from '../cmd/monitoring-rules.js';
import { DnsMetrics } from '../dns/metrics.js';
import { KubeMetrics } from '../kube/metrics.js';
import { processRegistry } from '../observability/health-server.js';
import { createLogger } from '../observability/log.js';
import { FakeApiServer } from './support/fake-apiserver.js';
import { startTestUpstream, type TestUpstream } from './support/dns-upstream.js';
import { runCli, repoRoot, type Child } from './support/processes.js';
import { exportedNames, promqlNames } from './support/promql.js';
import { requestUntilClose } from './support/targets.js';
import { waitUntilAsync } from './support/wait.js';

// biome-ignore lint/suspicious/noExplicitAny: rule files and dashboards are plain data, read by path
type Obj = Record<string, any>;

const monitoring = join(repoRoot, 'manifests/monitoring');
const rulesText = readFileSync(rulesPath, 'utf8');
const alerts = (parseYaml(rulesText) as Obj).groups.flatMap((g: Obj) => g.rules) as Obj[];
const dashboard = JSON.parse(readFileSync(join(monitoring, 'dashboard.json'), 'utf8')) as Obj;
// Labels Prometheus adds when it scrapes a pod (PodMonitor), and `cluster` from a multi-cluster setup.
const targetLabels = ['cluster', 'namespace', 'pod', 'container', 'instance', 'job'];

/** `promtool ARGS`; a non-zero exit fails with promtool's own output. */
function promtool(args: string[], cwd: string): string {
  try {
    return execFileSync('promtool', args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  } catch (err) {
    const e = err as { status?: number; stdout?: string; stderr?: string; message: string };
    throw new Error(`promtool ${args.join(' ')} exited ${e.status ?? e.message}:\n${e.stdout ?? ''}${e.stderr ?? ''}`);
  }
}

/** Every query of the dashboard: panel targets (rows included) and the template variables' label_values(). */
function dashboardQueries(): Array<{ where: string; expr: string }> {
  const out: Array<{ where: string; expr: string }> = [];
  const walk = (panels: Obj[]) => {
    for (const p of panels) {
      for (const t of p.targets ?? []) out.push({ where: `panel "${p.title}" ${t.refId}`, expr: t.expr });
      walk(p.panels ?? []);
    }
  };
  walk(dashboard.panels);
  for (const v of dashboard.templating.list as Obj[]) {
    if (v.type !== 'query') continue;
    const m = /^label_values\((.+),\s*(\w+)\)$/.exec(v.query.query);
    expect(m, `variable ${v.name}: label_values(SELECTOR, LABEL)`).not.toBeNull();
    out.push({ where: `variable ${v.name}`, expr: `${m![1]} and on (${m![2]}) ${m![1]}` });
  }
  return out;
}

const allQueries = () => [
  ...alerts.map((a) => ({ where: `alert ${a.alert}`, expr: a.expr as string })),
  ...dashboardQueries(),
];

describe('promqlNames (the check below is only as good as it)', () => {
  it('finds metrics and labels, and not functions, keywords, strings, ranges or Grafana variables', () => {
    const expr =
      'histogram_quantile(0.99, sum by (le, proto) (rate(a_bucket{cluster=~"$cluster", x!="b{c}"}[$__rate_interval]))) / on(pod) group_left(node) b_total offset 5m > bool 1e3 and c';
    expect(promqlNames(expr)).toEqual({
      metrics: ['a_bucket', 'b_total', 'c'],
      labels: ['cluster', 'le', 'node', 'pod', 'proto', 'x'],
      matchers: [
        { metric: 'a_bucket', label: 'cluster', op: '=~', value: '$cluster' },
        { metric: 'a_bucket', label: 'x', op: '!=', value: 'b{c}' },
      ],
    });
    expect(() => promqlNames('{__name__="x"}')).toThrow(/__name__/);
  });
});

describe('alert rules (manifests/monitoring/alerts.rules.yaml)', () => {
  it('pass `promtool check rules`', () => {
    expect(promtool(['check', 'rules', 'alerts.rules.yaml'], monitoring)).toMatch(
      new RegExp(`SUCCESS: ${alerts.length} rules found`),
    );
  });

  it('pass their unit tests, `promtool test rules alerts.test.yaml`', () => {
    expect(promtool(['test', 'rules', 'alerts.test.yaml'], monitoring)).toContain('SUCCESS');
  });

  it('each alert is tested quiet until its `for:` is up, firing, then cleared', () => {
    const tests = (parseYaml(readFileSync(join(monitoring, 'alerts.test.yaml'), 'utf8')) as Obj).tests as Obj[];
    const minutes = (t: string) => Number(/^(\d+)m$/.exec(t)![1]);
    for (const a of alerts) {
      const cases = tests.flatMap((t) =>
        (t.alert_rule_test as Obj[])
          .filter((c) => c.alertname === a.alert)
          .map((c) => ({ at: minutes(c.eval_time), firing: (c.exp_alerts ?? []).length > 0 })),
      );
      const fired = cases.filter((c) => c.firing).map((c) => c.at);
      expect(fired.length, `${a.alert} fires in a test`).toBeGreaterThan(0);
      const first = Math.min(...fired);
      expect(
        cases.some((c) => !c.firing && c.at < first),
        `${a.alert} quiet before it fires`,
      ).toBe(true);
      expect(
        cases.some((c) => !c.firing && c.at > first),
        `${a.alert} clears`,
      ).toBe(true);
    }
  });

  it('each alert waits, has a severity, a summary and a description', () => {
    expect(alerts.map((a) => a.alert)).toEqual(
      expect.arrayContaining([
        'SpokeAgentNoServerConnection',
        'SpokeAgentNotConnectedToAllServers',
        'SpokeAgentDialFailureRatioHigh',
        'SpokeAgentDnsServfailRatioHigh',
        'SpokeAgentRulesWatchFailing',
        'SpokeAgentRulesRejected',
        'SpokeAgentDialDenialsRising',
        'SpokeAgentRuleDialsFailing',
      ]),
    );
    for (const a of alerts) {
      expect(a.for, a.alert).toMatch(/^\d+m$/);
      expect(['critical', 'warning', 'info'], a.alert).toContain(a.labels?.severity);
      expect(a.annotations?.summary, a.alert).toMatch(/\S/);
      expect(a.annotations?.description, a.alert).toMatch(/\S/);
    }
  });

  it('prometheusrule.yaml is generated from them (npm run monitoring:rules)', () => {
    expect(readFileSync(prometheusRulePath, 'utf8'), 'prometheusrule.yaml is stale: run npm run monitoring:rules').toBe(
      prometheusRule(rulesText),
    );
  });
});

describe('Grafana dashboard (manifests/monitoring/dashboard.json)', () => {
  it('every query is PromQL that promtool accepts', () => {
    const dir = mkdtempSync(join(tmpdir(), 'spoke-dashboard-'));
    try {
      // As recording rules, with Grafana's range variables given values; the others sit in strings.
      const rules = dashboardQueries().map((q, i) => ({
        record: `dashboard:query_${i}`,
        expr: q.expr.replaceAll('$__rate_interval', '2m').replaceAll('$__range', '1h'),
      }));
      writeFileSync(join(dir, 'dashboard.rules.yaml'), stringifyYaml({ groups: [{ name: 'dashboard', rules }] }));
      expect(promtool(['check', 'rules', 'dashboard.rules.yaml'], dir)).toContain(
        `SUCCESS: ${rules.length} rules found`,
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('covers the tunnel, DNS, the Kubernetes sources and the process, every panel on the one data source variable', () => {
    const titles = (dashboard.panels as Obj[]).filter((p) => p.type === 'row').map((p) => p.title);
    expect(titles).toEqual(['Tunnel', 'DNS', 'Kubernetes sources', 'Process']);
    const ids = (dashboard.panels as Obj[]).map((p) => p.id);
    expect(new Set(ids).size).toBe(ids.length);
    for (const p of (dashboard.panels as Obj[]).filter((p) => p.type !== 'row')) {
      // biome-ignore lint/suspicious/noTemplateCurlyInString: Grafana's dashboard variable, literally in the JSON
      expect(p.datasource, p.title).toEqual({ type: 'prometheus', uid: '${datasource}' });
      expect(p.targets.length, p.title).toBeGreaterThan(0);
    }
  });
});

describe('every query names only metrics and labels the agent exports', () => {
  let api: FakeApiServer;
  let upstream: TestUpstream;
  let agent: Child;
  let exported: Map<string, string>;
  let scrape = '';

  beforeAll(async () => {
    api = await FakeApiServer.start();
    api.configMap('spoke', 'rules', { 'rules.yaml': 'static: [{name: db.cluster1, target: 127.0.0.1}]' });
    upstream = await startTestUpstream({});
    upstream.silent = true; // forwarded names time out: SERVFAIL
    agent = runCli([
      '--log-format=json', // the ports are read from the log lines
      '--health-server-port=0',
      '--cluster-name=cluster1',
      '--dns-port=0',
      `--dns-upstream=127.0.0.1:${upstream.port}`,
      '--dns-upstream-timeout=300ms',
      `--kubeconfig=${api.kubeconfigPath}`,
      '--rules-configmap=spoke/rules',
    ]);
    const dnsPort = Number((await agent.waitFor(/"port":(\d+)[^\n]*DNS server listening/))[1]);
    const grpcPort = Number((await agent.waitFor(/gRPC frontend (\d+)/))[1]);
    const healthPort = Number((await agent.waitFor(/"port":(\d+)[^\n]*health server listening/))[1]);
    await agent.waitFor(/connected to proxy-server/);
    const metrics = async () => (await fetch(`http://127.0.0.1:${healthPort}/metrics`)).text();
    await waitUntilAsync(
      async () => (await metrics()).includes('spoke_agent_kube_watch_synced{resource="configmap"} 1'),
      10_000,
      'the rules ConfigMap to be synced',
    );

    // A little of everything: a tunnelled HTTP request to a rule's name, a dial denied by policy,
    // a DNS answer from a rule and a SERVFAIL.
    const conn = await dialThroughProxy({
      mode: 'grpc',
      proxyHost: '127.0.0.1',
      proxyPort: grpcPort,
      address: `db.cluster1:${healthPort}`,
    });
    expect(await requestUntilClose(conn, 'GET /healthz HTTP/1.0\r\n\r\n')).toMatch(/^HTTP\/1\.[01] 200/);
    await expect(
      dialThroughProxy({ mode: 'grpc', proxyHost: '127.0.0.1', proxyPort: grpcPort, address: '127.0.0.2:80' }),
    ).rejects.toThrow();
    const resolver = new Resolver({ timeout: 10_000, tries: 1 });
    resolver.setServers([`127.0.0.1:${dnsPort}`]);
    expect(await resolver.resolve4('db.cluster1')).toEqual(['127.0.0.1']);
    await expect(resolver.resolve4('elsewhere.test')).rejects.toMatchObject({ code: 'ESERVFAIL' });

    scrape = await metrics();
    exported = exportedNames(scrape);
  }, 60_000);

  afterAll(async () => {
    agent?.kill('SIGKILL');
    await upstream?.close();
    await api?.close();
  });

  it('the scrape holds the traffic the alerts watch', () => {
    expect(scrape).toMatch(/^konnectivity_network_proxy_agent_dial_duration_seconds_count [1-9]/m);
    expect(scrape).toMatch(/^konnectivity_network_proxy_agent_open_server_connections 1$/m);
    expect(scrape).toMatch(/^konnectivity_network_proxy_agent_known_server_count 1$/m);
    expect(scrape).toMatch(/^spoke_agent_kube_rules_rejected 0$/m);
  });

  it('every label value a query matches exactly (= or !=) is one the agent exports for that metric', () => {
    // A misspelt value (rcode="ServFail") selects nothing and the alert never fires; the traffic above
    // makes each value the queries name appear.
    const series = scrape.split('\n').filter((l) => !l.startsWith('#'));
    const missing = allQueries().flatMap(({ where, expr }) =>
      promqlNames(expr)
        .matchers.filter((m) => (m.op === '=' || m.op === '!=') && !m.value.includes('$'))
        .filter((m) => !series.some((l) => l.startsWith(`${m.metric}{`) && l.includes(`${m.label}="${m.value}"`)))
        .map((m) => `${where}: ${m.metric}{${m.label}${m.op}"${m.value}"}`),
    );
    expect(missing).toEqual([]);
  });

  it('every metric name in the alert rules and the dashboard', () => {
    const unknown = allQueries().flatMap(({ where, expr }) =>
      promqlNames(expr)
        .metrics.filter((m) => !exported.has(m))
        .map((m) => `${where}: ${m}`),
    );
    expect(unknown).toEqual([]);
  });

  it('every label name, on the metrics the query names (labels declared in the registry, which the scrape confirms)', () => {
    // Label names are only in the text for series that exist; the metric objects declare them all.
    // The same metrics as the scrape, built in process: any metric added elsewhere fails here first.
    const registry = processRegistry();
    new AgentMetrics(registry);
    new DialTraffic(registry);
    new DenialAudit(createLogger('silent'), systemClock, registry);
    new DnsMetrics(registry, () => ({ answers: 0, upstream: 0 }));
    new KubeMetrics(registry);
    new DialAllowlist({ resolveForDial: async () => ({ addresses: [] }), cidrs: [], registry });
    const declared = new Map(
      registry.getMetricsAsArray().map((m) => [m.name, (m as unknown as { labelNames: string[] }).labelNames]),
    );
    expect([...declared.keys()].sort()).toEqual([...new Set(exported.values())].sort());
    const problems = allQueries().flatMap(({ where, expr }) => {
      const names = promqlNames(expr);
      const known = new Set([
        ...targetLabels,
        ...names.metrics.flatMap((m) => [...declared.get(exported.get(m)!)!, ...(m.endsWith('_bucket') ? ['le'] : [])]),
      ]);
      return names.labels.filter((l) => !known.has(l)).map((l) => `${where}: ${l}`);
    });
    expect(problems).toEqual([]);
  });
});
