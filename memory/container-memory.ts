// The container's memory limit (cgroup v2 or v1) and a V8 heap that fits inside it. Node sizes its
// heap for the limit by itself, but as if the heap were all the process held: under a 256 MiB limit it
// lets the heap grow past the limit before a full collection is forced. The agent also holds buffers
// outside the heap (up to --max-total-buffer, a quarter of the limit) and its code and native state,
// so the kernel would kill the pod before the garbage is collected. Heap flags only take effect at process
// start: an entry point calls tuneMemoryAtStart() first, which re-executes the process with them.
import { readFileSync } from 'node:fs';

/** Values at or above this mean "no limit" (v1 writes LONG_MAX rounded down to a page). */
const unlimited = 2 ** 60;

/** The limit in a cgroup v2 `memory.max` or v1 `memory.limit_in_bytes` file; undefined when none. */
export function parseCgroupMemoryLimit(text: string | undefined): number | undefined {
  const value = text?.trim();
  if (!value || value === 'max' || !/^\d+$/.test(value)) return undefined;
  const n = Number(value);
  return n > 0 && n < unlimited ? n : undefined;
}

/** The memory cgroup paths of this process in a /proc/self/cgroup text: v2 (`0::PATH`) and v1 (`N:...memory...:PATH`). */
export function memoryCgroupPaths(procSelfCgroup: string): { v2?: string; v1?: string } {
  const out: { v2?: string; v1?: string } = {};
  for (const line of procSelfCgroup.split('\n')) {
    const m = /^(\d+):([^:]*):(.*)$/.exec(line.trim());
    if (!m) continue;
    if (m[1] === '0' && m[2] === '') out.v2 = m[3];
    else if (m[2]!.split(',').includes('memory')) out.v1 = m[3];
  }
  return out;
}

/** Files that may hold this process's limit: its own cgroup's, then the mount's root (a container's own cgroup, seen through a namespace or bind mount). */
export function limitFiles(procSelfCgroup: string, root = '/sys/fs/cgroup'): string[] {
  const { v2, v1 } = memoryCgroupPaths(procSelfCgroup);
  const files: string[] = [];
  if (v2 !== undefined) files.push(`${root}${v2.replace(/\/$/, '')}/memory.max`, `${root}/memory.max`);
  if (v1 !== undefined)
    files.push(`${root}/memory${v1.replace(/\/$/, '')}/memory.limit_in_bytes`, `${root}/memory/memory.limit_in_bytes`);
  return [...new Set(files)];
}

/** The smallest limit among the files that exist; undefined outside a memory-limited cgroup. */
export function containerMemoryLimit(read: (path: string) => string | undefined = readOrUndefined): number | undefined {
  const limits = limitFiles(read('/proc/self/cgroup') ?? '')
    .map((f) => parseCgroupMemoryLimit(read(f)))
    .filter((n): n is number => n !== undefined);
  return limits.length ? Math.min(...limits) : undefined;
}

let thisProcess: { limit: number | undefined } | undefined;

/** This process's limit, read once (the heap sizing at start and the agent's buffer budget both use it). */
export function processMemoryLimit(): number | undefined {
  thisProcess ??= { limit: containerMemoryLimit() };
  return thisProcess.limit;
}

function readOrUndefined(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return undefined;
  }
}

const MiB = 1 << 20;

/** The young generation's semi-spaces, at most: V8 picks 16 MiB on a large host, and a burst of streams fills them (32 MiB of garbage) for no measurable CPU saved over 4. */
const maxSemiSpace = 4;

/**
 * V8 flags for a process limited to `limit` bytes: 3/8 of it for the old space (several times the
 * agent's heap after a full collection) and semi-spaces of 1/64, at most 4 MiB; without a limit, the
 * semi-spaces alone. What each choice held under churn and in a burst: bench/README.md, "Dial/close
 * churn and memory" and "Bursts".
 */
export function heapFlags(limit: number | undefined): string[] {
  if (limit === undefined) return [`--max-semi-space-size=${maxSemiSpace}`];
  const oldSpace = Math.max(32, Math.floor((limit * 3) / 8 / MiB));
  const semiSpace = Math.min(maxSemiSpace, Math.max(1, Math.floor(limit / 64 / MiB)));
  return [`--max-old-space-size=${oldSpace}`, `--max-semi-space-size=${semiSpace}`];
}

/** Whether the operator already sized the heap (command line or NODE_OPTIONS): then it is left alone. */
export function heapSizedByOperator(execArgv: readonly string[], nodeOptions = ''): boolean {
  return [...execArgv, ...nodeOptions.split(/\s+/)].some((a) =>
    /^--max-(old|semi)-space-size/.test(a.replace(/_/g, '-')),
  );
}

/**
 * glibc's malloc arenas for the process (MALLOC_ARENA_MAX), unless the operator set it. Buffers are
 * allocated on the main thread and freed by V8's background threads, and each thread that frees or
 * allocates gets an arena of its own (up to 8 per core), each keeping freed memory to itself: a burst of
 * a thousand streams held 35 MiB more resident with glibc's default (bench/README.md, "Bursts").
 */
export function mallocArenas(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv | undefined {
  return env.MALLOC_ARENA_MAX === undefined ? { ...env, MALLOC_ARENA_MAX: '2' } : undefined;
}

/**
 * At process start, before anything else: re-executes the process (same PID and arguments) with
 * heapFlags for its memory limit, or for none, unless the operator sized the heap, and with
 * mallocArenas in its environment. Does not return when it re-executes.
 */
export function tuneMemoryAtStart(): void {
  const limit = processMemoryLimit();
  const flags = heapSizedByOperator(process.execArgv, process.env.NODE_OPTIONS) ? [] : heapFlags(limit);
  const env = mallocArenas(process.env);
  if ((flags.length === 0 && env === undefined) || typeof process.execve !== 'function') return;
  try {
    process.execve(
      process.execPath,
      [process.execPath, ...process.execArgv, ...flags, ...process.argv.slice(1)],
      env ?? process.env,
    );
  } catch (err) {
    process.stderr.write(
      `spoke-agent: cannot re-execute with a heap sized for ${limit === undefined ? 'no memory limit' : `the ${limit}-byte memory limit`}, going on with Node's: ${(err as Error).message}\n`,
    );
  }
}
