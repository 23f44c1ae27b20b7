// What every bench section runs against: the PKI, processes (our hub, our agent, and the Go
// proxy-server and agent when their binaries are found: the newest ANP release in the reference cache,
// v0.36.0 (ANP_V036_BIN_DIR, else ~/.cache/spoke-agent/anp-v0.36), what cluster-proxy pins, else
// release-0.30 (ANP_BIN_DIR, else ~/.cache/spoke-agent/anp)), the ways to reach a target ("routes"),
// and the targets. Everything listens on 127.0.0.1; every process is stopped by its PID.
import { spawn, type ChildProcess } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import net from 'node:net';
import { join } from 'node:path';
import type { Duplex } from 'node:stream';
import { splitHostPort } from '../net/address.js';
import { dialThroughProxy } from '../client/dial.js';
import { makePki, type TestPki } from '../test/support/certs.js';
import {
  anpReleases,
  goServerFlags,
  goServerPorts,
  newestAnpRelease,
  type GoServerPorts,
} from '../test/support/go-proxy-server.js';
import { buildDist, repoRoot, terminate } from '../test/support/processes.js';
import { pattern, unusedPort } from '../test/support/targets.js';
import { sampleValue } from '../test/support/promql.js';

/** Set BENCH_CPU_PROF=/tmp/dir to profile the agent and hub processes (written when they exit). */
const profileDir = process.env.BENCH_CPU_PROF;
/** Set BENCH_NODE_FLAGS='--no-maglev ...' to try V8/Node flags on the agent and hub processes. */
const nodeFlags = (process.env.BENCH_NODE_FLAGS ?? '').split(' ').filter(Boolean);
const goBinaries = ['proxy-server', 'proxy-agent'];
const goRelease = newestAnpRelease(goBinaries);
/** The Go reference binaries' folder, or undefined to bench without them (`goReferenceNote` says why). */
export const anpBinDir = goRelease?.dir;
export const goReferenceNote = goRelease
  ? `ANP ${goRelease.name} (${goRelease.dir})`
  : `none (${anpReleases(goBinaries).missing.join('; ')})`;

const clockTicks = 100; // USER_HZ on Linux

/** A child process we started: its own RSS and CPU, read from /proc. */
export class Proc {
  readonly exited: Promise<void>;
  private stderrTail = '';

  constructor(
    readonly name: string,
    readonly child: ChildProcess,
  ) {
    child.stderr?.on('data', (c: Buffer) => (this.stderrTail = (this.stderrTail + c.toString()).slice(-4000)));
    this.exited = new Promise((resolve) => child.once('exit', () => resolve()));
  }

  get pid(): number {
    return this.child.pid!;
  }

