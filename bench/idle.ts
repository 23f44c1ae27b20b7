// What an idle agent costs a node: our agent connected to a hub and doing nothing, without DNS rules,
// with rules and the DNS server, and as the DaemonSet runs it (its rules from a ConfigMap it watches
// through the Kubernetes client, here a fake API server on loopback), next to bare Node (the same binary running an empty script) and
// the Go agent, in the same run. RSS is split into the process's own memory (anonymous: heap, malloc)
// and mapped files (mostly the node binary's code: shared, reclaimable, and sized by what the kernel
// maps around each page touched, so it moves with what else ran the binary lately).
import { spawn } from 'node:child_process';
import { startTestUpstream, type TestUpstream } from '../test/support/dns-upstream.js';
import { FakeApiServer } from '../test/support/fake-apiserver.js';
import { anpBinDir, Proc, startGoAgent, startGoHub, startOurAgent, startOurHub, type AgentProc, type TestPki } from './env.js';
import { MiB, type Report } from './report.js';

const settle = () => new Promise((r) => setTimeout(r, 2000));

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

export async function runIdle(report: Report, pki: TestPki): Promise<void> {
  const section = 'Idle footprint';
  const add = (subject: string, m: Idle, bare: Idle | undefined, target?: { text: string; limit: number }) => {
    const base = (v: number) => (bare ? { subject: 'bare Node', value: v / MiB } : undefined);
    report.add({ section, metric: 'RSS, idle', subject, value: m.rss / MiB, unit: 'MiB', baseline: base(bare?.rss ?? 0), target: target && { text: target.text, met: m.rss <= target.limit * MiB } });
    report.add({ section, metric: 'RSS, idle: anonymous (heap, malloc)', subject, value: m.anon / MiB, unit: 'MiB', baseline: base(bare?.anon ?? 0) });
    report.add({ section, metric: 'RSS, idle: mapped files (code)', subject, value: m.file / MiB, unit: 'MiB', baseline: base(bare?.file ?? 0) });
    if (m.heap !== undefined) report.add({ section, metric: 'V8 heap used, idle', subject, value: m.heap / MiB, unit: 'MiB', baseline: bare?.heap === undefined ? undefined : { subject: 'bare Node', value: bare.heap / MiB } });
  };

  const bare = await bareNode();
  await settle();
  const bareIdle = await measure(bare.proc, bare.heap);
  await bare.proc.stop();
  add('bare Node (an empty script)', bareIdle, undefined);

  const hub = await startOurHub(pki);
  let upstream: TestUpstream | undefined;
  let api: FakeApiServer | undefined;
  try {
    upstream = await startTestUpstream({ 'web.prod.svc.cluster.local': [{ type: 1, address: '10.96.0.11' }] });
    api = await FakeApiServer.start();
    api.configMap('spoke', 'spoke-agent-rules', { 'rules.yaml': 'expose: [prod/web]' });
    const dns = ['--cluster-name=cluster1', '--dns-port=0', `--dns-upstream=127.0.0.1:${upstream.port}`];
    for (const [subject, flags, target] of [
      ['ours, connected to a hub, no DNS rules', [], { text: '<= 64 MiB', limit: 64 }],
      ['ours, with rules and the DNS server', [...dns, '--expose=prod/web'], { text: '<= 72 MiB', limit: 72 }],
      ['ours, as the DaemonSet runs it: rules from a watched ConfigMap (Kubernetes client)', [...dns, `--kubeconfig=${api.kubeconfigPath}`, '--rules-configmap=spoke/spoke-agent-rules'], { text: '<= 128 MiB (the DaemonSet\'s memory request)', limit: 128 }],
    ] as const) {
      const agent = await startOurAgent(pki, hub, [...flags]);
      try {
        await settle();
        // Only a figure for the agent doing its job: watching the ConfigMap, not retrying it.
        if (flags.some((f) => f.startsWith('--rules-configmap')) && (await agent.metric('spoke_agent_kube_watch_synced')) !== 1) throw new Error(`${subject}: the agent is not watching its rules ConfigMap\n${agent.proc.log}`);
        add(subject, await measure(agent), bareIdle, target);
      } finally {
        await agent.proc.stop();
      }
    }
  } finally {
    await api?.close();
    await upstream?.close();
    await hub.proc.stop();
  }

  if (anpBinDir) {
    const goHub = await startGoHub(pki, 'http-connect');
    try {
      const agent = await startGoAgent(pki, goHub);
      await settle();
      add('Go agent, connected to the Go proxy-server', await measure(agent), bareIdle);
      await agent.proc.stop();
    } finally {
      await goHub.proc.stop();
    }
  }
}
