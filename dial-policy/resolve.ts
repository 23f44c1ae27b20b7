// How the agent resolves the host of a DIAL_REQ. Node's dns.lookup never asks our server (it uses
// getaddrinfo), so dials resolve in process: a rule's target through the same cache and upstream as
// the DNS server; a name no rule serves through the system resolver, as the Go agent does, which
// keeps /etc/hosts (cluster-proxy's hostAliases) and the pod's search path working.
import { promises as dnsPromises, type LookupAddress } from 'node:dns';
import { isIP } from 'node:net';
import { normalizeName } from '../rules/naming.js';
import { otherNodeReason } from '../rules/node.js';
import type { Match } from '../rules/rule-set.js';
import { chasedRecords } from '../dns/answer.js';
import type { Resolver } from '../dns/resolver.js';
import { RCODE, TYPE } from '../dns/wire.js';

export interface DialResolution {
  host: string;
  /** In answer order, IPv4 first. */
  addresses: LookupAddress[];
  /** The rule that served the host; undefined for IP literals and names resolved by the system. */
  match?: Match;
  /** Why the host is denied by its name (another node's): nothing is looked up. */
  denied?: string;
  via: 'literal' | 'rule' | 'system' | 'other-node';
}

export type SystemLookup = (host: string) => Promise<LookupAddress[]>;

const systemLookup: SystemLookup = (host) => dnsPromises.lookup(host, { all: true, verbatim: true });

function notFound(host: string, why: string): NodeJS.ErrnoException {
  return Object.assign(new Error(`getaddrinfo ENOTFOUND ${host} (${why})`), {
    code: 'ENOTFOUND',
    hostname: host,
    syscall: 'getaddrinfo',
  });
}

export async function resolveForDial(
  resolver: Resolver,
  host: string,
  system: SystemLookup = systemLookup,
): Promise<DialResolution> {
  const bare = host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host;
  const family = isIP(bare);
  if (family !== 0) return { host, addresses: [{ address: bare, family }], via: 'literal' };
  const ruleSet = resolver.holder.current;
  const name = normalizeName(host);
  const match = ruleSet.match(name);
  if (match === undefined) {
    const node = ruleSet.otherNode(name);
    if (node !== undefined)
      return { host, addresses: [], via: 'other-node', denied: `not allowed: ${name} is ${otherNodeReason(node)}` };
    if (ruleSet.inZone(name)) throw notFound(host, `no rule serves this name in the ${ruleSet.naming.cluster} zone`);
    return { host, addresses: await system(host), via: 'system' };
  }
  const { target } = match;
  if (target.kind === 'ip') {
    return {
      host,
      match,
      via: 'rule',
      addresses: [
        ...target.v4.map((address) => ({ address, family: 4 })),
        ...target.v6.map((address) => ({ address, family: 6 })),
      ],
    };
  }
  const answers = await Promise.all(
    [TYPE.A, TYPE.AAAA].map(async (qtype) =>
      chasedRecords((await resolver.lookupUpstream(target.fqdn, qtype)).bytes, Infinity),
    ),
  );
  const addresses: LookupAddress[] = [];
  for (const { records } of answers) {
    for (const r of records)
      if (r.type === TYPE.A || r.type === TYPE.AAAA)
        addresses.push({ address: r.address, family: r.type === TYPE.A ? 4 : 6 });
  }
  if (addresses.length === 0) {
    const why = answers.some((a) => a.rcode === RCODE.NXDOMAIN)
      ? `${target.fqdn} does not exist`
      : `${target.fqdn} has no addresses`;
    throw notFound(host, `${match.rule.source}: ${why}`);
  }
  return { host, addresses, match, via: 'rule' };
}
