// The per-node DaemonSet on a real two-node cluster: Kubernetes v1.28 (test/support/node-cluster.ts), each
// node a kubelet, containerd and kube-proxy in network and mount namespaces of its own, where only it
// has its node IP and its kubelet's port answers only its own node; kube-apiserver's egress
// (EgressSelectorConfiguration `cluster`) goes through the Go proxy-server v0.36 over a Unix socket with
// --proxy-strategies=destHost,default, and `kubectl apply -k` of manifests/ with manifests/per-node puts
// an agent on each node. Through it: kubectl logs, logs -f, exec, port-forward and the node proxy for a
// pod on each node, each on that node's agent (its metrics show it); an exposed Service reached by the
// hub through the agents; 100 of 100 alternating requests right; a node's agent refusing another node's address with the reason in kube-apiserver's error; a
// rolling update over both nodes with a logs -f and a port-forward open through the old agents,
// finishing inside their drain, and no failed request. Needs root, the reference binaries and Debian's
// packages (CONTRIBUTING.md, "Reference peers"); skipped with a note elsewhere.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { dialThroughProxy } from '../client/dial.js';
import { makePki, type TestPki } from './support/certs.js';
import { buildImage } from './support/image.js';
import { manifestsDir, type Obj } from './support/kustomize.js';
import { buildPauseImage, saveNodeImages } from './support/node-images.js';
import {
  type ClusterNode,
  clusterNodes,
  hubHost,
  NodeCluster,
  nodeBinDir,
  nodeClusterProblem,
  nodeIp,
} from './support/node-cluster.js';
import type { Child } from './support/processes.js';
import { sampleValue } from './support/promql.js';
import { skipNote } from './support/skips.js';
import { waitUntilAsync } from './support/wait.js';

const problem = nodeClusterProblem();
if (problem) skipNote('nodes', problem);

const ns = 'spoke-agent';
const selector = 'app.kubernetes.io/name=spoke-agent';
const nodes = clusterNodes.slice(0, 2);
const [node1, node2] = nodes as [ClusterNode, ClusterNode];
/** Taken off a node to take its agent away; the test's pods stay. */
const taint = 'spoke-test=off:NoExecute';
let cluster: NodeCluster;
let hubPki: TestPki;
let overlay: string;
const figures: Record<string, unknown> = {};

const json = async <T = Obj>(args: string[]) => JSON.parse(await cluster.kubectlOk([...args, '-o', 'json'])) as T;

/** The agent pod on each node (not one being deleted). */
async function agentOn(node: ClusterNode): Promise<{ name: string; ip: string }> {
  const pods = (await json<{ items: Obj[] }>(['-n', ns, 'get', 'pods', '-l', selector])).items.filter(
    (p) => !p.metadata.deletionTimestamp && p.spec.nodeName === node.name && p.status.podIP,
  );
  expect(
    pods.map((p) => p.metadata.name),
    `agent pods on ${node.name}`,
  ).toHaveLength(1);
  return { name: pods[0]!.metadata.name, ip: pods[0]!.status.podIP };
}

/** An agent's /metrics, read from the first node over the pod network (not through kube-apiserver, whose pod proxy is egress too). */
async function agentMetrics(podIp: string): Promise<string> {
  const r = await cluster.exec(['curl', '-sf', '--max-time', '10', `http://${podIp}:8093/metrics`]);
  if (r.code !== 0) throw new Error(`metrics of ${podIp}: curl exit ${r.code} ${r.stderr}`);
  return r.stdout;
}

/** Dials served and refused by each node's current agent. */
async function agentCounts(): Promise<Record<string, { dials: number; denied: number; pod: string }>> {
  const out: Record<string, { dials: number; denied: number; pod: string }> = {};
  for (const node of nodes) {
    const agent = await agentOn(node);
    const text = await agentMetrics(agent.ip);
    const denied = text
      .split('\n')
      .filter((l) => l.startsWith('spoke_agent_dials_denied_total{'))
      .reduce((n, l) => n + Number(l.split(' ').at(-1)), 0);
    out[node.name] = {
      dials: sampleValue(text, 'konnectivity_network_proxy_agent_dial_duration_seconds_count') ?? 0,
      denied,
      pod: agent.name,
    };
  }
  return out;
}

