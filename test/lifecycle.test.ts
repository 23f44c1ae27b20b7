// The agent process's lifecycle and resource bounds: graceful drain on SIGTERM during a transfer,
// a target that stops reading, and credentials rotated on disk.
import { spawn } from 'node:child_process';
import * as crypto from 'node:crypto';
import { copyFileSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Duplex } from 'node:stream';
import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { dialThroughProxy } from '../client/dial.js';
import { ProxyHub } from '../hub/proxy-server.js';
import { PacketType } from '../proto/packets.js';
import { defaultStallMs } from '../agent/connection-table.js';
import { startAgent } from './support/agent.js';
import { makePki, hubTls, agentTlsFlags } from './support/certs.js';
import { ManualClock } from './support/manual-clock.js';
import { pattern, startHttpServer, unusedPort, type Target } from './support/targets.js';
import { waitUntil, waitUntilAsync } from './support/wait.js';

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const pki = makePki();

async function startHub(extra: Parameters<typeof ProxyHub.start>[0] = {}): Promise<ProxyHub> {
  const hub = await ProxyHub.start({
    agentPort: 0,
    serverPort: 0,
    proxyStrategies: ['destHost'],
    agentTls: hubTls(pki),
    ...extra,
  });
  cleanups.push(() => hub.close());
  return hub;
}

const dial = (hub: ProxyHub, address: string) =>
  dialThroughProxy({ mode: 'grpc', proxyHost: '127.0.0.1', proxyPort: hub.ports.server!, address, timeoutMs: 20_000 });

/** GETs /bytes/N over a tunnelled connection; calls onProgress with the body bytes so far. */
function download(
  conn: Duplex,
  size: number,
  onProgress: (got: number) => void = () => {},
): Promise<{ ok: boolean; got: number }> {
  return new Promise((resolve, reject) => {
    let header: Buffer | undefined = Buffer.alloc(0);
    let expected = '';
    const hash = crypto.createHash('sha256');
    let got = 0;
    conn.on('data', (c: Buffer) => {
      if (header) {
        header = Buffer.concat([header, c]);
        const split = header.indexOf('\r\n\r\n');
        if (split === -1) return;
        expected = /x-sha256: (\w+)/i.exec(header.subarray(0, split).toString())?.[1] ?? '';
        c = header.subarray(split + 4);
        header = undefined;
      }
      hash.update(c);
      got += c.length;
      onProgress(got);
      if (got >= size) resolve({ ok: hash.digest('hex') === expected, got });
    });
    conn.on('error', reject);
    conn.on('close', () => resolve({ ok: false, got }));
    conn.write(`GET /bytes/${size} HTTP/1.1\r\nHost: web\r\n\r\n`);
  });
}

