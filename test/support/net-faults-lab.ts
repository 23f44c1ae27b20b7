// The network-faults harness's world, in a namespace of its own: the Go v0.36 proxy-server with its
// http-connect frontend (as cluster-proxy runs it, its default proxy strategy), one agent (ours or the
// Go one), an HTTP target, and the gateway the harness reaches them through. Fixed ports: nothing else
// lives in the namespace. Faults come from net-faults.ts; this file only starts, probes and stops.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { makePki, type TestPki } from './certs.js';
import { anpV036BinDir, goServerFlags } from './go-proxy-server.js';
import type { HostsFile } from './hosts-file.js';
import { Faults, agentFlows, establishedFlows, type Flow } from './net-faults.js';
import { fetchThroughHub, statusOf, textOf, type Fetch, type HubClientOptions } from './netns-client.js';
import { Netns, netnsUnavailable } from './netns.js';
import { buildDist, type Child } from './processes.js';
import { missingBinariesNote } from './reference-bins.js';
import { sampleValue } from './promql.js';
import { waitUntilAsync } from './wait.js';

const ports = { frontend: 8090, agent: 8091, serverHealth: 8092, serverAdmin: 8095, target: 8080 } as const;
const agentHealth = 8093;
const goAgentAdmin = 8096;
/** The hub's agent endpoint by name, for the moved-hub scenario; the hub's certificate names it. */
export const hubName = 'hub.spoke-nf.test';
const targetAddress = `127.0.0.1:${ports.target}`;

/**
 * Our agent's fault-detection flags, in one place for the suite and the bench: what finds a silent path
 * to the hub (agent/README.md). Given at their defaults so the figures say what they were measured with.
 */
export const ourFaultFlags: readonly string[] = ['--tcp-keepalive-time=3s', '--tcp-user-timeout=8s'];

const goBins = ['proxy-server', 'proxy-agent'];

/** Why the harness cannot run here, or undefined. */
export function labUnavailable(): string | undefined {
  return (
    netnsUnavailable() ??
    (anpV036BinDir(goBins) ? undefined : missingBinariesNote('ANP_V036_BIN_DIR', 'anp-v0.36', goBins))
  );
}

const here = (file: string) => fileURLToPath(new URL(file, import.meta.url));

export type AgentKind = 'ours' | 'go';

export interface LabAgent {
  kind: AgentKind;
  child: Child;
  pid: number;
  /** Its established connections to the agent port (on `address` only, when given). */
  flows(address?: string): Flow[];
  /** /readyz's status code, 0 when it does not answer. */
  readyz(): Promise<number>;
  /** Our agent's /metrics text. */
  metrics(): Promise<string>;
}

export class Lab {
  readonly pki: TestPki;
  readonly faults: Faults;
  readonly client: HubClientOptions;
  private readonly gateway: string;
  private readonly children: Child[] = [];
  private server?: Child;
  private readonly hubCert: [string, string];

  private constructor(readonly ns: Netns) {
    this.pki = makePki();
    this.hubCert = this.pki.issue('hub', { serverNames: [hubName, 'localhost', '127.0.0.1'] });
    this.gateway = join(mkdtempSync(join(tmpdir(), 'spoke-nf-gw-')), 'gateway.sock');
    this.faults = new Faults(ns, ports.agent);
    this.client = {
      gateway: this.gateway,
      frontend: `127.0.0.1:${ports.frontend}`,
      ca: readFileSync(this.pki.caCert),
      cert: readFileSync(this.pki.clientCert),
      key: readFileSync(this.pki.clientKey),
    };
  }

  /** A namespace with the gateway, the target and the Go proxy-server running. */
  static async start(): Promise<Lab> {
    const lab = new Lab(Netns.create());
    try {
      const node = process.execPath;
      const gw = lab.own(lab.ns.start(node, [here('./netns-gateway.cjs'), lab.gateway]));
      await gw.waitFor(/gateway ready/, 20_000);
      const target = lab.own(lab.ns.start(node, [here('./netns-target.cjs'), String(ports.target)]));
      await target.waitFor(/target ready/, 20_000);
      await lab.startServer();
    } catch (err) {
      await lab.close();
      throw err;
    }
    return lab;
  }

  private own(child: Child): Child {
    this.children.push(child);
    return child;
  }