/** A pod of the project's image pinned to `node`: a line on stdout every 100 ms, a page on 8080 naming its node. */
const chatter = (node: ClusterNode) => `apiVersion: v1
kind: Pod
metadata: {name: chatter-${node.name}, namespace: default, labels: {app: chatter}}
spec:
  nodeName: ${node.name}
  tolerations: [{key: spoke-test, operator: Exists, effect: NoExecute}]
  containers:
    - name: chatter
      image: spoke-agent:0.1.0
      env: [{name: NODE, value: ${node.name}}]
      command: [/nodejs/bin/node, -e, "let n = 0; setInterval(() => console.log('line ' + ++n), 100); require('http').createServer((q, s) => s.end('hello from ' + process.env.NODE)).listen(8080)"]
      readinessProbe: {tcpSocket: {port: 8080}, periodSeconds: 1}
`;

/** The chatter pods of both nodes behind one Service, which the hub reaches as chatter.default.cluster1. */
const chatterService = `apiVersion: v1
kind: Service
metadata: {name: chatter, namespace: default}
spec:
  selector: {app: chatter}
  ports: [{port: 80, targetPort: 8080}]
`;

/** One HTTP/1.0 GET through the hub to `address`; the body. */
async function getThroughHub(address: string): Promise<string> {
  const conn = await dialThroughProxy({
    mode: 'grpc',
    proxyHost: '',
    proxyPort: 0,
    proxyUds: cluster.hubSocket,
    address,
    timeoutMs: 20_000,
  });
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    conn.on('data', (c: Buffer) => chunks.push(c));
    conn.on('error', reject);
    conn.on('close', () => {
      const text = Buffer.concat(chunks).toString();
      resolve(text.slice(text.indexOf('\r\n\r\n') + 4));
    });
    conn.write(`GET / HTTP/1.0\r\nHost: ${address}\r\n\r\n`);
  });
}

/**
 * A pod that prints a line every 250 ms until SIGUSR2, then "done" and exits a second later (the exec
 * that signalled it ends first): a logs -f that ends when told.
 */
const countdown = (node: ClusterNode) => `apiVersion: v1
kind: Pod
metadata: {name: countdown-${node.name}, namespace: default}
spec:
  nodeName: ${node.name}
  restartPolicy: Never
  containers:
    - name: countdown
      image: spoke-agent:0.1.0
      command: [/nodejs/bin/node, -e, "let n = 0; const t = setInterval(() => console.log('line ' + ++n), 250); process.on('SIGUSR2', () => { clearInterval(t); console.log('done'); setTimeout(() => process.exit(0), 1000); })"]
`;

/** What an operator writes: the base, manifests/per-node, the hub Secret, a rule for a Service. */
function writeOverlay(dir: string): void {
  const put = (name: string, text: string | Buffer) => writeFileSync(join(dir, name), text);
  put('ca.crt', readFileSync(hubPki.caCert));
  put('tls.crt', readFileSync(hubPki.clientCert));
  put('tls.key', readFileSync(hubPki.clientKey));
  const base = relative(dir, manifestsDir);
  put(
    'kustomization.yaml',
    stringify({
      resources: [base],
      components: [join(base, 'per-node')],
      generatorOptions: { disableNameSuffixHash: true },
      secretGenerator: [{ name: 'spoke-agent-hub', namespace: ns, files: ['ca.crt', 'tls.crt', 'tls.key'] }],
      patches: [
        {
          target: { kind: 'ConfigMap', name: 'spoke-agent-rules' },
          patch: stringify([{ op: 'replace', path: '/data/rules.yaml', value: 'expose:\n  - default/chatter\n' }]),
        },
      ],
    }),
  );
}

/** kubectl port-forward to `pod`'s 8080 on a free local port of the first node; resolves with the port. */
async function portForward(pod: string): Promise<{ child: Child; port: number }> {
  const child = cluster.kubectlStream(['-n', 'default', 'port-forward', `pod/${pod}`, ':8080']);
  const m = await child.waitFor(/Forwarding from 127\.0\.0\.1:(\d+)/, 60_000);
  return { child, port: Number(m[1]) };
}

