// Counts TCP connections by reading /proc/net/tcp{,6} (this network namespace): what the kernel
// holds, whatever the libraries on either end believe.
import { readFileSync } from 'node:fs';

const established = '01';

/** Established connections whose local (`side: 'local'`) or remote port is `port`. */
export function establishedConnections(port: number, side: 'local' | 'remote'): number {
  let n = 0;
  for (const file of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let text: string;
    try {
      text = readFileSync(file, 'utf8');
    } catch {
      continue; // no IPv6 in this namespace
    }
    for (const line of text.split('\n').slice(1)) {
      // "sl local_address rem_address st ...", addresses as HEXIP:HEXPORT
      const [, local, remote, state] = line.trim().split(/\s+/);
      if (state !== established || !local || !remote) continue;
      const address = side === 'local' ? local : remote;
      if (parseInt(address.slice(address.lastIndexOf(':') + 1), 16) === port) n++;
    }
  }
  return n;
}
