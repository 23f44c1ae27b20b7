// A misbehaving server on the agent port: truncated and oversized gRPC messages. The agent logs and
// counts what it cannot decode, keeps serving on the same stream, and survives a stream that dies.
import * as grpc from '@grpc/grpc-js';
import { afterEach, describe, expect, it } from 'vitest';
import { AgentService, PacketType, type Packet } from '../proto/packets.js';
import { startAgent } from './support/agent.js';
import { makePki, agentTlsFlags } from './support/certs.js';
import { readFileSync } from 'node:fs';
import { waitUntil } from './support/wait.js';

const pki = makePki();
const connect = AgentService.service.Connect!;
const encode = (p: object) => connect.requestSerialize(p) as Buffer;

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** An agent port whose handler writes raw bytes, so it can send what no real server would. */
async function rawServer(onStream: (call: grpc.ServerDuplexStream<Packet, Buffer>) => void): Promise<number> {
  const server = new grpc.Server();
  server.addService(
    {
      Connect: {
        ...connect,
        responseSerialize: (b: Buffer) => b,
        requestDeserialize: (b: Buffer) => connect.responseDeserialize(b),
      },
    } as unknown as grpc.ServiceDefinition,
    {
      Connect: (call: grpc.ServerDuplexStream<Packet, Buffer>) => {
        const md = new grpc.Metadata();
        md.set('serverID', 'bad-hub');
        md.set('serverCount', '1');
        call.sendMetadata(md);
        call.on('error', () => {});
        onStream(call);
      },
    },
  );
  const creds = grpc.ServerCredentials.createSsl(
    readFileSync(pki.caCert),
    [{ cert_chain: readFileSync(pki.serverCert), private_key: readFileSync(pki.serverKey) }],
    true,
  );
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', creds, (err, p) => (err ? reject(err) : resolve(p))),
  );
  cleanups.push(() => server.forceShutdown());
  return port;
}

describe('a server that sends malformed gRPC messages', () => {
  it('truncated packets are counted and dropped; the stream keeps serving', async () => {
    const replies: Packet[] = [];
    let streams = 0;
    const port = await rawServer((call) => {
      streams++;
      call.on('data', (p: Packet) => replies.push(p));
      call.write(Buffer.from([0x08, 0x00, 0x12, 0x40, 0x0a])); // DIAL_REQ whose payload is cut short
      call.write(Buffer.from([0xff, 0xff, 0xff]));
      call.write(
        encode({ type: PacketType.DIAL_REQ, dialRequest: { protocol: 'tcp', address: '127.0.0.1:1', random: '17' } }),
      );
    });
    const agent = startAgent([`localhost:${port}`], [...agentTlsFlags(pki)]);
    cleanups.push(() => agent.stop());
    await waitUntil(() => replies.some((p) => p.type === PacketType.DIAL_RSP), 20_000, 'a DIAL_RSP');
    expect(replies.find((p) => p.type === PacketType.DIAL_RSP)?.dialResponse).toMatchObject({
      random: '17',
      error: 'dial tcp 127.0.0.1:1: connect: connection refused',
    });
    const rejected = await agent.agent.metrics.rejectedPackets.get();
    expect(rejected.values.find((v) => v.labels.reason === 'malformed')?.value).toBe(2);
    expect(streams).toBe(1);
  });

  it('an oversized message ends that stream only; the agent reconnects', async () => {
    let streams = 0;
    const port = await rawServer((call) => {
      if (++streams === 1) call.write(Buffer.alloc(40 << 20));
    });
    const agent = startAgent(
      [`localhost:${port}`],
      [...agentTlsFlags(pki), '--sync-interval=100ms', '--sync-interval-cap=200ms'],
    );
    cleanups.push(() => agent.stop());
    await waitUntil(() => streams >= 2, 10_000, 'a second stream');
    await agent.ready();
    const errors = await agent.agent.metrics.streamErrors.get();
    expect(errors.values.some((v) => v.labels.code === String(grpc.status.RESOURCE_EXHAUSTED))).toBe(true);
  });
});