const curlLocal = (port: number) => cluster.exec(['curl', '-sf', '--max-time', '10', `http://127.0.0.1:${port}/`]);

const nodeProxy = (node: ClusterNode) =>
  cluster.kubectl(['get', '--raw', `/api/v1/nodes/${node.name}/proxy/healthz`], { timeoutMs: 30_000 });

const waitForAgents = async () => {
  await cluster.kubectlOk(['-n', ns, 'rollout', 'status', 'ds/spoke-agent', '--timeout=240s'], { timeoutMs: 250_000 });
  await waitUntilAsync(
    async () => {
      for (const node of nodes) if ((await agentOn(node).catch(() => undefined)) === undefined) return false;
      return true;
    },
    120_000,
    'one agent on each node',
    1000,
  );
};

describe.skipIf(problem)(
  'the per-node DaemonSet on two real nodes, kube-apiserver egress through the Go proxy-server (destHost,default)',
  { timeout: 300_000 },
  () => {
    beforeAll(async () => {
      hubPki = makePki();
      hubPki.issue('hub', { serverNames: [hubHost, nodeIp] });
      cluster = await NodeCluster.start(
        async (dir) => {
          const image = await buildImage();
          return saveNodeImages(dir, [image.ref, await buildPauseImage(join(nodeBinDir()!, 'pause'))]);
        },
        { nodes: 2, egress: true },
      );
      figures.clusterReadyMs = cluster.nodeReadyMs;
      await cluster.startHub(
        { ca: hubPki.caCert, cert: join(hubPki.dir, 'hub.crt'), key: join(hubPki.dir, 'hub.key') },
        'destHost,default',
      );
      overlay = mkdtempSync(join(tmpdir(), 'spoke-nodes-overlay-'));
      writeOverlay(overlay);
      await cluster.kubectlOk(['apply', '-k', overlay]);
      await cluster.kubectlOk(['apply', '-f', '-'], { input: [...nodes.map(chatter), chatterService].join('---\n') });
      await waitForAgents();
      await cluster.kubectlOk(
        ['-n', 'default', 'wait', '--for=condition=Ready', 'pod', '-l', 'app=chatter', '--timeout=180s'],
        {
          timeoutMs: 190_000,
        },
      );
    }, 2_700_000); // it may first wait for the other node suite's cluster (support/node-cluster.ts takeClusterSlot)

    afterAll(async () => {
      await cluster?.close();
      if (overlay) rmSync(overlay, { recursive: true, force: true });
      if (hubPki) rmSync(hubPki.dir, { recursive: true, force: true });
      if (Object.keys(figures).length) console.log(`nodes suite figures: ${JSON.stringify(figures)}`);
    }, 120_000);

    it("announces each node's address: the agents' logs name their node and identifiers", async () => {
      for (const node of nodes) {
        const logs = await cluster.kubectlOk(['-n', ns, 'logs', (await agentOn(node)).name]);
        expect(logs).toContain(`ipv4=${node.ip}`);
        expect(logs).toContain(`host=${node.name}.node.cluster1`);
      }
    });

    it("serves kubectl logs, logs -f, exec, port-forward and the node proxy for a pod on each node, each on that node's agent", async () => {
      for (const node of nodes) {
        const other = nodes.find((n) => n !== node)!;
        const pod = `chatter-${node.name}`;
        const before = await agentCounts();
        expect(await cluster.kubectlOk(['-n', 'default', 'logs', pod, '--tail=1'])).toMatch(/^line \d+\n$/);
        const follow = cluster.kubectlStream(['-n', 'default', 'logs', '-f', pod, '--tail=1']);
        await follow.waitFor(/line \d+\n(?:.*\n)*line \d+\n(?:.*\n)*line \d+\n/, 60_000);
        follow.kill();
        expect(
          await cluster.kubectlOk([
            '-n',
            'default',
            'exec',
            pod,
            '--',
            '/nodejs/bin/node',
            '-e',
            'console.log(process.env.NODE)',
          ]),
        ).toBe(`${node.name}\n`);
        const forward = await portForward(pod);
        try {
          expect((await curlLocal(forward.port)).stdout).toBe(`hello from ${node.name}`);
        } finally {
          forward.child.kill();
        }
        const proxied = await nodeProxy(node);
        expect(proxied.stdout, proxied.stderr).toBe('ok');
        const after = await agentCounts();
        expect(after[node.name]!.dials, `${node.name}'s agent served them`).toBeGreaterThan(before[node.name]!.dials);
        expect(after[other.name]!.dials, `${other.name}'s agent did not`).toBe(before[other.name]!.dials);
        expect(after[other.name]!.denied).toBe(before[other.name]!.denied);
      }
    });

    it("reaches an exposed Service by name through either node's agent, as the proxy-server chooses", async () => {
      const before = await agentCounts();
      const answers = new Set<string>();
      for (let i = 0; i < 20; i++) answers.add(await getThroughHub('chatter.default.cluster1:80'));
      expect(
        [...answers].every((a) => /^hello from node[12]$/.test(a)),
        [...answers].join(),
      ).toBe(true);
      const after = await agentCounts();
      const byAgent = Object.fromEntries(nodes.map((n) => [n.name, after[n.name]!.dials - before[n.name]!.dials]));
      expect(Object.values(byAgent).reduce((a, b) => a + b, 0)).toBe(20);
      figures.serviceDialsByAgent = byAgent;
    });

    it('sends 100 of 100 alternating node proxy requests to the right node', async () => {
      const before = await agentCounts();
      const results: string[] = [];
      for (let i = 0; i < 100; i++) {
        const r = await nodeProxy(nodes[i % 2]!);
        results.push(r.code === 0 ? r.stdout : `exit ${r.code}: ${r.stderr}`);
      }
      expect(results.filter((r) => r !== 'ok')).toEqual([]);
      // Each answer came from the node named (its kubelet answers its own node only); kube-apiserver keeps
      // its kubelet connections open, so the agents count fewer dials than requests, and no refusal.
      const after = await agentCounts();
      for (const node of nodes) expect(after[node.name]!.denied, node.name).toBe(before[node.name]!.denied);
      figures.alternating = Object.fromEntries(
        nodes.map((n) => [n.name, after[n.name]!.dials - before[n.name]!.dials]),
      );
    });

    it("refuses another node's address: with node2's agent gone, kube-apiserver prints node1's agent's reason", async () => {
      const gone = await agentOn(node2);
      await cluster.kubectlOk(['taint', 'node', node2.name, taint]);
      try {
        await cluster.kubectlOk(['-n', ns, 'wait', '--for=delete', `pod/${gone.name}`, '--timeout=120s'], {
          timeoutMs: 130_000,
        });
        const refusal = new RegExp(
          `not allowed: ${node2.ip.replace(/\./g, '\\.')} is not this node's address \\(--node-ips=${node1.ip.replace(/\./g, '\\.')}\\)`,
        );
        await waitUntilAsync(
          async () => refusal.test((await nodeProxy(node2)).stderr),
          60_000,
          "the proxy-server to drop node2's agent",
          1000,
        );
        const logs = await cluster.kubectl(['-n', 'default', 'logs', `chatter-${node2.name}`, '--tail=1']);
        expect(logs.code).not.toBe(0);
        expect(logs.stderr).toMatch(refusal);
        const metrics = await agentMetrics((await agentOn(node1)).ip);
        expect(
          sampleValue(metrics, 'spoke_agent_dials_denied_total{reason="not_a_rule_address"}'),
        ).toBeGreaterThanOrEqual(2);
      } finally {
        await cluster.kubectlOk(['taint', 'node', node2.name, `${taint.split('=')[0]}-`]);
      }
      await waitForAgents();
      const back = await nodeProxy(node2);
      expect(back.stdout, back.stderr).toBe('ok');
    });

    it('rolls over both nodes: a logs -f and a port-forward open on the old agents finish inside their drain, no request fails', async () => {
      await cluster.kubectlOk(['apply', '-f', '-'], { input: countdown(node1) });
      await cluster.kubectlOk(
        ['-n', 'default', 'wait', '--for=condition=Ready', `pod/countdown-${node1.name}`, '--timeout=120s'],
        { timeoutMs: 130_000 },
      );
      const before = await agentCounts();
      /** The node's agent from before the rollout is being deleted (SIGTERM: draining) or gone. */
      const draining = async (node: ClusterNode) => {
        const r = await cluster.kubectl(['-n', ns, 'get', 'pod', before[node.name]!.pod, '-o', 'json']);
        return r.code !== 0 || Boolean((JSON.parse(r.stdout) as Obj).metadata.deletionTimestamp);
      };
      const follow = cluster.kubectlStream(['-n', 'default', 'logs', '-f', `countdown-${node1.name}`]);
      await follow.waitFor(/line \d+\n/, 60_000);
      const forward = await portForward(`chatter-${node2.name}`);
      const requests: Array<{ at: number; what: string; ok: boolean; error?: string }> = [];
      // The port-forward is used until three requests went through it while node2's old agent drained, then closed.
      let forwardedInDrain = 0;
      let stop = false;
      // Paced by the load, not the clock: one request in flight, the next once it is answered.
      const load = (async () => {
        for (let i = 0; !stop; i++) {
          const at = Date.now();
          const node = nodes[i % 2]!;
          const r = await nodeProxy(node);
          requests.push({ at, what: `proxy ${node.name}`, ok: r.stdout === 'ok', error: r.stderr || undefined });
          if (forwardedInDrain < 3) {
            const inDrain = await draining(node2);
            const page = await curlLocal(forward.port);
            const ok = page.stdout === `hello from ${node2.name}`;
            requests.push({ at, what: 'port-forward', ok, error: page.stderr || `exit ${page.code}` });
            if (ok && inDrain && ++forwardedInDrain === 3) forward.child.kill();
          }
        }
      })();
      try {
        await cluster.kubectlOk(['-n', ns, 'rollout', 'restart', 'ds/spoke-agent']);
        await waitUntilAsync(() => draining(node1), 240_000, "node1's old agent to drain", 500);
        // The logs -f carried by node1's old agent is still open; its pod ends it now, inside the drain.
        await cluster.kubectlOk([
          '-n',
          'default',
          'exec',
          `countdown-${node1.name}`,
          '--',
          '/nodejs/bin/node',
          '-e',
          "process.kill(1, 'SIGUSR2')",
        ]);
        const ended = await follow.exited;
        expect(ended.code, follow.stderr()).toBe(0);
        expect(follow.stdout()).toMatch(/line \d+\ndone\n$/);
        await cluster.kubectlOk(['-n', ns, 'rollout', 'status', 'ds/spoke-agent', '--timeout=240s'], {
          timeoutMs: 250_000,
        });
        await waitUntilAsync(async () => forwardedInDrain >= 3, 120_000, "the port-forward used during node2's drain");
      } finally {
        stop = true;
        await load;
        forward.child.kill();
        follow.kill();
      }
      const failed = requests.filter((r) => !r.ok);
      figures.rollout = { requests: requests.length, failed: failed.length, forwardedInDrain };
      expect(failed, JSON.stringify(failed.slice(0, 5))).toEqual([]);
      await waitForAgents();
      const after = await agentCounts();
      for (const node of nodes) expect(after[node.name]!.pod, node.name).not.toBe(before[node.name]!.pod);
      // New requests go to the new agents.
      for (const node of nodes) {
        const counts = (await agentCounts())[node.name]!;
        const r = await cluster.kubectl([
          '-n',
          'default',
          'exec',
          `chatter-${node.name}`,
          '--',
          '/nodejs/bin/node',
          '-e',
          'console.log(process.env.NODE)',
        ]);
        expect(r.stdout, r.stderr).toBe(`${node.name}\n`);
        expect((await agentCounts())[node.name]!.dials).toBeGreaterThan(counts.dials);
      }
    }, 600_000);
  },
);
