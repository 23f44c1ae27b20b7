import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { repoRoot } from '../test/support/processes.js';

// In a process of its own: the collection is process-wide, and vitest's worker is never quiet.
const script = `
import { getHeapSpaceStatistics } from 'node:v8';
import { releaseMemoryWhenIdle } from ${JSON.stringify(join(repoRoot, 'observability/idle-memory.ts'))};
const young = () => getHeapSpaceStatistics().find((s) => s.space_name === 'new_space').space_size;
releaseMemoryWhenIdle({ windowMs: 200 });
await new Promise((r) => setTimeout(r, 1200)); // past the start-up collection
// A burst that keeps objects alive across scavenges, so V8 grows the young generation.
let keep = [];
const until = performance.now() + 1000;
while (performance.now() < until) {
  keep.push({ a: [1, 2, 3], b: 'x'.repeat(20) });
  if (keep.length > 200_000) keep = [];
}
keep = [];
const grown = young();
await new Promise((r) => setTimeout(r, 1000)); // quiet windows
console.log(JSON.stringify({ grown, after: young() }));
`;

describe('releaseMemoryWhenIdle', () => {
  it('shrinks the young generation a burst grew once the process is quiet', () => {
    const out = execFileSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
      cwd: repoRoot,
      encoding: 'utf8',
    });
    const { grown, after } = JSON.parse(out) as { grown: number; after: number };
    expect(grown).toBeGreaterThan(2 << 20);
    expect(after).toBeLessThanOrEqual(1 << 20);
  });
});

// Full collections, in ms since the watcher started, while the process is quiet or busy from the start.
// One first, so V8 finishes what loading the modules started; after it nothing in the script is big
// enough to cause one (and Node 24 does not mark gc() calls as forced, so all are counted).
const timing = (busyFromStartMs: number, busyShare: number) => `
import { PerformanceObserver, constants } from 'node:perf_hooks';
import { setImmediate as yieldToLoop } from 'node:timers/promises';
import { releaseMemoryWhenIdle } from ${JSON.stringify(join(repoRoot, 'observability/idle-memory.ts'))};
globalThis.gc();
const t0 = performance.now();
const full = [];
new PerformanceObserver((list) => {
  for (const e of list.getEntries()) if (e.detail.kind === constants.NODE_PERFORMANCE_GC_MAJOR) full.push(Math.round(e.startTime - t0));
}).observe({ entryTypes: ['gc'] });
releaseMemoryWhenIdle({ windowMs: 400, startupMs: 600, startupQuietMs: 200, busyShare: ${busyShare} });
const busyUntil = t0 + ${busyFromStartMs};
while (performance.now() < busyUntil) {
  const slice = performance.now() + 5;
  while (performance.now() < slice);
  await yieldToLoop(); // timers still fire, as they would between the agent's dials
}
await new Promise((r) => setTimeout(r, 1500));
console.log(JSON.stringify(full));
`;
const fullCollections = (busyFromStartMs: number, busyShare = 0.02): number[] =>
  JSON.parse(
    execFileSync(
      process.execPath,
      ['--expose-gc', '--import', 'tsx', '--input-type=module', '-e', timing(busyFromStartMs, busyShare)],
      { cwd: repoRoot, encoding: 'utf8' },
    ),
  ) as number[];

describe('the start-up collection', () => {
  it('runs once, soon after start, in a quiet process', () => {
    const full = fullCollections(0);
    expect(full.length).toBeGreaterThan(0);
    expect(full[0]).toBeGreaterThanOrEqual(600);
    expect(full[0]).toBeLessThan(1500); // a quarter second or two late on a loaded machine
  });

  it('waits for the first quiet window when traffic flows from the start (it stops the process for ~30 ms)', () => {
    // "Busy" is judged by CPU used: on a loaded machine a spinning process still gets far more than
    // 0.5% of a window, where 2% (the agent's default) could be starved below.
    const full = fullCollections(1500, 0.005);
    expect(full.length).toBeGreaterThan(0);
    expect(full.every((t) => t >= 1500)).toBe(true);
  });
});
