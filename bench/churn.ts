// Dial/close churn: 100k cycles (dial, 1 byte each way, close; 16 in flight) through our hub and our
// agent, the agent in a memory cgroup of the DaemonSet's limit (256 MiB) when the machine allows, as
// in a pod. Its RSS every 10k cycles: it must be flat after the first 10k (V8 sized for the container,
// memory/container-memory.ts, instead of growing towards the host's memory) and within the DaemonSet's
// memory request. Not in the default run (minutes long): `npm run bench -- churn`.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { memoryCgroup } from '../test/support/cgroup.js';
import { repoRoot } from '../test/support/processes.js';
import { hubRoute, startOurAgent, startOurHub, type Targets, type TestPki } from './env.js';
import { exchange } from './latency.js';
import { MiB, type Report } from './report.js';

const limit = 256 * MiB;

/** The agent container's memory request in manifests/daemonset.yaml, in bytes. */
function daemonSetRequest(): number {
  const yaml = readFileSync(join(repoRoot, 'manifests/daemonset.yaml'), 'utf8');
  const m = /requests:\s*\n(?:\s+cpu: \S+\n)?\s+memory: (\d+)Mi/.exec(yaml);
  if (!m) throw new Error('no memory request in manifests/daemonset.yaml');
  return Number(m[1]) * MiB;
}

export async function runChurn(report: Report, pki: TestPki, targets: Targets, quick: boolean): Promise<void> {
  const section = 'Dial/close churn';
  const [total, step, parallel] = quick ? [20_000, 5000, 16] : [100_000, 10_000, 16];
  const cgroup = memoryCgroup(limit, `spoke-agent-bench-${process.pid}`);
  const where =
    typeof cgroup === 'string'
      ? `no memory cgroup (${cgroup}): the agent's heap is Node's default for this host`
      : `in a cgroup v${cgroup.version} memory limit of 256 MiB, as the DaemonSet`;
  const hub = await startOurHub(pki, { plainFrontends: true });
  const agent = await startOurAgent(pki, hub, [], typeof cgroup === 'string' ? undefined : cgroup.wrap);
  const route = hubRoute('churn', pki, hub, 'http-connect');
  const one = Buffer.from('x');
  const samples: Array<{
    cycles: number;
    rss: number;
    anon: number;
    usage?: number;
    workingSet?: number;
    heap: number;
  }> = [];
  const usage = () => (typeof cgroup === 'string' ? undefined : cgroup.usageBytes());
  const workingSet = () => (typeof cgroup === 'string' ? undefined : cgroup.workingSetBytes());
  const mib = (n: number | undefined) => (n === undefined ? '-' : (n / MiB).toFixed(1));
  try {
    const rss0 = agent.proc.rss();
    let done = 0;
    let nextSample = step;
    const started = performance.now();
    await Promise.all(
      Array.from({ length: parallel }, async () => {
        while (done < total) {
          const conn = await route.dial(targets.echo);
          await exchange(conn, one);
          conn.destroy();
          done++;
          if (done >= nextSample) {
            nextSample += step;
            const { rss, anon } = agent.proc.memory();
            const sample = {
              cycles: done,
              rss,
              anon,
              usage: usage(),
              workingSet: workingSet(),
              heap: (await agent.heapUsed()) ?? 0,
            };
            samples.push(sample);
            console.log(
              `   ${sample.cycles} cycles: agent RSS ${mib(sample.rss)} MiB (anonymous ${mib(sample.anon)}), cgroup usage ${mib(sample.usage)} MiB (working set ${mib(sample.workingSet)}), heap used ${mib(sample.heap)} MiB, ${(done / ((performance.now() - started) / 1000)).toFixed(0)} cycles/s`,
            );
          }
        }
      }),
    );
    const first = samples[0]!;
    const last = samples.at(-1)!;
    const peakAfterFirst = Math.max(...samples.map((s) => s.rss));
    const growth = peakAfterFirst - first.rss;
    // Flat: what it grows after the first step is within 10% (or 8 MiB) of where it stood then.
    const flat = growth <= Math.max(first.rss * 0.1, 8 * MiB);
    const k = (n: number) => `${n / 1000}k`;
    report.add({
      section,
      metric: `agent RSS after ${k(first.cycles)} dial/close cycles`,
      subject: 'ours',
      value: first.rss / MiB,
      unit: 'MiB',
      baseline: { subject: 'before the first cycle', value: rss0 / MiB },
      note: where,
    });
    report.add({
      section,
      metric: `agent peak RSS from ${k(first.cycles)} to ${k(last.cycles)} cycles`,
      subject: 'ours',
      value: peakAfterFirst / MiB,
      unit: 'MiB',
      baseline: { subject: `after ${k(first.cycles)}`, value: first.rss / MiB },
      target: { text: 'flat (within 10% or 8 MiB)', met: flat },
    });
    // What the kubelet weighs against the request is the cgroup's working set (the shared pages of
    // the node binary are in RSS but charged elsewhere); without a cgroup, the anonymous memory.
    const held = last.workingSet ?? last.anon;
    const request = daemonSetRequest();
    report.add({
      section,
      metric: `agent memory after ${k(last.cycles)} cycles (${last.workingSet === undefined ? 'anonymous RSS' : 'cgroup working set'}) vs the DaemonSet memory request`,
      subject: 'ours',
      value: held / MiB,
      unit: 'MiB',
      baseline: { subject: 'memory request', value: request / MiB },
      target: { text: 'within the request', met: held <= request },
    });
    report.add({
      section,
      metric: `agent heap used after ${k(last.cycles)} cycles`,
      subject: 'ours',
      value: last.heap / MiB,
      unit: 'MiB',
      baseline: { subject: `after ${k(first.cycles)}`, value: first.heap / MiB },
    });
    report.note(
      `churn by cycles (RSS / anonymous / cgroup usage / working set, MiB): ${samples.map((s) => `${k(s.cycles)} ${mib(s.rss)}/${mib(s.anon)}/${mib(s.usage)}/${mib(s.workingSet)}`).join(', ')}${typeof cgroup === 'string' ? '' : `; cgroup peak ${mib(cgroup.peakBytes())} MiB, OOM kills ${cgroup.oomKills()}`}`,
    );
  } finally {
    await agent.proc.stop();
    await hub.proc.stop();
    if (typeof cgroup !== 'string') cgroup.remove();
  }
}
