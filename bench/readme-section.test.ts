import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import {
  benchSection,
  frontReadmePath,
  performanceSection,
  type Results,
  readmePath,
  readResults,
  withBenchSection,
  withPerformanceSection,
} from './readme-section.js';
import type { Row } from './row.js';

const results = (rows: Row[]): Results => ({
  started: '2026-12-01T00:00:00Z',
  commit: 'abc1234',
  seconds: 1,
  args: [],
  goReference: true,
  machine: { cpus: 2, node: 'v24' },
  rows,
});

describe("README's benchmark section", () => {
  it('is the one generated from bench/results/latest.json', () => {
    const readme = readFileSync(readmePath, 'utf8');
    expect(readme, 'README benchmark table is stale: run npm run bench:readme').toBe(
      withBenchSection(readme, benchSection(readResults())),
    );
  });

  it('lists every target as met or not met, with the ratio', () => {
    const rows = [
      {
        section: 'S',
        metric: 'm',
        subject: 'ours',
        value: 2,
        unit: 'MiB',
        baseline: { subject: 'Go agent', value: 1 },
        ratio: 2,
        target: { text: '>= 1.5x the Go agent', met: true },
      },
      {
        section: 'S',
        metric: 'n',
        subject: 'ours',
        value: 130,
        unit: 'MiB',
        target: { text: '<= 120 MiB', met: false },
      },
      { section: 'S', metric: 'no target', subject: 'ours', value: 1, unit: 'x' },
    ];
    const text = benchSection(results(rows));
    expect(text).toContain('| >= 1.5x the Go agent | S: m [ours] | 2.00 MiB | Go agent: 1.00 | x2.00 | met |');
    expect(text).toContain('| <= 120 MiB | S: n [ours] | 130 MiB |  |  | **not met** |');
    expect(text).not.toContain('no target');
  });
});

describe("README.md's Performance list", () => {
  it('is the one generated from bench/results/latest.json', () => {
    const readme = readFileSync(frontReadmePath, 'utf8');
    expect(readme, "README.md's Performance list is stale: run npm run bench:readme").toBe(
      withPerformanceSection(readme, performanceSection(readResults())),
    );
  });

  it('names the run, every figure with a target with its reference, and each target not met', () => {
    const rows: Row[] = [
      {
        section: 'Throughput',
        metric: 'download 1024 MiB, 1 stream: ours vs Go agent',
        subject: 'ours',
        value: 169,
        unit: 'MiB/s',
        baseline: { subject: 'Go agent', value: 74.7 },
        ratio: 169 / 74.7,
        target: { text: '>= 1.5x the Go agent', met: true },
      },
      {
        section: 'DNS (dnsperf)',
        metric: 'forwarded: queries/s at saturation, vs the C reference',
        subject: 'ours',
        value: 40000,
        unit: 'q/s',
        baseline: { subject: 'dnsmasq', value: 60000 },
        ratio: 40000 / 60000,
        target: { text: '>= 0.7x dnsmasq', met: false },
      },
      { section: 'DNS (dnsperf)', metric: 'a figure with no target', subject: 'ours', value: 3, unit: 'x' },
    ];
    const text = performanceSection(results(rows));
    expect(text).toContain('2026-12-01 at commit `abc1234`');
    expect(text).toContain('1 of 2 targets not met');
    expect(text).toContain('- Throughput: 1 stream 169 MiB/s (Go agent: 74.7, x2.26).');
    expect(text).toContain(
      '- DNS: forwarded names 40000 q/s (dnsmasq: 60000, x0.67), **not met** (target >= 0.7x dnsmasq).',
    );
    expect(text).not.toContain('no target');
  });

  it('changes when a figure leaves the results, so the stored README no longer matches', () => {
    const latest = readResults();
    const withTarget = latest.rows.filter((r) => r.target);
    expect(withTarget.length).toBeGreaterThan(0);
    const fewer = { ...latest, rows: latest.rows.filter((r) => r !== withTarget[0]) };
    const readme = readFileSync(frontReadmePath, 'utf8');
    expect(withPerformanceSection(readme, performanceSection(fewer))).not.toBe(readme);
  });
});
