// Builds the DNS stack from flags: upstream, caches and resolver, the server on its port. Used by the
// agent (when --cluster-name is set) and by `spoke-agent dns`.
import { readFileSync } from 'node:fs';
import type { Registry } from 'prom-client';
import type { Logger } from '../observability/log.js';
import type { RuleHolder } from '../rules/holder.js';
import { DnsMetrics } from './metrics.js';
import type { DnsFlagValues } from './options.js';
import { QueryLog } from './query-log.js';
import { Resolver } from './resolver.js';
import { DnsServer } from './server.js';
import {
  NoUpstream,
  parseUpstream,
  Upstream,
  type UpstreamAddress,
  type UpstreamClient,
  upstreamFromResolvConf,
} from './upstream.js';

export interface DnsStack {
  resolver: Resolver;
  server: DnsServer;
  /** Where the server listens (the port is the bound one when --dns-port=0). */
  listening: { address: string; port: number };
  close(): Promise<void>;
}

/**
 * --dns-upstream, or the first nameserver of resolv.conf; a string saying why there is none when
 * resolv.conf is missing or names no nameserver (a bad --dns-upstream throws).
 */
function upstreamAddress(
  values: Pick<DnsFlagValues, 'dnsUpstream'>,
  resolvConf = '/etc/resolv.conf',
): UpstreamAddress | string {
  if (values.dnsUpstream !== '') {
    const parsed = parseUpstream(values.dnsUpstream);
    if (typeof parsed === 'string') throw new Error(`--dns-upstream: ${parsed}`);
    return parsed;
  }
  let text = '';
  try {
    text = readFileSync(resolvConf, 'utf8');
  } catch (err) {
    return `no --dns-upstream and ${resolvConf} is unreadable: ${(err as Error).message}`;
  }
  return upstreamFromResolvConf(text) ?? `no --dns-upstream and no nameserver in ${resolvConf}`;
}

/**
 * The resolver over the upstream the flags and resolv.conf name. Without one (a bare container) it
 * still starts, with forwarding off, and says so: names with IP targets answer, the rest cannot.
 */
export function createResolver(
  values: DnsFlagValues,
  holder: RuleHolder,
  registry: Registry,
  log: Logger,
  resolvConf?: string,
): Resolver {
  const address = upstreamAddress(values, resolvConf);
  const none = typeof address === 'string' ? address : undefined;
  if (none)
    log.warn(
      { reason: none },
      'no DNS upstream: forwarding is off (names no rule serves are REFUSED) and rules whose targets are names answer SERVFAIL; give --dns-upstream=IP[:PORT] to turn both on',
    );
  const upstream: UpstreamClient = none
    ? new NoUpstream(none)
    : new Upstream(address as UpstreamAddress, values.dnsUpstreamTimeout);
  let resolver: Resolver | undefined;
  let queryLog: QueryLog | undefined;
  const metrics = new DnsMetrics(
    registry,
    () => ({ answers: resolver?.answers.size ?? 0, upstream: resolver?.upstreamCache.size ?? 0 }),
    () => queryLog?.watchers ?? 0,
  );
  if (values.dnsQueryLogSize > 0)
    queryLog = new QueryLog({
      size: values.dnsQueryLogSize,
      onSkipped: (reason, n) => metrics.queryLogSkipped.inc({ reason }, n),
    });
  resolver = new Resolver({
    holder,
    upstream,
    forward: values.dnsForward && !none,
    forwardOffReason: none,
    ttl: values.dnsTtl / 1000,
    cacheSize: values.dnsCacheSize,
    metrics,
    log,
    queryLog,
  });
  return resolver;
}

/** Binds on `port`; a caller may try another port when it fails (npm start's demo does when 5353 is taken). */
export type PortBinder = <T>(port: number, bind: (port: number) => Promise<T>) => Promise<T>;

/** Starts the DNS server; rejects when the port cannot be bound. */
export async function startDns(
  values: DnsFlagValues,
  holder: RuleHolder,
  registry: Registry,
  log: Logger,
  bindPort: PortBinder = (port, bind) => bind(port),
): Promise<DnsStack> {
  const resolver = createResolver(values, holder, registry, log);
  let server: DnsServer;
  let listening: DnsStack['listening'];
  try {
    ({ server, listening } = await bindPort(values.dnsPort, async (port) => {
      const server = new DnsServer({
        address: values.dnsBindAddress,
        port,
        resolver,
        log,
        batchedUdp: values.dnsBatchedUdp,
      });
      return { server, listening: await server.start() };
    }));
  } catch (err) {
    resolver.close();
    throw err;
  }
  log.info(
    { ...listening, udp: server.udpKind, upstream: resolver.upstreamDescription, forward: resolver.forwarding },
    'DNS server listening (UDP and TCP)',
  );
  return {
    resolver,
    server,
    listening,
    async close() {
      await server.stop();
      resolver.close();
    },
  };
}
