// Memory of idle tunnelled connections: our agent as a process of its own (its RSS is its own) holds
// 1k, then 10k, connections to a target that sends nothing. RSS from /proc/PID/status, heap from its
// /metrics; the baseline is the same agent with no connection, read in the same run. The hub's
// frontends are plaintext here: 10k TLS handshakes would only time the bench's own client.
import type { Duplex } from 'node:stream';
import { hubRoute, spawnNode, startOurAgent, startOurHub, type TestPki } from './env.js';
import { MiB, type Report } from './report.js';
import { waitUntilAsync } from '../test/support/wait.js';

const settle = () => new Promise((r) => setTimeout(r, 1500));
/**
 * Idle means after the burst's garbage is gone: V8's memory reducer collects it once the agent has
 * allocated little for ~8-10 s (10k connections: 164 MiB of RSS 1.5 s after the last dial, 110 MiB
 * from 10 s on, bench/README.md).
 */
const idleAfterBurst = () => new Promise((r) => setTimeout(r, 15_000));

export async function runScale(report: Report, pki: TestPki, quick: boolean): Promise<void> {
  const section = 'Scale (idle connections)';
  const steps = quick ? [1000] : [1000, 10_000];
  const idle = spawnNode('idle-target', 'bench/idle-target.ts', []);
  const idleTarget = `127.0.0.1:${(await idle.firstLine()).trim()}`;
  const hub = await startOurHub(pki, { plainFrontends: true });
  const agent = await startOurAgent(pki, hub);
  const route = hubRoute('scale', pki, hub, 'http-connect');
  const conns: Duplex[] = [];
  try {
    await settle();
    const rss0 = agent.proc.rss();
    const heap0 = (await agent.heapUsed()) ?? 0;
    report.add({ section, metric: 'agent RSS, no connection', subject: 'ours', value: rss0 / MiB, unit: 'MiB' });
    for (const n of steps) {
      const started = performance.now();
      const cpu0 = agent.proc.cpuSeconds();
      // 64 dials in flight: a realistic burst, and well under the targets' accept backlog.
      const before = conns.length;
      let next = before;
      await Promise.all(
        Array.from({ length: 64 }, async () => {
          while (next < n) {
            next++;
            const c = await route.dial(idleTarget);
            c.on('error', () => {});
            conns.push(c);
          }
        }),
      );
      const openSeconds = (performance.now() - started) / 1000;
      const cpu = agent.proc.cpuSeconds() - cpu0;
      const open = () => agent.metric('konnectivity_network_proxy_agent_open_endpoint_connections');
      await waitUntilAsync(
        async () => ((await open()) ?? 0) >= n,
        30_000,
        `${n} open endpoint connections in the agent`,
        100,
      );
      await idleAfterBurst();
      const rss = agent.proc.rss();
      const heap = (await agent.heapUsed()) ?? 0;
      const target = n === 10_000 ? { text: '<= 120 MiB RSS', met: rss <= 120 * MiB } : undefined;
      report.add({
        section,
        metric: `agent RSS holding ${n} idle connections`,
        subject: 'ours',
        value: rss / MiB,
        unit: 'MiB',
        baseline: { subject: 'no connection', value: rss0 / MiB },
        target,
      });
      report.add({
        section,
        metric: `agent heap used holding ${n} idle connections`,
        subject: 'ours',
        value: heap / MiB,
        unit: 'MiB',
        baseline: { subject: 'no connection', value: heap0 / MiB },
      });
      report.add({
        section,
        metric: `agent memory per idle connection (RSS growth / ${n})`,
        subject: 'ours',
        value: (rss - rss0) / n / 1024,
        unit: 'KiB',
      });
      report.add({
        section,
        metric: `opening connections ${before + 1} to ${n} (64 in flight)`,
        subject: 'ours',
        value: (n - before) / openSeconds,
        unit: 'dials/s',
        note: `agent CPU ${cpu.toFixed(1)} s`,
      });
      report.add({
        section,
        metric: `hub RSS holding ${n} idle connections (for reference)`,
        subject: 'our hub',
        value: hub.proc.rss() / MiB,
        unit: 'MiB',
      });
    }
  } finally {
    for (const c of conns) c.destroy();
    await agent.proc.stop();
    await hub.proc.stop();
    await idle.stop();
  }
}
