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
    const out = execFileSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { cwd: repoRoot, encoding: 'utf8' });
    const { grown, after } = JSON.parse(out) as { grown: number; after: number };
    expect(grown).toBeGreaterThan(2 << 20);
    expect(after).toBeLessThanOrEqual(1 << 20);
  });
});
