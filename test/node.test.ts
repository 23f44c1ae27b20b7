// The DaemonSet on a real node: a single-node Kubernetes v1.28 cluster in a private network + mount
// namespace (test/support/node-cluster.ts), the image the image test builds imported into its
// containerd, `kubectl apply -k` of an overlay written here over manifests/ (and manifests/dns-api),
// the Go proxy-server v0.36 (cluster-proxy's pin) as the hub. What an operator relies on, day one and
// day two: the pod under Pod Security `restricted`, the hub reaching cluster1:443 (TLS verified) and a
// pod-backed exposed Service, DNS through the spoke-agent-dns Service (also with the hub down),
// `resolve` inside the pod, the aggregated API through its real Service for a bound and an unbound
// user, an agent with no nameserver, a rolling restart under a client that keeps one dial in flight (no failed
// dial), the pod's working set and CPU from the kubelet's summary API, and cluster-proxy's rendered
// Deployment with only the image changed. Needs root, the reference binaries and Debian's packages
// (CONTRIBUTING.md, "Reference peers"); skipped with a note elsewhere.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import type { Duplex } from 'node:stream';
import tls from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseAllDocuments, stringify } from 'yaml';
import { dialThroughProxy } from '../client/dial.js';
import { createCa } from '../hub/ephemeral-pki.js';
import { serviceProxyHost } from '../rules/naming.js';
import { makePki, type TestPki } from './support/certs.js';
import { httpGet } from './support/http-over.js';
import { buildImage, megabytes, type BuiltImage } from './support/image.js';
import { manifestsDir, render, type Obj } from './support/kustomize.js';
import { buildClusterProxyStandIn, buildPauseImage, saveNodeImages } from './support/node-images.js';
import { hubHost, NodeCluster, nodeBinDir, nodeClusterProblem, nodeIp, nodeName } from './support/node-cluster.js';
import { repoRoot, type Child } from './support/processes.js';
import { skipNote } from './support/skips.js';
import { waitUntilAsync } from './support/wait.js';

const problem = nodeClusterProblem();
if (problem) skipNote('node', problem);

const ns = 'spoke-agent';
const selector = 'app.kubernetes.io/name=spoke-agent';
const suiteStarted = Date.now();
let cluster: NodeCluster;
let image: BuiltImage;
let hubPki: TestPki;
let hubSocket: string;
let overlay: string;
/** The serving CA of the cluster's API server, for TLS verified through the tunnel. */
let apiCa: string;
/** Figures the lead quotes, also written to a JSON file under the OS temp dir. */
const figures: Record<string, unknown> = {};

const hubTls = () => ({ ca: hubPki.caCert, cert: join(hubPki.dir, 'hub.crt'), key: join(hubPki.dir, 'hub.key') });
const dial = (address: string, timeoutMs = 10_000) =>
  dialThroughProxy({ mode: 'grpc', proxyHost: '', proxyPort: 0, proxyUds: hubSocket, address, timeoutMs });

/** TLS over a tunnelled connection, verified against `ca` for `servername`. */
function tlsOver(conn: Duplex, ca: string, servername: string): Promise<tls.TLSSocket> {
  return new Promise((resolve, reject) => {
    const socket = tls.connect({ socket: conn, ca, servername, ALPNProtocols: ['http/1.1'] }, () => resolve(socket));
    socket.once('error', reject);
  });
}

const json = async <T = Obj>(args: string[]) => JSON.parse(await cluster.kubectlOk([...args, '-o', 'json'])) as T;
const agentPods = async () =>
  (await json<{ items: Obj[] }>(['-n', ns, 'get', 'pods', '-l', selector])).items.filter(
    (p) => !p.metadata.deletionTimestamp,
  );
const onlyPod = async () => {
  const pods = await agentPods();
  expect(pods.map((p) => p.metadata.name)).toHaveLength(1);
  return pods[0]!.metadata.name as string;
};
const metric = (text: string, name: string) =>
  Number(new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, 'm').exec(text)?.[1] ?? NaN);

