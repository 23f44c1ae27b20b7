// Bursts of concurrent downloads (target -> agent -> hub -> client: many `kubectl logs`, `exec`, `cp`
// at once): 1, 16, 100 and 1000 streams started together through the Go proxy-server v0.36's HTTP
// CONNECT frontend (mTLS, as cluster-proxy runs it), the Go agent and ours in turn behind it, then
// ours again inside a 256 MiB memory cgroup, as the DaemonSet limits it. Every stream's bytes are
// checked one by one against what the target sent (burst-content.ts): a stream that arrives short
// or wrong fails the target "every stream whole", whatever else the run shows. The target gives up
// on a reader that takes nothing for 60 s, as nginx's send_timeout does, so an agent that leaves one
// target unread that long shows up as a short stream. Figures: the burst's wall time, its slowest
// stream, the agent's CPU seconds per GiB and peak RSS (VmHWM, reset before each burst), the longest
// the target waited for a read, and how long the kernel's TCP memory was under pressure.
import { readFileSync, writeFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import type { Duplex } from 'node:stream';
import { memoryCgroup } from '../test/support/cgroup.js';
import { burstRequest, StreamCheck } from './burst-content.js';
import {
  type AgentProc,
  hubRoute,
  type Proc,
  type Route,
  spawnNode,
  startGoAgent,
  startGoHub,
  startOurAgent,
  type TestPki,
} from './env.js';
import { MiB, type Report } from './report.js';
import { fmt } from './row.js';

const section = 'Bursts';
/** nginx's send_timeout: what a real target allows a reader that takes nothing. */
const targetSendTimeoutMs = 60_000;

/** The target process: its address, and what it saw of the last burst. */
interface BurstTarget {
  address: string;
  /** Clears the figures before a burst; resolves with those of the one before. */
  reset(): Promise<TargetStats>;
  stats(): Promise<TargetStats>;
  proc: Proc;
}

interface TargetStats {
  /** The longest a write of the target waited for its reader, ms. */
  longestWaitMs: number;
  /** Connections the target gave up on (nothing taken for its send timeout). */
  timeouts: number;
}

async function startBurstTarget(): Promise<BurstTarget> {
  const proc = spawnNode(
    'burst-target',
    'bench/burst-target.ts',
    [`--send-timeout=${targetSendTimeoutMs}`],
    undefined,
    'pipe',
  );
  const port = Number(await proc.firstLine());
  const waiting: Array<(s: TargetStats) => void> = [];
  createInterface({ input: proc.child.stdout! }).on('line', (line) => {
    if (line.startsWith('{')) waiting.shift()?.(JSON.parse(line) as TargetStats);
  });
  const ask = (command: string) =>
    new Promise<TargetStats>((resolve) => {
      waiting.push(resolve);
      proc.child.stdin!.write(`${command}\n`);
    });
  return { address: `127.0.0.1:${port}`, reset: () => ask('reset'), stats: () => ask('stats'), proc };
}

interface BurstResult {
  wallS: number;
  slowestS: number;
  /** Streams that did not arrive whole, each said. */
  broken: string[];
  cpuPerGiB: number;
  peakRss: number;
  target: TargetStats;
  /** Seconds the kernel's TCP memory was under pressure during the burst (all sockets of the machine). */
  tcpPressureS: number;
}

/** TcpExt's TCPMemoryPressuresChrono: milliseconds the kernel's TCP memory has been under pressure. */
function tcpPressureMs(): number {
  const lines = readFileSync('/proc/net/netstat', 'utf8').split('\n');
  const names = lines.find((l) => l.startsWith('TcpExt:'))?.split(' ') ?? [];
  const values = lines.filter((l) => l.startsWith('TcpExt:'))[1]?.split(' ') ?? [];
  const at = names.indexOf('TCPMemoryPressuresChrono');
  return at < 0 ? 0 : Number(values[at] ?? 0);
}

/** One download of `check.bytes`; resolves when it ends, however it ends (the check says how). */
function download(route: Route, target: string, check: StreamCheck): Promise<number> {
  const started = performance.now();
  return new Promise((resolve) => {
    let conn: Duplex | undefined;
    const done = () => {
      conn?.destroy();
      resolve((performance.now() - started) / 1000);
    };
    route.dial(target).then(
      (c) => {
        conn = c;
        c.on('data', (chunk: Buffer) => check.push(chunk));
        c.once('end', done);
        c.once('error', (err: Error) => {
          check.fail(`error after ${check.received} bytes: ${err.message}`);
          done();
        });
        c.once('close', done);
        c.write(burstRequest(check.bytes, check.offset));
      },
      (err: Error) => {
        check.fail(`dial failed: ${err.message}`);
        done();
      },
    );
  });
}

/** `streams` downloads of `bytesEach`, all started at once, through `route` and `agent`. */
async function burst(
  route: Route,
  target: BurstTarget,
  agent: AgentProc,
  streams: number,
  bytesEach: number,
): Promise<BurstResult> {
  await target.reset();
  writeFileSync(`/proc/${agent.proc.pid}/clear_refs`, '5'); // VmHWM starts again from the RSS of now
  const cpu0 = agent.proc.cpuSeconds();
  const pressure0 = tcpPressureMs();
  const started = performance.now();
  const checks = Array.from({ length: streams }, (_, i) => new StreamCheck(bytesEach, i * 4099));
  const times = await Promise.all(checks.map((c) => download(route, target.address, c)));
  const wallS = (performance.now() - started) / 1000;
  return {
    wallS,
    slowestS: Math.max(...times),
    broken: checks.flatMap((c, i) => (c.whole ? [] : [`stream ${i}: ${c.describe()}`])),
    cpuPerGiB: (agent.proc.cpuSeconds() - cpu0) / ((streams * bytesEach) / 2 ** 30),
    peakRss: agent.proc.memory().hwm,
    target: await target.stats(),
    tcpPressureS: (tcpPressureMs() - pressure0) / 1000,
  };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) / 2)]!;
