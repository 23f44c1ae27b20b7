import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { DialCancel, type TargetDialError, dialTcp } from './dialer.js';
import { waitUntil } from '../test/support/wait.js';
import { ManualClock } from '../test/support/manual-clock.js';

const servers: net.Server[] = [];
afterEach(() => {
  for (const s of servers.splice(0)) s.close();
});

function listen(host = '127.0.0.1'): Promise<{ port: number; connections: () => number }> {
  let count = 0;
  const server = net.createServer((s) => {
    count++;
    s.end();
  });
  servers.push(server);
  return new Promise((resolve) =>
    server.listen(0, host, () =>
      resolve({ port: (server.address() as net.AddressInfo).port, connections: () => count }),
    ),
  );
}

async function closedPort(): Promise<number> {
  const { port } = await listen();
  await new Promise<void>((r) => servers.pop()!.close(() => r()));
  return port;
}

describe('dialTcp', () => {
  it('connects to a loopback listener, by IP and through a resolver', async () => {
    const { port, connections } = await listen();
    (await dialTcp(`127.0.0.1:${port}`, { timeoutMs: 1000 })).socket.destroy();
    const named = await dialTcp(`web.prod.cluster1:${port}`, {
      timeoutMs: 1000,
      resolve: async () => ({
        addresses: ['127.0.0.1'],
        route: { rule: '--expose=prod/web', name: 'web.prod.svc.cluster.local' },
      }),
    });
    named.socket.destroy();
    expect(named.route).toEqual({
      rule: '--expose=prod/web',
      name: 'web.prod.svc.cluster.local',
      address: '127.0.0.1',
    });
    await waitUntil(() => connections() === 2, 20_000, 'both connections accepted');
  });

  it('words a refusal like Go', async () => {
    const port = await closedPort();
    await expect(dialTcp(`127.0.0.1:${port}`, { timeoutMs: 1000 })).rejects.toMatchObject({
      message: `dial tcp 127.0.0.1:${port}: connect: connection refused`,
      reason: 'refused',
    });
  });

  it('times out with i/o timeout when the dial does not complete in time', async () => {
    const never = () => new Promise<never>(() => {});
    const clock = new ManualClock();
    const dial = dialTcp('slow.example:80', { timeoutMs: 150, clock, resolve: never });
    let settled = false;
    dial.catch(() => {}).finally(() => (settled = true));
    await waitUntil(() => clock.waiting === 1, 5000, 'the lookup to wait on the clock');
    await clock.advance(149);
    expect(settled).toBe(false);
    await clock.advance(1);
    await expect(dial).rejects.toMatchObject({
      reason: 'timeout',
      message: 'dial tcp: lookup slow.example: i/o timeout',
    });
  });

  it('reports an unresolvable name', async () => {
    const fail = async () => {
      throw new Error('ENOTFOUND');
    };
    await expect(dialTcp('nosuch.invalid:80', { timeoutMs: 1000, resolve: fail })).rejects.toMatchObject({
      message: 'dial tcp: lookup nosuch.invalid: no such host',
      reason: 'unresolvable',
    });
  });

  it('refuses before any connection attempt when the authorizer says no', async () => {
    const { port, connections } = await listen('127.0.0.3');
    const err = await dialTcp(`127.0.0.3:${port}`, {
      timeoutMs: 1000,
      authorize: (_h, ip) => `${ip} is not allowed`,
    }).catch((e: TargetDialError) => e);
    expect(err).toMatchObject({
      reason: 'denied',
      message: `dial tcp 127.0.0.3:${port}: 127.0.0.3 is not allowed`,
      route: { address: '127.0.0.3' },
    });
    // A dial allowed after it is the first the listener accepts.
    (await dialTcp(`127.0.0.3:${port}`, { timeoutMs: 1000 })).socket.destroy();
    await waitUntil(() => connections() > 0, 20_000, 'the allowed connection accepted');
    expect(connections()).toBe(1);
  });

  it('is cancelled while it resolves, while it connects, and before it starts', async () => {
    const lookingUp = new DialCancel();
    const dial = dialTcp('slow.example:80', {
      timeoutMs: 5000,
      cancel: lookingUp,
      resolve: () => new Promise(() => {}),
    });
    lookingUp.cancel();
    await expect(dial).rejects.toMatchObject({ reason: 'cancelled' });

    // Cancelled once its connect has begun (the socket exists; Node issues the syscall a tick later).
    const connecting = new DialCancel();
    const pendingConnect = dialTcp('127.0.0.1:1', { timeoutMs: 5000, cancel: connecting });
    connecting.cancel();
    await expect(pendingConnect).rejects.toMatchObject({ reason: 'cancelled' });
    expect(connecting.onCancel).toBeUndefined();

    const before = new DialCancel();
    before.cancel();
    await expect(dialTcp('127.0.0.1:1', { timeoutMs: 1000, cancel: before })).rejects.toMatchObject({
      reason: 'cancelled',
    });
  });

  it('rejects malformed addresses', async () => {
    await expect(dialTcp('no-port', { timeoutMs: 100 })).rejects.toThrow(/missing port/);
    await expect(dialTcp('[::1]:99999', { timeoutMs: 100 })).rejects.toThrow(/invalid port/);
  });
});
