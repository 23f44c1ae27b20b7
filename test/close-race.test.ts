// The ordinary close race, many times: the target says its last word and closes while the client
// closes on reading it, so the hub's CLOSE_REQ crosses the agent's CLOSE_RSP. That must not count as
// a rejected packet (an alarm), only as a late one; against our hub and the Go proxy-server.
import net from 'node:net';
import { readFileSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { dialThroughProxy } from '../client/dial.js';
import { ProxyHub } from '../hub/proxy-server.js';
import { startAgent } from './support/agent.js';
import { makePki, hubTls, agentTlsFlags } from './support/certs.js';
import { anpBinDir, GoServer } from './support/go-proxy-server.js';
import { missingBinariesNote } from './support/reference-bins.js';
import { skipNote } from './support/skips.js';

const pki = makePki();
const tls = hubTls(pki);
const cycles = 300;
if (anpBinDir() === undefined)
  skipNote('close-race', `the Go proxy-server case ${missingBinariesNote('ANP_BIN_DIR', 'anp', ['proxy-server'])}`);

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** Agent port and gRPC frontend of a running server. */
type Server = { agent: number; frontend: number; mtls: boolean };

async function ourHub(): Promise<Server> {
  const hub = await ProxyHub.start({ agentPort: 0, serverPort: 0, proxyStrategies: ['default'], agentTls: tls });
  cleanups.push(() => hub.close());
  return { agent: hub.ports.agent, frontend: hub.ports.server!, mtls: false };
}

async function goServer(): Promise<Server> {
  const go = await GoServer.create(anpBinDir()!, 'grpc', 'default', 'go-close-race');
  await go.start(pki);
  cleanups.push(() => go.stop());
  return { agent: go.ports.agent, frontend: go.ports.server, mtls: true };
}

describe.each([
  ['our hub', ourHub, true],
  ['the Go proxy-server', goServer, anpBinDir() !== undefined],
] as const)('the close race through %s', (_name, makeServer, available) => {
  it.skipIf(!available)(
    `${cycles} cycles: late packets, none rejected`,
    async () => {
      // Says one byte and closes at once.
      const target = net.createServer((s) => s.end('x'));
      await new Promise<void>((r) => target.listen(0, '127.0.0.1', () => r()));
      cleanups.push(() => new Promise((r) => target.close(r)));
      const server = await makeServer();
      const agent = startAgent([`localhost:${server.agent}`], [...agentTlsFlags(pki)], {
        resolve: async () => ({ addresses: ['127.0.0.1'] }),
      });
      cleanups.push(() => agent.stop());
      await agent.ready(1);
      const frontendTls = server.mtls
        ? { ca: readFileSync(pki.caCert), cert: readFileSync(pki.clientCert), key: readFileSync(pki.clientKey) }
        : {};
      const address = `127.0.0.1:${(target.address() as net.AddressInfo).port}`;
      for (let i = 0; i < cycles; i++) {
        const conn = await dialThroughProxy({
          mode: 'grpc',
          proxyHost: '127.0.0.1',
          proxyPort: server.frontend,
          address,
          timeoutMs: 10_000,
          ...frontendTls,
        });
        conn.on('error', () => {});
        await new Promise<void>((resolve) => {
          conn.once('data', () => conn.destroy());
          conn.once('close', () => resolve());
        });
      }
      const rejected = (await agent.agent.metrics.rejectedPackets.get()).values.reduce((n, v) => n + v.value, 0);
      const late = (await agent.agent.metrics.latePackets.get()).values.reduce((n, v) => n + v.value, 0);
      expect(rejected).toBe(0);
      // The race happened (otherwise this test proves nothing).
      expect(late).toBeGreaterThan(0);
    },
    120_000,
  );
});