  get alive(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  /** Resident set in bytes (VmRSS). */
  rss(): number {
    return this.memory().rss;
  }

  /** VmRSS split into anonymous memory (heap, malloc: this process's own) and mapped files (mostly the node binary's code, shared and reclaimable), bytes. */
  memory(): { rss: number; anon: number; file: number; hwm: number } {
    const status = readFileSync(`/proc/${this.pid}/status`, 'utf8');
    const kib = (field: string) => Number(new RegExp(`${field}:\\s+(\\d+) kB`).exec(status)?.[1] ?? 0) * 1024;
    return { rss: kib('VmRSS'), anon: kib('RssAnon'), file: kib('RssFile'), hwm: kib('VmHWM') };
  }

  /** User + system CPU seconds so far (/proc/PID/stat fields 14 and 15). */
  cpuSeconds(): number {
    const stat = readFileSync(`/proc/${this.pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / clockTicks;
  }

  /**
   * CPU time in ns and context switches so far, summed over the process's threads
   * (/proc/PID/task/TID/schedstat and status): finer than clock ticks, for an idle process. A switch is
   * a wake-up of a thread: voluntary (it slept, e.g. on a timer or I/O) or not.
   */
  schedStats(): { cpuNs: number; switches: number } {
    let cpuNs = 0;
    let switches = 0;
    for (const tid of readdirSync(`/proc/${this.pid}/task`)) {
      try {
        cpuNs += Number(readFileSync(`/proc/${this.pid}/task/${tid}/schedstat`, 'utf8').split(' ')[0]);
        const status = readFileSync(`/proc/${this.pid}/task/${tid}/status`, 'utf8');
        switches +=
          Number(/^voluntary_ctxt_switches:\s+(\d+)/m.exec(status)?.[1] ?? 0) +
          Number(/^nonvoluntary_ctxt_switches:\s+(\d+)/m.exec(status)?.[1] ?? 0);
      } catch {
        // the thread ended meanwhile
      }
    }
    return { cpuNs, switches };
  }

  /** First stdout line (the hub prints its ports). */
  firstLine(timeoutMs = 20_000): Promise<string> {
    return new Promise((resolve, reject) => {
      let buf = '';
      const timer = setTimeout(
        () => reject(new Error(`${this.name}: no output within ${timeoutMs} ms\n${this.stderrTail}`)),
        timeoutMs,
      );
      this.child.stdout!.on('data', (c: Buffer) => {
        buf += c.toString();
        const nl = buf.indexOf('\n');
        if (nl >= 0) {
          clearTimeout(timer);
          resolve(buf.slice(0, nl));
        }
      });
      this.child.once('exit', (code) => {
        clearTimeout(timer);
        reject(new Error(`${this.name} exited (${code})\n${this.stderrTail}`));
      });
    });
  }

  /** SIGTERM, then SIGKILL if it has not exited (the Go agent ignores SIGTERM while draining). */
  async stop(graceMs = 3000): Promise<void> {
    if (!this.alive) return;
    await terminate(this.child, this.exited, graceMs);
  }

  get log(): string {
    return this.stderrTail;
  }
}

/** Turns a command line into one that runs it somewhere else (e.g. in a memory cgroup: test/support/cgroup.ts). */
export type Wrap = (command: string, args: string[]) => [string, string[]];

/** A .ts file runs through tsx's loader; a .js file (the built dist/) runs as shipped. */
export function spawnNode(
  name: string,
  script: string,
  args: string[],
  wrap: Wrap = (c, a) => [c, a],
  stdin: 'ignore' | 'pipe' = 'ignore',
): Proc {
  const prof = profileDir
    ? ['--cpu-prof', `--cpu-prof-dir=${profileDir}`, `--cpu-prof-name=${name}-${Date.now()}.cpuprofile`]
    : [];
  const loader = [...nodeFlags, ...(script.endsWith('.ts') ? ['--import', 'tsx'] : [])];
  // process.execPath is the pinned Node 24 (npm scripts put node_modules/.bin first).
  const [command, argv] = wrap(process.execPath, [...prof, ...loader, join(repoRoot, script), ...args]);
  const child = spawn(command, argv, { cwd: repoRoot, stdio: [stdin, 'pipe', 'pipe'] });
  return new Proc(name, child);
}

/**
 * The agent as it ships: `npm run build` (cmd/build.ts: the bundle in dist/) once per run, so its RSS
 * is not inflated by tsx's loader thread (~40 MiB). Falls back to the sources through tsx when the
 * build fails.
 */
let builtEntry: string | undefined;
export function agentEntry(): string {
  if (builtEntry) return builtEntry;
  try {
    buildDist();
    builtEntry = 'dist/cmd/main.js';
  } catch (err) {
    console.warn(
      `bench: build failed, running the agent from source through tsx: ${(err as { stdout?: Buffer }).stdout?.toString().slice(0, 500) ?? err}`,
    );
    builtEntry = 'cmd/main.ts';
  }
  return builtEntry;
}

async function httpOk(port: number, path: string): Promise<string | undefined> {
  try {
    const res = await fetch(`http://127.0.0.1:${port}${path}`);
    return res.ok ? await res.text() : undefined;
  } catch {
    return undefined;
  }
}

async function waitReady(proc: Proc, port: number, path: string): Promise<void> {
  const deadline = Date.now() + 30_000;
  while (!(await httpOk(port, path))) {
    if (!proc.alive) throw new Error(`${proc.name} exited before it was ready\n${proc.log}`);
    if (Date.now() > deadline) throw new Error(`${proc.name} not ready within 30 s\n${proc.log}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

export interface Hub {
  kind: 'ours' | 'go';
  proc: Proc;
  agentPort: number;
  /** Frontends on this hub; the Go proxy-server serves one mode per process. */
  grpcPort?: number;
  httpConnectPort?: number;
  /** The Go proxy-server's frontend on a Unix socket (--uds-name: plaintext), instead of a port. */
  udsPath?: string;
  tls: boolean;
  /**
   * The Go proxy-server's own dial timing (konnectivity_network_proxy_server_dial_duration_seconds:
   * from its DIAL_REQ to the agent's DIAL_RSP), so far: the agent's share of a new dial without the
   * client's TLS handshake and the frontend around it.
   */
  dialDurations?(): Promise<{ sum: number; count: number }>;
  /** The Go proxy-server: agents it holds (`ready_backends`), and its ports, to start it again on them. */
  readyBackends?(): Promise<number>;
  goPorts?: GoServerPorts;
}

export async function startOurHub(pki: TestPki, opts: { plainFrontends?: boolean } = {}): Promise<Hub> {
  const proc = spawnNode('hub', 'bench/hub-process.ts', [
    JSON.stringify({
      caCert: pki.caCert,
      serverCert: pki.serverCert,
      serverKey: pki.serverKey,
      plainFrontends: opts.plainFrontends,
    }),
  ]);
  const ports = JSON.parse(await proc.firstLine()) as { agent: number; server: number; httpConnect: number };
  return {
    kind: 'ours',
    proc,
    agentPort: ports.agent,
    grpcPort: ports.server,
    httpConnectPort: ports.httpConnect,
    tls: !opts.plainFrontends,
  };
}

/**
 * The Go proxy-server (anpBinDir), mTLS on both ports with our PKI, like the anchor; on `ports` to
 * restart one. `udsPath`: the frontend on that Unix socket, plaintext (kube-apiserver's egress set-up).
 */
export async function startGoHub(
  pki: TestPki,
  mode: 'grpc' | 'http-connect',
  ports?: GoServerPorts,
  udsPath?: string,
): Promise<Hub> {
  const goPorts = ports ?? (await goServerPorts(udsPath));
  const { server, agent, health } = goPorts;
  const args = goServerFlags(pki, mode, 'destHost,default', goPorts, udsPath);
  const proc = new Proc(
    'go-proxy-server',
    spawn(join(anpBinDir!, 'proxy-server'), args, { stdio: ['ignore', 'pipe', 'pipe'] }),
  );
  await waitReady(proc, health, '/healthz');
  const dialDurations = async () => {
    const text = (await httpOk(health, '/metrics')) ?? '';
    const read = (suffix: string) =>
      sampleValue(text, `konnectivity_network_proxy_server_dial_duration_seconds_${suffix}`) ?? 0;
    return { sum: read('sum'), count: read('count') };
  };
  // ready_backends is v0.31+; release-0.30 has only ready_backend_connections.
  const readyBackends = async () => {
    const text = (await httpOk(health, '/metrics')) ?? '';
    return (
      sampleValue(text, 'konnectivity_network_proxy_server_ready_backends') ??
      sampleValue(text, 'konnectivity_network_proxy_server_ready_backend_connections') ??
      0
    );
  };
  const frontendAt = udsPath ? { udsPath } : mode === 'grpc' ? { grpcPort: server } : { httpConnectPort: server };
  return { kind: 'go', proc, agentPort: agent, ...frontendAt, tls: !udsPath, dialDurations, readyBackends, goPorts };
}

export interface AgentProc {
  kind: 'ours' | 'go';
  proc: Proc;
  /** Where its /healthz and /readyz are (127.0.0.1). */
  healthPort: number;
  /** Our agent: /metrics nodejs_heap_size_used_bytes. */
  heapUsed(): Promise<number | undefined>;
  /** Our agent: a gauge or counter from /metrics (first series). */
  metric(name: string): Promise<number | undefined>;
}

/** Our agent as its own process (its RSS is its own), from source via tsx, mTLS to the hub. */
export async function startOurAgent(
  pki: TestPki,
  hub: Hub,
  extraFlags: string[] = [],
  wrap?: Wrap,
): Promise<AgentProc> {
  const health = await unusedPort();
  // prettier-ignore
  const proc = spawnNode(
    'agent',
    agentEntry(),
    [
      `--proxy-server-host=127.0.0.1:${hub.agentPort}`,
      `--ca-cert=${pki.caCert}`,
      `--agent-cert=${pki.clientCert}`,
      `--agent-key=${pki.clientKey}`,
      '--agent-identifiers=host=localhost&ipv4=127.0.0.1',
      '--health-server-host=127.0.0.1',
      `--health-server-port=${health}`,
      '--log-level=warn',
      '--drain-timeout=1s',
      ...extraFlags,
    ],
    wrap,
  );
  await waitReady(proc, health, '/readyz');
  const metric = async (name: string) => sampleValue((await httpOk(health, '/metrics')) ?? '', name);
  return { kind: 'ours', proc, healthPort: health, metric, heapUsed: () => metric('nodejs_heap_size_used_bytes') };
}

export async function startGoAgent(pki: TestPki, hub: Hub): Promise<AgentProc> {
  const [health, admin] = [await unusedPort(), await unusedPort()];
  // prettier-ignore
  const args = [
    '--proxy-server-host=127.0.0.1',
    `--proxy-server-port=${hub.agentPort}`,
    `--ca-cert=${pki.caCert}`,
    `--agent-cert=${pki.clientCert}`,
    `--agent-key=${pki.clientKey}`,
    '--agent-identifiers=host=localhost&ipv4=127.0.0.1',
    '--health-server-host=127.0.0.1',
    `--health-server-port=${health}`,
    '--admin-bind-address=127.0.0.1',
    `--admin-server-port=${admin}`,
  ];
  const proc = new Proc(
    'go-agent',
    spawn(join(anpBinDir!, 'proxy-agent'), args, { stdio: ['ignore', 'pipe', 'pipe'] }),
  );
  await waitReady(proc, health, '/readyz');
  return { kind: 'go', proc, healthPort: health, heapUsed: async () => undefined, metric: async () => undefined };
}

/** One way of reaching a target: direct TCP, or a frontend of a hub. */
export interface Route {
  name: string;
  dial(address: string): Promise<Duplex>;
}

export const directRoute: Route = {
  name: 'direct',
  dial: (address) =>
    new Promise((resolve, reject) => {
      const target = splitHostPort(address);
      if (typeof target === 'string') return reject(new Error(target));
      const { host, port } = target;
      const s = net.connect({ host, port, noDelay: true }, () => {
        s.off('error', reject);
        resolve(s);
      });
      s.once('error', reject);
    }),
};

export function hubRoute(name: string, pki: TestPki, hub: Hub, mode: 'grpc' | 'http-connect'): Route {
  const port = hub.udsPath ? 0 : mode === 'grpc' ? hub.grpcPort : hub.httpConnectPort;
  if (port === undefined) throw new Error(`${name}: hub has no ${mode} frontend`);
  const creds = hub.tls
    ? { ca: readFileSync(pki.caCert), cert: readFileSync(pki.clientCert), key: readFileSync(pki.clientKey) }
    : {};
  const at = hub.udsPath ? { proxyUds: hub.udsPath } : {};
  return {
    name,
    dial: async (address) => {
      const s = await dialThroughProxy({ mode, proxyHost: '127.0.0.1', proxyPort: port, ...at, address, ...creds });
      if (s instanceof net.Socket) s.setNoDelay(true);
      return s;
    },
  };
}

export { makePki, type TestPki };

export interface Targets {
  /** Sends the number of bytes asked for in an 8-byte big-endian header, then closes. */
  source: string;
  /** Reads and counts everything. */
  sink: string;
  sinkBytes(): number;
  /** Echoes every byte. */
  echo: string;
  /** Accepts and reads nothing: a target that stopped reading. */
  stall: string;
  close(): Promise<void>;
}

const block = pattern(256 * 1024);

export async function startTargets(): Promise<Targets> {
  const sockets = new Set<net.Socket>();
  let sunk = 0;
  const track = (s: net.Socket) => {
    sockets.add(s);
    s.on('error', () => {});
    s.on('close', () => sockets.delete(s));
  };
  const listen = (onConn: (s: net.Socket) => void) =>
    new Promise<net.Server>((resolve) => {
      const server = net.createServer({ noDelay: true }, (s) => {
        track(s);
        onConn(s);
      });
      // 10k connections arrive at once in the scale run: a big accept backlog avoids 1 s SYN retries.
      server.listen(0, '127.0.0.1', 4096, () => resolve(server));
    });
  const source = await listen((s) => {
    s.once('readable', function ask() {
      const head = s.read(8) as Buffer | null;
      if (!head) return s.once('readable', ask);
      let left = Number(head.readBigUInt64BE(0));
      const pump = () => {
        while (left > 0) {
          const n = Math.min(left, block.length);
          left -= n;
          if (!s.write(n === block.length ? block : block.subarray(0, n))) return s.once('drain', pump);
        }
        s.end();
      };
      pump();
    });
  });
  const sink = await listen((s) => s.on('data', (c: Buffer) => (sunk += c.length)));
  const echo = await listen((s) => s.pipe(s));
  const stall = await listen((s) => s.pause());
  const servers = [source, sink, echo, stall];
  const addr = (s: net.Server) => `127.0.0.1:${(s.address() as net.AddressInfo).port}`;
  return {
    source: addr(source),
    sink: addr(sink),
    sinkBytes: () => sunk,
    echo: addr(echo),
    stall: addr(stall),
    close: async () => {
      for (const s of sockets) s.destroy();
      await Promise.all(servers.map((s) => new Promise((r) => s.close(r))));
    },
  };
}
