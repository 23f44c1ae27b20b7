// Per-node agents behind the Go proxy-server v0.36 as kube-apiserver's egress uses it (gRPC frontend on
// a Unix socket, --proxy-strategies=destHost,default), on loopback: two agents run as the DaemonSet's
// per-node args run them (--node-name, --node-ips, --kubelet-port), each "node" an address of its own
// (127.0.0.5 and 127.0.0.6) with an echo server as its kubelet. Every dial to a node's address or
// name lands on that node's agent (its metrics count it); a dial the server routes to the wrong agent
// (no agent announces the address, or that node's agent is gone) is refused with a reason that reaches
// the caller. The real-cluster version of this is test/node.test.ts. Needs the Go binaries.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DialError, dialThroughProxy } from '../client/dial.js';
import { makePki, type TestPki } from './support/certs.js';
import { anpV036BinDir, GoServer, httpText } from './support/go-proxy-server.js';
import { type Child, runCli } from './support/processes.js';
import { missingBinariesNote } from './support/reference-bins.js';
import { sampleValue } from './support/promql.js';
import { skipNote } from './support/skips.js';
import { echoRoundTrip, sha256, startEchoServer, type Target, unusedPort } from './support/targets.js';
import { waitUntilAsync } from './support/wait.js';

const binDir = anpV036BinDir();
if (!binDir) skipNote('per-node', missingBinariesNote('ANP_V036_BIN_DIR', 'anp-v0.36', ['proxy-server']));

const dialsCounted = 'konnectivity_network_proxy_agent_dial_duration_seconds_count';

interface NodeAgent {
  name: string;
  ip: string;
  kubelet: Target;
  child: Child;
  healthPort: number;
  metrics(): Promise<string>;
}

let pki: TestPki;
let dir: string;
let server: GoServer;
const nodes: NodeAgent[] = [];
let kubeletPort: number;

async function startNodeAgent(name: string, ip: string): Promise<NodeAgent> {
  const kubelet = await startEchoServer(ip, kubeletPort);
  const healthPort = await unusedPort();
  const [cert, key] = pki.issue(`agent-${name}`, { client: true });
  const child = runCli([
    '--proxy-server-host=127.0.0.1',
    `--proxy-server-port=${server.ports.agent}`,
    `--ca-cert=${pki.caCert}`,
    `--agent-cert=${cert}`,
    `--agent-key=${key}`,
    `--agent-id=agent-${name}`,
    '--cluster-name=cluster1',
    `--node-name=${name}`,
    `--node-ips=${ip}`,
    `--kubelet-port=${kubeletPort}`,
    '--dns-port=0',
    '--dns-upstream=127.0.0.1:9',
    '--health-server-host=127.0.0.1',
    `--health-server-port=${healthPort}`,
    '--debug-socket=false',
    '--sync-interval=200ms',
  ]);
  const metrics = () => httpText(`http://127.0.0.1:${healthPort}/metrics`);
  await waitUntilAsync(
    async () => (await httpText(`http://127.0.0.1:${healthPort}/readyz`).catch(() => '')) === 'ok',
    60_000,
    `agent ${name} ready`,
  );
  return { name, ip, kubelet, child, healthPort, metrics };
}

const dial = (address: string) =>
  dialThroughProxy({ mode: 'grpc', proxyHost: '', proxyPort: 0, proxyUds: server.uds, address, timeoutMs: 20_000 });

async function roundTrip(address: string): Promise<string> {
  const conn = await dial(address);
  try {
    return await echoRoundTrip(conn, Buffer.from(`hello ${address}`));
  } finally {
    conn.destroy();
  }
}

const dialsOf = async (node: NodeAgent) => sampleValue(await node.metrics(), dialsCounted) ?? 0;