/** The overlay a user would write: the base and the dns-api component, the Secrets, the APIService's CA, a rule. */
function writeOverlay(dir: string): void {
  const apiCaPair = createCa('spoke-agent-api-ca');
  const serving = apiCaPair.issue('spoke-agent-api.spoke-agent.svc', {
    serverNames: ['spoke-agent-api.spoke-agent.svc'],
  });
  const put = (name: string, text: string | Buffer) => writeFileSync(join(dir, name), text);
  put('ca.crt', readFileSync(hubPki.caCert));
  put('tls.crt', readFileSync(hubPki.clientCert));
  put('tls.key', readFileSync(hubPki.clientKey));
  put('api.crt', serving.cert);
  put('api.key', serving.key);
  const base = relative(dir, manifestsDir);
  put(
    'kustomization.yaml',
    stringify({
      resources: [base],
      components: [join(base, 'dns-api')],
      generatorOptions: { disableNameSuffixHash: true },
      secretGenerator: [
        { name: 'spoke-agent-hub', namespace: ns, files: ['ca.crt', 'tls.crt', 'tls.key'] },
        {
          name: 'spoke-agent-api-tls',
          namespace: ns,
          type: 'kubernetes.io/tls',
          files: ['tls.crt=api.crt', 'tls.key=api.key'],
        },
      ],
      patches: [
        {
          target: { kind: 'APIService', name: 'v1alpha1.dns.spoke-agent.io' },
          patch: stringify([
            { op: 'replace', path: '/spec/caBundle', value: Buffer.from(apiCaPair.cert).toString('base64') },
          ]),
        },
        {
          target: { kind: 'ConfigMap', name: 'spoke-agent-rules' },
          patch: stringify([{ op: 'replace', path: '/data/rules.yaml', value: 'expose:\n  - default/web\n' }]),
        },
      ],
    }),
  );
}

/** A pod-backed Service for the hub to reach: the project's image has Node, so it serves a page. */
const web = `apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: default}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
        - name: web
          image: spoke-agent:0.1.0
          command: [/nodejs/bin/node, -e, "require('http').createServer((q, s) => s.end('hello from web ' + q.url)).listen(8080)"]
          ports: [{containerPort: 8080}]
          readinessProbe: {tcpSocket: {port: 8080}, periodSeconds: 1}
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: default}
spec:
  selector: {app: web}
  ports: [{port: 80, targetPort: 8080}]
`;

