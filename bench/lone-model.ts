// `npm run bench:model`: issue 42's trade-off as a model, not a measurement (seconds, no binaries). The
// fleet bench (fleet.ts) measures a lone agent behind haproxy regaining a server that was down 2 s, and
// a fleet's attempts while a server is down 20 s; this replays both with the balancer reduced to what
// decides them, to ask what any timing of attempts could reach: each attempt lands on the missing server
// with a chance p (else on a held one: a duplicate). What happens to one that lands there while it is
// down is what the fleet bench's BENCH_FLEET_DOWN sets: `held`, haproxy's default, retries it a second
// apart three times and connects it at the first retry after the server is back, or gives up;
// `refused` refuses it at once; `removed` sends none there (a health check took the server out). Our
// agent's waits come from agent/sync-policy.ts itself, the Go agent's from its loop (a ~1 s tick; the
// k8s backoff after an error, reset by a duplicate). The figures it prints, beside the fleet bench's
// measured ones, are in bench/README.md ("Fleet, the trade-off as a model").
import { type AttemptOutcome, SyncPolicy } from '../agent/sync-policy.js';
import { Backoff } from '../clock/backoff.js';
import { seededRandom } from '../test/support/seeded-random.js';
import { type DownServer, downServers } from './down-server.js';
import { percentile } from './report.js';

/** When an agent that lost one of its servers at t = 0 (seconds) makes its attempts. */
interface Searcher {
  first(): number;
  /** The next attempt's start, after one that started at `start`, ended at `end`, with `outcome`. */
  next(start: number, end: number, outcome: AttemptOutcome): number;
}

type Policy = { name: string; searcher: (random: () => number) => Searcher };

const ours: Policy = {
  name: 'ours (agent/sync-policy.ts)',
  searcher: (random) => {
    const policy = new SyncPolicy({ intervalMs: 1000, capMs: 10_000, random });
    return {
      first: () => policy.afterLoss(true) / 1000,
      // clientset.ts counts the wait from the attempt's start: one that hung has waited already.
      next: (start, end, outcome) => Math.max(end, start + policy.after(outcome, true, (end - start) * 1000) / 1000),
    };
  },
};

const goAgent: Policy = {
  name: 'the Go agent',
  searcher: (random) => {
    const backoff = new Backoff({ initialMs: 1000, capMs: 10_000 }, random);
    return {
      // Its tick runs whether or not anything is missing, so the first look after a loss is at a random
      // phase of it.
      first: () => (random() * backoff.steady()) / 1000,
      next: (_start, end, outcome) => {
        if (outcome !== 'failed') backoff.reset();
        return end + (outcome === 'failed' ? backoff.next() : backoff.steady()) / 1000;
      },
    };
  },
};

/** An attempt every 1/r s from a random phase, whatever the outcome: the flattest a fleet's rate can be. */
const flat = (r: number): Policy => ({
  name: `every ${(1 / r).toFixed(2)} s`,
  searcher: (random) => ({
    first: () => random() / r,
    next: (start, end) => Math.max(end, start + 1 / r),
  }),
});

/**
 * The shape of sync-policy.ts with its numbers free (s): the first look spread over `spread` with a
 * falling density, the first duplicate's wait `firstDup[0]` plus up to `firstDup[1]`, later ones
 * `laterDup` (+10 %), a refusal's `refusal` plus up to 3.
 */
interface Shape {
  spread: number;
  firstDup: [number, number];
  laterDup: number;
  refusal: number;
}

const shaped = (x: Shape): Policy => ({
  name: `spread ${x.spread}, dup ${x.firstDup.join('+')} then ${x.laterDup}, refusal ${x.refusal}+3`,
  searcher: (random) => {
    let attempts = 0;
    return {
      first: () => x.spread * (1 - Math.sqrt(1 - random())),
      next: (start, end, outcome) => {
        const first = attempts++ === 0;
        const wait =
          outcome === 'failed'
            ? x.refusal + 3 * random()
            : first
              ? x.firstDup[0] + x.firstDup[1] * random()
              : x.laterDup * (1 + 0.1 * random());
        return Math.max(end, start + wait);
      },
    };
  },
});

interface Balancer {
  /** The chance that an attempt goes to the missing server. */
  p: number;
  /** The missing server is back at this time (s). */
  backAt: number;
  down: DownServer;
}

const handshake = 0.005;
const haproxyRetries = 3;

/** One attempt's end and outcome. */
function attempt(start: number, b: Balancer, random: () => number): { end: number; outcome: AttemptOutcome } {
  const isDown = start < b.backAt;
  if ((isDown && b.down === 'removed') || random() >= b.p) return { end: start + handshake, outcome: 'duplicate' };
  if (!isDown) return { end: start + handshake, outcome: 'connected' };
  if (b.down === 'refused') return { end: start + handshake, outcome: 'failed' };
  const retry = Math.ceil(b.backAt - start);
  return retry <= haproxyRetries
    ? { end: start + retry + handshake, outcome: 'connected' }
    : { end: start + haproxyRetries, outcome: 'failed' };
}

