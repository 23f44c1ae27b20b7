// buildah and podman (Debian's) for the tests that build and run the image, with a configuration and a
// storage of their own, so nothing the machine's other containers use is read or changed:
// - storage under ~/.cache/spoke-agent/images/storage (reruns find the stand-in bases and the build's
//   layer cache there), run state under /run/spoke-agent/containers;
// - containers.conf: runc (crun refuses this kind of machine's hybrid cgroup layout), cgroupfs, file
//   events, and default ulimits no higher than this shell's hard limits (without CAP_SYS_RESOURCE
//   runc fails on the engines' defaults: "setrlimit RLIMIT_NOFILE: Operation not permitted").
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { hasCommand, runToEnd, type Result } from './commands.js';
import { referenceCacheDir } from './reference-bins.js';
import { waitUntilAsync } from './wait.js';

/** The Debian packages the image tests need (.ci/run installs them). */
const enginePackages = ['buildah', 'podman', 'runc', 'debootstrap'] as const;

const imagesCacheDir = referenceCacheDir('images');
const storageRoot = join(imagesCacheDir, 'storage');
const runRoot = '/run/spoke-agent/containers';
const confDir = join(imagesCacheDir, 'conf');

/** Why images cannot be built and run here (the skip note), or undefined when they can. */
export function engineProblem(): string | undefined {
  if (process.platform !== 'linux') return 'skipped: buildah and podman need Linux';
  const missing = enginePackages.filter((p) => !hasCommand(p));
  if (missing.length)
    return `skipped: ${missing.join(', ')} not installed (Debian: apt-get install ${enginePackages.join(' ')}; .ci/run does)`;
  if (process.getuid?.() !== 0)
    return 'skipped: not root (the stand-in bases are made with debootstrap, and the engines run rootful here)';
  return undefined;
}

let env: NodeJS.ProcessEnv | undefined;

/** The environment that points buildah and podman at this module's configuration and storage. */
export function engineEnv(): NodeJS.ProcessEnv {
  if (env) return env;
  mkdirSync(confDir, { recursive: true });
  mkdirSync(runRoot, { recursive: true });
  // This process's hard limits (/proc/self/limits), which a child without CAP_SYS_RESOURCE cannot exceed.
  const limits = readFileSync('/proc/self/limits', 'utf8');
  const limit = (name: string, row: string, wanted: number) => {
    const hard = new RegExp(`^${row}\\s+\\S+\\s+(\\S+)`, 'm').exec(limits)?.[1];
    const n = hard === undefined || hard === 'unlimited' ? wanted : Math.min(wanted, Number(hard));
    return `"${name}=${n}:${n}"`;
  };
  const containersConf = join(confDir, 'containers.conf');
  writeFileSync(
    containersConf,
    [
      '[containers]',
      `default_ulimits = [${limit('nofile', 'Max open files', 1_048_576)}, ${limit('nproc', 'Max processes', 8192)}]`,
      '[engine]',
      'runtime = "runc"',
      'cgroup_manager = "cgroupfs"',
      'events_logger = "file"',
      `tmp_dir = "${join(runRoot, 'libpod')}"`,
      '',
    ].join('\n'),
  );
  const storageConf = join(confDir, 'storage.conf');
  writeFileSync(
    storageConf,
    ['[storage]', 'driver = "overlay"', `graphroot = "${storageRoot}"`, `runroot = "${runRoot}"`, ''].join('\n'),
  );
  env = { ...process.env, CONTAINERS_CONF: containersConf, CONTAINERS_STORAGE_CONF: storageConf };
  return env;
}

/** Runs an engine command; resolves with its output and exit code (never rejects on a non-zero exit). */
export function engine(tool: 'buildah' | 'podman', args: string[], opts: { timeoutMs?: number } = {}): Promise<Result> {
  return runToEnd(tool, args, { env: engineEnv(), timeoutMs: opts.timeoutMs });
}

/** The same, throwing with the command's stderr when it fails; resolves with stdout. */
export async function engineOk(
  tool: 'buildah' | 'podman',
  args: string[],
  opts: { timeoutMs?: number } = {},
): Promise<string> {
  const r = await engine(tool, args, opts);
  if (r.code !== 0) throw new Error(`${tool} ${args.join(' ')} (exit ${r.code}):\n${r.stderr.slice(-4000)}`);
  return r.stdout;
}

/**
 * Runs `fn` holding an exclusive lock named `name` in the cache, so two test files (or two checkouts)
 * building the same stand-ins at once take turns. A lock whose holder has died is taken over.
 */
export async function withCacheLock<T>(name: string, timeoutMs: number, fn: () => Promise<T>): Promise<T> {
  mkdirSync(imagesCacheDir, { recursive: true });
  const lock = join(imagesCacheDir, `${name}.lock`);
  let holder = 0;
  const take = (): boolean => {
    try {
      mkdirSync(lock);
      writeFileSync(join(lock, 'pid'), String(process.pid));
      return true;
    } catch {
      holder = 0;
      try {
        holder = Number(readFileSync(join(lock, 'pid'), 'utf8'));
      } catch {
        // being created or removed: look again
      }
      if (!(holder > 0 && !alive(holder))) return false;
      rmSync(lock, { recursive: true, force: true });
      return take();
    }
  };
  await waitUntilAsync(
    async () => take(),
    timeoutMs,
    () => `${lock} (held by pid ${holder})`,
    500,
  );
  try {
    return await fn();
  } finally {
    rmSync(lock, { recursive: true, force: true });
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
