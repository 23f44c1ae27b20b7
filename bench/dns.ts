// The embedded DNS server under dnsperf (Debian's, installed with apt-get when missing), against a
// naive dns2 server answering the same names from a Map, both in this process, in the same run, and
// against dnsmasq (Debian's dnsmasq-base, the reference) serving the same names: what a C
// server reaches on this machine with the same load generator sharing its cores.
// Three query mixes: rewritten names (answers cache warm), misses in the cluster zone (NXDOMAIN),
// and forwarded names (upstream cache warm). Each at saturation (qps, mean latency) and, for
// rewritten names, the mean latency at a fixed 10k queries/s, and what the live query log costs: the
// same server with the log on, in paired rounds against it off, then with a watcher attached.
import { execFile, execFileSync, spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import dns2 from 'dns2';
import { Registry } from 'prom-client';
import { dnsFlags } from '../dns/options.js';
import { startDns, type DnsStack } from '../dns/setup.js';
import { createLogger } from '../observability/log.js';
import { RuleHolder } from '../rules/holder.js';
import { parseRules } from '../rules/rule-set.js';
import { startTestUpstream } from '../test/support/dns-upstream.js';
import { unusedPort } from '../test/support/targets.js';
import { Proc } from './env.js';
import { medianRound, pairedRounds } from './paired.js';
import type { Report } from './report.js';

const run = promisify(execFile);
const { Packet } = dns2;

const naming = { cluster: 'cluster1', agentNamespace: 'agent-ns', clusterDomain: 'cluster.test' };
const upstreamZone = {
  'kubernetes.default.svc.cluster.test': [{ type: 1, address: '10.96.0.1' }],
  'web.prod.svc.cluster.test': [{ type: 1, address: '10.96.0.11' }],
  'search.default.svc.cluster.test': [{ type: 1, address: '10.96.0.12' }],
  'db.default.svc.cluster.test': [{ type: 1, address: '10.96.0.13' }],
  'www.example.test': [{ type: 1, address: '192.0.2.1' }],
  'api.example.test': [{ type: 1, address: '192.0.2.2' }],
};
const mixes = {
  rewritten: ['cluster1', 'cluster1.agent-ns', 'web.prod.cluster1', 'search.default.cluster1', 'db.default.cluster1'],
  'zone miss (NXDOMAIN)': ['nope.cluster1', 'missing.prod.cluster1', 'a.b.c.cluster1'],
  forwarded: ['www.example.test', 'api.example.test'],
} as const;
type Mix = keyof typeof mixes;
/** The in-cluster name a rewritten name answers with (what the rules do, for the reference servers). */
const fqdn = (n: string) =>
  n === 'cluster1' || n === 'cluster1.agent-ns'
    ? 'kubernetes.default.svc.cluster.test'
    : n.replace(/\.cluster1$/, '.svc.cluster.test');
/** dnsmasq lives in /usr/sbin, which a non-login root shell may not have on PATH. */
const sbinEnv = { ...process.env, PATH: `${process.env.PATH}:/usr/sbin:/sbin` };

/** True when `command` is on PATH, after installing Debian's `pkg` if it was not and we are root. */
function ensureCommand(command: string, pkg: string): boolean {
  const has = () => {
    try {
      execFileSync('sh', ['-c', `command -v ${command}`], { stdio: 'ignore', env: sbinEnv });
      return true;
    } catch {
      return false;
    }
  };
  if (has()) return true;
  if (process.getuid?.() !== 0) return false;
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  try {
    execFileSync('apt-get', ['install', '-y', '--no-install-recommends', pkg], { stdio: 'inherit', env });
  } catch {
    execFileSync('apt-get', ['update'], { stdio: 'inherit', env });
    execFileSync('apt-get', ['install', '-y', '--no-install-recommends', pkg], { stdio: 'inherit', env });
  }
  return has();
}

interface PerfResult {
  qps: number;
  meanMs: number;
  lost: number;
}

async function dnsperf(
  port: number,
  names: readonly string[],
  seconds: number,
  maxQps?: number,
  tcp = false,
): Promise<PerfResult> {
  const file = join(tmpdir(), `bench-dnsperf-${process.pid}.txt`);
  writeFileSync(file, names.map((n) => `${n} A\n`).join(''));
  const args = [
    '-s',
    '127.0.0.1',
    '-p',
    String(port),
    '-d',
    file,
    '-l',
    String(seconds),
    '-c',
    '4',
    '-T',
    '1',
    '-q',
    '200',
    '-t',
    '2',
    ...(maxQps ? ['-Q', String(maxQps)] : []),
    ...(tcp ? ['-m', 'tcp'] : []),
  ];
  const { stdout } = await run('dnsperf', args);
  const num = (re: RegExp) => Number(re.exec(stdout)?.[1] ?? NaN);
  return {
    qps: num(/Queries per second:\s+([\d.]+)/),
    meanMs: num(/Average Latency \(s\):\s+([\d.]+)/) * 1000,
    lost: num(/Queries lost:\s+(\d+)/),
  };
}

/**
 * The naive baseline: dns2's own server, parsing and encoding every message, answers from a Map. It
 * is a server to compare with, like dnsmasq, so it uses dns2 directly rather than dns/dns2.ts.
 */
async function startNaive(): Promise<{ port: number; close: () => Promise<void> }> {
  type Answer = { rcode: number; records: dns2.Packet.Resource[] };
  const table = new Map<string, Answer>();
  const a = (name: string, address: string) =>
    new Packet.Resource({ name, type: Packet.TYPE.A, class: 1, ttl: 5, address });
  const cname = (name: string, domain: string) =>
    new Packet.Resource({ name, type: Packet.TYPE.CNAME, class: 1, ttl: 5, domain });
  for (const n of mixes.rewritten)
    table.set(n, {
      rcode: 0,
      records: [cname(n, fqdn(n)), a(fqdn(n), upstreamZone[fqdn(n) as keyof typeof upstreamZone][0]!.address)],
    });
  for (const n of mixes['zone miss (NXDOMAIN)']) table.set(n, { rcode: Packet.RCODE.NXDOMAIN, records: [] });
  for (const n of mixes.forwarded)
    table.set(n, { rcode: 0, records: [a(n, upstreamZone[n as keyof typeof upstreamZone][0]!.address)] });
  const server = dns2.createServer({
    udp: true,
    handle: (request, send) => {
      const response = Packet.createResponseFromRequest(request);
      const q = request.questions[0];
      const hit = q && table.get(q.name.toLowerCase());
      if (hit) {
        response.header.rcode = hit.rcode;
        response.answers.push(...hit.records);
      } else response.header.rcode = Packet.RCODE.NXDOMAIN;
      void send(response);
    },
  });
  const listening = new Promise<dns2.ServerAddresses>((resolve) => server.once('listening', resolve));
  void server.listen({ udp: { port: 0, address: '127.0.0.1' } });
  const port = (await listening).udp?.port;
  if (port === undefined) throw new Error('the naive dns2 server has no UDP port');
  return { port, close: () => server.close() };
}

/**
 * dnsmasq with the same answers: CNAMEs to the FQDNs with the FQDNs' addresses as local records (the
 * issue's reference set-up), NXDOMAIN for the rest of the cluster zone, forwarding (cached) to the
 * same upstream. Undefined when dnsmasq cannot be installed or started.
 */
async function startDnsmasq(upstreamPort: number, ttl: number): Promise<{ port: number; proc: Proc } | undefined> {
  if (!ensureCommand('dnsmasq', 'dnsmasq-base')) return undefined;
  const port = await unusedPort();
  const args = [
    '--keep-in-foreground',
    '--log-facility=-',
    '--pid-file=',
    '--conf-file=/dev/null',
    '--no-resolv',
    '--no-hosts',
    `--port=${port}`,
    '--listen-address=127.0.0.1',
    '--bind-interfaces',
    '--cache-size=10000',
    `--local-ttl=${ttl}`,
    `--server=127.0.0.1#${upstreamPort}`,
    '--local=/cluster1/',
    ...mixes.rewritten.map((n) => `--cname=${n},${fqdn(n)}`),
    ...[...new Set(mixes.rewritten.map(fqdn))].map(
      (f) => `--host-record=${f},${upstreamZone[f as keyof typeof upstreamZone][0]!.address}`,
    ),
  ];
  const proc = new Proc('dnsmasq', spawn('dnsmasq', args, { stdio: ['ignore', 'pipe', 'pipe'], env: sbinEnv }));
  // It logs "started" once it listens, or exits with the reason.
  const started = await new Promise<boolean>((resolve) => {
    const timer = setTimeout(() => resolve(false), 5000);
    proc.child.stderr!.on('data', (c: Buffer) => {
      if (!c.toString().includes('started')) return;
      clearTimeout(timer);
      resolve(true);
    });
    proc.child.once('exit', () => {
      clearTimeout(timer);
      resolve(false);
    });
  });
  if (!started) {
    await proc.stop();
    return undefined;
  }
  return { port, proc };
}

export async function runDns(report: Report, quick: boolean): Promise<void> {
  const section = 'DNS (dnsperf; UDP unless said)';
  if (!ensureCommand('dnsperf', 'dnsperf')) {
    report.note('DNS section skipped: dnsperf missing and not root to install it (apt-get install dnsperf)');
    return;
  }
  const seconds = quick ? 3 : 8;
  const upstream = await startTestUpstream(upstreamZone);
  const rules = parseRules({ naming, expose: ['prod/web', 'default/*'] });
  if (!rules.ok) throw new Error(rules.errors.join('\n'));
  const values = {
    dnsBindAddress: '127.0.0.1',
    dnsPort: 0,
    dnsUpstream: `127.0.0.1:${upstream.port}`,
    dnsBatchedUdp: true,
    dnsForward: true,
    dnsTtl: 60_000,
    dnsCacheSize: 10_000,
    dnsUpstreamTimeout: 2000,
    dnsQueryLogSize: 0,
  };
  const ours = await startDns(values, new RuleHolder(rules.value), new Registry(), createLogger('silent'));
  // The same server on Node's dgram (--dns-batched-udp=false, or no native helper): what batching buys.
  const ourDgram = await startDns(
    { ...values, dnsBatchedUdp: false },
    new RuleHolder(rules.value),
    new Registry(),
    createLogger('silent'),
  );
  // The same server with the query log on at its default size: what recording every query costs.
  const logged = await startDns(
    { ...values, dnsQueryLogSize: dnsFlags.dnsQueryLogSize.default },
    new RuleHolder(rules.value),
    new Registry(),
    createLogger('silent'),
  );
  if (ours.server.udpKind !== 'batched')
    report.note('batched UDP not built here (see npm install\'s output): "ours" is served by dgram too');
  const naive = await startNaive();
  const dnsmasq = await startDnsmasq(upstream.port, 60);
  if (!dnsmasq)
    report.note(
      'dnsmasq reference skipped: dnsmasq missing and not root to install it (apt-get install dnsmasq-base), or it did not start',
    );
  try {
    for (const mix of Object.keys(mixes) as Mix[]) {
      const names = mixes[mix];
      await dnsperf(ours.listening.port, names, 1); // warm the caches (and the JIT)
      await dnsperf(naive.port, names, 1);
      const base = await dnsperf(naive.port, names, seconds);
      const mine = await dnsperf(ours.listening.port, names, seconds);
      const lost = mine.lost ? `${mine.lost} lost` : undefined;
      report.add({
        section,
        metric: `${mix}: queries/s at saturation`,
        subject: 'ours',
        value: mine.qps,
        unit: 'q/s',
        baseline: { subject: 'naive dns2 + Map', value: base.qps },
        target: mix === 'rewritten' ? { text: '>= 100k q/s', met: mine.qps >= 100_000 } : undefined,
        note: lost,
      });
      report.add({
        section,
        metric: `${mix}: mean latency at saturation`,
        subject: 'ours',
        value: mine.meanMs,
        unit: 'ms',
        baseline: { subject: 'naive dns2 + Map', value: base.meanMs },
      });
      if (dnsmasq) {
        await dnsperf(dnsmasq.port, names, 1);
        const ref = await dnsperf(dnsmasq.port, names, seconds);
        const least = mix === 'rewritten' ? 0.9 : mix === 'forwarded' ? 0.7 : undefined;
        report.add({
          section,
          metric: `${mix}: queries/s at saturation, vs the C reference`,
          subject: 'ours',
          value: mine.qps,
          unit: 'q/s',
          baseline: { subject: 'dnsmasq', value: ref.qps },
          note: `dnsmasq mean latency ${ref.meanMs.toFixed(2)} ms`,
          target: least === undefined ? undefined : { text: `>= ${least}x dnsmasq`, met: mine.qps >= least * ref.qps },
        });
      }
      if (mix === 'rewritten') {
        await dnsperf(ourDgram.listening.port, names, 1);
        const viaDgram = await dnsperf(ourDgram.listening.port, names, seconds);
        report.add({
          section,
          metric: 'rewritten: queries/s at saturation, batched UDP vs dgram',
          subject: `ours (${ours.server.udpKind})`,
          value: mine.qps,
          unit: 'q/s',
          baseline: { subject: 'ours on dgram', value: viaDgram.qps },
        });
        // Over TCP dnsperf pipelines queries on 4 connections, so one read and one write carry many:
        // how fast the resolver is once UDP's syscall per datagram is out of the way.
        await dnsperf(ours.listening.port, names, 1, undefined, true);
        const tcp = await dnsperf(ours.listening.port, names, seconds, undefined, true);
        report.add({
          section,
          metric: 'rewritten over TCP (pipelined): queries/s at saturation',
          subject: 'ours',
          value: tcp.qps,
          unit: 'q/s',
          baseline: { subject: 'ours over UDP', value: mine.qps },
        });
        const base10k = await dnsperf(naive.port, names, seconds, 10_000);
        const mine10k = await dnsperf(ours.listening.port, names, seconds, 10_000);
        report.add({
          section,
          metric: 'rewritten: mean latency at 10k q/s',
          subject: 'ours',
          value: mine10k.meanMs,
          unit: 'ms',
          baseline: { subject: 'naive dns2 + Map', value: base10k.meanMs },
          target: { text: '< 0.2 ms', met: mine10k.meanMs < 0.2 },
        });
        await queryLogCost(report, section, names, seconds, quick ? 2 : 3, ours, logged);
      }
    }
  } finally {
    await logged.close();
    await ourDgram.close();
    await dnsmasq?.proc.stop();
    await naive.close();
    await ours.close();
    await upstream.close();
  }
}

/**
 * Rewritten names at saturation with the query log on against the same server with it off, in paired
 * rounds (the median round's ratio is judged); then with a watcher attached, one that keeps only
 * SERVFAILs (none here), as `kubectl get queries --watch --field-selector rcode=SERVFAIL` would:
 * every batch is decoded, nothing is sent.
 */
async function queryLogCost(
  report: Report,
  section: string,
  names: readonly string[],
  seconds: number,
  rounds: number,
  off: DnsStack,
  on: DnsStack,
): Promise<void> {
  const log = on.resolver.queryLog!;
  await dnsperf(on.listening.port, names, 1);
  const qps = async (s: DnsStack) => (await dnsperf(s.listening.port, names, seconds)).qps;
  const [logOn, logOff, each] = medianRound(await pairedRounds(rounds, off, on, qps), (q) => q)!;
  const subject = `ours, --dns-query-log-size=${log.size}`;
  report.add({
    section,
    metric: 'rewritten: queries/s at saturation, query log on vs off',
    subject,
    value: logOn,
    unit: 'q/s',
    baseline: { subject: 'ours, log off', value: logOff },
    target: { text: '>= 0.9x log off', met: logOn >= 0.9 * logOff },
    note: `median of ${rounds} paired rounds: ${each}`,
  });
  let delivered = 0;
  let kept = 0;
  const recordedBefore = log.last;
  const watched = async (s: DnsStack) => {
    if (s !== on) return qps(s);
    const stop = log.subscribe((batch) => {
      delivered += batch.length;
      kept += batch.filter((e) => e.rcode === 'SERVFAIL').length;
    });
    try {
      return await qps(s);
    } finally {
      stop();
    }
  };
  const [withWatcher, base] = medianRound(await pairedRounds(1, off, on, watched), (q) => q)!;
  report.add({
    section,
    metric: 'rewritten: queries/s at saturation, query log on with a watcher vs off',
    subject: `${subject}, 1 watcher`,
    value: withWatcher,
    unit: 'q/s',
    baseline: { subject: 'ours, log off', value: base },
    note: `the watcher was handed ${delivered} of ${log.last - recordedBefore} queries (batches of at most ${log.size}, every 100 ms; the rest counted as skipped) and kept ${kept}`,
  });
}
