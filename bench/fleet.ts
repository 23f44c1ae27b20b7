// A fleet of agents and a hub restart: 100 agent processes (ours, the built bundle; then the Go v0.36
// agent) behind one haproxy in front of three Go v0.36 proxy-servers with --server-count=3, as
// cluster-proxy deploys them. One server is stopped for 20 s and started again; then all three are
// restarted one after another (a hub upgrade) while a hub client dials every agent through them.
// Read: connection attempts per second at the balancer (haproxy's stats socket), CPU of the surviving
// servers and haproxy during the outage (/proc), how long until 50/99/100 % of the agents hold the
// restarted server (its own ready_backends), failed hub dials through the upgrade, and whether every
// agent ends holding all three. Before the fleet, one agent of each kind alone behind a balancer of
// five (round-robin, then random), one server down a couple of seconds at a time. Loopback only: agent
// N answers for 127.1.x.y (its ipv4= identifier), where an echo target of its own listens.
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { dialThroughProxy } from '../client/dial.js';
import { anpV036BinDir, goServerFlags, goServerPorts, type GoServerPorts } from '../test/support/go-proxy-server.js';
import { sampleValue } from '../test/support/promql.js';
import { startEchoServer, unusedPort, type Target } from '../test/support/targets.js';
import { downServerFromEnv } from './down-server.js';
import { agentEntry, Proc, spawnNode, type TestPki } from './env.js';
import { percentile, type Report } from './report.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const serverCount = 3;
const outageMs = 20_000;
/** How long after a hub upgrade every agent has to hold all three servers again. */
const settleMs = 120_000;

/** Agent n's address: its ipv4= identifier and where its echo target listens. */
const agentAddress = (n: number) => `127.1.${n >> 8}.${(n & 255) + 1}`;

async function httpText(url: string): Promise<string | undefined> {
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(2000) });
    return res.ok ? await res.text() : undefined;
  } catch {
    return undefined;
  }
}

async function until(condition: () => Promise<boolean> | boolean, timeoutMs: number, what: string, everyMs = 100) {
  const deadline = performance.now() + timeoutMs;
  while (!(await condition())) {
    if (performance.now() > deadline) throw new Error(`fleet: timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(everyMs);
  }
}

/** One Go v0.36 proxy-server of the three, restartable on its ports. */
class Server {
  proc?: Proc;
  constructor(
    private readonly bin: string,
    private readonly pki: TestPki,
    readonly id: string,
    readonly ports: GoServerPorts,
    private readonly count = serverCount,
    private readonly mode: 'grpc' | 'http-connect' = 'grpc',
  ) {}

  async start(): Promise<void> {
    const args = [
      ...goServerFlags(this.pki, this.mode, 'destHost', this.ports),
      `--server-count=${this.count}`,
      `--server-id=${this.id}`,
    ];
    this.proc = new Proc(this.id, spawn(join(this.bin, 'proxy-server'), args, { stdio: ['ignore', 'pipe', 'pipe'] }));
    await until(
      async () => {
        if (!this.proc!.alive) throw new Error(`${this.id} exited\n${this.proc!.log}`);
        return (await httpText(`http://127.0.0.1:${this.ports.health}/healthz`)) !== undefined;
      },
      20_000,
      `${this.id} healthy`,
      20,
    ).catch((err: Error) => {
      throw new Error(`${err.message}\n${this.proc!.log}`);
    });
  }

  /** Agents it holds (ready_backends of its only strategy, destHost); undefined while it is down. */
  async agents(): Promise<number | undefined> {
    const text = await httpText(`http://127.0.0.1:${this.ports.health}/metrics`);
    return text === undefined
      ? undefined
      : (sampleValue(text, 'konnectivity_network_proxy_server_ready_backends') ?? 0);
  }

  stop(): Promise<void> {
    return this.proc?.stop(10_000) ?? Promise.resolve();
  }
}

/**
 * haproxy's `balance`: `roundrobin`, or `random` (haproxy's default of two draws, the less loaded of
 * two servers picked at random).
 */