const seconds = (xs: number[]) => xs.map((x) => fmt(x)).join(', ');

function describe(who: string, r: BurstResult): string {
  return `${who}: ${fmt(r.wallS)} s, slowest ${fmt(r.slowestS)} s, ${fmt(r.cpuPerGiB)} CPU s/GiB, peak RSS ${fmt(r.peakRss / MiB)} MiB, target waited up to ${fmt(r.target.longestWaitMs / 1000)} s, TCP memory pressure ${fmt(r.tcpPressureS)} s, ${r.broken.length} not whole${r.broken.length ? ` (${r.broken.slice(0, 3).join('; ')})` : ''}`;
}

export async function runBursts(report: Report, pki: TestPki, quick: boolean): Promise<void> {
  const rounds = Number(process.env.BENCH_BURST_ROUNDS ?? (quick ? 1 : 3));
  const shapes = quick
    ? [
        { streams: 16, bytes: 4 * MiB, rounds: 1 },
        { streams: 1000, bytes: 2 * MiB, rounds },
      ]
    : [
        { streams: 1, bytes: 64 * MiB, rounds: 2 },
        { streams: 16, bytes: 16 * MiB, rounds: 2 },
        { streams: 100, bytes: 4 * MiB, rounds: 2 },
        { streams: 1000, bytes: 2 * MiB, rounds },
      ];
  const hub = await startGoHub(pki, 'http-connect');
  const target = await startBurstTarget();
  const route = hubRoute(section, pki, hub, 'http-connect');
  let checked = 0;
  const broken: string[] = [];
  const measure = async (
    who: 'ours' | 'go',
    streams: number,
    bytes: number,
    wrap?: Parameters<typeof startOurAgent>[3],
  ) => {
    const agent = who === 'go' ? await startGoAgent(pki, hub) : await startOurAgent(pki, hub, [], wrap);
    try {
      const r = await burst(route, target, agent, streams, bytes);
      checked += streams;
      broken.push(...r.broken.map((b) => `${who}, ${streams} streams: ${b}`));
      console.log(
        `   ${streams} x ${bytes / MiB} MiB, ${describe(who === 'go' ? 'Go agent' : wrap ? 'ours in 256 MiB' : 'ours', r)}`,
      );
      return r;
    } finally {
      await agent.proc.stop();
      // The Go proxy-server forgets an agent a moment after its stream ends.
      await new Promise((r) => setTimeout(r, 300));
    }
  };
  try {
    for (const { streams, bytes, rounds: n } of shapes) {
      const pairs: Array<{ ours: BurstResult; go: BurstResult }> = [];
      for (let i = 0; i < n; i++) {
        // Which goes first alternates: neither always runs on what the other left behind.
        if (i % 2 === 0) {
          const go = await measure('go', streams, bytes);
          pairs.push({ go, ours: await measure('ours', streams, bytes) });
        } else {
          const ours = await measure('ours', streams, bytes);
          pairs.push({ ours, go: await measure('go', streams, bytes) });
        }
      }
      addBurstRows(report, streams, bytes, pairs);
    }
    const cgroup = memoryCgroup(256 * MiB, `spoke-agent-bench-burst-${process.pid}`);
    if (typeof cgroup === 'string') report.note(`Bursts inside a 256 MiB memory cgroup skipped: ${cgroup}`);
    else {
      try {
        const inside: BurstResult[] = [];
        for (let i = 0; i < rounds; i++) inside.push(await measure('ours', 1000, 2 * MiB, cgroup.wrap));
        addCgroupRows(report, inside, cgroup.peakBytes(), cgroup.oomKills());
      } finally {
        cgroup.remove();
      }
    }
    report.add({
      section,
      metric: `streams not whole, of ${checked} checked byte by byte (every burst of this section, both agents)`,
      subject: 'ours and the Go agent',
      value: broken.length,
      unit: 'streams',
      target: { text: '0', met: broken.length === 0 },
      note: broken.length ? broken.slice(0, 5).join('; ') : undefined,
    });
  } finally {
    await target.proc.stop();
    await hub.proc.stop();
  }
}

