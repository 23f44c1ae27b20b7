import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../test/support/manual-clock.js';
import { repoRoot } from '../test/support/processes.js';
import { releaseMemoryWhenIdle } from './idle-memory.js';

// In a process of its own: the collection is process-wide, and vitest's worker is never quiet. The
// script waits on what it measures (the young generation back under 1 MiB), 20 s at most.
const script = `
import { getHeapSpaceStatistics } from 'node:v8';
import { releaseMemoryWhenIdle } from ${JSON.stringify(join(repoRoot, 'memory/idle-memory.ts'))};
import { waitUntilAsync } from ${JSON.stringify(join(repoRoot, 'test/support/wait.ts'))};
const young = () => getHeapSpaceStatistics().find((s) => s.space_name === 'new_space').space_size;
const shrunk = (what) =>
  waitUntilAsync(async () => young() <= 1 << 20, 20_000, 'the young generation to shrink ' + what, 50);
releaseMemoryWhenIdle({ windowMs: 200 });
await shrunk('after start'); // the start-up collection
// A burst that keeps objects alive across scavenges, so V8 grows the young generation.
let keep = [];
for (let i = 0; i < 3_000_000; i++) {
  keep.push({ a: [1, 2, 3], b: 'x'.repeat(20) });
  if (keep.length > 200_000) keep = [];
}
keep = [];
const grown = young();
await shrunk('after the burst'); // a busy window, then a quiet one
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

/**
 * When the watcher collects (clock times), on a ManualClock, with the process's CPU time scripted:
 * `busyUntil` ms of half the CPU from the start, nothing after.
 */
async function collectionTimes(busyUntil: number): Promise<number[]> {
  const clock = new ManualClock();
  let cpuMicros = 0;
  const times: number[] = [];
  const stop = releaseMemoryWhenIdle({
    windowMs: 400,
    startupMs: 600,
    startupQuietMs: 200,
    busyShare: 0.02,
    clock,
    cpuUsage: (since) => ({ user: cpuMicros - (since?.user ?? 0), system: 0 }),
    collect: () => times.push(clock.now()),
  });
  for (let t = 0; t < 5000; t += 50) {
    if (t < busyUntil) cpuMicros += 25_000;
    await clock.advance(50);
  }
  stop();
  return times;
}

describe('the start-up collection', () => {
  it('runs once, at the first check from startupMs on, in a quiet process', async () => {
    expect(await collectionTimes(0)).toEqual([600]);
  });

  it('waits for the first quiet window when traffic flows from the start (it stops the process for ~30 ms)', async () => {
    // busy windows until 1600 (the one from 1200 holds the last of it), the next one quiet
    expect(await collectionTimes(1500)).toEqual([2000]);
  });
});
