// `npm run bench -- netfaults` (root, the Go v0.36 binaries): how an agent recovers when the path to the
// hub fails, ours against the Go v0.36 agent in the same run, in a network namespace of the bench's own
// (test/support/net-faults-lab.ts): the Go proxy-server (http-connect) as the hub, iptables making the
// faults on the agent port, and a client fetching a page through the hub every 2 s all along.
// 1. silent loss of the established flow, idle (the hub dials during the outage: order a; or first
//    after the agent reconnected: order b) and with a download running at the loss;
// 2. a 60 s blackhole of the agent port, then healed; 3. 10 % random loss for 60 s under a 64 MiB
// download and 50 small dials; 4. the hub moves: its name re-pointed, the old address blackholed.
import { HostsFile } from '../test/support/hosts-file.js';
import {
  hubName,
  Lab,
  labUnavailable,
  ourFaultFlags,
  type AgentKind,
  type LabAgent,
} from '../test/support/net-faults-lab.js';
import type { Fetch } from '../test/support/netns-client.js';
import { MiB, percentile, type Report } from './report.js';
import { fmt } from './row.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const median = (xs: number[]) => percentile(xs, 50);
const runs = Number(process.env.BENCH_NF_RUNS ?? 1);
/** Seconds a recovery may take before the run gives up on it (and shows the limit). */
const capS = Number(process.env.BENCH_NF_CAP_S ?? 60);
/** BENCH_NF_ONLY=blackhole,moved runs only those scenarios (silent, blackhole, lossy, moved). */
const only = process.env.BENCH_NF_ONLY?.split(',');
const want = (scenario: 'silent' | 'blackhole' | 'lossy' | 'moved') => !only || only.includes(scenario);

/** What one run saw, in seconds from the fault (undefined: not within the cap). */
interface Times {
  /** The agent's old connection gone from `ss` (it noticed and closed it). */
  noticed?: number;
  /** The agent holds a new connection. */
  reconnected?: number;
  /** The proxy-server's side of the old connection gone. */
  serverDropped?: number;
  /** A fetch started after the fault came back with the page. */
  hubReached?: number;
  /** Seconds /readyz was not 200. */
  notReadyS: number;
  /** Fetches that failed before the first success. */
  failedFetches: number;
}

/** The connections before the fault, agent's side and server's: what "old" means for a run. */
interface Old {
  local: Set<string>;
  server: Set<string>;
}
const before = (lab: Lab, agent: LabAgent): Old => ({
  local: new Set(agent.flows().map((f) => f.local)),
  server: new Set(lab.serverSideFlows().map((f) => f.peer)),
});

/**
 * Polls the agent's connections, the server's side of the old one and /readyz every 100 ms from the
 * fault at `t0` until `done` says enough, while the fetch loop runs (from t0, or in order b from the
 * reconnect); times relative to `from` (the fault, or the heal).
 */
async function watch(
  lab: Lab,
  agent: LabAgent,
  o: { t0: number; from: number; order: 'a' | 'b'; newAt?: string; until: (t: Times) => boolean; old?: Old },
): Promise<Times> {
  const { local: oldLocal, server: oldServer } = o.old ?? before(lab, agent);
  const times: Times = { notReadyS: 0, failedFetches: 0 };
  const since = () => (performance.now() - o.from) / 1000;
  const fetches: Promise<Fetch>[] = [];
  let fetching = o.order === 'a';
  let nextFetch = o.t0;
  let lastPoll = performance.now();
  const deadline = o.from + capS * 1000;
  while (performance.now() < deadline && !o.until(times)) {
    const now = performance.now();
    if (fetching && now >= nextFetch) {
      nextFetch += 2000;
      const f = lab.fetchPage(30_000);
      fetches.push(f);
      void f.then((r) => {
        if (r.ok && times.hubReached === undefined) times.hubReached = (r.end - o.from) / 1000;
        else if (!r.ok && times.hubReached === undefined) times.failedFetches++;
      });
    }
    const flows = agent.flows(o.newAt);
    const all = o.newAt === undefined ? flows : agent.flows();
    if (times.noticed === undefined && !all.some((f) => oldLocal.has(f.local))) times.noticed = since();
    if (times.reconnected === undefined && flows.some((f) => !oldLocal.has(f.local))) {
      times.reconnected = since();
      if (!fetching) {
        fetching = true;
        nextFetch = performance.now();
      }
    }
    if (times.serverDropped === undefined && !lab.serverSideFlows().some((f) => oldServer.has(f.peer)))
      times.serverDropped = since();
    const ready = (await agent.readyz()) === 200;
    const t = performance.now();
    if (!ready) times.notReadyS += (t - lastPoll) / 1000;
    lastPoll = t;
    await sleep(100);
  }
  return times;
}

