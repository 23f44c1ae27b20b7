// The DNS server's flags. Together with rules/options.ts (the names it serves) they make the `dns` group
// of the agent and the flags of `spoke-agent dns`.
import { isIP } from 'node:net';
import { bool, duration, int, str, type Values } from '../flags/flags.js';
import { parseUpstream } from './upstream.js';

export const dnsFlags = {
  dnsBindAddress: str(
    'dns-bind-address',
    '127.0.0.1',
    'Address the DNS server listens on, UDP and TCP (0.0.0.0 or :: to serve other pods)',
    {
      validate: (a) => (isIP(a) ? undefined : `"${a}" is not an IP address`),
    },
  ),
  dnsPort: int('dns-port', 5353, 'Port of the DNS server, UDP and TCP (unprivileged: no root needed)', {
    validate: (n) => (n < 0 || n > 65535 ? `port ${n} out of range` : undefined),
  }),
  dnsUpstream: str(
    'dns-upstream',
    '',
    'Resolver for rule targets and forwarded names, IP[:PORT] or [IPv6]:PORT. With none (no nameserver in /etc/resolv.conf, or no such file) the DNS server still starts, with forwarding off and only IP targets answering, and says so in the log',
    {
      defaultText: 'first nameserver in /etc/resolv.conf, port 53',
      validate: (v) => {
        const parsed = v === '' ? undefined : parseUpstream(v);
        return typeof parsed === 'string' ? parsed : undefined;
      },
    },
  ),
  dnsBatchedUdp: bool(
    'dns-batched-udp',
    true,
    "Serve UDP in batches (recvmmsg/sendmmsg) when the native helper is built (npm install builds it on Linux); false, or no helper: Node's dgram",
  ),
  dnsForward: bool('dns-forward', true, 'Forward names no rule serves to the upstream; when false they are REFUSED'),
  dnsTtl: duration(
    'dns-ttl',
    5000,
    'TTL of the records in our own answers, and the most a rewritten answer may keep of the upstream TTLs',
    {
      validate: (ms) => (ms < 1000 || ms % 1000 !== 0 ? 'must be whole seconds, at least 1s' : undefined),
    },
  ),
  dnsCacheSize: int(
    'dns-cache-size',
    10_000,
    'Responses kept in each cache (our answers, upstream answers); 0 turns caching off',
    {
      validate: (n) => (n < 0 ? 'must not be negative' : undefined),
    },
  ),
  dnsUpstreamTimeout: duration(
    'dns-upstream-timeout',
    2000,
    'How long to wait for the upstream before answering SERVFAIL',
    {
      validate: (ms) => (ms <= 0 ? 'must be positive' : undefined),
    },
  ),
  dnsQueryLogSize: int(
    'dns-query-log-size',
    1000,
    'Recent queries kept in memory for the live query log (/debug/queries, and the queries resource of the dns.spoke-agent.io API): name, type, client, rcode, rule, latency, time; about 300 bytes each; 0 turns it off',
    {
      validate: (n) => (n < 0 ? 'must not be negative' : n > 100_000 ? 'at most 100000 (about 30 MiB)' : undefined),
    },
  ),
};

export type DnsFlagValues = Values<typeof dnsFlags>;