/** One agent until it connects: its attempts' starts, and when it connected. */
function search(policy: Policy, b: Balancer, random: () => number): { starts: number[]; back: number } {
  const s = policy.searcher(random);
  const starts: number[] = [];
  let t = s.first();
  for (;;) {
    starts.push(t);
    const { end, outcome } = attempt(t, b, random);
    if (outcome === 'connected') return { starts, back: end };
    t = s.next(t, end, outcome);
  }
}

/** The fleet bench's lone rows: five servers behind haproxy's `random` (two draws, the idle one wins), down 2 s. */
const lone = (down: DownServer): Balancer => ({ p: 1 - (4 / 5) ** 2, backAt: 2, down });
/** Its fleet: three servers behind round-robin, one down 20 s. */
const fleet = (down: DownServer): Balancer => ({ p: 1 / 3, backAt: 20, down });
const fleetSize = 100;

function loneMedian(policy: Policy, b: Balancer, random: () => number, samples: number): number {
  return percentile(
    Array.from({ length: samples }, () => search(policy, b, random).back - b.backAt),
    50,
  );
}

/** Most attempts in any 1 s, mean over fleets; and the time from the server's return until all are back. */
function fleetFigures(
  policy: Policy,
  b: Balancer,
  random: () => number,
  fleets: number,
): { peak: number; allBack: number } {
  const runs = Array.from({ length: fleets }, () => {
    const agents = Array.from({ length: fleetSize }, () => search(policy, b, random));
    const starts = agents.flatMap((a) => a.starts).sort((x, y) => x - y);
    let peak = 0;
    for (let i = 0, j = 0; i < starts.length; i++) {
      while (starts[j]! <= starts[i]! - 1) j++;
      peak = Math.max(peak, i - j + 1);
    }
    return { peak, allBack: Math.max(...agents.map((a) => a.back)) - b.backAt };
  });
  const mean = (xs: number[]) => xs.reduce((x, y) => x + y, 0) / xs.length;
  return { peak: mean(runs.map((r) => r.peak)), allBack: mean(runs.map((r) => r.allBack)) };
}

const random = seededRandom(42);
type Figures = { lone: number; peak: number; allBack: number };
const figures = (policy: Policy, down: DownServer, samples = 20_000, fleets = 200): Figures => ({
  lone: loneMedian(policy, lone(down), random, samples),
  ...fleetFigures(policy, fleet(down), random, fleets),
});
const show = (name: string, f: Figures, go?: Figures) => {
  const x = (k: keyof Figures) => (go ? ` x${(f[k] / go[k]).toFixed(2)}` : '');
  console.log(
    `  ${name.padEnd(52)} lone ${f.lone.toFixed(2)}${x('lone')}  fleet peak ${f.peak.toFixed(0)}${x('peak')}  all back ${f.allBack.toFixed(1)}${x('allBack')}`,
  );
};
console.log(
  `lone: one agent, five servers behind haproxy random (p ${lone('held').p.toFixed(2)}), one down 2 s: median s from its return`,
);
console.log(
  `fleet: ${fleetSize} agents, three servers behind round-robin, one down 20 s: peak attempts in 1 s, s from its return until all are back`,
);
const goFigures = Object.fromEntries(downServers.map((down) => [down, figures(goAgent, down)])) as Record<
  DownServer,
  Figures
>;
for (const down of downServers) {
  console.log(`BENCH_FLEET_DOWN=${down}:`);
  show(goAgent.name, goFigures[down]);
  for (const policy of [ours, ...[0.6, 0.72, 0.8, 0.9, 1].map(flat)])
    show(policy.name, figures(policy, down), goFigures[down]);
}

// --search: every shape of a grid around sync-policy.ts's numbers, behind haproxy's default (the
// issue's rig); the best lone medians among those whose fleet peak is within 0.78x the Go fleet's
// (fewer samples each).
if (process.argv.includes('--search')) {
  const go = goFigures.held;
  const found: Array<{ lone: number; peak: number; line: () => void }> = [];
  for (const spread of [1.5, 2, 2.5, 3, 4])
    for (const firstDup of [
      [0.5, 0.5],
      [0.7, 0.6],
      [1, 1],
      [0.5, 1],
    ] as Array<[number, number]>)
      for (const laterDup of [0.6, 0.8, 1, 1.3])
        for (const refusal of [3, 5]) {
          const policy = shaped({ spread, firstDup, laterDup, refusal });
          const f = figures(policy, 'held', 10_000, 100);
          found.push({ lone: f.lone / go.lone, peak: f.peak / go.peak, line: () => show(policy.name, f, go) });
        }
  console.log(`\nof ${found.length} shapes, the quickest lone medians with the fleet peak <= 0.78x:`);
  for (const s of found
    .filter((s) => s.peak <= 0.78)
    .sort((a, b) => a.lone - b.lone)
    .slice(0, 8))
    s.line();
}
