// What an idle agent costs a node: our agent connected to a hub and doing nothing, without DNS rules,
// with rules and the DNS server, and as the DaemonSet runs it (in a pod: the service account's
// in-cluster configuration, rules from a ConfigMap it watches, delegated auth for /debug, DNS, metrics;
// emulated with a private mount namespace as root, test/support/pod.ts, against a fake API server on
// loopback), once more with --count-server-leases; next to bare Node (the same binary running an empty
// script) and the Go agent, in the same run. RSS is split into the process's own memory (anonymous:
// heap, malloc) and mapped files (mostly the node binary's code: shared, reclaimable, and sized by what
// the kernel maps around each page touched, so it moves with what else ran the binary lately). Then the
// CPU and wake-ups of the DaemonSet's agent and the Go agent side by side over an idle minute, each
// probed as the kubelet probes the DaemonSet (/readyz every 5 s, /healthz every 10 s).
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { startTestUpstream, type TestUpstream } from '../test/support/dns-upstream.js';
import { FakeApiServer } from '../test/support/fake-apiserver.js';
import { emulatedPod, podProblem, type Pod } from '../test/support/pod.js';
import {
  anpBinDir,
  Proc,
  startGoAgent,
  startGoHub,
  startOurAgent,
  startOurHub,
  type AgentProc,
  type Hub,
  type TestPki,
  type Wrap,
} from './env.js';
import { MiB, type Report } from './report.js';

const settle = () => new Promise((r) => setTimeout(r, 2000));
/** The idle window over which CPU and wake-ups are counted, and how long after start it begins. */
const idleMinuteMs = Number(process.env.BENCH_IDLE_MS ?? 60_000);
/** Before it, a window with no probe: what the agent costs by itself, and so what each probe adds. */
const unprobedMs = Number(process.env.BENCH_IDLE_UNPROBED_MS ?? 30_000);
const warmUpMs = 30_000;

/** Bare Node: the same binary, an empty script that prints its heap once and waits. */
async function bareNode(): Promise<{ proc: Proc; heap: number }> {
  const script = 'setTimeout(() => console.log(process.memoryUsage().heapUsed), 1500); setInterval(() => {}, 1e9);';
  const proc = new Proc('bare-node', spawn(process.execPath, ['-e', script], { stdio: ['ignore', 'pipe', 'pipe'] }));
  return { proc, heap: Number(await proc.firstLine()) };
}

interface Idle {
  rss: number;
  anon: number;
  file: number;
  heap?: number;
}

async function measure(agent: AgentProc | Proc, heap?: number): Promise<Idle> {
  const proc = agent instanceof Proc ? agent : agent.proc;
  return { ...proc.memory(), heap: heap ?? (agent instanceof Proc ? undefined : await agent.heapUsed()) };
}

/**
 * The kubelet's probes of the DaemonSet: GET /readyz every 5 s and /healthz every 10 s, a new
 * connection each. `stop()` ends them and says how many were sent.
 */
function probe(port: number): () => number {
  const http = process.getBuiltinModule('node:http');
  let sent = 0;
  const get = (path: string) => {
    sent++;
    http.get({ host: '127.0.0.1', port, path, agent: false }, (res) => res.resume()).on('error', () => {});
  };
  const timers = [setInterval(() => get('/readyz'), 5000), setInterval(() => get('/healthz'), 10_000)];
  return () => {
    timers.forEach(clearInterval);
    return sent;
  };
}

type Target = { text: string; limit: number };

