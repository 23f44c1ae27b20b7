// `npm run bench [-- --quick] [section ...]`: runs the sections (all by default), prints each figure
// next to its same-run baseline, and writes bench/results/latest.{json,md}. Loopback only; every
// process it starts is stopped by PID; a watchdog ends a run that overstays its time budget.
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { runBursts } from './burst.js';
import { runChurn } from './churn.js';
import { anpBinDir, goReferenceNote, makePki, startTargets } from './env.js';
import { runDialLog } from './dial-log.js';
import { runDns } from './dns.js';
import { runFleet } from './fleet.js';
import { runHubCost } from './hub-cost.js';
import { runIdle } from './idle.js';
import { runLatency } from './latency.js';
import { runNetFaults } from './net-faults.js';
import { writeReadmeSection } from './readme-section.js';
import { runReconnect } from './reconnect.js';
import { Report, targetsTable } from './report.js';
import { runScale } from './scale.js';
import { runSlowConsumer } from './slow-consumer.js';
import { Subjects } from './subjects.js';
import { runThroughput } from './throughput.js';

const sections = [
  'idle',
  'throughput',
  'latency',
  'dial-log',
  'scale',
  'slow',
  'dns',
  'reconnect',
  'hubcost',
  'burst',
  'churn',
  'fleet',
  'netfaults',
] as const;
type Section = (typeof sections)[number];
/** Minutes long: only when named. */
const optIn: readonly Section[] = ['churn', 'fleet', 'netfaults'];

const args = process.argv.slice(2);
const quick = args.includes('--quick');
const unknown = args.filter((a) => a !== '--quick' && !(sections as readonly string[]).includes(a));
if (unknown.length) {
  console.error(
    `bench: unknown argument(s) ${unknown.join(' ')}; usage: npm run bench -- [--quick] [${sections.join('|')} ...]`,
  );
  process.exit(2);
}
const chosen = new Set<Section>(args.filter((a): a is Section => (sections as readonly string[]).includes(a)));
const wanted = (s: Section) => chosen.has(s) || (chosen.size === 0 && !optIn.includes(s));

// The watchdog's budget: a full run takes ~20 min on 2 cores (bench/README.md), --quick ~4; the rest is
// room for a busy machine, plus the opt-in sections' own minutes.
const budgetMs = ((quick ? 8 : 35) + (chosen.has('fleet') ? 20 : 0) + (chosen.has('netfaults') ? 15 : 0)) * 60_000;
const watchdog = setTimeout(() => {
  console.error(`bench: still running after ${budgetMs / 60_000} min, giving up`);
  void cleanup().finally(() => process.exit(1));
}, budgetMs);

const started = performance.now();
const report = new Report();
const pki = makePki();
const targets = await startTargets();
const subjects = new Subjects(pki);
const cleanup = async () => {
  await subjects.close();
  await targets.close();
};
process.once('SIGINT', () => void cleanup().finally(() => process.exit(130)));

console.log(
  `bench: ${quick ? 'quick, ' : ''}sections ${sections.filter(wanted).join(', ')}; Go reference: ${goReferenceNote}`,
);
let failed = false;
const run = async (name: Section, fn: () => Promise<void>) => {
  if (!wanted(name)) return;
  console.log(`\n== ${name}`);
  const t = performance.now();
  try {
    await fn();
  } catch (err) {
    failed = true;
    report.note(`section ${name} failed: ${(err as Error).stack ?? err}`);
  }
  console.log(`   (${((performance.now() - t) / 1000).toFixed(0)} s)`);
};
try {
  // First: the later sections leave thousands of loopback ports in use, and a DNS server on port 0
  // binds UDP and TCP on the same number.
  await run('idle', () => runIdle(report, pki));
  await run('dns', () => runDns(report, quick));
  await run('throughput', () => runThroughput(report, subjects, targets, quick));
  await run('latency', () => runLatency(report, subjects, targets, quick));
  await run('dial-log', () => runDialLog(report, pki, targets, quick));
  await run('slow', () => runSlowConsumer(report, subjects, targets, quick));
  await run('scale', () => runScale(report, pki, quick));
  await run('reconnect', () => runReconnect(report, pki, quick));
  await run('hubcost', () => runHubCost(report, pki, quick));
  await run('burst', () =>
    anpBinDir
      ? runBursts(report, pki, quick)
      : Promise.resolve(report.note(`Bursts skipped: no Go reference binaries (${goReferenceNote})`)),
  );
  await run('churn', () => runChurn(report, pki, targets, quick));
  await run('fleet', () => runFleet(report, pki, quick));
  await run('netfaults', () => runNetFaults(report));
} finally {
  await cleanup();
  clearTimeout(watchdog);
}
/** The commit measured, `-dirty` when tracked files differ from it; undefined outside a git clone. */
function measuredCommit(): string | undefined {
  try {
    const git = (...a: string[]) => execFileSync('git', a, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
    const head = git('rev-parse', '--short', 'HEAD').trim();
    return git('status', '--porcelain', '--untracked-files=no').trim() ? `${head}-dirty` : head;
  } catch {
    return undefined;
  }
}
const dir = fileURLToPath(new URL('results/', import.meta.url));
// latest.* and README.md's table come from full runs only: a partial or quick run would not stand for
// the agent (partial.* is ignored by git).
const full = !quick && chosen.size === 0;
const name = full ? 'latest' : 'partial';
report.write(
  dir,
  name,
  args,
  (performance.now() - started) / 1000,
  { found: anpBinDir !== undefined, note: goReferenceNote },
  measuredCommit(),
);
console.log(`\ntargets:\n${targetsTable(report.rows).join('\n')}`);
if (full) writeReadmeSection();
console.log(
  `\nbench: wrote ${dir}${name}.json and ${name}.md in ${((performance.now() - started) / 1000).toFixed(0)} s`,
);
process.exit(failed ? 1 : 0);
