// `npm start` with no flags that choose names: the whole product on loopback, in one process. Next to
// the local hub, the agent gets the cluster name `cluster1` and a rules file with one static rule,
// demo.default.cluster1 -> 127.0.0.1, the name of a page served here on a free loopback port. The lines
// it prints show the DNS server answering the name, a request through the hub that the agent dials by
// name, and `resolve` explaining the answer. Imported only when the demo runs.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { joinHostPort } from '../net/address.js';

const demoCluster = 'cluster1';
const demoName = `demo.default.${demoCluster}`;

export interface Demo {
  /** What the demo sets in place of flags: its cluster name and its rules file. */
  options: { clusterName: string; rulesFile: string };
  /** What to print once the agent is connected: three commands that work as printed, from the clone. */
  lines(at: DemoListeners): string[];
  close(): Promise<void>;
}

/** Where the rest listens (the demo's default ports may have been taken). */
export interface DemoListeners {
  httpConnectPort: number;
  dns: { address: string; port: number };
  health: { host: string; port: number };
}

/**
 * Serves the page and writes the rules file. `offFlags`: the flags that turn the demo off (the agent
 * command decides), named in the printed lines.
 */
export async function startDemo(offFlags: readonly string[]): Promise<Demo> {
  const server = http.createServer((req, res) => {
    res.writeHead(200, { 'content-type': 'text/plain; charset=utf-8' });
    res.end(
      `Hello from the spoke-agent demo page: you reached ${req.headers.host ?? demoName} through the hub, the tunnel and the agent.\n`,
    );
  });
  await new Promise<void>((resolve, reject) => server.once('error', reject).listen(0, '127.0.0.1', resolve));
  const dir = mkdtempSync(join(tmpdir(), 'spoke-agent-demo-'));
  const rulesFile = join(dir, 'rules.yaml');
  writeFileSync(
    rulesFile,
    `# npm start's demo: the page served in process, answered with its loopback address.\nstatic:\n  - name: ${demoName}\n    target: 127.0.0.1\n`,
  );
  const pagePort = (server.address() as AddressInfo).port;
  return {
    options: { clusterName: demoCluster, rulesFile },
    lines: (at) => demoLines(pagePort, rulesFile, at, offFlags),
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** An address a client on this machine can reach a listener bound to `bound` at. */
const reachable = (bound: string) =>
  bound === '0.0.0.0' || bound === '' ? '127.0.0.1' : bound === '::' ? '::1' : bound;

function demoLines(pagePort: number, rulesFile: string, at: DemoListeners, offFlags: readonly string[]): string[] {
  const dnsServer = reachable(at.dns.address);
  const healthHost = reachable(at.health.host);
  // `spoke-agent resolve` defaults: --server=127.0.0.1 --dns-port=5353 --health-server-host=127.0.0.1 --health-server-port=8093.
  const resolveFlags = [
    dnsServer !== '127.0.0.1' ? `--server=${dnsServer}` : '',
    at.dns.port !== 5353 ? `--dns-port=${at.dns.port}` : '',
    healthHost !== '127.0.0.1' ? `--health-server-host=${healthHost}` : '',
    at.health.port !== 8093 ? `--health-server-port=${at.health.port}` : '',
  ].filter(Boolean);
  const target = joinHostPort(demoName, pagePort);
  return [
    `spoke-agent demo: cluster "${demoCluster}", DNS on ${joinHostPort(at.dns.address, at.dns.port)}, and a page served at 127.0.0.1:${pagePort}`,
    `under the name ${demoName} (a static rule in ${rulesFile}). From another terminal in this folder:`,
    '  the DNS server answers the name:',
    `    dig -p ${at.dns.port} @${dnsServer} ${demoName}`,
    "  a request through the hub's HTTP CONNECT port and the tunnel, which the agent dials by name:",
    `    curl -p -x http://127.0.0.1:${at.httpConnectPort} http://${target}/`,
    '  which rule answers the name, and why:',
    `    npm start -- resolve ${demoName}${resolveFlags.map((f) => ` ${f}`).join('')}`,
    `Ctrl-C stops it. Any of --${offFlags.join(', --')} turns the demo off.`,
  ];
}
