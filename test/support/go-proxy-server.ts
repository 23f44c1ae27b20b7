// The Go proxy-server of kubernetes-sigs/apiserver-network-proxy as a child process on 127.0.0.1, for
// the tests that meet it (interop-go, cluster-proxy, leases). The binaries are built outside the
// repository, one folder per release: release-0.30 in ANP_BIN_DIR, else ~/.cache/spoke-agent/anp;
// v0.36.0 (what cluster-proxy v0.11 pins) in ANP_V036_BIN_DIR, else ~/.cache/spoke-agent/anp-v0.36.
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import type { TestPki } from './certs.js';
import { terminate } from './processes.js';
import { missingBinariesNote, referenceBinDir } from './reference-bins.js';
import { unusedPort } from './targets.js';
import { waitUntilAsync } from './wait.js';

/** The folder holding the release-0.30 ANP binaries `names` (ANP_BIN_DIR, else the ready cache), or undefined. */
export const anpBinDir = (names: readonly string[] = ['proxy-server']): string | undefined =>
  referenceBinDir('ANP_BIN_DIR', 'anp', names);

export interface AnpRelease {
  name: 'release-0.30' | 'v0.36.0';
  dir: string;
  /**
   * v0.31 and later: the server reads DRAIN (marks the backend draining, routes around it), exports
   * ready_backends{proxy_strategy}, answers an HTTP CONNECT it cannot route with 500 (0.30 has
   * already sent 200 and closes), and keeps Leases (--enable-lease-controller).
   */
  modern: boolean;
}

const releases = [
  { name: 'release-0.30', envVar: 'ANP_BIN_DIR', kind: 'anp', modern: false },
  { name: 'v0.36.0', envVar: 'ANP_V036_BIN_DIR', kind: 'anp-v0.36', modern: true },
] as const;

/** The ANP releases whose binaries `names` are found, and a note for each that is not. */
export function anpReleases(names: readonly string[] = ['proxy-server']): { found: AnpRelease[]; missing: string[] } {
  const found: AnpRelease[] = [];
  const missing: string[] = [];
  for (const r of releases) {
    const dir = referenceBinDir(r.envVar, r.kind, names);
    if (dir) found.push({ name: r.name, dir, modern: r.modern });
    else missing.push(`${r.name}: ${missingBinariesNote(r.envVar, r.kind, names)}`);
  }
  return { found, missing };
}

/** The newest release found (cluster-proxy's v0.36.0 first), or undefined. */
export function newestAnpRelease(names: readonly string[] = ['proxy-server']): AnpRelease | undefined {
  return anpReleases(names).found.at(-1);
}

/** The v0.36.0 binaries `names`, the release cluster-proxy pins, or undefined. */
export const anpV036BinDir = (names: readonly string[] = ['proxy-server']): string | undefined =>
  anpReleases(names).found.find((r) => r.name === 'v0.36.0')?.dir;

export interface GoServerPorts {
  /** The frontend's TLS port; 0 when it serves a Unix socket instead. */
  server: number;
  agent: number;
  health: number;
  admin: number;
}

/** Free ports for a Go proxy-server (it refuses any in the ephemeral range: unusedPort picks below it). */
export async function goServerPorts(uds?: string): Promise<GoServerPorts> {
  return {
    server: uds ? 0 : await unusedPort(),
    agent: await unusedPort(),
    health: await unusedPort(),
    admin: await unusedPort(),
  };
}

/**
 * The Go proxy-server's flags on loopback with our PKI: mTLS on the agent port and on the frontend's
 * port, or the frontend on the Unix socket `uds` (--uds-name: plaintext, kube-apiserver's egress set-up).
 */
