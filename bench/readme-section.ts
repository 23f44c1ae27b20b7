// bench/README.md's table of the latest results and README.md's Performance list, both generated from
// bench/results/latest.json: `npm run bench` rewrites them after a full run, `npm run bench:readme` from
// the stored results; bench/readme-section.test.ts fails when either README no longer matches them, so
// the figures are never edited by hand.
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { targetsTable } from './report.js';
import { fmt, type Row } from './row.js';

export const readmePath = fileURLToPath(new URL('README.md', import.meta.url));
/** The repository's README.md, whose Performance list is generated here too. */
export const frontReadmePath = fileURLToPath(new URL('../README.md', import.meta.url));
export const resultsPath = fileURLToPath(new URL('results/latest.json', import.meta.url));
const startMarker = '<!-- bench:start -->';
const endMarker = '<!-- bench:end -->';
const performanceStart = '<!-- performance:start -->';
const performanceEnd = '<!-- performance:end -->';

export interface Results {
  started: string;
  /** The commit measured (`git rev-parse --short HEAD`, `-dirty` with uncommitted changes). */
  commit?: string;
  seconds: number;
  args: string[];
  goReference: boolean;
  machine: { cpus: number; cpuModel?: string; node: string };
  rows: Row[];
}

/** What a node pays per idle tunnelled connection, from the scale section's largest step. */
function perConnection(rows: readonly Row[]): string | undefined {
  const growth = rows.filter((r) => r.metric.startsWith('agent memory per idle connection')).at(-1);
  const held = rows.filter((r) => /^agent RSS holding \d+ idle connections$/.test(r.metric)).at(-1);
  if (!growth || !held) return undefined;
  return `Each idle tunnelled connection costs the agent ${fmt(growth.value)} KiB of RSS (${held.metric.replace('agent RSS holding ', '')}: ${fmt(held.value)} MiB); the kernel's socket buffers come on top, outside RSS.`;
}

export function benchSection(results: Results): string {
  const { machine } = results;
  return [
    `From \`npm run bench\` of ${results.started.slice(0, 10)} (${machine.cpus} x ${machine.cpuModel ?? 'CPU'}, Node ${machine.node}, Go reference binaries: ${results.goReference ? 'yes' : 'no'}); each ratio is against a reference measured in the same run.`,
    '',
    ...targetsTable(results.rows),
    '',
    ...[perConnection(results.rows)].filter((l): l is string => l !== undefined),
  ].join('\n');
}

/**
 * Short names for README.md's list, matched against `Section: metric [subject]` (the bench table's
 * figure column); the first match wins. A figure none matches keeps its full name there.
 */
