import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { benchSection, readmePath, readResults, withBenchSection } from './readme-section.js';

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
    const text = benchSection({
      started: '2026-12-01T00:00:00Z',
      seconds: 1,
      args: [],
      goReference: true,
      machine: { cpus: 2, node: 'v24' },
      rows,
    });
    expect(text).toContain('| >= 1.5x the Go agent | S: m [ours] | 2.00 MiB | Go agent: 1.00 | x2.00 | met |');
    expect(text).toContain('| <= 120 MiB | S: n [ours] | 130 MiB |  |  | **not met** |');
    expect(text).not.toContain('no target');
  });
});