async function silentLoss(lab: Lab, kind: AgentKind, busy: boolean, order: 'a' | 'b'): Promise<Times> {
  const agent = await lab.startAgent(kind);
  const stop = new AbortController();
  try {
    if (!(await lab.fetchPage()).ok) throw new Error(`${kind}: no fetch through the hub before the fault`);
    let download: Promise<Fetch> | undefined;
    if (busy) {
      let got = 0;
      download = lab.download(64 * 1024 * MiB, { timeoutMs: 600_000, onBytes: (n) => (got = n), signal: stop.signal });
      while (got < 16 * MiB) await sleep(20);
    }
    const t0 = performance.now();
    lab.faults.silentLoss(agent.flows());
    const times = await watch(lab, agent, { t0, from: t0, order, until: (t) => t.hubReached !== undefined });
    stop.abort();
    await download;
    return times;
  } finally {
    lab.faults.heal();
    await lab.stopAgent(agent);
  }
}

async function blackhole(lab: Lab, kind: AgentKind): Promise<Times & { syns: number }> {
  const agent = await lab.startAgent(kind);
  try {
    // Taken before the fault: a SYN retransmitted at the heal may connect before the second watch starts.
    const old = before(lab, agent);
    const t0 = performance.now();
    lab.faults.blackhole();
    const during = await watch(lab, agent, {
      t0,
      from: t0,
      order: 'a',
      until: () => performance.now() - t0 > 60_000,
      old,
    });
    const syns = lab.faults.synCount();
    const healed = performance.now();
    lab.faults.heal();
    const after = await watch(lab, agent, {
      t0: healed,
      from: healed,
      order: 'a',
      until: (t) => t.hubReached !== undefined && t.reconnected !== undefined,
      old,
    });
    return {
      ...after,
      noticed: during.noticed,
      serverDropped: during.serverDropped,
      notReadyS: during.notReadyS + after.notReadyS,
      failedFetches: during.failedFetches + after.failedFetches,
      syns,
    };
  } finally {
    lab.faults.heal();
    await lab.stopAgent(agent);
  }
}

interface Lossy {
  mibPerS: number;
  downloadOk: boolean;
  dialsOk: number;
  reconnects: number;
  syns: number;
}

async function lossy(lab: Lab, kind: AgentKind): Promise<Lossy> {
  const agent = await lab.startAgent(kind);
  const seen = new Set(agent.flows().map((f) => f.local));
  let polling = true;
  const poll = (async () => {
    while (polling) {
      for (const f of agent.flows()) seen.add(f.local);
      await sleep(200);
    }
  })();
  try {
    const t0 = performance.now();
    lab.faults.lossy(0.1);
    const d = await lab.download(64 * MiB, { timeoutMs: 120_000 });
    let dialsOk = 0;
    for (let i = 0; i < 50; i++) if ((await lab.fetchPage(20_000)).ok) dialsOk++;
    const left = 60_000 - (performance.now() - t0);
    if (left > 0) await sleep(left); // the loss lasts its 60 s whatever the transfers took
    const syns = lab.faults.synCount();
    return {
      mibPerS: d.bytes / MiB / ((d.end - d.start) / 1000),
      downloadOk: d.ok,
      dialsOk,
      reconnects: seen.size - 1,
      syns,
    };
  } finally {
    polling = false;
    await poll;
    lab.faults.heal();
    await lab.stopAgent(agent);
  }
}

async function moved(lab: Lab, kind: AgentKind): Promise<Times> {
  const hosts = new HostsFile({ [hubName]: '127.0.0.2' });
  const agent = await lab.startAgent(kind, { host: hubName, hosts });
  try {
    const t0 = performance.now();
    lab.faults.blackhole('127.0.0.2');
    hosts.point(hubName, '127.0.0.3');
    return await watch(lab, agent, {
      t0,
      from: t0,
      order: 'a',
      newAt: '127.0.0.3',
      until: (t) => t.hubReached !== undefined && t.reconnected !== undefined,
    });
  } finally {
    lab.faults.heal();
    await lab.stopAgent(agent);
    hosts.remove();
  }
}

/** A time in seconds, the cap when it did not happen. */
const s = (x: number | undefined) => x ?? capS;
const show = (x: number | undefined) => (x === undefined ? `>${capS}` : fmt(x));

