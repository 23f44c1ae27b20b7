// Why a suite that needs a real peer (Go binaries, kube-apiserver, root, a container engine, a tool) is
// skipped, in whole or in part: said at once, and kept for the one line a run ends with
// (run-setup.ts's teardown), so a run without the outside binaries does not quietly cover less. Each
// vitest worker is a process of its own: a note is a file in a folder the run names (SPOKE_TEST_RUN).
import { createHash } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const notesDir = (): string => join(tmpdir(), `spoke-agent-skips-${process.env.SPOKE_TEST_RUN ?? 'unnamed'}`);

/** Says why `suite` (a test file's short name) skips all or part of itself, and keeps it for the run's last line. */
export function skipNote(suite: string, why: string): void {
  console.warn(`${suite}: ${why}`);
  const dir = notesDir();
  mkdirSync(dir, { recursive: true });
  const name = createHash('sha256').update(`${suite}\n${why}`).digest('hex').slice(0, 16);
  writeFileSync(join(dir, name), JSON.stringify({ suite, why }));
}

/**
 * The run's skip notes in one line: how many suites skipped (all or part) and why, the suites that share
 * a reason named together. Removes the notes.
 */
export function takeSkipSummary(): string {
  const dir = notesDir();
  let files: string[] = [];
  try {
    files = readdirSync(dir);
  } catch {
    // no note written: nothing skipped
  }
  const byReason = new Map<string, Set<string>>();
  const suites = new Set<string>();
  for (const f of files) {
    const { suite, why } = JSON.parse(readFileSync(join(dir, f), 'utf8')) as { suite: string; why: string };
    suites.add(suite);
    byReason.set(why, (byReason.get(why) ?? new Set()).add(suite));
  }
  rmSync(dir, { recursive: true, force: true });
  if (suites.size === 0) return 'real-peer suites skipped: none';
  const reasons = [...byReason]
    .map(([why, names]) => `[${[...names].sort().join(', ')}] ${why.replace(/(^|: )skipped: /, '$1')}`)
    .sort()
    .join('; ');
  return `real-peer suites skipped in whole or part: ${suites.size}: ${reasons}`;
}