export function goServerFlags(
  pki: TestPki,
  mode: 'grpc' | 'http-connect',
  strategies: string,
  ports: GoServerPorts,
  uds?: string,
): string[] {
  // prettier-ignore
  return [
    `--mode=${mode}`,
    `--proxy-strategies=${strategies}`,
    ...(uds
      ? [`--uds-name=${uds}`, '--server-port=0']
      : [
          '--server-bind-address=127.0.0.1',
          `--server-port=${ports.server}`,
          `--server-cert=${pki.serverCert}`,
          `--server-key=${pki.serverKey}`,
          `--server-ca-cert=${pki.caCert}`,
        ]),
    '--agent-bind-address=127.0.0.1',
    `--agent-port=${ports.agent}`,
    `--cluster-cert=${pki.serverCert}`,
    `--cluster-key=${pki.serverKey}`,
    `--cluster-ca-cert=${pki.caCert}`,
    '--health-bind-address=127.0.0.1',
    `--health-port=${ports.health}`,
    '--admin-bind-address=127.0.0.1',
    `--admin-port=${ports.admin}`,
  ];
}

/** One Go proxy-server process; its combined output is kept in `log`. */
export class GoServer {
  log = '';
  private proc?: ChildProcess;
  private constructor(
    readonly binDir: string,
    readonly mode: 'grpc' | 'http-connect',
    readonly strategies: string,
    readonly serverID: string,
    readonly ports: GoServerPorts,
    /** The frontend's Unix socket (--uds-name, plaintext), instead of its TLS port. */
    readonly uds?: string,
  ) {}

  static async create(
    binDir: string,
    mode: 'grpc' | 'http-connect',
    strategies: string,
    serverID: string,
    opts: { uds?: string } = {},
  ): Promise<GoServer> {
    return new GoServer(binDir, mode, strategies, serverID, await goServerPorts(opts.uds), opts.uds);
  }

  /** `extraArgs` after ours, e.g. --server-count, --enable-lease-controller and --kubeconfig. */
  async start(pki: TestPki, extraArgs: readonly string[] = []): Promise<void> {
    const { ports } = this;
    const args = [
      ...goServerFlags(pki, this.mode, this.strategies, ports, this.uds),
      '--server-count=1',
      `--server-id=${this.serverID}`,
      '-v=5',
      ...extraArgs,
    ];
    const proc = spawn(join(this.binDir, 'proxy-server'), args, { stdio: ['ignore', 'pipe', 'pipe'] });
    this.proc = proc;
    const collect = (b: Buffer) => (this.log += b.toString());
    proc.stdout!.on('data', collect);
    proc.stderr!.on('data', collect);
    const healthy = async () => {
      // One that exited (a refused flag or port) says why at once instead of after the timeout.
      if (proc.exitCode !== null || proc.signalCode !== null)
        throw new Error(
          `proxy-server ${this.serverID} exited (${proc.exitCode ?? proc.signalCode}): ${this.log.split('\n').find((l) => /^Error/.test(l)) ?? this.log.slice(-2000)}`,
        );
      return (await httpText(`http://127.0.0.1:${ports.health}/healthz`).catch(() => '')) === 'ok';
    };
    await waitUntilAsync(healthy, 10_000, `proxy-server ${this.serverID} health`);
  }

  async stop(): Promise<void> {
    const proc = this.proc;
    if (!proc || proc.exitCode !== null || proc.signalCode !== null) return;
    await terminate(proc, new Promise((r) => proc.once('exit', r)), 3000);
  }

  /** SIGKILL: no graceful stop (a v0.36 server deletes its Lease when it stops; a killed one leaves it to expire). */
  async kill(): Promise<void> {
    const proc = this.proc;
    if (!proc || proc.exitCode !== null || proc.signalCode !== null) return;
    const exited = new Promise((r) => proc.once('exit', r));
    proc.kill('SIGKILL');
    await exited;
  }

  metrics(): Promise<string> {
    return httpText(`http://127.0.0.1:${this.ports.admin}/metrics`);
  }

  /** Lines of the log after `from` (an offset into `log`) matching `re`. */
  lines(re: RegExp, from = 0): string[] {
    return this.log
      .slice(from)
      .split('\n')
      .filter((l) => re.test(l));
  }
}

export async function httpText(url: string): Promise<string> {
  const res = await fetch(url);
  return (await res.text()).trim();
}
