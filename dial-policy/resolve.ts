// How the agent resolves the host of a DIAL_REQ. Node's dns.lookup never asks our server (it uses
// getaddrinfo), so dials resolve in process, by what the rules make of the name (RuleSet.classify,
// as the DNS server decides): a rule's target through the same cache and upstream as the DNS
// server; another node's name is denied; a name in the cluster's zone no rule serves does not exist;
// any other name goes to the system resolver, as the Go agent does, which keeps /etc/hosts
// (cluster-proxy's hostAliases) and the pod's search path working.
import { promises as dnsPromises, type LookupAddress } from 'node:dns';
import { normalizeName } from '../rules/naming.js';
import { otherNodeReason } from '../rules/node.js';
import { chasedRecords } from '../dns/answer.js';
import type { Resolver } from '../dns/resolver.js';
import { RCODE, TYPE } from '../dns/wire.js';
import type { HostDenied, HostResolution } from './contract.js';

export type SystemLookup = (host: string) => Promise<LookupAddress[]>;

const systemLookup: SystemLookup = (host) => dnsPromises.lookup(host, { all: true, verbatim: true });

function notFound(host: string, why: string): NodeJS.ErrnoException {
  return Object.assign(new Error(`getaddrinfo ENOTFOUND ${host} (${why})`), {
    code: 'ENOTFOUND',
    hostname: host,
    syscall: 'getaddrinfo',
  });
}

/** The addresses of `host` in answer order, IPv4 first, and the rule that served it; or the denial of another node's name. */
export async function resolveForDial(
  resolver: Resolver,
  host: string,
  system: SystemLookup = systemLookup,
): Promise<HostResolution | HostDenied> {
  const ruleSet = resolver.holder.current;
  const name = normalizeName(host);
  const named = ruleSet.classify(name);
  if (named.kind === 'other-node') return { denied: `not allowed: ${name} is ${otherNodeReason(named.node)}` };
  if (named.kind === 'zone') throw notFound(host, `no rule serves this name in the ${ruleSet.naming.cluster} zone`);
  if (named.kind === 'outside') return { addresses: (await system(host)).map((a) => a.address) };
  const { rule, target } = named.match;
  if (target.kind === 'ip') return { addresses: [...target.v4, ...target.v6], route: { rule: rule.source } };
  const answers = await Promise.all(
    [TYPE.A, TYPE.AAAA].map(async (qtype) =>
      chasedRecords((await resolver.lookupUpstream(target.fqdn, qtype)).bytes, Infinity),
    ),
  );
  const addresses: string[] = [];
  for (const { records } of answers) {
    for (const r of records) if (r.type === TYPE.A || r.type === TYPE.AAAA) addresses.push(r.address);
  }
  if (addresses.length === 0) {
    const why = answers.some((a) => a.rcode === RCODE.NXDOMAIN)
      ? `${target.fqdn} does not exist`
      : `${target.fqdn} has no addresses`;
    throw notFound(host, `${rule.source}: ${why}`);
  }
  return { addresses, route: { rule: rule.source, name: target.fqdn } };
}