type Balance = 'roundrobin' | 'random';
/** The fleet's balancer (BENCH_FLEET_BALANCE). */
const fleetBalance: Balance = process.env.BENCH_FLEET_BALANCE === 'random' ? 'random' : 'roundrobin';

/** What the balancer does with a connection meant for the server that is down (down-server.ts). */
const downServer = downServerFromEnv();

/** haproxy in TCP mode over the servers' agent ports; counts from its stats socket. */
class Balancer {
  proc?: Proc;
  private readonly dir = mkdtempSync(join(tmpdir(), 'spoke-fleet-'));
  port = 0;

  constructor(private readonly balance: Balance) {}

  async start(servers: Server[]): Promise<void> {
    this.port = await unusedPort();
    const config = [
      'global',
      `  stats socket ${join(this.dir, 'stats.sock')} mode 600 level admin`,
      '  maxconn 5000',
      'defaults',
      '  mode tcp',
      ...(downServer === 'refused' ? ['  retries 0'] : []),
      ...(downServer === 'removed' ? ['  default-server check inter 200 fall 1 rise 1'] : []),
      '  timeout connect 2s',
      '  timeout client 1h',
      '  timeout server 1h',
      'frontend agents',
      `  bind 127.0.0.1:${this.port}`,
      '  default_backend servers',
      'backend servers',
      `  balance ${this.balance}`,
      // Unless BENCH_FLEET_DOWN=removed, no health check: a connection to the server that is down
      // fails (haproxy closes it), as behind a balancer that does not know the proxy-servers' state.
      ...servers.map((s) => `  server ${s.id} 127.0.0.1:${s.ports.agent}`),
      '',
    ].join('\n');
    writeFileSync(join(this.dir, 'haproxy.cfg'), config);
    this.proc = new Proc(
      'haproxy',
      spawn('haproxy', ['-db', '-f', join(this.dir, 'haproxy.cfg')], { stdio: ['ignore', 'pipe', 'pipe'] }),
    );
    await until(async () => (await this.sessions()) !== undefined, 10_000, 'haproxy', 50);
  }

  /** `show stat` as rows keyed by proxy/server name. */
  private async stat(): Promise<Map<string, Record<string, string>> | undefined> {
    const text = await new Promise<string | undefined>((resolve) => {
      let out = '';
      const s = net.connect(join(this.dir, 'stats.sock'));
      s.on('connect', () => s.write('show stat\n'));
      s.on('data', (c: Buffer) => (out += c.toString()));
      s.on('end', () => resolve(out));
      s.on('error', () => resolve(undefined));
    });
    if (!text?.startsWith('# ')) return undefined;
    const [head, ...lines] = text.slice(2).trim().split('\n');
    const names = head!.split(',');
    const rows = new Map<string, Record<string, string>>();
    for (const line of lines) {
      const cells = line.split(',');
      const row = Object.fromEntries(names.map((n, i) => [n, cells[i] ?? '']));
      rows.set(`${row.pxname}/${row.svname}`, row);
    }
    return rows;
  }

  /** Connections the frontend accepted so far: every agent's connection attempt. */
  async sessions(): Promise<number | undefined> {
    const rows = await this.stat();
    const total = rows?.get('agents/FRONTEND')?.stot;
    return total === undefined ? undefined : Number(total);
  }