describe.skipIf(!binDir)('per-node agents behind the Go proxy-server (destHost,default, Unix socket)', () => {
  beforeAll(async () => {
    pki = makePki();
    dir = mkdtempSync(join(tmpdir(), 'spoke-per-node-'));
    kubeletPort = await unusedPort();
    server = await GoServer.create(binDir!, 'grpc', 'destHost,default', 'per-node-hub', {
      uds: join(dir, 'egress.sock'),
    });
    await server.start(pki);
    nodes.push(await startNodeAgent('n1', '127.0.0.5'), await startNodeAgent('n2', '127.0.0.6'));
    // Both registered with the server: each agent's "Agent connected" line.
    await waitUntilAsync(
      async () => server.lines(/Agent connected|agent connected/i).length >= 2,
      30_000,
      'two agents in the proxy-server log',
    );
  }, 120_000);

  afterAll(async () => {
    for (const n of nodes) {
      n.child.kill('SIGKILL');
      await n.child.exited;
      await n.kubelet.close();
    }
    await server?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('sends 100 of 100 alternating dials to the node they name, by address and by name, each on that node agent', async () => {
    const before = await Promise.all(nodes.map(dialsOf));
    const accepted = nodes.map((n) => n.kubelet.accepted());
    for (let i = 0; i < 100; i++) {
      const node = nodes[i % 2]!;
      const host = i % 4 < 2 ? node.ip : `${node.name}.node.cluster1`;
      expect(await roundTrip(`${host}:${kubeletPort}`)).toBe(sha256(`hello ${host}:${kubeletPort}`));
    }
    const after = await Promise.all(nodes.map(dialsOf));
    expect(after.map((a, i) => a - before[i]!)).toEqual([50, 50]);
    expect(nodes.map((n, i) => n.kubelet.accepted() - accepted[i]!)).toEqual([50, 50]);
  });

  it('refuses, with the reason in the DIAL_RSP, what reaches the wrong node agent', async () => {
    // No agent announces 127.0.0.7: destHost finds none and `default` picks either agent, which refuses.
    const stray = await dial(`127.0.0.7:${kubeletPort}`).then(
      (conn) => {
        conn.destroy();
        return undefined;
      },
      (err: Error) => err,
    );
    expect(stray).toBeInstanceOf(DialError);
    expect(stray!.message).toMatch(
      new RegExp(
        `dial tcp 127\\.0\\.0\\.7:${kubeletPort}: not allowed: 127\\.0\\.0\\.7 is not this node's address \\(--node-ips=127\\.0\\.0\\.[56]\\), not an address any rule resolves to, nor inside --allowed-cidrs`,
      ),
    );
    // Another port of a node is not the kubelet's: refused by the node's own agent.
    await expect(dial('127.0.0.5:22')).rejects.toThrow(
      /dial tcp 127\.0\.0\.5:22: not allowed: 127\.0\.0\.5 is this node's address, where only ports \d+ are dialled/,
    );
    // n2's agent gone: dials to n2 fall back to n1's agent, which refuses n2's address and name.
    const n2 = nodes[1]!;
    n2.child.kill('SIGKILL');
    await n2.child.exited;
    await waitUntilAsync(
      async () => server.lines(/Remove|removed|Agent disconnected|agent disconnected/i).length > 0,
      30_000,
      "n2's agent removed by the server",
    );
    const accepted = n2.kubelet.accepted();
    await expect(dial(`127.0.0.6:${kubeletPort}`)).rejects.toThrow(
      /not allowed: 127\.0\.0\.6 is not this node's address \(--node-ips=127\.0\.0\.5\)/,
    );
    await expect(dial(`n2.node.cluster1:${kubeletPort}`)).rejects.toThrow(
      /not allowed: n2\.node\.cluster1 is the name of node n2, which only the agent on that node serves/,
    );
    expect(n2.kubelet.accepted()).toBe(accepted);
    const denied = await nodes[0]!.metrics();
    expect(sampleValue(denied, 'spoke_agent_dials_denied_total{reason="other_node"}')).toBe(1);
    expect(sampleValue(denied, 'spoke_agent_dials_denied_total{reason="node_port"}')).toBe(1);
  });
});