/** The real agent process against `hub`, with its combined output and exit code. */
async function spawnAgent(hub: ProxyHub) {
  const healthPort = await unusedPort();
  const child = spawn(
    process.execPath,
    [
      '--import',
      'tsx',
      'cmd/main.ts',
      '--proxy-server-host=localhost',
      `--proxy-server-port=${hub.ports.agent}`,
      ...agentTlsFlags(pki),
      '--agent-identifiers=host=127.0.0.1',
      `--health-server-port=${healthPort}`,
      '--health-server-host=127.0.0.1',
      '--log-level=warn',
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let output = '';
  child.stdout.on('data', (c: Buffer) => (output += c.toString()));
  child.stderr.on('data', (c: Buffer) => (output += c.toString()));
  const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
  cleanups.push(() => child.kill('SIGKILL'));
  await hub.waitForAgent(undefined, 20_000);
  return { child, healthPort, exited, output: () => output };
}

describe('graceful shutdown of the agent process', () => {
  it('on SIGTERM sends DRAIN, finishes a 100 MiB transfer intact, turns unready, and exits 0', async () => {
    const hub = await startHub();
    const web: Target = await startHttpServer();
    cleanups.push(() => web.close());
    const { child, healthPort, exited, output } = await spawnAgent(hub);

    const conn = await dial(hub, `127.0.0.1:${web.port}`);
    const drain = hub.waitForPacket(PacketType.DRAIN, undefined, undefined, 20_000);
    let signalled = false;
    const size = 100 << 20;
    const result = download(conn, size, (got) => {
      if (!signalled && got > 8 << 20) {
        signalled = true;
        child.kill('SIGTERM');
      }
    });
    await drain;
    const readyz = await fetch(`http://127.0.0.1:${healthPort}/readyz`).catch(() => undefined);
    if (readyz) {
      expect(readyz.status).toBe(503);
      expect(await readyz.text()).toContain('[-]server-connected failed: agent is draining');
    }
    expect(await result).toEqual({ ok: true, got: size });
    conn.destroy();
    expect(await exited, output()).toBe(0);
  }, 60_000);

  it('a second signal (not the duplicate a terminal delivers with the first) exits at once', async () => {
    const hub = await startHub();
    const web: Target = await startHttpServer();
    cleanups.push(() => web.close());
    const { child, exited, output } = await spawnAgent(hub);
    const conn = await dial(hub, `127.0.0.1:${web.port}`);
    conn.on('error', () => {});
    const drain = hub.waitForPacket(PacketType.DRAIN, undefined, undefined, 20_000);
    child.kill('SIGTERM');
    child.kill('SIGTERM');
    await drain;
    // The agent tells the operator's second signal from a terminal's duplicate by its wall clock, a
    // second after the first (a child: no clock of ours to move). It sent DRAIN once it took the
    // first, so a second after DRAIN arrived is past the agent's window, whatever the load.
    const drained = Date.now();
    await waitUntil(() => Date.now() - drained > 1000, 20_000, "the agent's window for a terminal's duplicate signal");
    // Still draining: the open connection holds it, and the immediate duplicate was ignored.
    expect(child.exitCode).toBe(null);
    child.kill('SIGTERM');
    // 1, not the 0 of a drain that finished: the open connection would hold that for --drain-timeout
    expect(await exited, output()).toBe(1);
    expect(output()).toContain('second signal');
    conn.destroy();
  }, 60_000);
});

describe('a target that stops reading', () => {
  it('holds another connection on the same stream for no more than the stall limit, and memory stays bounded', async () => {
    const hub = await startHub();
    const web = await startHttpServer();
    cleanups.push(() => web.close());
    // A target that accepts and never reads.
    const stuckSockets = new Set<net.Socket>();
    const stuck = net.createServer((s) => {
      s.pause();
      stuckSockets.add(s);
    });
    await new Promise<void>((r) => stuck.listen(0, '127.0.0.1', () => r()));
    cleanups.push(
      () =>
        new Promise((r) => {
          for (const s of stuckSockets) s.destroy();
          stuck.close(r);
        }),
    );
    const stuckPort = (stuck.address() as net.AddressInfo).port;
    // The stall limit runs on this clock: the stuck target stops reading "for 2 s" when the test says so.
    const clock = new ManualClock();
    const agent = startAgent(
      [`localhost:${hub.ports.agent}`],
      [...agentTlsFlags(pki), '--agent-identifiers=host=127.0.0.1', '--max-connection-buffer=4194304'],
      { clock },
    );
    cleanups.push(() => agent.stop());
    await agent.ready();

    const size = 64 << 20;
    const fetchWeb = async (onProgress?: () => void) => {
      const conn = await dial(hub, `127.0.0.1:${web.port}`);
      const r = await download(conn, size, onProgress);
      conn.destroy();
      expect(r.ok).toBe(true);
    };
    await fetchWeb();

    const heapBefore = process.memoryUsage().heapUsed;
    let heapPeak = heapBefore;
    // Sampled as the data moves, not on a timer: each block the sender writes, each chunk the download
    // beside it reads, each look at the budget and at the stuck connection.
    const sample = () => {
      heapPeak = Math.max(heapPeak, process.memoryUsage().heapUsed);
    };
    const slow = await dial(hub, `127.0.0.1:${stuckPort}`);
    slow.on('error', () => {});
    let ended = false;
    slow.on('end', () => (ended = true)).resume();
    let pushed = 0;
    const block = pattern(256 << 10);
    // Writes as fast as the tunnel accepts, as a real sender would, until the agent gives up on it.
    const flood = (async () => {
      while (!slow.destroyed && !ended && pushed < 512 << 20) {
        pushed += block.length;
        sample();
        if (!slow.write(block))
          await Promise.race([
            new Promise((r) => slow.once('drain', r)),
            waitUntil(
              () => {
                sample();
                return ended || slow.destroyed;
              },
              30_000,
              'the stuck connection to close',
            ),
          ]);
      }
    })();
    // Past --max-connection-buffer, the target still counts as reading (the clock has not moved): the
    // stream is braked, so the next download waits behind it.
    await waitUntil(
      () => {
        sample();
        return agent.agent.budget.total > 4 << 20;
      },
      30_000,
      'the stuck connection over its buffer',
    );
    const beside = fetchWeb(sample);
    expect((await agent.agent.metrics.bufferOverflows.get()).values[0]?.value ?? 0).toBe(0);
    // Once the stall limit has passed with nothing accepted, the stuck target is closed and the stream goes on.
    await clock.advance(defaultStallMs);
    await flood;
    expect(ended || slow.destroyed).toBe(true);
    await beside;
    // The stuck target was closed (stalled), not left to hold the stream.
    expect((await agent.agent.metrics.bufferOverflows.get()).values[0]?.value).toBe(1);
    // Everything in this process (hub, client, agent) grew far less than what the sender pushed.
    expect(heapPeak - heapBefore).toBeLessThan(96 << 20);
  }, 60_000);
});

describe('credentials rotated on disk', () => {
  it('replace streams gracefully with the new certificate and re-read the token, without a restart', async () => {
    const next = makePki();
    // The hub trusts client certificates of both CAs, as during a rotation.
    const tokens: string[] = [];
    const hub = await startHub({
      agentTls: { ...hubTls(pki), ca: Buffer.concat([readFileSync(pki.caCert), readFileSync(next.caCert)]) },
      validateAgentToken: async (t) => void tokens.push(t),
    });
    const dir = pki.dir;
    const certPath = join(dir, 'rotating.crt');
    const keyPath = join(dir, 'rotating.key');
    const tokenPath = join(dir, 'rotating.token');
    copyFileSync(pki.clientCert, certPath);
    copyFileSync(pki.clientKey, keyPath);
    writeFileSync(tokenPath, 'token-1');
    const agent = startAgent(
      [`localhost:${hub.ports.agent}`],
      [
        `--ca-cert=${pki.caCert}`,
        `--agent-cert=${certPath}`,
        `--agent-key=${keyPath}`,
        `--service-account-token-path=${tokenPath}`,
        '--sync-interval=100ms',
        '--sync-interval-cap=1s',
        '--agent-identifiers=host=127.0.0.1',
      ],
    );
    cleanups.push(() => agent.stop());
    await agent.ready();
    const [first] = agent.agent.clients.connections();

    const drained = hub.waitForPacket(PacketType.DRAIN, agent.agent.agentID);
    copyFileSync(next.clientCert, certPath);
    copyFileSync(next.clientKey, keyPath);
    writeFileSync(tokenPath, 'token-2');
    await drained;
    await waitUntil(
      () => first!.isClosed && agent.agent.clients.healthyCount === 1,
      20_000,
      'the old stream to be replaced',
    );
    expect(tokens).toEqual(['token-1', 'token-2']);
    expect(agent.agent.readiness.check()).toBeUndefined();
  });

  it('reconnects after the hub is restored with a new CA once the new CA bundle is on disk', async () => {
    const restored = makePki();
    const caPath = join(pki.dir, 'rotating-ca.crt');
    copyFileSync(pki.caCert, caPath);
    const hub = await startHub();
    const agent = startAgent(
      [`localhost:${hub.ports.agent}`],
      [
        `--ca-cert=${caPath}`,
        `--agent-cert=${pki.clientCert}`,
        `--agent-key=${pki.clientKey}`,
        '--sync-interval=100ms',
        '--sync-interval-cap=500ms',
      ],
    );
    cleanups.push(() => agent.stop());
    await agent.ready();
    const port = hub.ports.agent;
    await hub.close();
    // Hub restored from backup with a new PKI: the old CA no longer verifies it.
    const hub2 = await startHub({
      agentPort: port,
      agentTls: { cert: readFileSync(restored.serverCert), key: readFileSync(restored.serverKey) },
    });
    // The old CA refuses it: attempts fail (the second from now surely met the restored hub), nothing connects.
    const failed = async () =>
      (await agent.agent.metrics.serverConnectAttempts.get()).values.find((v) => v.labels.result === 'failed')?.value ??
      0;
    const failedBefore = await failed();
    await waitUntilAsync(async () => (await failed()) >= failedBefore + 2, 20_000, 'attempts on the restored hub');
    expect(agent.agent.clients.healthyCount).toBe(0);
    copyFileSync(restored.caCert, caPath);
    await agent.ready(1, 20_000);
    expect(hub2.agents().map((a) => a.agentID)).toContain(agent.agent.agentID);
  });
});