export async function runIdle(report: Report, pki: TestPki): Promise<void> {
  const section = 'Idle footprint';
  const add = (
    subject: string,
    m: Idle,
    bare: Idle | undefined,
    targets: { rss?: Target; anon?: Target; heapMB?: Target } = {},
  ) => {
    const base = (v: number) => (bare ? { subject: 'bare Node', value: v / MiB } : undefined);
    const target = (t: Target | undefined, value: number) => t && { text: t.text, met: value <= t.limit };
    report.add({
      section,
      metric: 'RSS, idle',
      subject,
      value: m.rss / MiB,
      unit: 'MiB',
      baseline: base(bare?.rss ?? 0),
      target: target(targets.rss, m.rss / MiB),
    });
    report.add({
      section,
      metric: 'RSS, idle: anonymous (heap, malloc)',
      subject,
      value: m.anon / MiB,
      unit: 'MiB',
      baseline: base(bare?.anon ?? 0),
      target: target(targets.anon, m.anon / MiB),
    });
    report.add({
      section,
      metric: 'RSS, idle: mapped files (code)',
      subject,
      value: m.file / MiB,
      unit: 'MiB',
      baseline: base(bare?.file ?? 0),
    });
    if (m.heap !== undefined) {
      report.add({
        section,
        metric: 'V8 heap used, idle',
        subject,
        value: m.heap / MiB,
        unit: 'MiB',
        baseline: bare?.heap === undefined ? undefined : { subject: 'bare Node', value: bare.heap / MiB },
        target: target(
          targets.heapMB && { ...targets.heapMB, limit: (targets.heapMB.limit * 1e6) / MiB },
          m.heap / MiB,
        ),
      });
    }
  };

  const bare = await bareNode();
  await settle();
  const bareIdle = await measure(bare.proc, bare.heap);
  await bare.proc.stop();
  add('bare Node (an empty script)', bareIdle, undefined);

  const hub = await startOurHub(pki);
  let upstream: TestUpstream | undefined;
  let api: FakeApiServer | undefined;
  let pod: Pod | undefined;
  let daemonSet: AgentProc | undefined;
  let withLeases: AgentProc | undefined;
  let goHub: Hub | undefined;
  let goAgent: AgentProc | undefined;
  try {
    upstream = await startTestUpstream({ 'web.prod.svc.cluster.local': [{ type: 1, address: '10.96.0.11' }] });
    const dns = ['--cluster-name=cluster1', '--dns-port=0', `--dns-upstream=127.0.0.1:${upstream.port}`];
    for (const [subject, flags, target] of [
      ['ours, connected to a hub, no DNS rules', [], { text: '<= 64 MiB', limit: 64 }],
      ['ours, with rules and the DNS server', [...dns, '--expose=prod/web'], { text: '<= 72 MiB', limit: 72 }],
    ] as const) {
      const agent = await startOurAgent(pki, hub, [...flags]);
      try {
        await settle();
        add(subject, await measure(agent), bareIdle, { rss: target });
      } finally {
        await agent.proc.stop();
      }
    }

    // As the DaemonSet runs it. In a pod (root: a mount namespace with the service account), the
    // in-cluster configuration, which is what the DaemonSet uses; else through --kubeconfig, said so.
    const [cert, key] = pki.issue('fake-kube-apiserver', { serverNames: ['127.0.0.1'] });
    api = await FakeApiServer.start({ tls: { cert: readFileSync(cert), key: readFileSync(key) } });
    api.configMap('spoke', 'spoke-agent-rules', { 'rules.yaml': 'expose: [prod/web]' });
    for (const name of ['a', 'b', 'c']) api.lease('kube-system', `konnectivity-proxy-server-${name}`);
    const why = podProblem();
    let wrap: Wrap | undefined;
    let kubeFlags: string[];
    if (why === undefined) {
      const p = emulatedPod({
        hostAliases: {},
        nameserver: '127.0.0.1',
        namespace: 'spoke',
        serviceAccount: { token: api.token, caCert: readFileSync(pki.caCert) },
        etcFiles: {},
      });
      pod = p;
      wrap = (command, args) =>
        p.command([
          'env',
          'KUBERNETES_SERVICE_HOST=127.0.0.1',
          `KUBERNETES_SERVICE_PORT=${api!.port}`,
          'POD_NAMESPACE=spoke',
          command,
          ...args,
        ]);
      kubeFlags = [];
    } else {
      report.note(
        `idle: the DaemonSet's agent reads --kubeconfig, not a pod's service account (${why}): the kubeconfig's parser (js-yaml) is loaded too`,
      );
      kubeFlags = [`--kubeconfig=${api.kubeconfigPath}`, '--debug-auth=true'];
    }
    const asDaemonSet = [...dns, '--rules-configmap=spoke/spoke-agent-rules', ...kubeFlags];
    const daemonSetSubject = `ours, as the DaemonSet runs it: ${why === undefined ? 'in a pod (in-cluster config)' : 'with --kubeconfig'}, rules from a watched ConfigMap, DNS, metrics, /debug auth`;
    const watching = async (agent: AgentProc, resource: string) => {
      // Only a figure for the agent doing its job: watching, not retrying.
      if ((await agent.metric(`spoke_agent_kube_watch_synced{resource="${resource}"}`)) !== 1)
        throw new Error(`the agent is not watching ${resource}\n${agent.proc.log}`);
    };
    // The DaemonSet's agent, the same with --count-server-leases and the Go agent stay up together:
    // each is measured after a warm-up (start-up, and V8's memory reducer, which runs a few full
    // collections in the first ~15 s, are not idle), then over an idle minute, then its memory.
    daemonSet = await startOurAgent(pki, hub, asDaemonSet, wrap);
    withLeases = await startOurAgent(pki, hub, [...asDaemonSet, '--count-server-leases'], wrap);
    if (anpBinDir) {
      goHub = await startGoHub(pki, 'http-connect');
      goAgent = await startGoAgent(pki, goHub);
    }
    const warmedUp = performance.now() + warmUpMs;
    await settle();
    await watching(daemonSet, 'configmap');
    await watching(withLeases, 'leases');
    await new Promise((r) => setTimeout(r, Math.max(0, warmedUp - performance.now())));

    // An idle window with no probe, then an idle minute, each probed as the kubelet probes the DaemonSet.
    const subjects = [daemonSet, withLeases, ...(goAgent ? [goAgent] : [])];
    const unprobed = subjects.map((a) => a.proc.schedStats());
    await new Promise((r) => setTimeout(r, unprobedMs));
    const before = subjects.map((a) => a.proc.schedStats());
    const stops = subjects.map((a) => probe(a.healthPort));
    await new Promise((r) => setTimeout(r, idleMinuteMs));
    const after = subjects.map((a) => a.proc.schedStats());
    const probes = stops.map((stop) => stop());
    const figures = await Promise.all(subjects.map((a) => measure(a)));

    const daemonSetFigures = figures[0]!;
    add(daemonSetSubject, daemonSetFigures, bareIdle, {
      rss: { text: '<= 64 MiB', limit: 64 },
      anon: { text: '<= 24 MiB', limit: 24 },
      heapMB: { text: '<= 10 MB', limit: 10 },
    });
    add(`${daemonSetSubject}, and --count-server-leases (a second watch)`, figures[1]!, bareIdle, {
      rss: { text: '<= 4 MiB more than without', limit: daemonSetFigures.rss / MiB + 4 },
    });
    if (goAgent) add('Go agent, connected to the Go proxy-server', figures[2]!, bareIdle);

    const seconds = idleMinuteMs / 1000;
    const cpu = subjects.map((_, i) => {
      const unprobedNsPerMs = (before[i]!.cpuNs - unprobed[i]!.cpuNs) / unprobedMs;
      const probedNs = after[i]!.cpuNs - before[i]!.cpuNs;
      return {
        msPerMinute: probedNs / 1e6 / (seconds / 60),
        unprobedMsPerMinute: (unprobedNsPerMs * 60_000) / 1e6,
        msPerProbe: (probedNs - unprobedNsPerMs * idleMinuteMs) / 1e6 / probes[i]!,
        wakeups: (after[i]!.switches - before[i]!.switches) / seconds,
      };
    });
    const go = goAgent ? { subject: 'Go agent, same probes', cpu: cpu[2]! } : undefined;
    const base = (v: (c: (typeof cpu)[number]) => number) => go && { subject: go.subject, value: v(go.cpu) };
    for (const [i, subject] of [
      [0, 'ours, as the DaemonSet runs it'],
      [1, 'ours, as the DaemonSet runs it, and --count-server-leases'],
    ] as const) {
      const c = cpu[i]!;
      const probed = `${subject}, probed /readyz every 5 s and /healthz every 10 s`;
      report.add({
        section,
        metric: `CPU per idle minute (over ${seconds} s, ${warmUpMs / 1000} s after start)`,
        subject: probed,
        value: c.msPerMinute,
        unit: 'ms',
        baseline: base((x) => x.msPerMinute),
      });
      report.add({
        section,
        metric: 'CPU, idle',
        subject: probed,
        value: c.msPerMinute / 60,
        unit: 'millicores',
        baseline: base((x) => x.msPerMinute / 60),
        target: i === 0 ? { text: '<= 1 millicore', met: c.msPerMinute / 60 <= 1 } : undefined,
      });
      report.add({
        section,
        metric: `CPU, idle, not probed (over ${unprobedMs / 1000} s before that minute)`,
        subject,
        value: c.unprobedMsPerMinute / 60,
        unit: 'millicores',
        baseline: go && { subject: 'Go agent, not probed', value: go.cpu.unprobedMsPerMinute / 60 },
      });
      report.add({
        section,
        metric: 'CPU per probe (the probed minute less the unprobed rate, per request; a new connection each)',
        subject,
        value: c.msPerProbe,
        unit: 'ms',
        baseline: base((x) => x.msPerProbe),
      });
      report.add({
        section,
        metric: 'Wake-ups (context switches of all threads), idle',
        subject: probed,
        value: c.wakeups,
        unit: '/s',
        baseline: base((x) => x.wakeups),
      });
    }
  } finally {
    await goAgent?.proc.stop();
    await goHub?.proc.stop();
    await daemonSet?.proc.stop();
    await withLeases?.proc.stop();
    pod?.remove();
    await api?.close();
    await upstream?.close();
    await hub.proc.stop();
  }
}
