import { readFileSync } from 'node:fs';
import net from 'node:net';
import { PassThrough } from 'node:stream';
import * as grpc from '@grpc/grpc-js';
import { afterEach, describe, expect, it } from 'vitest';
import { makePki } from '../test/support/certs.js';
import { startEchoServer } from '../test/support/targets.js';
import { AgentService, PacketType, type OutPacket, type Packet } from '../proto/packets.js';
import { ProxyHub } from '../hub/proxy-server.js';
import { runDialCommand } from './dial-command.js';

const read = (p: string) => readFileSync(p);
const readPair = (cert: string, key: string, ca: string) => ({ cert: read(cert), key: read(key), ca: read(ca) });

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** An agent that dials loopback targets; just enough for the CLI. */
function agent(port: number, creds = grpc.credentials.createInsecure()) {
  const client = new AgentService(`localhost:${port}`, creds, { 'grpc.use_local_subchannel_pool': 1 });
  const md = new grpc.Metadata();
  md.set('agentID', 'cli-test');
  const call = (
    client as unknown as { Connect(md: grpc.Metadata): grpc.ClientDuplexStream<OutPacket, Packet> }
  ).Connect(md);
  call.on('error', () => {});
  const conns = new Map<string, net.Socket>();
  call.on('data', (pkt: Packet) => {
    if (pkt.type === PacketType.DIAL_REQ) {
      const { address, random } = pkt.dialRequest!;
      const s = net.connect(Number(address.split(':')[1]), '127.0.0.1');
      s.once('connect', () => {
        conns.set('1', s);
        call.write({ type: PacketType.DIAL_RSP, dialResponse: { random, connectID: '1' } });
      });
      s.on('data', (data: Buffer) => call.write({ type: PacketType.DATA, data: { connectID: '1', data } }));
      s.on('close', () => call.write({ type: PacketType.CLOSE_RSP, closeResponse: { connectID: '1' } }));
    } else if (pkt.type === PacketType.DATA) conns.get(pkt.data!.connectID)?.write(pkt.data!.data);
    else if (pkt.type === PacketType.CLOSE_REQ) conns.get(pkt.closeRequest!.connectID)?.destroy();
  });
  cleanups.push(() => call.cancel());
}

function io() {
  const stdin = new PassThrough();
  const stdout = new PassThrough();
  const stderr = new PassThrough();
  let out = '';
  let err = '';
  stdout.on('data', (c: Buffer) => (out += c.toString()));
  stderr.on('data', (c: Buffer) => (err += c.toString()));
  return { io: { stdin, stdout, stderr }, stdin, out: () => out, err: () => err };
}

/** A hub with TLS frontends (HTTP CONNECT on `httpConnectPort`), an agent on it, and an echo target. */
async function hubWithAgent(httpConnectPort: number | null) {
  const pki = makePki();
  const hub = await ProxyHub.start({
    agentPort: 0,
    serverPort: 0,
    httpConnectPort,
    agentTls: readPair(pki.serverCert, pki.serverKey, pki.caCert),
    frontendTls: readPair(pki.serverCert, pki.serverKey, pki.caCert),
  });
  cleanups.push(() => hub.close());
  const echo = await startEchoServer();
  cleanups.push(() => echo.close());
  agent(hub.ports.agent, grpc.credentials.createSsl(read(pki.caCert), read(pki.clientKey), read(pki.clientCert)));
  await hub.waitForAgent();
  return { pki, hub, echo };
}

describe('spoke-agent dial', () => {
  it.each(['grpc', 'http-connect'] as const)(
    'pipes stdin and stdout through the tunnel with --mode=%s and mTLS',
    async (mode) => {
      const { pki, hub, echo } = await hubWithAgent(0);
      const t = io();
      const port = mode === 'grpc' ? hub.ports.server! : hub.ports.httpConnect!;
      const code = runDialCommand(
        [
          `--mode=${mode}`,
          '--proxy-host=localhost',
          `--proxy-port=${port}`,
          `--ca-cert=${pki.caCert}`,
          `--client-cert=${pki.clientCert}`,
          `--client-key=${pki.clientKey}`,
          '--verbose',
          '--close-on-eof',
          echo.address,
        ],
        t.io,
      );
      t.stdin.write('ping\n');
      await expect.poll(() => t.out()).toBe('ping\n');
      t.stdin.end();
      expect(await code).toBe(0);
      expect(t.err()).toMatch(/established/);
    },
  );

  it('reaches a gRPC frontend over TLS by IP, the IP checked against the certificate, without a DEP0123 warning', async () => {
    const warnings: string[] = [];
    const onWarning = (w: Error & { code?: string }) => warnings.push(`${w.code ?? w.name}: ${w.message}`);
    process.on('warning', onWarning);
    cleanups.push(() => process.off('warning', onWarning));
    const { pki, hub, echo } = await hubWithAgent(null);
    const tls = [`--ca-cert=${pki.caCert}`, `--client-cert=${pki.clientCert}`, `--client-key=${pki.clientKey}`];
    const t = io();
    const code = runDialCommand(
      ['--proxy-host=127.0.0.1', `--proxy-port=${hub.ports.server}`, ...tls, '--close-on-eof', echo.address],
      t.io,
    );
    t.stdin.write('by IP\n');
    await expect.poll(() => t.out(), { message: t.err() }).toBe('by IP\n');
    t.stdin.end();
    expect(await code).toBe(0);
    // A certificate without the IP is refused: the IP is what is checked.
    const [otherCert, otherKey] = pki.issue('named-only', { serverNames: ['localhost'] });
    const named = await ProxyHub.start({
      agentPort: 0,
      serverPort: 0,
      httpConnectPort: null,
      frontendTls: readPair(otherCert, otherKey, pki.caCert),
    });
    cleanups.push(() => named.close());
    const refused = io();
    expect(
      await runDialCommand(
        ['--proxy-host=127.0.0.1', `--proxy-port=${named.ports.server}`, ...tls, '--dial-timeout=3s', echo.address],
        refused.io,
      ),
    ).toBe(1);
    expect(refused.err()).toMatch(/IP: 127\.0\.0\.1 is not in the cert's list/);
    await new Promise((r) => setImmediate(r)); // process warnings are emitted on the next tick
    expect(warnings.filter((w) => w.startsWith('DEP0123'))).toEqual([]);
  });

  it('exits 1 with the hub error when no agent is connected', async () => {
    const hub = await ProxyHub.start({ agentPort: 0, serverPort: 0, httpConnectPort: null });
    cleanups.push(() => hub.close());
    const t = io();
    const code = await runDialCommand(
      ['--proxy-host=127.0.0.1', `--proxy-port=${hub.ports.server}`, '127.0.0.1:9'],
      t.io,
    );
    expect(code).toBe(1);
    expect(t.err()).toBe(
      `spoke-agent dial: failed to dial 127.0.0.1:9 through 127.0.0.1:${hub.ports.server}: No agent available\n`,
    );
  });

  it('exits 2 on bad usage', async () => {
    const t = io();
    expect(await runDialCommand(['--mode=udp', 'a:1'], t.io)).toBe(2);
    expect(t.err()).toMatch(/mode must be set to either 'grpc' or 'http-connect' not "udp"/);
    expect(await runDialCommand(['nohostport'], t.io)).toBe(2);
  });
});
