// The built agent (dist/, as the image runs it) inside a memory cgroup of the DaemonSet's limit
// (256 MiB, no swap), on an operator's worst day: 40 targets that accept and never read, each sent
// 24 MiB through the tunnel, beside a healthy 64 MiB upload on the same agent stream. Without a total
// for buffered bytes the kernel kills the agent (every tunnel of the node); with it, the stopped
// targets are closed with an error and everything else goes on. Needs root and a writable cgroup
// file system (skipped with a note otherwise). On cgroup v1 the kernel's socket buffers are not
// charged to the cgroup (v2 charges them): there the test bounds what the agent itself holds.
import { createHash } from 'node:crypto';
import net from 'node:net';
import type { Duplex } from 'node:stream';
import { afterAll, describe, expect, it } from 'vitest';
import { dialThroughProxy } from '../client/dial.js';
import { ProxyHub } from '../hub/proxy-server.js';
import { memoryCgroup } from './support/cgroup.js';
import { makePki, hubTls, agentTlsFlags } from './support/certs.js';
import { buildDist, run, type Child } from './support/processes.js';
import { sampleValue } from './support/promql.js';
import { skipNote } from './support/skips.js';
import { pattern, sha256, unusedPort } from './support/targets.js';

const MiB = 1 << 20;
const cgroup = memoryCgroup(256 * MiB, `spoke-agent-test-${process.pid}`);
if (typeof cgroup === 'string') skipNote('memory-limit', `skipped: ${cgroup}`);