  private async startServer(): Promise<void> {
    const bin = join(anpV036BinDir(goBins)!, 'proxy-server');
    const p = { server: ports.frontend, agent: ports.agent, health: ports.serverHealth, admin: ports.serverAdmin };
    // The agent port on every address: the moved hub is the same server reached at another one.
    const args = [
      ...goServerFlags(this.pki, 'http-connect', 'default', p),
      '--agent-bind-address=0.0.0.0',
      `--cluster-cert=${this.hubCert[0]}`,
      `--cluster-key=${this.hubCert[1]}`,
      '--server-count=1',
      '--server-id=hub',
      '-v=3',
    ];
    this.server = this.own(this.ns.start(bin, args));
    await waitUntilAsync(
      async () => {
        if (this.server!.stderr().includes('Error')) throw new Error(`proxy-server: ${this.server!.stderr()}`);
        return (await this.inside(ports.serverHealth, '/healthz')) === 200;
      },
      20_000,
      'the proxy-server to be healthy',
      100,
    );
  }

  /** GET `path` on a port inside the namespace: the status code (0: no answer). */
  inside(port: number, path: string): Promise<number> {
    return statusOf(this.gateway, `127.0.0.1:${port}`, path);
  }

  /** The proxy-server's agents it can route to (ready_backends). */
  async serverBackends(): Promise<number> {
    const text = (await textOf(this.gateway, `127.0.0.1:${ports.serverHealth}`, '/metrics')) ?? '';
    return sampleValue(text, 'konnectivity_network_proxy_server_ready_backends') ?? 0;
  }

  /** The proxy-server's own connections from an agent (its side of the agent port). */
  serverSideFlows(): Flow[] {
    const pid = this.server!.pid;
    return establishedFlows(this.ns).filter((f) => f.pids.includes(pid) && f.local.endsWith(`:${ports.agent}`));
  }

  /**
   * An agent connected to the hub at `host` (an address, or hubName resolved through `hosts`); resolves
   * once it holds a connection and /readyz says 200.
   */
  async startAgent(kind: AgentKind, opts: { host?: string; hosts?: HostsFile } = {}): Promise<LabAgent> {
    const host = opts.host ?? '127.0.0.1';
    const tlsFlags = [
      `--ca-cert=${this.pki.caCert}`,
      `--agent-cert=${this.pki.clientCert}`,
      `--agent-key=${this.pki.clientKey}`,
    ];
    const common = [
      `--proxy-server-host=${host}`,
      `--proxy-server-port=${ports.agent}`,
      ...tlsFlags,
      '--agent-identifiers=host=localhost&ipv4=127.0.0.1',
      '--health-server-host=127.0.0.1',
      `--health-server-port=${agentHealth}`,
    ];
    let [command, args]: [string, string[]] =
      kind === 'ours'
        ? [process.execPath, [buildDist(), ...common, '--log-level=info', '--drain-timeout=1s', ...ourFaultFlags]]
        : [
            join(anpV036BinDir(goBins)!, 'proxy-agent'),
            [...common, '--admin-bind-address=127.0.0.1', `--admin-server-port=${goAgentAdmin}`, '-v=3'],
          ];
    if (opts.hosts) [command, args] = opts.hosts.wrap(command, args);
    const child = this.own(this.ns.start(command, args));
    const agent: LabAgent = {
      kind,
      child,
      pid: child.pid,
      flows: (address) => agentFlows(this.ns, child.pid, ports.agent, address),
      readyz: () => this.inside(agentHealth, '/readyz'),
      metrics: async () => (await textOf(this.gateway, `127.0.0.1:${agentHealth}`, '/metrics')) ?? '',
    };
    let exited = false;
    void child.exited.then(() => (exited = true));
    await waitUntilAsync(
      async () => {
        if (exited) throw new Error(`${kind} agent exited: ${child.stdout()}${child.stderr()}`.slice(-3000));
        return agent.flows().length > 0 && (await agent.readyz()) === 200;
      },
      60_000,
      `the ${kind} agent to connect`,
      100,
    );
    return agent;
  }

  /** Stops an agent (SIGKILL: the next one starts clean; nothing of its shutdown is measured). */
  async stopAgent(agent: LabAgent): Promise<void> {
    agent.child.kill('SIGKILL');
    await agent.child.exited;
  }

  /** The target's page through the hub. */
  fetchPage(timeoutMs = 30_000): Promise<Fetch> {
    return fetchThroughHub(this.client, targetAddress, '/page', { timeoutMs });
  }

  /** `bytes` from the target through the hub. */
  download(
    bytes: number,
    opts: { timeoutMs: number; onBytes?: (n: number) => void; signal?: AbortSignal },
  ): Promise<Fetch> {
    return fetchThroughHub(this.client, targetAddress, `/bytes/${bytes}`, opts);
  }

  /** The proxy-server's log so far (klog on stderr). */
  serverLog(): string {
    return this.server?.stderr() ?? '';
  }

  async close(): Promise<void> {
    for (const c of this.children) c.kill('SIGKILL');
    await Promise.all(this.children.map((c) => c.exited));
    this.ns.destroy();
    for (const dir of [dirname(this.gateway), this.pki.dir]) rmSync(dir, { recursive: true, force: true });
  }
}