function addBurstRows(
  report: Report,
  streams: number,
  bytes: number,
  pairs: Array<{ ours: BurstResult; go: BurstResult }>,
): void {
  const shape = `${streams} concurrent download${streams > 1 ? 's' : ''} of ${bytes / MiB} MiB`;
  const big = streams >= 1000;
  const ours = (f: (r: BurstResult) => number) => pairs.map((p) => f(p.ours));
  const go = (f: (r: BurstResult) => number) => pairs.map((p) => f(p.go));
  const runs = (f: (r: BurstResult) => number) =>
    `runs: ours ${seconds(ours(f))}, Go ${seconds(go(f))}; TCP memory pressure ${seconds(ours((r) => r.tcpPressureS))} s with ours, ${seconds(go((r) => r.tcpPressureS))} with Go`;
  const everyRun = (f: (r: BurstResult) => number) => pairs.every((p) => f(p.ours) <= f(p.go));
  report.add({
    section,
    metric: `${shape}: wall time, median of ${pairs.length}`,
    subject: 'ours behind the Go proxy-server v0.36 (http-connect, mTLS)',
    value: median(ours((r) => r.wallS)),
    unit: 's',
    baseline: { subject: 'Go agent', value: median(go((r) => r.wallS)) },
    target: big ? { text: 'no slower than the Go agent in every run', met: everyRun((r) => r.wallS) } : undefined,
    note: runs((r) => r.wallS),
  });
  report.add({
    section,
    metric: `${shape}: slowest stream, median of ${pairs.length}`,
    subject: 'ours behind the Go proxy-server v0.36 (http-connect, mTLS)',
    value: median(ours((r) => r.slowestS)),
    unit: 's',
    baseline: { subject: 'Go agent', value: median(go((r) => r.slowestS)) },
    target: big
      ? { text: "no slower than the Go agent's slowest in every run", met: everyRun((r) => r.slowestS) }
      : undefined,
  });
  report.add({
    section,
    metric: `${shape}: agent CPU per GiB, median of ${pairs.length}`,
    subject: 'ours',
    value: median(ours((r) => r.cpuPerGiB)),
    unit: 's/GiB',
    baseline: { subject: 'Go agent', value: median(go((r) => r.cpuPerGiB)) },
  });
  const peak = Math.max(...ours((r) => r.peakRss)) / MiB;
  report.add({
    section,
    metric: `${shape}: agent peak RSS, the most of ${pairs.length}, no memory limit`,
    subject: 'ours',
    value: peak,
    unit: 'MiB',
    baseline: { subject: 'Go agent', value: Math.max(...go((r) => r.peakRss)) / MiB },
    target: big ? { text: '<= 128 MiB', met: peak <= 128 } : undefined,
  });
  report.add({
    section,
    metric: `${shape}: the longest the target waited for the agent to read it, the most of ${pairs.length}`,
    subject: 'ours',
    value: Math.max(...ours((r) => r.target.longestWaitMs)) / 1000,
    unit: 's',
    baseline: { subject: 'Go agent', value: Math.max(...go((r) => r.target.longestWaitMs)) / 1000 },
  });
}

function addCgroupRows(report: Report, inside: BurstResult[], cgroupPeak: number, oomKills: number): void {
  const shape = '1000 concurrent downloads of 2 MiB, ours in a 256 MiB memory cgroup';
  const peak = Math.max(...inside.map((r) => r.peakRss)) / MiB;
  report.add({
    section,
    metric: `${shape}: agent peak RSS, the most of ${inside.length}`,
    subject: 'ours',
    value: peak,
    unit: 'MiB',
    target: { text: '<= 128 MiB', met: peak <= 128 },
    note: `cgroup peak (page cache and socket buffers included) ${fmt(cgroupPeak / MiB)} MiB; wall times ${seconds(inside.map((r) => r.wallS))} s`,
  });
  report.add({
    section,
    metric: `${shape}: OOM kills`,
    subject: 'ours',
    value: oomKills,
    unit: 'kills',
    target: { text: 'none', met: oomKills === 0 },
  });
}
