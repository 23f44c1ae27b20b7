// Child processes for tests that run the real entry point or a copy of the repository: collected
// output, waiting for a line, and the exit code.
import { execFileSync, spawn, type SpawnOptions } from 'node:child_process';
import {
  closeSync,
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { waitUntil } from './wait.js';

export const repoRoot = fileURLToPath(new URL('../..', import.meta.url));

export interface Child {
  pid: number;
  stdout(): string;
  stderr(): string;
  write(text: string): void;
  end(): void;
  /** Resolves with the first match of `re` in stdout+stderr. */
  waitFor(re: RegExp, timeoutMs?: number): Promise<RegExpMatchArray>;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  kill(signal?: NodeJS.Signals): void;
}

/** SIGTERM, then SIGKILL if it has not exited within `graceMs` (a Go binary may ignore SIGTERM while draining). */
export async function terminate(
  child: { kill(signal: NodeJS.Signals): unknown },
  exited: Promise<unknown>,
  graceMs: number,
): Promise<void> {
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
  await exited;
  clearTimeout(timer);
}

export function run(command: string, args: string[], opts: SpawnOptions = {}): Child {
  const child = spawn(command, args, { stdio: ['pipe', 'pipe', 'pipe'], ...opts });
  child.stdin?.on('error', () => {}); // EPIPE from a child that exited: its exit says so
  let out = '';
  let err = '';
  const waiters = new Set<() => void>();
  const wake = () => {
    for (const w of waiters) w();
  };
  child.stdout!.on('data', (c: Buffer) => {
    out += c.toString();
    wake();
  });
  child.stderr!.on('data', (c: Buffer) => {
    err += c.toString();
    wake();
  });
  let done = false;
  // `done` before the waiters wake, so a waitFor learns of the exit now rather than at its timeout.
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on('exit', (code, signal) => {
      done = true;
      resolve({ code, signal });
      wake();
    }),
  );
  return {
    pid: child.pid!,
    stdout: () => out,
    stderr: () => err,
    write: (text) => child.stdin!.write(text),
    end: () => child.stdin!.end(),
    exited,
    kill: (signal = 'SIGTERM') => {
      if (!done) child.kill(signal);
    },
    waitFor: (re, timeoutMs = 30_000) =>
      new Promise((resolve, reject) => {
        const check = () => {
          const m = (out + err).match(re);
          if (m) return finish(() => resolve(m));
          if (done) return finish(() => reject(new Error(`exited before printing ${re}:\n${out}\n${err}`)));
        };
        const timer = setTimeout(
          () => finish(() => reject(new Error(`timed out waiting for ${re}:\n${out}\n${err}`))),
          timeoutMs,
        );
        const finish = (f: () => void) => {
          clearTimeout(timer);
          waiters.delete(check);
          f();
        };
        waiters.add(check);
        check();
      }),
  };
}

let built = false;

/**
 * `npm run build`'s output in dist/ (cmd/build.ts: type-check, bundle, the .proto files), once per
 * process: the agent as the image runs it, without tsx's loader (~30-40 MiB of RSS). Throws when the build fails.
 * In a test run, once per run: the test files that use it run in parallel workers, and a second build
 * removes dist/ under the agent the first one started. The first to take the lock builds and stamps
 * dist/ with the run's id (run-setup.ts), the others find the stamp.
 */
export function buildDist(): string {
  if (!built) {
    const run = process.env.SPOKE_TEST_RUN;
    const stamp = join(repoRoot, 'dist/.test-run');
    mkdirSync(join(repoRoot, 'node_modules/.cache'), { recursive: true });
    const lock = openSync(join(repoRoot, 'node_modules/.cache/spoke-agent-dist.lock'), 'w');
    try {
      // flock(1) locks the open file this process shares with it; the lock lasts until we close it.
      execFileSync('flock', ['3'], { stdio: ['ignore', 'ignore', 'inherit', lock] });
      if (!(run && existsSync(stamp) && readFileSync(stamp, 'utf8') === run)) {
        execFileSync(process.execPath, ['--import', 'tsx', join(repoRoot, 'cmd/build.ts')], {
          cwd: repoRoot,
          stdio: 'pipe',
        });
        if (run) writeFileSync(stamp, run);
      }
    } finally {
      closeSync(lock);
    }
    built = true;
  }
  return join(repoRoot, 'dist/cmd/main.js');
}

/** `spoke-agent ARGS` from source, as `npm start -- ARGS` runs it. */
export function runCli(args: string[], opts: SpawnOptions = {}): Child {
  return run(process.execPath, ['--import', 'tsx', join(repoRoot, 'cmd/main.ts'), ...args], { cwd: repoRoot, ...opts });
}

/**
 * `spoke-agent dial FLAGS --close-on-eof ADDRESS` to an echo target: writes a line, waits (20 s at most)
 * for it to come back, closes stdin; what came back and how the command exited.
 */
export async function lineThroughDial(
  flags: string[],
  address: string,
): Promise<{ stdout: string; stderr: string; code: number | null }> {
  const dial = runCli(['dial', ...flags, '--close-on-eof', address]);
  let exited = false;
  void dial.exited.then(() => (exited = true));
  dial.write('ping\n');
  await waitUntil(() => dial.stdout() === 'ping\n' || exited, 20_000, 'the line echoed');
  dial.end();
  const { code } = await dial.exited;
  return { stdout: dial.stdout(), stderr: dial.stderr(), code };
}

/**
 * The files a fresh clone has (plus untracked, not ignored ones, so work in progress is seen),
 * copied to a temporary folder. `node_modules` is a symlink to ours: `npm install` per test is too slow.
 */
export function copyOfRepo(opts: { linkNodeModules: boolean }): { dir: string; remove(): void } {
  const dir = mkdtempSync(join(tmpdir(), 'spoke-agent-copy-'));
  const files = execFileSync('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], {
    cwd: repoRoot,
    encoding: 'utf8',
  })
    .split('\0')
    .filter(Boolean);
  for (const file of files) {
    const from = join(repoRoot, file);
    if (!existsSync(from)) continue; // deleted in the work tree, not yet committed
    mkdirSync(dirname(join(dir, file)), { recursive: true });
    cpSync(from, join(dir, file));
  }
  if (opts.linkNodeModules) symlinkSync(join(repoRoot, 'node_modules'), join(dir, 'node_modules'), 'dir');
  return { dir, remove: () => rmSync(dir, { recursive: true, force: true }) };
}