const cleanups: Array<() => unknown> = [];
afterAll(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** Writes `total` bytes as fast as the tunnel takes them; resolves with what was written and why it stopped. */
function flood(conn: Duplex, total: number, reasons: string[]): Promise<{ written: number; closedBy?: string }> {
  const block = Buffer.alloc(256 << 10, 0x61);
  return new Promise((resolve) => {
    let written = 0;
    let done = false;
    const finish = () => {
      if (done) return;
      done = true;
      resolve({ written, closedBy: reasons.at(-1) });
    };
    // The agent's close reaches the client as the end of what it reads (and a write waiting for
    // room may never complete then).
    conn.on('end', finish);
    conn.on('error', finish);
    conn.on('close', finish);
    conn.resume();
    const go = () => {
      while (!done && !conn.destroyed && written < total) {
        written += block.length;
        if (!conn.write(block)) return void conn.once('drain', go);
      }
      if (written >= total) finish();
    };
    go();
  });
}

/** A target that hashes everything it reads and answers with the hex digest when the sender is done (8-byte length first). */
async function hashTarget(): Promise<net.Server> {
  const server = net.createServer((s) => {
    s.on('error', () => {});
    const hash = createHash('sha256');
    let head = Buffer.alloc(0);
    let left = -1;
    s.on('data', (c: Buffer) => {
      if (left < 0) {
        head = Buffer.concat([head, c]);
        if (head.length < 8) return;
        left = Number(head.readBigUInt64BE(0));
        c = head.subarray(8);
      }
      hash.update(c);
      left -= c.length;
      if (left === 0) s.write(hash.digest('hex'));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return server;
}

/** Sends `size` bytes to a hashTarget and compares its digest with ours. */
function upload(conn: Duplex, size: number): Promise<boolean> {
  const body = pattern(size, 7);
  const expected = sha256(body);
  return new Promise((resolve, reject) => {
    let answer = '';
    conn.on('data', (c: Buffer) => {
      answer += c.toString();
      if (answer.length >= 64) resolve(answer === expected);
    });
    conn.on('error', reject);
    conn.on('close', () => resolve(false));
    const head = Buffer.alloc(8);
    head.writeBigUInt64BE(BigInt(size));
    conn.write(head);
    conn.write(body);
  });
}

describe.skipIf(typeof cgroup === 'string')('the built agent under the DaemonSet memory limit (256 MiB)', () => {
  it('closes 40 stalled targets fed 24 MiB each with an error, keeps a healthy 64 MiB upload intact, and is not OOM-killed', async () => {
    const cg = cgroup as Exclude<typeof cgroup, string>;
    cleanups.push(() => cg.remove());
    const entry = buildDist();
    const pki = makePki();
    const hub = await ProxyHub.start({
      agentPort: 0,
      serverPort: 0,
      proxyStrategies: ['destHost'],
      agentTls: hubTls(pki),
    });
    cleanups.push(() => hub.close());
    const sink = await hashTarget();
    cleanups.push(() => new Promise((r) => sink.close(r)));
    const stuckSockets = new Set<net.Socket>();
    const stuck = net.createServer((s) => {
      s.pause();
      s.on('error', () => {});
      stuckSockets.add(s);
    });
    await new Promise<void>((r) => stuck.listen(0, '127.0.0.1', 1024, r));
    cleanups.push(
      () =>
        new Promise((r) => {
          for (const s of stuckSockets) s.destroy();
          stuck.close(r);
        }),
    );

    const healthPort = await unusedPort();
    // prettier-ignore
    const [command, args] = cg.wrap(process.execPath, [
      entry,
      `--proxy-server-host=127.0.0.1:${hub.ports.agent}`,
      ...agentTlsFlags(pki),
      '--agent-identifiers=host=127.0.0.1',
      '--health-server-host=127.0.0.1',
      `--health-server-port=${healthPort}`,
      '--log-level=info',
    ]);
    const agent: Child = run(command, args);
    cleanups.push(async () => {
      agent.kill('SIGKILL');
      await agent.exited;
    });
    const started = await agent.waitFor(/"heapLimit":(\d+),"bufferBudget":(\d+)/, 30_000);
    // Sized for the container: a heap of 108 MiB and 64 MiB of buffers, not Node's 259 MiB heap.
    expect(Number(started[1])).toBeLessThanOrEqual(128 * MiB);
    expect(Number(started[2])).toBe(64 * MiB);
    await hub.waitForAgent(undefined, 20_000);

    const dial = (address: string, reasons: string[] = []) =>
      dialThroughProxy({
        mode: 'grpc',
        proxyHost: '127.0.0.1',
        proxyPort: hub.ports.server!,
        address,
        timeoutMs: 10_000,
        onEvent: (e) => void (e.kind === 'closed' && reasons.push(e.reason)),
      });
    const stuckAddress = `127.0.0.1:${(stuck.address() as net.AddressInfo).port}`;
    const stalled = await Promise.all(
      Array.from({ length: 40 }, async () => {
        const reasons: string[] = [];
        return { c: await dial(stuckAddress, reasons), reasons };
      }),
    );
    const healthyReasons: string[] = [];
    const healthy = await dial(`127.0.0.1:${(sink.address() as net.AddressInfo).port}`, healthyReasons);
    const floods = stalled.map(({ c, reasons }) => flood(c, 24 * MiB, reasons));
    const intact = upload(healthy, 64 * MiB);

    const state = () =>
      `healthy connection closed by ${healthyReasons.join(', ') || 'nothing'}; oom kills ${cg.oomKills()}, peak ${(cg.peakBytes() / MiB).toFixed(0)} MiB; agent output:\n${(agent.stdout() + agent.stderr()).slice(-3000)}`;
    expect(await intact, state()).toBe(true);
    const results = await Promise.all(floods);
    healthy.destroy();
    for (const r of results) {
      // Closed by the agent before it took all 24 MiB, and the hub relayed why.
      expect(r.written).toBeLessThan(24 * MiB);
      expect(r.closedBy).toMatch(/CLOSE_RSP: (agent buffer budget exhausted|target stopped reading)/);
    }
    expect(agent.stdout() + agent.stderr()).not.toMatch(/heap out of memory/i);
    expect(cg.oomKills()).toBe(0);
    const metrics = await (await fetch(`http://127.0.0.1:${healthPort}/metrics`)).text();
    const value = (name: string) => sampleValue(metrics, name) ?? NaN;
    expect(
      value('spoke_agent_buffer_budget_shed_connections_total') +
        value('spoke_agent_connection_buffer_overflows_total'),
    ).toBe(40);
    console.log(
      `memory-limit.test: cgroup v${cg.version} peak ${(cg.peakBytes() / MiB).toFixed(0)} MiB of 256; shed by the budget ${value('spoke_agent_buffer_budget_shed_connections_total')}, by the per-connection limit ${value('spoke_agent_connection_buffer_overflows_total')}`,
    );
    agent.kill('SIGKILL');
    await agent.exited;
  }, 180_000);
});
