// What each deployment shape costs the hub (manifests/README.md, "Which shape"): every agent holds a
// connection, with its streams, to every proxy-server, so a cluster costs each server one connection
// per agent: 3 for the Deployment (service-access/), one per node for the DaemonSet (per-node/). Measured
// on one Go v0.36 proxy-server (--proxy-strategies=destHost,default, mTLS): its RSS, goroutines and idle
// CPU with no agent, then with N of our agents as the per-node DaemonSet starts them (--cluster-name,
// --node-name, --node-ips: one connection and its one stream each); the difference over N is the cost of
// one agent connection, and the shapes' costs per cluster follow from it. Our agents' own RSS is the
// spoke's side of the same choice.
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { goServerFlags, goServerPorts } from '../test/support/go-proxy-server.js';
import { sampleValue } from '../test/support/promql.js';
import { unusedPort } from '../test/support/targets.js';
import { waitUntilAsync } from '../test/support/wait.js';
import { agentEntry, anpBinDir, Proc, spawnNode, type TestPki } from './env.js';
import { MiB, type Report } from './report.js';

const section = 'Hub cost per shape';
const idleWindowMs = 20_000;

async function metrics(port: number): Promise<string> {
  return (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
}

export async function runHubCost(report: Report, pki: TestPki, quick: boolean): Promise<void> {
  if (!anpBinDir) {
    report.note(`${section}: skipped, no Go proxy-server`);
    return;
  }
  const agentsN = quick ? 8 : 24;
  const ports = await goServerPorts();
  const server = new Proc(
    'go-proxy-server',
    spawn(
      join(anpBinDir, 'proxy-server'),
      [...goServerFlags(pki, 'grpc', 'destHost,default', ports), '--server-count=1', '--server-id=hub-cost'],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    ),
  );
  const agents: Proc[] = [];
  const backends = async () =>
    sampleValue(await metrics(ports.health).catch(() => ''), 'konnectivity_network_proxy_server_ready_backends') ?? 0;
  /** The server's RSS and goroutines, and its CPU over an idle window. */
  const idle = async () => {
    const cpu0 = server.cpuSeconds();
    await new Promise((r) => setTimeout(r, idleWindowMs));
    const text = await metrics(ports.health);
    return {
      rss: server.rss(),
      goroutines: sampleValue(text, 'go_goroutines') ?? Number.NaN,
      millicores: ((server.cpuSeconds() - cpu0) / (idleWindowMs / 1000)) * 1000,
    };
  };
  try {
    await waitUntilAsync(async () => (await metrics(ports.health).catch(() => '')) !== '', 20_000, 'the Go server');
    const none = await idle();
    for (let n = 0; n < agentsN; n++) {
      const health = await unusedPort();
      const ip = `127.3.0.${n + 1}`;
      agents.push(
        spawnNode(`agent-${n}`, agentEntry(), [
          `--proxy-server-host=127.0.0.1:${ports.agent}`,
          `--ca-cert=${pki.caCert}`,
          `--agent-cert=${pki.clientCert}`,
          `--agent-key=${pki.clientKey}`,
          `--agent-id=hub-cost-${n}`,
          '--cluster-name=cluster1',
          `--node-name=n${n}`,
          `--node-ips=${ip}`,
          '--dns-port=0',
          '--dns-upstream=127.0.0.1:9',
          '--health-server-host=127.0.0.1',
          `--health-server-port=${health}`,
          '--debug-socket=false',
          '--log-level=warn',
        ]),
      );
    }
    await waitUntilAsync(async () => (await backends()) >= agentsN, 120_000, `${agentsN} agents on the server`, 500);
    // Start-up is not idle: let the agents' and the server's first seconds pass.
    await new Promise((r) => setTimeout(r, 5000));
    const held = await idle();
    const perAgent = {
      rssKiB: (held.rss - none.rss) / agentsN / 1024,
      goroutines: (held.goroutines - none.goroutines) / agentsN,
    };
    const subject = 'Go v0.36 proxy-server';
    report.add({
      section,
      metric: `server RSS holding ${agentsN} agents (one connection each)`,
      subject,
      value: held.rss / MiB,
      unit: 'MiB',
      baseline: { subject: 'no agent', value: none.rss / MiB },
    });
    report.add({ section, metric: 'server RSS per agent connection', subject, value: perAgent.rssKiB, unit: 'KiB' });
    report.add({
      section,
      metric: 'server goroutines per agent connection',
      subject,
      value: perAgent.goroutines,
      unit: 'goroutines',
    });
    report.add({
      section,
      metric: `server idle CPU holding ${agentsN} agents (${idleWindowMs / 1000} s window)`,
      subject,
      value: held.millicores,
      unit: 'millicores',
      baseline: { subject: 'no agent', value: none.millicores },
    });
    // The shapes, behind 3 proxy-servers (cluster-proxy's default): connections per cluster, and their memory on the hub.
    for (const [shape, agentsPerCluster] of [
      ['service-access/ (Deployment of 3)', 3],
      ['per-node/ on 10 nodes', 10],
      ['per-node/ on 100 nodes', 100],
    ] as const) {
      report.add({
        section,
        metric: `hub memory per cluster, 3 servers: ${shape}, ${agentsPerCluster * 3} connections`,
        subject,
        value: (agentsPerCluster * 3 * perAgent.rssKiB) / 1024,
        unit: 'MiB',
        note: `${agentsPerCluster * 3 * perAgent.goroutines} goroutines`,
      });
    }
    const agentRss = agents.map((a) => a.rss()).reduce((a, b) => a + b, 0) / agents.length;
    report.add({
      section,
      metric: 'each agent, idle, per-node flags (the spoke side: per node or per replica)',
      subject: 'ours',
      value: agentRss / MiB,
      unit: 'MiB RSS',
    });
  } finally {
    await Promise.all(agents.map((a) => a.stop()));
    await server.stop();
  }
}