  async stop(): Promise<void> {
    await this.proc?.stop();
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** Samples a cumulative count every 100 ms; the peak over any 1 s window. */
class RateSampler {
  private readonly samples: Array<{ t: number; n: number }> = [];
  private timer?: NodeJS.Timeout;

  constructor(private readonly read: () => Promise<number | undefined>) {}

  start(): void {
    const tick = async () => {
      const n = await this.read();
      if (n !== undefined) this.samples.push({ t: performance.now(), n });
      this.timer = setTimeout(tick, 100);
    };
    void tick();
  }

  stop(): void {
    clearTimeout(this.timer);
  }

  /** Most counted in any 1 s between `from` and `to` (performance.now()). */
  peakPerSecond(from: number, to: number): number {
    const s = this.samples.filter((x) => x.t >= from - 100 && x.t <= to + 100);
    let peak = 0;
    let j = 0;
    for (let i = 0; i < s.length; i++) {
      while (s[j]!.t < s[i]!.t - 1000) j++;
      // A window that spans a little more than 1 s is scaled down to 1 s.
      const span = Math.max(1000, s[i]!.t - s[j]!.t);
      peak = Math.max(peak, ((s[i]!.n - s[j]!.n) * 1000) / span);
    }
    return peak;
  }

  /** Counted in each whole second from `from` until `to`. */
  perSecond(from: number, to: number): number[] {
    const out: number[] = [];
    for (let t = from; t + 1000 <= to; t += 1000) out.push(this.countBetween(t, t + 1000));
    return out;
  }

  countBetween(from: number, to: number): number {
    const at = (t: number) => this.samples.reduce((n, x) => (x.t <= t ? x.n : n), this.samples[0]?.n ?? 0);
    return at(to) - at(from);
  }
}

/** The hub's side of an upgrade: dials every agent in turn through the servers that are up, one byte each way. */
class HubClient {
  ok = 0;
  failed = 0;
  private running = false;
  private done?: Promise<void>;
  readonly failures = new Map<string, number>();

  constructor(
    private readonly pki: TestPki,
    private readonly servers: Server[],
    private readonly targets: Target[],
    private readonly up: (s: Server) => boolean,
  ) {}

  start(inFlight = 2): void {
    this.running = true;
    let next = 0;
    const creds = {
      ca: readFileSync(this.pki.caCert),
      cert: readFileSync(this.pki.clientCert),
      key: readFileSync(this.pki.clientKey),
    };
    const worker = async () => {
      while (this.running) {
        const i = next++;
        const candidates = this.servers.filter(this.up);
        const server = candidates[i % candidates.length];
        if (!server) {
          await sleep(20);
          continue;
        }
        const target = this.targets[i % this.targets.length]!;
        try {
          const conn = await dialThroughProxy({
            mode: 'grpc',
            proxyHost: '127.0.0.1',
            proxyPort: server.ports.server,
            address: `${target.host}:${target.port}`,
            timeoutMs: 5000,
            ...creds,
          });
          let timer: NodeJS.Timeout | undefined;
          await new Promise<void>((resolve, reject) => {
            timer = setTimeout(() => reject(new Error('no echo within 5 s')), 5000);
            conn.once('data', () => resolve());
            conn.once('error', reject);
            conn.once('close', () => reject(new Error('closed before the echo')));
            conn.write('x');
          }).finally(() => {
            clearTimeout(timer);
            conn.destroy();
          });
          this.ok++;
        } catch (err) {
          this.failed++;
          const key = (err as Error).message.slice(0, 80);
          this.failures.set(key, (this.failures.get(key) ?? 0) + 1);
        }
        await sleep(10);
      }
    };
    this.done = Promise.all(Array.from({ length: inFlight }, worker)).then(() => {});
  }

  async stop(): Promise<void> {
    this.running = false;
    await this.done;
  }
}

interface FleetFigures {
  /** Attempts at the balancer: the peak of any 1 s, and the total, from the kill until all are back. */
  peakPerSecond: number;
  attempts: number;
  /** Attempts in each second from the stop until all are back. */
  timeline: number[];
  /** CPU seconds of the two surviving servers and haproxy during the outage. */
  survivorsCpu: number;
  haproxyCpu: number;
  /** From the restarted server's /healthz to 50/99/100 % of the agents held by it, ms. */
  back: { p50: number; p99: number; all: number };
  /** Through the upgrade. */
  upgrade: {
    peakPerSecond: number;
    /** Attempts in each second of the upgrade, and when (s from its start) each server stopped and was ready. */
    timeline: number[];
    steps: string;
    dials: number;
    failed: number;
    /** From the last start until every agent holds all three (Infinity: not within `settleMs`). */
    allHeldMs: number;
    /** Agents each server holds at the end (all of them, or the count when `settleMs` ran out). */
    heldAtEnd: number[];
    failures: string;
  };
}

type StartAgent = (n: number, balancerPort: number) => Promise<Proc>;

/** What both agents are started with: the same PKI, agent n's ID and address, its health port. */
const agentFlags = (pki: TestPki, n: number, health: number) => [
  `--ca-cert=${pki.caCert}`,
  `--agent-cert=${pki.clientCert}`,
  `--agent-key=${pki.clientKey}`,
  `--agent-id=fleet-${n}`,
  `--agent-identifiers=ipv4=${agentAddress(n)}`,
  '--health-server-host=127.0.0.1',
  `--health-server-port=${health}`,
];

async function ready(proc: Proc, health: number, what: string): Promise<Proc> {
  await until(() => httpText(`http://127.0.0.1:${health}/readyz`).then(Boolean), 60_000, `${what} ready`);
  return proc;
}

function ourAgent(pki: TestPki): StartAgent {
  return async (n, balancerPort) => {
    const health = await unusedPort();
    const args = [`--proxy-server-host=127.0.0.1:${balancerPort}`, ...agentFlags(pki, n, health), '--log-level=warn'];
    return ready(spawnNode(`agent-${n}`, agentEntry(), args), health, `agent ${n}`);
  };
}

function goAgent(pki: TestPki, bin: string): StartAgent {
  return async (n, balancerPort) => {
    const [health, admin] = [await unusedPort(), await unusedPort()];
    const args = [
      '--proxy-server-host=127.0.0.1',
      `--proxy-server-port=${balancerPort}`,
      ...agentFlags(pki, n, health),
      '--admin-bind-address=127.0.0.1',
      `--admin-server-port=${admin}`,
      '-v=0',
    ];
    const proc = new Proc(
      `go-agent-${n}`,
      spawn(join(bin, 'proxy-agent'), args, { stdio: ['ignore', 'pipe', 'pipe'] }),
    );
    return ready(proc, health, `Go agent ${n}`);
  };
}

async function measureFleet(
  name: string,
  pki: TestPki,
  bin: string,
  size: number,
  startAgent: StartAgent,
): Promise<FleetFigures> {
  const say = (what: string) => console.log(`   fleet ${name}: ${what}`);
  const servers: Server[] = [];
  for (let i = 0; i < serverCount; i++) servers.push(new Server(bin, pki, `server-${i}`, await goServerPorts()));
  const balancer = new Balancer(fleetBalance);
  const agents: Proc[] = [];
  const targets: Target[] = [];
  const down = new Set<Server>();
  const sampler = new RateSampler(() => balancer.sessions());
  const client = new HubClient(pki, servers, targets, (s) => !down.has(s));
  const allHeld = async () => (await Promise.all(servers.map((s) => s.agents()))).every((n) => n === size);
  try {
    await Promise.all(servers.map((s) => s.start()));
    await balancer.start(servers);
    for (let n = 0; n < size; n++) targets.push(await startEchoServer(agentAddress(n)));
    for (let n = 0; n < size; n += 10)
      agents.push(
        ...(await Promise.all(
          Array.from({ length: Math.min(10, size - n) }, (_, k) => startAgent(n + k, balancer.port)),
        )),
      );
    say(`${size} agents started`);
    await until(allHeld, 120_000, `all ${size} agents to hold all ${serverCount} servers`, 250);
    say('every agent holds all three servers');
    sampler.start();
    await sleep(3000);

    // One server stops (SIGTERM: a pod's restart) for 20 s and comes back on the same ports.
    const [victim, ...survivors] = [servers[1]!, servers[0]!, servers[2]!];
    const cpu = () => ({
      servers: survivors.reduce((t, s) => t + s.proc!.cpuSeconds(), 0),
      haproxy: balancer.proc!.cpuSeconds(),
    });
    const killed = performance.now();
    const before = cpu();
    down.add(victim);
    await victim.stop();
    await sleep(outageMs);
    const after = cpu();
    say(`${victim.id} starts again after ${outageMs / 1000} s`);
    await victim.start();
    down.delete(victim);
    const healthy = performance.now();
    const marks: { p50?: number; p99?: number; all?: number } = {};
    await until(
      async () => {
        const held = (await victim.agents()) ?? 0;
        const t = performance.now() - healthy;
        if (held >= size * 0.5) marks.p50 ??= t;
        if (held >= Math.ceil(size * 0.99)) marks.p99 ??= t;
        if (held >= size) marks.all ??= t;
        return marks.all !== undefined;
      },
      120_000,
      'every agent to hold the restarted server',
      50,
    );
    const back = performance.now();
    say(`all back in ${Math.round(marks.all!)} ms; the upgrade starts`);
    await sleep(2000);

    // A hub upgrade: each server in turn stops and starts again, the next once it is ready and holds
    // an agent (as a Deployment's rolling update waits for readiness), while the hub dials through.
    const upgradeStart = performance.now();
    client.start();
    const steps: string[] = [];
    const since = () => ((performance.now() - upgradeStart) / 1000).toFixed(1);
    for (const server of servers) {
      down.add(server);
      const stopped = since();
      await server.stop();
      await server.start();
      await until(
        async () => ((await server.agents()) ?? 0) > 0 && down.delete(server),
        120_000,
        `${server.id} ready`,
        50,
      );
      steps.push(`${server.id} stopped ${stopped} s, ready ${since()} s`);
    }
    const lastStarted = performance.now();
    say('all three restarted');
    // Not an error when some never come back: that is a figure (the agents missing a server at the end).
    const allHeldMs = await until(
      allHeld,
      settleMs,
      'every agent to hold all three servers after the upgrade',
      100,
    ).then(
      () => performance.now() - lastStarted,
      () => Number.POSITIVE_INFINITY,
    );
    const heldAtEnd = await Promise.all(servers.map(async (s) => (await s.agents()) ?? 0));
    await sleep(1000);
    await client.stop();
    const upgradeEnd = performance.now();
    sampler.stop();
    return {
      peakPerSecond: sampler.peakPerSecond(killed, back),
      attempts: sampler.countBetween(killed, back),
      timeline: sampler.perSecond(killed, back),
      survivorsCpu: after.servers - before.servers,
      haproxyCpu: after.haproxy - before.haproxy,
      back: { p50: marks.p50!, p99: marks.p99!, all: marks.all! },
      upgrade: {
        peakPerSecond: sampler.peakPerSecond(upgradeStart, upgradeEnd),
        timeline: sampler.perSecond(upgradeStart, upgradeEnd),
        steps: steps.join('; '),
        dials: client.ok + client.failed,
        failed: client.failed,
        allHeldMs,
        heldAtEnd,
        failures: [...client.failures].map(([m, n]) => `${n}x ${m}`).join('; '),
      },
    };
  } finally {
    sampler.stop();
    await client.stop();
    for (let i = 0; i < agents.length; i += 20) await Promise.all(agents.slice(i, i + 20).map((a) => a.stop(5000)));
    await Promise.all(servers.map((s) => s.stop()));
    await balancer.stop();
    await Promise.all(targets.map((t) => t.close()));
  }
}

/** How long the lone agent's server stays down (BENCH_FLEET_DOWN_MS): a crash and restart, a pod's quick restart. */
const loneDownMs = Number(process.env.BENCH_FLEET_DOWN_MS ?? 2000);

/**
 * One agent alone behind a balancer of five Go v0.36 servers (--server-count=5, http-connect), whose
 * servers restart one at a time: a server stops (SIGTERM), stays down `loneDownMs` and starts again
 * with the same server ID and ports. Which server, and when (0-1.5 s after the agent held all five
 * again), are drawn at random: the Go agent looks on a ~1 s tick, and a round-robin balancer hands out
 * servers in a fixed order, so stopping the next server in that order at a fixed time would line up
 * with both, which a real restart does not.
 */
class LoneRig {
  private readonly servers: Server[] = [];
  private readonly balancer: Balancer;
  private agent?: Proc;

  constructor(
    private readonly bin: string,
    private readonly pki: TestPki,
    balance: Balance,
  ) {
    this.balancer = new Balancer(balance);
  }

  async start(startAgent: StartAgent): Promise<void> {
    for (let i = 0; i < 5; i++)
      this.servers.push(new Server(this.bin, this.pki, `five-${i}`, await goServerPorts(), 5, 'http-connect'));
    await Promise.all(this.servers.map((s) => s.start()));
    await this.balancer.start(this.servers);
    this.agent = await startAgent(0, this.balancer.port);
    await until(() => this.allHeld(), 60_000, 'the agent to hold all five servers', 50);
  }

  private async allHeld(): Promise<boolean> {
    return (await Promise.all(this.servers.map((s) => s.agents()))).every((n) => n === 1);
  }

  /** One restart: from the server's /healthz until it holds the agent again, ms. */
  async restart(): Promise<number> {
    const victim = this.servers[Math.floor(Math.random() * this.servers.length)]!;
    await sleep(1500 * Math.random());
    await victim.stop();
    await sleep(loneDownMs);
    await victim.start();
    const healthy = performance.now();
    await until(async () => (await victim.agents()) === 1, 120_000, `${victim.id} to hold the agent again`, 20);
    const ms = performance.now() - healthy;
    await until(() => this.allHeld(), 60_000, 'the agent to hold all five servers', 50);
    return ms;
  }

  async stop(): Promise<void> {
    await this.agent?.stop(5000);
    await Promise.all(this.servers.map((s) => s.stop()));
    await this.balancer.stop();
  }
}

/**
 * The Go agent and ours, each alone behind a balancer of its own (`LoneRig`), restarted in turn,
 * `cycles` times each, which of them goes first alternating: both meet the same moments of a shared
 * machine.
 */
async function measureLone(
  pki: TestPki,
  bin: string,
  agents: { go: StartAgent; ours: StartAgent },
  cycles: number,
  balance: Balance,
): Promise<{ go: number[]; ours: number[] }> {
  const go = new LoneRig(bin, pki, balance);
  const ours = new LoneRig(bin, pki, balance);
  const times = { go: [] as number[], ours: [] as number[] };
  try {
    await go.start(agents.go);
    await ours.start(agents.ours);
    for (let i = 0; i < cycles; i++) {
      const order = i % 2 === 0 ? (['go', 'ours'] as const) : (['ours', 'go'] as const);
      for (const who of order) times[who].push(await (who === 'go' ? go : ours).restart());
    }
  } finally {
    await go.stop();
    await ours.stop();
  }
  return times;
}

export async function runFleet(report: Report, pki: TestPki, quick: boolean): Promise<void> {
  const section = 'Fleet';
  const bin = anpV036BinDir(['proxy-server', 'proxy-agent']);
  if (!bin) return report.note('fleet: needs the Go v0.36 proxy-server and proxy-agent; skipped');
  const size = Number(process.env.BENCH_FLEET_AGENTS ?? (quick ? 30 : 100));
  const cycles = quick ? 3 : 16;
  const median = (xs: number[]) => percentile(xs, 50);
  const spread = (xs: number[]) => `${Math.round(Math.min(...xs))}-${Math.round(Math.max(...xs))}`;
  // The rows name what the balancer did with the server that was down, unless it was haproxy's default.
  const world = downServer === 'held' ? '' : ` (BENCH_FLEET_DOWN=${downServer})`;
  for (const balance of ['roundrobin', 'random'] as const) {
    const { go, ours } = await measureLone(pki, bin, { go: goAgent(pki, bin), ours: ourAgent(pki) }, cycles, balance);
    report.add({
      section,
      metric: `one agent behind haproxy \`balance ${balance}\` over five servers, one down ${loneDownMs / 1000} s and restarted: healthy -> it holds the agent again, median of ${cycles}${world}`,
      subject: 'ours vs Go v0.36 agent',
      value: median(ours),
      unit: 'ms',
      baseline: { subject: 'Go agent', value: median(go) },
      target: { text: "no later than the Go agent's median", met: median(ours) <= median(go) },
      note: `ours ${spread(ours)} (${ours.map(Math.round).join(', ')}); Go ${spread(go)} (${go.map(Math.round).join(', ')})`,
    });
  }
  // BENCH_FLEET_AGENTS=0: the single agent's figure alone.
  if (size === 0) return;
  const go = await measureFleet('Go', pki, bin, size, goAgent(pki, bin));
  const ours = await measureFleet('ours', pki, bin, size, ourAgent(pki));
  const subject = `ours vs Go v0.36 agent, ${size} agents each`;
  const baseline = (value: number) => ({ subject: 'Go fleet', value });
  const row = (metric: string, value: number, unit: string, goValue: number, target?: { text: string; met: boolean }) =>
    report.add({ section, metric: `${metric}${world}`, subject, value, unit, baseline: baseline(goValue), target });
  row(
    'one server of three down 20 s: peak connection attempts in one second at the balancer',
    ours.peakPerSecond,
    'attempts/s',
    go.peakPerSecond,
    { text: "<= 0.75x the Go fleet's", met: ours.peakPerSecond <= 0.75 * go.peakPerSecond },
  );
  row('the same: attempts from the stop until all are back', ours.attempts, 'attempts', go.attempts);
  const cpuOurs = ours.survivorsCpu + ours.haproxyCpu;
  const cpuGo = go.survivorsCpu + go.haproxyCpu;
  row('CPU of the two surviving servers and haproxy during the 20 s outage', cpuOurs, 's', cpuGo, {
    text: "<= 0.75x the Go fleet's",
    met: cpuOurs <= 0.75 * cpuGo,
  });
  row('of which haproxy', ours.haproxyCpu, 's', go.haproxyCpu);
  row('restarted server healthy -> 50 % of the agents hold it', ours.back.p50, 'ms', go.back.p50);
  row('restarted server healthy -> 99 % hold it', ours.back.p99, 'ms', go.back.p99);
  row('restarted server healthy -> all hold it', ours.back.all, 'ms', go.back.all, {
    text: "<= 1.5x the Go fleet's",
    met: ours.back.all <= 1.5 * go.back.all,
  });
  row(
    'hub upgrade (3 servers restarted in turn): peak attempts in one second',
    ours.upgrade.peakPerSecond,
    'attempts/s',
    go.upgrade.peakPerSecond,
  );
  row(
    `hub upgrade: failed hub dials (of ${ours.upgrade.dials} ours, ${go.upgrade.dials} Go)`,
    ours.upgrade.failed,
    'dials',
    go.upgrade.failed,
    { text: 'no more than the Go fleet', met: ours.upgrade.failed <= go.upgrade.failed },
  );
  row(
    'hub upgrade: last server started -> every agent holds all three',
    ours.upgrade.allHeldMs,
    'ms',
    go.upgrade.allHeldMs,
  );
  const missing = (f: FleetFigures) => f.upgrade.heldAtEnd.reduce((n, held) => n + (size - held), 0);
  row(
    `hub upgrade: agent-server pairs still missing ${settleMs / 1000} s after the last start`,
    missing(ours),
    'pairs',
    missing(go),
    { text: 'every agent ends holding all three', met: missing(ours) === 0 },
  );
  report.note(`fleet, attempts in each second from the stop until all were back, ours: ${ours.timeline.join(' ')}`);
  report.note(`fleet, the same, Go: ${go.timeline.join(' ')}`);
  for (const [who, f] of [
    ['ours', ours],
    ['Go', go],
  ] as const)
    report.note(
      `fleet, the upgrade, attempts in each second, ${who}: ${f.upgrade.timeline.join(' ')} (${f.upgrade.steps})`,
    );
  if (ours.upgrade.failures) report.note(`fleet, ours: failed dials: ${ours.upgrade.failures}`);
  if (go.upgrade.failures) report.note(`fleet, Go: failed dials: ${go.upgrade.failures}`);
}
