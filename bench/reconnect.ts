// The Go proxy-server restarts (SIGTERM, then started again on the same ports): how long until it
// holds the agent again, our agent against the Go agent, each alone behind it. Timed from the old
// server's exit and from the new one's /healthz, to the server's own ready_backends >= 1. Then the
// TCP connections to the agent port (exactly one is right), and how often each agent knocks on a
// server that stays down: a listener on the freed port that counts and drops connections for 10 s.
import net from 'node:net';
import { establishedConnections } from '../test/support/sockets.js';
import {
  anpBinDir,
  goReferenceNote,
  startGoAgent,
  startGoHub,
  startOurAgent,
  type AgentProc,
  type Hub,
  type TestPki,
} from './env.js';
import { percentile, type Report } from './report.js';
import { waitUntilAsync } from '../test/support/wait.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const median = (xs: number[]) => percentile(xs, 50);
/** Polled every 10 ms: the reconnect times are read off these waits. */
const until = (condition: () => Promise<boolean>, timeoutMs: number, what: string) =>
  waitUntilAsync(condition, timeoutMs, what, 10);

/** Connections accepted on `port` during `ms`, each dropped at once. */
async function knocks(port: number, ms: number): Promise<number> {
  let n = 0;
  const sink = net.createServer((s) => {
    n++;
    s.destroy();
  });
  await new Promise<void>((resolve, reject) => sink.once('error', reject).listen(port, '127.0.0.1', () => resolve()));
  await sleep(ms);
  await new Promise((r) => sink.close(r));
  return n;
}

interface Figures {
  fromExit: number[];
  fromHealthy: number[];
  sockets: number;
  knocks: number;
}

async function measure(
  pki: TestPki,
  start: (pki: TestPki, hub: Hub) => Promise<AgentProc>,
  cycles: number,
): Promise<Figures> {
  let hub = await startGoHub(pki, 'grpc');
  const agent = await start(pki, hub);
  const figures: Figures = { fromExit: [], fromHealthy: [], sockets: 0, knocks: 0 };
  try {
    await until(async () => (await hub.readyBackends!()) >= 1, 30_000, 'the agent to register');
    for (let i = 0; i < cycles; i++) {
      await hub.proc.stop();
      const exited = performance.now();
      hub = await startGoHub(pki, 'grpc', hub.goPorts);
      const healthy = performance.now();
      await until(async () => (await hub.readyBackends!()) >= 1, 60_000, 'the agent to come back');
      const back = performance.now();
      figures.fromExit.push(back - exited);
      figures.fromHealthy.push(back - healthy);
      await sleep(1500); // a second connection left behind would show up by now
    }
    figures.sockets = establishedConnections(hub.agentPort, 'remote');
    await hub.proc.stop();
    figures.knocks = await knocks(hub.agentPort, 10_000);
  } finally {
    await agent.proc.stop();
    await hub.proc.stop();
  }
  return figures;
}

export async function runReconnect(report: Report, pki: TestPki, quick: boolean): Promise<void> {
  const section = 'Reconnect';
  if (!anpBinDir) return report.note(`reconnect: needs the Go proxy-server; skipped: ${goReferenceNote}`);
  const cycles = quick ? 5 : 15;
  const go = await measure(pki, startGoAgent, cycles);
  const ours = await measure(pki, startOurAgent, cycles);
  const subject = 'ours vs Go agent, behind the Go proxy-server (grpc)';
  const baseline = (value: number) => ({ subject: 'Go agent', value });
  report.add({
    section,
    metric: `server restart: old server exited -> server holds the agent again, median of ${cycles}`,
    subject,
    value: median(ours.fromExit),
    unit: 'ms',
    baseline: baseline(median(go.fromExit)),
    target: { text: 'no slower than the Go agent', met: median(ours.fromExit) <= median(go.fromExit) * 1.05 },
  });
  report.add({
    section,
    metric: `server restart: new server healthy -> holds the agent, median of ${cycles}`,
    subject,
    value: median(ours.fromHealthy),
    unit: 'ms',
    baseline: baseline(median(go.fromHealthy)),
  });
  report.add({
    section,
    metric: `TCP connections to the server's agent port after ${cycles} restarts`,
    subject,
    value: ours.sockets,
    unit: 'connections',
    baseline: baseline(go.sockets),
    target: { text: 'exactly 1', met: ours.sockets === 1 },
  });
  report.add({
    section,
    metric: 'connection attempts in the 10 s after the server went away (a server that stays down)',
    subject,
    value: ours.knocks,
    unit: 'attempts',
    baseline: baseline(go.knocks),
    note: "ours: a random share of 1/2 --sync-interval after losing its last server, then the Go agent's x1.5 backoff",
  });
}