describe.skipIf(problem)(
  'the DaemonSet on a real node (kubelet, containerd, kube-proxy), with the Go proxy-server as the hub',
  { timeout: 300_000 },
  () => {
    beforeAll(async () => {
      hubPki = makePki();
      hubPki.issue('hub', { serverNames: [hubHost, nodeIp] });
      cluster = await NodeCluster.start(async (dir) => {
        image = await buildImage();
        return saveNodeImages(dir, [
          image.ref,
          await buildPauseImage(join(nodeBinDir()!, 'pause')),
          await buildClusterProxyStandIn(),
        ]);
      });
      figures.nodeReadyMs = cluster.nodeReadyMs;
      hubSocket = await cluster.startHub(hubTls());
      overlay = mkdtempSync(join(tmpdir(), 'spoke-node-overlay-'));
      writeOverlay(overlay);
      apiCa = readFileSync(cluster.pki.files['serving-ca.crt']!, 'utf8');
      await cluster.kubectlOk(['apply', '-f', '-'], { input: web });
      await cluster.kubectlOk(['apply', '-k', overlay]);
      await cluster.kubectlOk([
        'create',
        'clusterrolebinding',
        'dns-debuggers',
        '--clusterrole=spoke-agent-dns-debugger',
        '--user=alice',
      ]);
      await cluster.kubectlOk(['-n', ns, 'rollout', 'status', 'ds/spoke-agent', '--timeout=180s'], {
        timeoutMs: 190_000,
      });
      await cluster.kubectlOk(['-n', 'default', 'rollout', 'status', 'deploy/web', '--timeout=180s'], {
        timeoutMs: 190_000,
      });
      // kube-proxy programs a Service's endpoints a moment after its pods are Ready (what rollout status
      // waits for); until then its ClusterIP refuses. The tests dial both Services: wait for kube-proxy.
      const dnsIp = (await json(['-n', ns, 'get', 'service', 'spoke-agent-dns'])).spec.clusterIP as string;
      const routed = (attempt: () => Promise<boolean>) => async () => {
        try {
          return await attempt();
        } catch {
          return false;
        }
      };
      await waitUntilAsync(
        routed(async () => (await cluster.dig(dnsIp, 'cluster1')).includes('10.96.0.1')),
        60_000,
        'kube-proxy to route the spoke-agent-dns Service',
        500,
      );
      await waitUntilAsync(
        routed(
          async () =>
            (await httpGet(await dial('web.default.cluster1:80'), 'web.default.cluster1', '/ready')).status === 200,
        ),
        60_000,
        'kube-proxy to route the web Service',
        500,
      );
    }, 2_700_000); // it may first wait for the other node suite's cluster (support/node-cluster.ts takeClusterSlot)

    afterAll(async () => {
      await cluster?.close();
      if (overlay) rmSync(overlay, { recursive: true, force: true });
      if (hubPki) rmSync(hubPki.dir, { recursive: true, force: true });
      if (cluster) {
        figures.suiteSeconds = Math.round((Date.now() - suiteStarted) / 1000);
        const file = join(tmpdir(), `spoke-agent-node-suite-${Date.now()}.json`);
        writeFileSync(file, `${JSON.stringify(figures, null, 2)}\n`);
        console.log(`node suite figures (${figures.suiteSeconds} s in all): ${file}`);
      }
    }, 120_000);

    it('runs the pod under Pod Security "restricted" as 65532 with a read-only root, Ready once it holds the hub', async () => {
      const readyOf = (p: Obj) => (p.status.conditions as Obj[] | undefined)?.find((c) => c.type === 'Ready');
      let pod = (await agentPods())[0]!;
      // Ready once it holds the hub: the pod list read right after the rollout may be a moment behind.
      await waitUntilAsync(
        async () => {
          const now = (await agentPods())[0];
          if (now) pod = now;
          return now !== undefined && readyOf(now)?.status === 'True';
        },
        60_000,
        'the agent pod Ready',
        500,
      );
      const ready = readyOf(pod);
      figures.podReadyAfterCreationSeconds =
        (Date.parse(ready!.lastTransitionTime) - Date.parse(pod.metadata.creationTimestamp)) / 1000;
      expect((await json(['get', 'namespace', ns])).metadata.labels['pod-security.kubernetes.io/enforce']).toBe(
        'restricted',
      );
      const exec = await cluster.kubectlOk([
        '-n',
        ns,
        'exec',
        pod.metadata.name,
        '--',
        '/nodejs/bin/node',
        '-e',
        "const fs = require('fs'); let w = 'written'; try { fs.writeFileSync('/app/x', '') } catch (e) { w = e.code } console.log(process.getuid(), w, fs.readFileSync('/etc/resolv.conf', 'utf8').match(/nameserver (\\S+)/)[1])",
      ]);
      expect(exec.trim()).toBe('65532 EROFS 10.96.0.10');
      const logs = await cluster.kubectlOk(['-n', ns, 'logs', pod.metadata.name]);
      expect(logs).toMatch(/"msg":"connected to proxy-server"/);
      expect(logs).toMatch(/"memoryLimit":268435456/);
    });

    it('the hub reaches cluster1:443 (TLS verified against the cluster CA) and the pod-backed Service web.default.cluster1', async () => {
      const api = await tlsOver(await dial('cluster1:443'), apiCa, 'kubernetes.default.svc');
      const version = await httpGet(api, 'kubernetes.default.svc', '/version');
      expect(version.status).toBe(200);
      expect(JSON.parse(version.body)).toMatchObject({ gitVersion: 'v1.28.0' });
      const page = await httpGet(await dial('web.default.cluster1:80'), 'web.default.cluster1', '/hello');
      expect(page).toEqual({ status: 200, body: 'hello from web /hello' });
    });

    it('answers DNS through the spoke-agent-dns Service', async () => {
      const svc = (await json(['-n', ns, 'get', 'service', 'spoke-agent-dns'])).spec.clusterIP as string;
      expect(await cluster.dig(svc, 'cluster1')).toBe('kubernetes.default.svc.cluster.local.\n10.96.0.1\n');
      const webIp = (await json(['-n', 'default', 'get', 'service', 'web'])).spec.clusterIP as string;
      expect(await cluster.dig(svc, 'web.default.cluster1', ['+tcp'])).toBe(
        `web.default.svc.cluster.local.\n${webIp}\n`,
      );
    });

    it('`resolve` inside the pod (no shell, kubectl exec) explains the answer', async () => {
      const out = await cluster.kubectlOk([
        '-n',
        ns,
        'exec',
        await onlyPod(),
        '--',
        '/nodejs/bin/node',
        '/app/dist/cmd/main.js',
        'resolve',
        'cluster1',
      ]);
      expect(out).toMatch(/^;; cluster1 A from 127\.0\.0\.1:5353 \(udp\): NOERROR/m);
      expect(out).toMatch(
        /^;; explanation from the agent's socket @spoke-agent-health-8093: rule --cluster-name \(cluster\) -> kubernetes\.default\.svc\.cluster\.local$/m,
      );
    });

    it('serves the aggregated API through its real Service: a bound user gets the resolution, an unbound one a 403', async () => {
      await cluster.kubectlOk(
        ['wait', '--for=condition=Available', 'apiservice/v1alpha1.dns.spoke-agent.io', '--timeout=120s'],
        { timeoutMs: 130_000 },
      );
      expect((await json(['-n', ns, 'get', 'service', 'spoke-agent-api'])).spec.type).toBe('ClusterIP');
      const raw = await cluster.kubectlOk(['get', '--raw', '/apis/dns.spoke-agent.io/v1alpha1/resolutions/cluster1'], {
        as: 'alice',
      });
      expect(JSON.parse(raw)).toMatchObject({
        kind: 'Resolution',
        status: { action: 'rule', target: 'kubernetes.default.svc.cluster.local', rcode: 'NOERROR' },
      });
      const bob = await cluster.kubectl(['get', '--raw', '/apis/dns.spoke-agent.io/v1alpha1/resolutions/cluster1'], {
        as: 'bob',
      });
      expect(bob.code).not.toBe(0);
      expect(bob.stderr).toMatch(/forbidden/i);
    });

    it('shows an age for every rule (`kubectl get rules.dns.spoke-agent.io`)', async () => {
      const table = await cluster.kubectlOk(['get', 'rules.dns.spoke-agent.io'], { as: 'alice' });
      const [header, ...rows] = table.trim().split('\n');
      expect(header).toMatch(/\bAGE\b/);
      expect(rows.length).toBeGreaterThan(0);
      for (const row of rows) expect(row).not.toMatch(/<unknown>/);
    });

    it('keeps answering DNS through the Service while the hub is unreachable (the pod not Ready)', async () => {
      const pod = await onlyPod();
      const svc = (await json(['-n', ns, 'get', 'service', 'spoke-agent-dns'])).spec.clusterIP as string;
      await cluster.stopHub();
      try {
        await cluster.kubectlOk(['-n', ns, 'wait', '--for=condition=Ready=false', `pod/${pod}`, '--timeout=90s'], {
          timeoutMs: 100_000,
        });
        expect(await cluster.dig(svc, 'cluster1')).toBe('kubernetes.default.svc.cluster.local.\n10.96.0.1\n');
        const slices = await json<{ items: Obj[] }>([
          '-n',
          ns,
          'get',
          'endpointslices',
          '-l',
          'kubernetes.io/service-name=spoke-agent-dns',
        ]);
        expect(slices.items.flatMap((s) => (s.endpoints ?? []) as Obj[]).map((e) => e.targetRef?.name)).toContain(pod);
      } finally {
        hubSocket = await cluster.startHub(hubTls());
      }
      await cluster.kubectlOk(['-n', ns, 'wait', '--for=condition=Ready', `pod/${pod}`, '--timeout=90s'], {
        timeoutMs: 100_000,
      });
    });

    it('starts without a nameserver (dnsPolicy Default on a kubelet whose resolvConf has none): forwarding off, said in the log', async () => {
      const ds = render(overlay).find((o) => o.kind === 'DaemonSet')!;
      const spec = structuredClone(ds.spec.template.spec) as Obj;
      spec.dnsPolicy = 'Default';
      const container = spec.containers[0] as Obj;
      container.args = (container.args as string[]).map((a) =>
        a.startsWith('--cluster-name=') ? '--cluster-name=bare1' : a,
      );
      delete container.readinessProbe;
      const pod = {
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: { name: 'spoke-agent-bare', namespace: ns, labels: { 'app.kubernetes.io/name': 'spoke-agent-bare' } },
        spec,
      };
      await cluster.kubectlOk(['apply', '-f', '-'], { input: JSON.stringify(pod) });
      try {
        await waitUntilAsync(
          async () =>
            /"msg":"spoke-agent started"/.test((await cluster.kubectl(['-n', ns, 'logs', 'spoke-agent-bare'])).stdout),
          90_000,
          'the bare agent to start',
          500,
        );
        const logs = await cluster.kubectlOk(['-n', ns, 'logs', 'spoke-agent-bare']);
        expect(logs, logs).toMatch(
          /"reason":"no --dns-upstream and no nameserver in \/etc\/resolv.conf".*"msg":"no DNS upstream: forwarding is off/,
        );
        const status = (await json(['-n', ns, 'get', 'pod', 'spoke-agent-bare'])).status.containerStatuses[0] as Obj;
        expect({ running: Boolean(status.state.running), restarts: status.restartCount }).toEqual({
          running: true,
          restarts: 0,
        });
      } finally {
        await cluster.kubectlOk(['-n', ns, 'delete', 'pod', 'spoke-agent-bare', '--grace-period=1', '--wait=false']);
      }
    });

    it('a rolling restart loses no dial of a client that keeps one dial in flight: the new pod holds the hub first, the old one drains', async () => {
      const old = await onlyPod();
      const oldLogs: Child = cluster.kubectlStream(['-n', ns, 'logs', '-f', old]);
      const dials: Array<{ at: number; ok: boolean; error?: string }> = [];
      const line = (text: string, msg: string) => text.split('\n').find((l) => l.includes(`"msg":"${msg}`));
      let drainAt = 0;
      let stop = false;
      // Paced by the load, not the clock: the next dial goes once the last is answered.
      const client = (async () => {
        while (!stop) {
          const at = Date.now();
          try {
            const page = await httpGet(await dial('web.default.cluster1:80', 5000), 'web.default.cluster1', '/rollout');
            dials.push({
              at,
              ok: page.status === 200 && page.body === 'hello from web /rollout',
              error: page.status === 200 ? undefined : `HTTP ${page.status}`,
            });
          } catch (err) {
            dials.push({ at, ok: false, error: (err as Error).message });
          }
        }
      })();
      try {
        await waitUntilAsync(async () => dials.length >= 3, 30_000, 'the client to dial');
        await cluster.kubectlOk(['-n', ns, 'rollout', 'restart', 'ds/spoke-agent']);
        await cluster.kubectlOk(['-n', ns, 'rollout', 'status', 'ds/spoke-agent', '--timeout=180s'], {
          timeoutMs: 190_000,
        });
        await cluster.kubectlOk(['-n', ns, 'wait', '--for=delete', `pod/${old}`, '--timeout=120s'], {
          timeoutMs: 130_000,
        });
        // The old pod's SIGTERM (an earlier DRAIN replaced its first stream once the rules' identifiers were known).
        drainAt = JSON.parse(line(oldLogs.stdout(), 'draining: DRAIN sent to every proxy-server') ?? '{}')
          .time as number;
        expect(drainAt, `the old pod's log:\n${oldLogs.stdout()}`).toBeGreaterThan(0);
        await waitUntilAsync(
          async () => dials.filter((d) => d.at > drainAt + 2000).length >= 3,
          30_000,
          'dials well after the DRAIN',
        );
      } finally {
        stop = true;
        await client;
        oldLogs.kill();
      }
      const failed = dials.filter((d) => !d.ok);
      figures.rollout = { dials: dials.length, failed: failed.length };
      console.log(`rollout restart: ${dials.length} dials one after another through the hub, ${failed.length} failed`);
      expect(failed, JSON.stringify(failed)).toEqual([]);

      const fresh = await onlyPod();
      expect(fresh).not.toBe(old);
      const connectedAt = JSON.parse(
        line(await cluster.kubectlOk(['-n', ns, 'logs', fresh]), 'connected to proxy-server') ?? '{}',
      ).time as number;
      expect(connectedAt, 'the new pod held the hub before the old one sent DRAIN').toBeLessThan(drainAt);
      // Every dial sent once the hub had the DRAIN went to the new pod (2 s for the DRAIN to get there on a
      // loaded machine). A hub that ignored DRAIN would keep choosing the old pod, registered first, until
      // it exits: with a dial always in flight it would never be idle for its settle second before --drain-timeout.
      const metrics = await cluster.kubectlOk([
        'get',
        '--raw',
        `/api/v1/namespaces/${ns}/pods/${fresh}:8093/proxy/metrics`,
      ]);
      const afterDrain = dials.filter((d) => d.at > drainAt + 2000).length;
      expect(metric(metrics, 'konnectivity_network_proxy_agent_dial_duration_seconds_count')).toBeGreaterThanOrEqual(
        afterDrain,
      );
    });

    it("reports the pod's working set and CPU from the kubelet's summary API", async () => {
      const pod = await onlyPod();
      const sample = async (): Promise<Obj> => {
        const summary = JSON.parse(
          await cluster.kubectlOk(['get', '--raw', `/api/v1/nodes/${nodeName}/proxy/stats/summary`]),
        ) as Obj;
        const container = (
          (summary.pods as Obj[]).find((p) => p.podRef.name === pod)?.containers as Obj[] | undefined
        )?.find((c) => c.name === 'spoke-agent');
        if (container?.cpu?.usageCoreNanoSeconds === undefined || container?.memory?.workingSetBytes === undefined)
          throw new Error(`no CPU and memory for ${pod} in the summary API yet`);
        return container;
      };
      const apiRequests = async () =>
        (await cluster.kubectlOk(['get', '--raw', `/api/v1/namespaces/${ns}/pods/${pod}:8093/proxy/metrics`]))
          .split('\n')
          .filter((l) => l.startsWith('spoke_agent_api_requests_total'))
          .reduce((n, l) => n + Number(l.split(' ').at(-1)), 0);
      /** CPU averaged over a minute (usageCoreNanoSeconds is cumulative; usageNanoCores is a rate over the kubelet's last few seconds), and the working set at its end. */
      const idleMinute = async () => {
        let first: Obj | undefined;
        await waitUntilAsync(
          async () => {
            first = await sample().catch(() => undefined);
            return Boolean(first);
          },
          60_000,
          'the summary API',
          2000,
        );
        const requestsBefore = await apiRequests();
        let last: Obj | undefined;
        await waitUntilAsync(
          async () => {
            last = await sample();
            return Date.parse(last.cpu.time) - Date.parse(first!.cpu.time) >= 60_000;
          },
          120_000,
          'a minute of CPU',
          5000,
        );
        const seconds = (Date.parse(last!.cpu.time) - Date.parse(first!.cpu.time)) / 1000;
        return {
          workingSetBytes: last!.memory.workingSetBytes as number,
          rssBytes: last!.memory.rssBytes as number,
          millicores:
            ((last!.cpu.usageCoreNanoSeconds as number) - (first!.cpu.usageCoreNanoSeconds as number)) / seconds / 1e6,
          seconds,
          apiRequests: (await apiRequests()) - requestsBefore,
          age: Math.round((Date.parse(last!.cpu.time) - Date.parse(last!.startTime)) / 1000),
        };
      };
      const say = (what: string, m: Awaited<ReturnType<typeof idleMinute>>) =>
        console.log(
          `kubelet summary API: pod ${pod} ${what} (${m.age} s after its start, holding the hub, rules from the ConfigMap, probed by the kubelet): working set ${(m.workingSetBytes / 2 ** 20).toFixed(1)} MiB, CPU ${m.millicores.toFixed(2)} millicores over ${m.seconds.toFixed(0)} s, ${m.apiRequests} requests to the dns-api`,
        );
      // Idle once the container has run for 30 s: start-up and V8's first collections are not idle.
      await waitUntilAsync(
        async () => (await sample().catch(() => undefined)) !== undefined,
        120_000,
        'the summary API',
        2000,
      );
      await waitUntilAsync(
        async () => {
          const s = await sample();
          return Date.parse(s.cpu.time) - Date.parse(s.startTime) >= 30_000;
        },
        120_000,
        "the container's 30th second, as the kubelet samples it",
        2000,
      );
      // With the dns-api's aggregator traffic (its availability and discovery checks, each a new TLS
      // connection), which in a cluster is shared by every agent pod behind the Service, all on this one here;
      const withApi = await idleMinute();
      say("with the dns-api, the aggregator's requests all on this pod", withApi);
      // and what every node pays: the same pod once the aggregator no longer calls it.
      const apiService = await cluster.kubectlOk(['get', 'apiservice', 'v1alpha1.dns.spoke-agent.io', '-o', 'yaml']);
      await cluster.kubectlOk(['delete', 'apiservice', 'v1alpha1.dns.spoke-agent.io']);
      let node: Awaited<ReturnType<typeof idleMinute>>;
      try {
        node = await idleMinute();
      } finally {
        await cluster.kubectlOk(['apply', '-f', '-'], {
          input: apiService.replace(/^\s+(resourceVersion|uid|creationTimestamp):.*$/gm, ''),
        });
      }
      say('without aggregator traffic (per node)', node);
      figures.summary = { pod, withAggregatorTraffic: withApi, perNode: node };
      figures.image = { ref: image.ref, sizeBytes: image.sizeBytes };
      console.log(`image ${image.ref}: ${megabytes(image.sizeBytes)}`);
      expect(node.workingSetBytes).toBeGreaterThan(10 * 2 ** 20);
      expect(node.workingSetBytes).toBeLessThan(256 * 2 ** 20);
      expect(node.apiRequests).toBeLessThan(withApi.apiRequests);
    }, 400_000);

    describe("cluster-proxy's rendered Deployment with only the image changed", { timeout: 300_000 }, () => {
      const cp = 'open-cluster-management-cluster-proxy';
      const docs = () =>
        parseAllDocuments(
          readFileSync(join(repoRoot, 'manifests/cluster-proxy/rendered-proxy-agent.yaml'), 'utf8'),
        ).map((d) => d.toJS() as Obj);
      const patchImage = () =>
        (
          parseAllDocuments(
            readFileSync(join(repoRoot, 'manifests/cluster-proxy/managedproxyconfiguration-patch.yaml'), 'utf8'),
          )[0]!.toJS() as Obj
        ).spec.proxyAgent.image as string;
      let serviceProxyCa: string;

      beforeAll(async () => {
        // One agent per cluster name at the hub: the DaemonSet leaves first.
        await cluster.kubectlOk(['-n', ns, 'delete', 'daemonset', 'spoke-agent', '--wait=true', '--timeout=120s'], {
          timeoutMs: 130_000,
        });
        await cluster.kubectlOk(['-n', ns, 'wait', '--for=delete', 'pod', '-l', selector, '--timeout=120s'], {
          timeoutMs: 130_000,
        });
        const secrets = mkdtempSync(join(tmpdir(), 'spoke-node-cp-'));
        try {
          const spCa = createCa('service-proxy-ca');
          serviceProxyCa = spCa.cert;
          const sp = spCa.issue(serviceProxyHost('cluster1'), { serverNames: [serviceProxyHost('cluster1')] });
          writeFileSync(join(secrets, 'sp.crt'), sp.cert);
          writeFileSync(join(secrets, 'sp.key'), sp.key);
          writeFileSync(join(secrets, 'kubeconfig'), 'apiVersion: v1\nkind: Config\n');
          await cluster.kubectlOk(['create', 'namespace', cp]);
          // What cluster-proxy's addon framework puts there: the hub CA, the agent's client certificate, the hub kubeconfig, the service-proxy's certificate.
          await cluster.kubectlOk([
            '-n',
            cp,
            'create',
            'secret',
            'generic',
            'cluster-proxy-ca',
            `--from-file=ca.crt=${hubPki.caCert}`,
          ]);
          await cluster.kubectlOk([
            '-n',
            cp,
            'create',
            'secret',
            'tls',
            'cluster-proxy-open-cluster-management.io-proxy-agent-signer-client-cert',
            `--cert=${hubPki.clientCert}`,
            `--key=${hubPki.clientKey}`,
          ]);
          await cluster.kubectlOk([
            '-n',
            cp,
            'create',
            'secret',
            'generic',
            'cluster-proxy-hub-kubeconfig',
            `--from-file=kubeconfig=${join(secrets, 'kubeconfig')}`,
          ]);
          await cluster.kubectlOk([
            '-n',
            cp,
            'create',
            'secret',
            'tls',
            'cluster-proxy-service-proxy-server-certificates',
            `--cert=${join(secrets, 'sp.crt')}`,
            `--key=${join(secrets, 'sp.key')}`,
          ]);
        } finally {
          rmSync(secrets, { recursive: true, force: true });
        }
        // The addon manager's render with spec.proxyAgent.image set: that one field changes.
        const objects = docs().map((o) => {
          if (o.kind !== 'Deployment') return o;
          const agent = (o.spec.template.spec.containers as Obj[]).find((c) => c.name === 'proxy-agent')!;
          agent.image = patchImage();
          return o;
        });
        const rules = parseAllDocuments(
          readFileSync(join(repoRoot, 'manifests/cluster-proxy/spoke-agent-rules.yaml'), 'utf8'),
        )[0]!.toJS() as Obj;
        await cluster.kubectlOk(['apply', '-f', '-'], {
          input: [...objects, rules].map((o) => JSON.stringify(o)).join('\n'),
        });
        await cluster.kubectlOk(['-n', cp, 'rollout', 'status', 'deploy/cluster-proxy-proxy-agent', '--timeout=180s'], {
          timeoutMs: 190_000,
        });
      }, 400_000);

      it("serves: cluster1:443 and an exposed Service by rules from spoke-agent-rules with no flag, and cluster-proxy's own service-proxy path", async () => {
        const api = await tlsOver(await dial('cluster1:443'), apiCa, 'kubernetes.default.svc');
        expect((await httpGet(api, 'kubernetes.default.svc', '/version')).status).toBe(200);
        await waitUntilAsync(
          async () =>
            await dial('kubernetes.default.cluster1:443').then(
              (c) => {
                c.destroy();
                return true;
              },
              () => false,
            ),
          60_000,
          'the rule from spoke-agent-rules',
          500,
        );
        const host = serviceProxyHost('cluster1');
        const sp = await tlsOver(await dial(`${host}:7443`), serviceProxyCa, host);
        expect(await httpGet(sp, host, '/cluster1/api')).toEqual({
          status: 200,
          body: 'service-proxy stand-in: /cluster1/api\n',
        });
      });

      it('stays up under the liveness probe on :8888, which the addon-agent sidecar serves, and that sidecar sees /readyz on 8093 green', async () => {
        const pods = (
          await json<{ items: Obj[] }>([
            '-n',
            cp,
            'get',
            'pods',
            '-l',
            'proxy.open-cluster-management.io/component-name=proxy-agent',
          ])
        ).items;
        expect(pods).toHaveLength(3);
        for (const pod of pods) {
          const name = pod.metadata.name as string;
          // The kubelet probes at 10 s and every 10 s after: wait for two probes answered by the sidecar.
          await waitUntilAsync(
            async () =>
              (
                (await cluster.kubectl(['-n', cp, 'logs', name, '-c', 'addon-agent'])).stdout.match(
                  /"msg":"healthz"/g,
                ) ?? []
              ).length >= 2,
            90_000,
            `two liveness probes of ${name}`,
            1000,
          );
          const sidecar = await cluster.kubectlOk(['-n', cp, 'logs', name, '-c', 'addon-agent']);
          expect(sidecar).toMatch(/"msg":"proxy-agent ready: lease renewed"/);
          expect(sidecar).not.toMatch(/"certificatesChanged":true/);
          const agentLogs = await cluster.kubectlOk(['-n', cp, 'logs', name, '-c', 'proxy-agent']);
          expect(agentLogs).toMatch(
            /"flag":"--cluster-name","value":"cluster1".*"msg":"--cluster-name not given: derived"/,
          );
        }
        const statuses = (await json<{ items: Obj[] }>(['-n', cp, 'get', 'pods'])).items.flatMap(
          (p) => p.status.containerStatuses as Obj[],
        );
        expect(statuses.filter((s) => s.name === 'proxy-agent').map((s) => s.restartCount)).toEqual([0, 0, 0]);
      });
    });
  },
);