export async function runNetFaults(report: Report): Promise<void> {
  const skipped = labUnavailable();
  if (skipped) return report.note(`netfaults: ${skipped}`);
  const section = 'Network faults';
  const lab = await Lab.start();
  const table: string[] = [
    '| scenario | agent | noticed | reconnected | server dropped old | hub reached | fetches failed | not ready |',
    '|---|---|---:|---:|---:|---:|---:|---:|',
  ];
  // Each run's row as it ends: a run can take minutes.
  const row = (text: string) => {
    table.push(text);
    console.log(`  ${text}`);
  };
  const line = (scenario: string, kind: AgentKind, t: Times) =>
    row(
      `| ${scenario} | ${kind} | ${show(t.noticed)} | ${show(t.reconnected)} | ${show(t.serverDropped)} | ${show(t.hubReached)} | ${t.failedFetches} | ${fmt(t.notReadyS)} s |`,
    );
  const kinds: AgentKind[] = ['ours', 'go'];
  const flagsNote = `ours with ${ourFaultFlags.length ? ourFaultFlags.join(' ') : 'its default flags'}`;
  /** A figure of ours against the Go agent's in the same run. */
  const vsGo = (metric: string, unit: string, ours: number, go: number, target?: { text: string; met: boolean }) =>
    report.add({
      section,
      metric,
      subject: flagsNote,
      value: ours,
      unit,
      baseline: { subject: 'Go v0.36 agent', value: go },
      target,
    });
  try {
    // 1. silent loss
    const cases = [
      { name: 'silent loss, idle, hub dials during the outage (a)', busy: false, order: 'a' as const },
      { name: 'silent loss, idle, first hub dial after the agent reconnected (b)', busy: false, order: 'b' as const },
      { name: 'silent loss, a download running', busy: true, order: 'a' as const },
    ];
    for (const c of want('silent') ? cases : []) {
      const got: Record<AgentKind, Times[]> = { ours: [], go: [] };
      for (let i = 0; i < runs; i++)
        for (const kind of kinds) {
          const t = await silentLoss(lab, kind, c.busy, c.order);
          got[kind].push(t);
          line(c.name, kind, t);
        }
      const m = (kind: AgentKind, k: 'hubReached' | 'reconnected') => median(got[kind].map((t) => s(t[k])));
      vsGo(
        `${c.name}: fault -> agent holds a new connection, median of ${runs}`,
        's',
        m('ours', 'reconnected'),
        m('go', 'reconnected'),
      );
      const worst = Math.max(...got.ours.map((t) => s(t.hubReached)));
      const goBest = Math.min(...got.go.map((t) => s(t.hubReached)));
      vsGo(
        `${c.name}: fault -> the hub's next successful fetch, median of ${runs} (ours worst ${fmt(worst)})`,
        's',
        m('ours', 'hubReached'),
        m('go', 'hubReached'),
        { text: "every run within half the Go agent's best (~11 s)", met: worst <= Math.min(11, goBest / 2) },
      );
    }
    // 2. blackhole, then heal
    if (want('blackhole')) {
      const bh: Partial<Record<AgentKind, Times & { syns: number }>> = {};
      for (const kind of kinds) {
        bh[kind] = await blackhole(lab, kind);
        line('blackhole 60 s (noticed, server dropped: from the fault; the rest from the heal)', kind, bh[kind]!);
      }
      vsGo(
        "blackhole 60 s: heal -> the hub's next successful fetch",
        's',
        s(bh.ours!.hubReached),
        s(bh.go!.hubReached),
        { text: 'no longer than the Go agent', met: s(bh.ours!.hubReached) <= s(bh.go!.hubReached) },
      );
      vsGo('blackhole 60 s: SYNs sent to the agent port during it', 'SYNs', bh.ours!.syns, bh.go!.syns);
    }
    // 3. lossy link
    if (want('lossy')) {
      const lo: Partial<Record<AgentKind, Lossy>> = {};
      for (const kind of kinds) lo[kind] = await lossy(lab, kind);
      for (const kind of kinds) {
        const l = lo[kind]!;
        row(
          `| 10 % loss 60 s | ${kind} | 64 MiB at ${fmt(l.mibPerS)} MiB/s${l.downloadOk ? '' : ' (failed)'}, ${l.dialsOk}/50 dials | reconnects ${l.reconnects} | SYNs ${l.syns} | | | |`,
        );
      }
      vsGo('10 % loss both ways: 64 MiB download through the hub', 'MiB/s', lo.ours!.mibPerS, lo.go!.mibPerS, {
        text: "at least the Go agent's, completed",
        met: lo.ours!.downloadOk && lo.ours!.mibPerS >= lo.go!.mibPerS,
      });
      vsGo('10 % loss both ways: small dials that succeeded, of 50', 'dials', lo.ours!.dialsOk, lo.go!.dialsOk, {
        text: '50 of 50',
        met: lo.ours!.dialsOk === 50,
      });
      vsGo('10 % loss both ways for 60 s: reconnects', 'reconnects', lo.ours!.reconnects, lo.go!.reconnects, {
        text: 'no more than the Go agent',
        met: lo.ours!.reconnects <= lo.go!.reconnects,
      });
    }
    // 4. the hub moves
    if (want('moved')) {
      const mv: Partial<Record<AgentKind, Times>> = {};
      for (const kind of kinds) {
        mv[kind] = await moved(lab, kind);
        line('hub moved (name re-pointed, old address blackholed)', kind, mv[kind]!);
      }
      vsGo(
        'hub moved: fault -> agent holds the hub at the new address',
        's',
        s(mv.ours!.reconnected),
        s(mv.go!.reconnected),
        { text: 'within the silent-loss time (~11 s)', met: s(mv.ours!.reconnected) <= 11 },
      );
      vsGo("hub moved: fault -> the hub's next successful fetch", 's', s(mv.ours!.hubReached), s(mv.go!.hubReached));
    }
  } finally {
    console.log(`\n${table.join('\n')}\n(seconds from the fault unless said; >${capS}: not within the run's limit)`);
    report.note(`netfaults per run:\n${table.join('\n')}`);
    await lab.close();
  }
}
