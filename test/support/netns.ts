// A private network namespace for the network-faults harness: every process of a scenario runs in it
// (`ip netns exec`), so iptables rules on its `lo` touch nothing outside, and deleting it ends it all.
// The name carries the owner's PID: a later run deletes what a crashed one left behind.
import { execFileSync, spawn, type SpawnOptions } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { run, type Child } from './processes.js';

const prefix = 'spoke-nf-';

/** Why the harness cannot run here (not root, no `ip`/`iptables`/`unshare`/`ss`), or undefined. */
export function netnsUnavailable(): string | undefined {
  if (process.getuid?.() !== 0) return 'skipped: needs root (network namespaces, iptables)';
  for (const tool of ['ip', 'iptables', 'ss', 'unshare', 'mount']) {
    try {
      execFileSync('sh', ['-c', `command -v ${tool}`], { stdio: 'ignore' });
    } catch {
      return `skipped: ${tool} not found (Debian: iproute2, iptables, util-linux, mount)`;
    }
  }
  return undefined;
}

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

function remove(name: string): void {
  // Everything still in it first: a namespace with processes lingers after `ip netns del`.
  const pids = execFileSync('ip', ['netns', 'pids', name], { encoding: 'utf8' }).split('\n').filter(Boolean);
  for (const pid of pids) {
    try {
      process.kill(Number(pid), 'SIGKILL');
    } catch {
      // gone already
    }
  }
  execFileSync('ip', ['netns', 'del', name], { stdio: 'ignore' });
}

/** Deletes the namespaces of runs whose process is gone (a crash, a killed vitest worker). */
function sweepOrphans(): void {
  const names = execFileSync('ip', ['netns', 'list'], { encoding: 'utf8' })
    .split('\n')
    .map((l) => l.split(' ')[0]!)
    .filter((n) => n.startsWith(prefix));
  for (const name of names) {
    const owner = Number(name.slice(prefix.length).split('-')[0]);
    if (Number.isInteger(owner) && !alive(owner)) remove(name);
  }
}

export class Netns {
  private removed = false;
  private readonly onExit = () => this.destroy();

  private constructor(readonly name: string) {}

  static create(): Netns {
    sweepOrphans();
    const ns = new Netns(`${prefix}${process.pid}-${randomBytes(3).toString('hex')}`);
    execFileSync('ip', ['netns', 'add', ns.name]);
    process.once('exit', ns.onExit);
    ns.sh('ip link set lo up');
    return ns;
  }

  /** The command line that runs `command args` inside the namespace (same PID: `ip netns exec` execs it). */
  wrap(command: string, args: readonly string[]): [string, string[]] {
    return ['ip', ['netns', 'exec', this.name, command, ...args]];
  }

  /** A long-lived process in the namespace, its output collected (processes.ts). */
  start(command: string, args: readonly string[], opts: SpawnOptions = {}): Child {
    const [c, a] = this.wrap(command, args);
    return run(c, a, opts);
  }

  /** A raw ChildProcess in the namespace, for callers that read its streams themselves. */
  spawn(command: string, args: readonly string[], opts: SpawnOptions = {}) {
    const [c, a] = this.wrap(command, args);
    return spawn(c, a, opts);
  }

  /** A short command in the namespace; its stdout. Throws with its stderr when it fails. */
  exec(command: string, args: readonly string[]): string {
    const [c, a] = this.wrap(command, args);
    return execFileSync(c, a, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  }

  sh(script: string): string {
    return this.exec('sh', ['-c', script]);
  }

  /** Kills whatever still runs in it and deletes it; idempotent, also run at process exit. */
  destroy(): void {
    if (this.removed) return;
    this.removed = true;
    process.off('exit', this.onExit);
    try {
      remove(this.name);
    } catch {
      // already gone
    }
  }
}
