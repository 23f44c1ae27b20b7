// Every flag the real Go agent takes (its own `--help`, release-0.30 and v0.36.0 when built: see
// CONTRIBUTING.md) is a flag of ours: cluster-proxy's ManagedProxyConfiguration appends any of them
// through spec.proxyAgent.additionalArgs, so the image swap must not turn one into "unknown flag".
// What each means here (or why it is refused) is agent/options.ts' and observability/klog-flags.ts'.
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { agentCommandFlags } from '../cmd/agent-command.js';
import { anpReleases } from './support/go-proxy-server.js';
import { skipNote } from './support/skips.js';

const { found, missing } = anpReleases(['proxy-agent']);
for (const note of missing) skipNote('go-agent-flags', note);

/** The long flag names in a pflag usage text. */
const flagNames = (usage: string): string[] =>
  [...usage.matchAll(/^\s+(?:-\w, )?--([a-z0-9][a-z0-9_-]*)/gm)].map((m) => m[1]!).filter((n) => n !== 'help');

describe.skipIf(found.length === 0)("the Go agent's flags", () => {
  const ours = new Set(Object.values(agentCommandFlags).map((f) => f.name));
  it.each(found.map((r) => [r.name, r.dir] as const))('%s: every one is ours too', async (_name, dir) => {
    // The Go agent prints its usage on an unknown flag and exits 1.
    const usage = await promisify(execFile)(join(dir, 'proxy-agent'), ['--help']).then(
      (r) => r.stdout + r.stderr,
      (err: { stdout: string; stderr: string }) => err.stdout + err.stderr,
    );
    const theirs = flagNames(usage);
    expect(theirs.length).toBeGreaterThan(20);
    expect(theirs.filter((n) => !ours.has(n))).toEqual([]);
  });
});