const shortNames: ReadonlyArray<readonly [RegExp, string]> = [
  [/^Idle footprint: RSS, idle \[ours, connected to a hub, no DNS rules\]$/, 'RSS, tunnel only'],
  [/^Idle footprint: RSS, idle \[ours, with rules and the DNS server\]$/, 'RSS with rules and DNS'],
  [
    /^Idle footprint: RSS, idle \[ours, as the DaemonSet runs it.*--count-server-leases/,
    'RSS with --count-server-leases',
  ],
  [/^Idle footprint: RSS, idle \[ours, as the DaemonSet runs it/, 'RSS as the DaemonSet runs it'],
  [/^Idle footprint: RSS, idle: anonymous/, 'of which anonymous (heap, malloc)'],
  [/^Idle footprint: V8 heap used, idle/, 'V8 heap used'],
  [/^Idle footprint: CPU, idle \[/, 'CPU, probed as in a pod'],
  [/^DNS[^:]*: rewritten: queries\/s at saturation \[/, 'rewritten names'],
  [/^DNS[^:]*: rewritten: queries\/s at saturation, vs the C reference/, 'the same'],
  [/^DNS[^:]*: rewritten: mean latency/, 'mean latency at 10k q/s'],
  [/^DNS[^:]*: rewritten: queries\/s at saturation, query log on/, 'with the query log on'],
  [/^DNS[^:]*: forwarded: queries\/s at saturation, vs the C reference/, 'forwarded names'],
  [/^Throughput: download 1024 MiB, 1 stream/, '1 stream'],
  [/^Throughput: download 16 x 64 MiB/, '16 streams'],
  [
    /^Latency and dial rate: added latency per request on an open connection/,
    'added latency over direct TCP, open connection (p50)',
  ],
  [
    /^Latency and dial rate: added latency per request with a new dial/,
    'added latency over direct TCP, new dial (p50)',
  ],
  [/^Latency and dial rate: agent share of a new dial/, "agent's share of a dial"],
  [/^Latency and dial rate: dial rate through the TLS frontend/, 'dial rate, TLS frontend'],
  [/^Latency and dial rate: dial rate through the Unix-socket frontend/, 'dial rate, Unix-socket frontend'],
  [/^Dial log: dial rate/, 'dial rate with the log on (1 B each way, 16 in flight)'],
  [/^Dial log: download/, 'download with the log on (512 MiB, 1 stream)'],
  [/^Scale[^:]*: agent RSS holding (\d+) idle connections/, 'RSS holding $1 idle connections'],
  [/^Reconnect: server restart/, 'restarted server holds the agent again (median)'],
  [/^Reconnect: TCP connections to the server's agent port after (\d+) restarts/, 'connections left after $1 restarts'],
  [
    /^Bursts: (\d+) concurrent downloads of (\d+) MiB: wall time, median of (\d+) \[/,
    '$1 x $2 MiB at once, wall time (median of $3)',
  ],
  [/^Bursts: (\d+) concurrent downloads of (\d+) MiB: slowest stream/, 'its slowest stream'],
  [
    /^Bursts: (\d+) concurrent downloads of (\d+) MiB: agent peak RSS, the most of (\d+), no memory limit/,
    'peak RSS, no memory limit (most of $3)',
  ],
  [
    /^Bursts: \d+ concurrent downloads of \d+ MiB, ours in a 256 MiB memory cgroup: agent peak RSS, the most of (\d+)/,
    'peak RSS inside 256 MiB (most of $1)',
  ],
  [
    /^Bursts: \d+ concurrent downloads of \d+ MiB, ours in a 256 MiB memory cgroup: OOM kills/,
    'OOM kills inside 256 MiB',
  ],
  [/^Bursts: streams not whole, of (\d+) checked/, 'streams not whole, of $1 checked byte by byte'],
];

function shortName(r: Row): string {
  const figure = `${r.section}: ${r.metric} [${r.subject}]`;
  for (const [pattern, name] of shortNames) {
    const m = pattern.exec(figure);
    if (m) return name.replace(/\$(\d)/g, (_, i: string) => m[Number(i)] ?? '');
  }
  return `${r.metric} [${r.subject}]`;
}

/** One figure as README.md says it: value, its same-run reference and ratio, the target when not met. */
function figure(r: Row): string {
  const reference = r.baseline ? ` (${r.baseline.subject}: ${fmt(r.baseline.value)}, x${fmt(r.ratio ?? NaN)})` : '';
  const miss = r.target && !r.target.met ? `, **not met** (target ${r.target.text})` : '';
  return `${shortName(r)} ${fmt(r.value)} ${r.unit}${reference}${miss}`;
}

/** `text` as lines of at most `width`, continued with `indent`; never starting a line with a Markdown marker. */
function wrap(text: string, width: number, indent: string): string[] {
  const lines: string[] = [];
  let line = '';
  for (const word of text.split(' ')) {
    const marker = /^([-+*>|]|#+|\d+[.)])$/.test(word);
    if (line && !marker && line.length + 1 + word.length > width) {
      lines.push(line);
      line = `${indent}${word}`;
    } else line = line ? `${line} ${word}` : word;
  }
  return [...lines, line];
}

/** README.md's Performance list: every figure with a target, by section, with its reference; misses said. */
export function performanceSection(results: Results): string {
  const rows = results.rows.filter((r) => r.target);
  const sections = [...new Set(rows.map((r) => r.section))];
  const missed = rows.filter((r) => !r.target!.met).length;
  const commit = results.commit ? `commit \`${results.commit}\`` : 'a commit it did not record';
  const intro = `From \`npm run bench\` of ${results.started.slice(0, 10)} at ${commit} (${results.machine.cpus} x ${results.machine.cpuModel ?? 'CPU'}), each figure with its reference measured in the same run and the ratio (the Go agent runs behind the Go proxy-server); ${missed} of ${rows.length} targets not met:`;
  const items = sections.map((section) => {
    const figures = rows.filter((r) => r.section === section).map(figure);
    return `- ${section.replace(/ \(.*\)$/, '')}: ${figures.join('; ')}.`;
  });
  return [...wrap(intro, 110, ''), '', ...items.flatMap((item) => wrap(item, 110, '  '))].join('\n');
}

/** `readme` with the text between `start` and `end` replaced by `section`. */
function withSection(readme: string, start: string, end: string, section: string, file: string): string {
  const from = readme.indexOf(start);
  const to = readme.indexOf(end);
  if (from < 0 || to < from) throw new Error(`${file} has no ${start} ... ${end} block`);
  return `${readme.slice(0, from + start.length)}\n${section}\n${readme.slice(to)}`;
}

/** `readme` with the text between the bench markers replaced by `section`. */
export function withBenchSection(readme: string, section: string): string {
  return withSection(readme, startMarker, endMarker, section, 'bench/README.md');
}

/** README.md's text with its Performance list replaced by `section`. */
export function withPerformanceSection(readme: string, section: string): string {
  return withSection(readme, performanceStart, performanceEnd, section, 'README.md');
}

export function readResults(path = resultsPath): Results {
  return JSON.parse(readFileSync(path, 'utf8')) as Results;
}

/** Rewrites bench/README.md's table and README.md's Performance list from `results`. */
export function writeReadmeSection(results: Results = readResults()): void {
  writeFileSync(readmePath, withBenchSection(readFileSync(readmePath, 'utf8'), benchSection(results)));
  writeFileSync(
    frontReadmePath,
    withPerformanceSection(readFileSync(frontReadmePath, 'utf8'), performanceSection(results)),
  );
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) writeReadmeSection();
