// bench/README.md's table of the latest results, generated from bench/results/latest.json: `npm run bench` rewrites it
// after a full run, `npm run bench:readme` from the stored results; bench/readme-section.test.ts
// fails when that README no longer matches them, so the figures are never edited by hand.
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { fmt, targetsTable, type Row } from './report.js';

export const readmePath = fileURLToPath(new URL('README.md', import.meta.url));
export const resultsPath = fileURLToPath(new URL('results/latest.json', import.meta.url));
const startMarker = '<!-- bench:start -->';
const endMarker = '<!-- bench:end -->';

export interface Results {
  started: string;
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

/** `readme` with the text between the bench markers replaced by `section`. */
export function withBenchSection(readme: string, section: string): string {
  const start = readme.indexOf(startMarker);
  const end = readme.indexOf(endMarker);
  if (start < 0 || end < start) throw new Error(`bench/README.md has no ${startMarker} ... ${endMarker} block`);
  return `${readme.slice(0, start + startMarker.length)}\n${section}\n${readme.slice(end)}`;
}

export function readResults(path = resultsPath): Results {
  return JSON.parse(readFileSync(path, 'utf8')) as Results;
}

export function writeReadmeSection(results: Results = readResults()): void {
  writeFileSync(readmePath, withBenchSection(readFileSync(readmePath, 'utf8'), benchSection(results)));
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) writeReadmeSection();
