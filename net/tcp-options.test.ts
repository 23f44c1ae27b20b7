// The helper's options, read back from the kernel with `ss` (iproute2), which shows each socket's
// congestion control and receive buffer.
import { execFileSync } from 'node:child_process';
import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { setCongestionControl } from './tcp-congestion-control.js';
import { tcpOptionsUnavailable } from './tcp-options.js';
import { setReceiveBuffer } from './tcp-receive-buffer.js';
import { skipNote } from '../test/support/skips.js';

const ss = (() => {
  try {
    execFileSync('ss', ['-V'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
})();
const skip = tcpOptionsUnavailable() ?? (ss ? undefined : 'no `ss` (iproute2) to read the options back');
if (skip) skipNote('net/tcp-options', `skipped: ${skip}`);

const cleanups: Array<() => void> = [];
afterEach(() => {
  for (const c of cleanups.splice(0)) c();
});

async function connected(): Promise<net.Socket> {
  const server = net.createServer((s) => cleanups.push(() => s.destroy()));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const socket = net.connect((server.address() as net.AddressInfo).port, '127.0.0.1');
  await new Promise((r) => socket.once('connect', r));
  cleanups.push(() => {
    socket.destroy();
    server.close();
  });
  return socket;
}

/** What `ss` says of the socket whose local port is `port`. */
function ssLine(port: number): string {
  return execFileSync('ss', ['-tmniH', 'state', 'established', `sport = :${port}`], { encoding: 'utf8' });
}

describe.skipIf(skip !== undefined)('TCP options through the helper', () => {
  it('sets the congestion control, and says why when the kernel refuses one', async () => {
    const socket = await connected();
    expect(setCongestionControl(socket, 'reno')).toBeUndefined();
    expect(ssLine(socket.localPort!)).toMatch(/\breno\b/);
    expect(setCongestionControl(socket, 'nosuchcc')).toMatch(/setsockopt\(TCP_CONGESTION, nosuchcc\): /);
    expect(setCongestionControl(socket, '')).toBeUndefined();
  });

  it('fixes the receive buffer at about the size asked', async () => {
    const socket = await connected();
    expect(setReceiveBuffer(socket, 128 << 10)).toBeUndefined();
    const rb = Number(/skmem:\(r\d+,rb(\d+)/.exec(ssLine(socket.localPort!))?.[1]);
    expect(rb).toBe(128 << 10);
  });
});
