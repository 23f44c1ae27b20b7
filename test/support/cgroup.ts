// A memory cgroup of our own for a child process (as a container's limit holds the agent): cgroup v2
// (memory.max, memory.swap.max = 0) or v1 (memory.limit_in_bytes, memsw too), created next to or
// below this process's own memory cgroup. Needs root and a writable cgroup file system; otherwise
// `memoryCgroup` says why not, and the callers skip with that note.
import { existsSync, mkdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { memoryCgroupPaths } from '../../memory/container-memory.js';

export interface MemoryCgroup {
  dir: string;
  version: 1 | 2;
  /** A command line that joins the cgroup, then execs `command` (so its first byte is charged here). */
  wrap(command: string, args: string[]): [string, string[]];
  /** OOM kills inside the cgroup so far. */
  oomKills(): number;
  /** Peak memory charged to the cgroup (v2 before 5.19 has none: 0). */
  peakBytes(): number;
  /** Memory charged to the cgroup now, page cache included. */
  usageBytes(): number;
  /** The kubelet's working set: usage less inactive file pages (what `kubectl top` shows and eviction weighs). */
  workingSetBytes(): number;
  /** Removes the cgroup (its processes must have exited). */
  remove(): void;
}

const root = '/sys/fs/cgroup';

export function memoryCgroup(limitBytes: number, name: string): MemoryCgroup | string {
  if (process.getuid?.() !== 0) return 'not root: cannot create a memory cgroup';
  let self: string;
  try {
    self = readFileSync('/proc/self/cgroup', 'utf8');
  } catch {
    return 'no /proc/self/cgroup';
  }
  const paths = memoryCgroupPaths(self);
  try {
    if (existsSync(join(root, 'cgroup.controllers')) && paths.v2 !== undefined) return v2(paths.v2, limitBytes, name);
    if (existsSync(join(root, 'memory')) && paths.v1 !== undefined) return v1(paths.v1, limitBytes, name);
  } catch (err) {
    return `cannot set up a memory cgroup: ${(err as Error).message}`;
  }
  return 'no memory cgroup controller mounted at /sys/fs/cgroup';
}

function wrapper(procs: string) {
  return (command: string, args: string[]): [string, string[]] => [
    'sh',
    ['-c', `echo $$ > ${procs} && exec "$@"`, 'sh', command, ...args],
  ];
}

const field = (text: string, key: string) => Number(new RegExp(`^${key} (\\d+)$`, 'm').exec(text)?.[1] ?? 0);

function v2(own: string, limitBytes: number, name: string): MemoryCgroup {
  // A sibling of our own cgroup: a cgroup with processes cannot hand controllers to children.
  const dir = join(root, dirname(own), name);
  mkdirSync(dir, { recursive: true });
  if (!readFileSync(join(dir, 'cgroup.controllers'), 'utf8').split(/\s+/).includes('memory')) {
    rmdirSync(dir);
    throw new Error(`the memory controller is not enabled for ${dirname(dir)}`);
  }
  writeFileSync(join(dir, 'memory.max'), String(limitBytes));
  if (existsSync(join(dir, 'memory.swap.max'))) writeFileSync(join(dir, 'memory.swap.max'), '0');
  return {
    dir,
    version: 2,
    wrap: wrapper(join(dir, 'cgroup.procs')),
    oomKills: () => field(readFileSync(join(dir, 'memory.events'), 'utf8'), 'oom_kill'),
    peakBytes: () =>
      existsSync(join(dir, 'memory.peak')) ? Number(readFileSync(join(dir, 'memory.peak'), 'utf8')) : 0,
    usageBytes: () => Number(readFileSync(join(dir, 'memory.current'), 'utf8')),
    workingSetBytes: () =>
      Number(readFileSync(join(dir, 'memory.current'), 'utf8')) -
      field(readFileSync(join(dir, 'memory.stat'), 'utf8'), 'inactive_file'),
    remove: () => rmdirSync(dir),
  };
}

function v1(own: string, limitBytes: number, name: string): MemoryCgroup {
  const dir = join(root, 'memory', own, name);
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'memory.limit_in_bytes'), String(limitBytes));
  // No swap either (memsw is memory + swap; it may only be set after the memory limit).
  if (existsSync(join(dir, 'memory.memsw.limit_in_bytes')))
    writeFileSync(join(dir, 'memory.memsw.limit_in_bytes'), String(limitBytes));
  return {
    dir,
    version: 1,
    wrap: wrapper(join(dir, 'cgroup.procs')),
    oomKills: () => field(readFileSync(join(dir, 'memory.oom_control'), 'utf8'), 'oom_kill'),
    peakBytes: () => Number(readFileSync(join(dir, 'memory.max_usage_in_bytes'), 'utf8')),
    usageBytes: () => Number(readFileSync(join(dir, 'memory.usage_in_bytes'), 'utf8')),
    workingSetBytes: () =>
      Number(readFileSync(join(dir, 'memory.usage_in_bytes'), 'utf8')) -
      field(readFileSync(join(dir, 'memory.stat'), 'utf8'), 'total_inactive_file'),
    remove: () => rmdirSync(dir),
  };
}
