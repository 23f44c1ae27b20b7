// A private /etc/hosts for one process: it runs under `unshare -m` with a file of ours bind-mounted on
// /etc/hosts, so re-pointing a name (the hub moved) changes what that process resolves and nothing
// else's. The file is rewritten in place, never replaced: a bind mount follows the inode, not the name.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';

export class HostsFile {
  readonly path: string;

  constructor(entries: Record<string, string>) {
    this.path = join(mkdtempSync(join(tmpdir(), 'spoke-nf-hosts-')), 'hosts');
    this.write(entries);
  }

  /** `name` resolves to `address` from now on (in place: same inode). */
  point(name: string, address: string): void {
    this.write({ [name]: address });
  }

  private write(entries: Record<string, string>): void {
    const lines = ['127.0.0.1 localhost', ...Object.entries(entries).map(([n, a]) => `${a} ${n}`)];
    writeFileSync(this.path, `${lines.join('\n')}\n`); // flag 'w': truncates the same file
  }

  /** Deletes the file (after the process that mounted it is gone). */
  remove(): void {
    rmSync(dirname(this.path), { recursive: true, force: true });
  }

  /** `command args` run with this file as /etc/hosts (same PID: unshare and sh both exec). */
  wrap(command: string, args: readonly string[]): [string, string[]] {
    return [
      'unshare',
      [
        '-m',
        '--propagation',
        'private',
        'sh',
        '-c',
        'mount --bind "$0" /etc/hosts && exec "$@"',
        this.path,
        command,
        ...args,
      ],
    ];
  }
}
