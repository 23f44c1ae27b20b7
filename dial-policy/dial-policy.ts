// Where the agent may dial, for the agent command: with rules, only what they resolve to (resolve.ts,
// through the DNS server's resolver), the host= names of --agent-identifiers and --allowed-cidrs
// (allowlist.ts, kept current as the rules change), and for a per-node agent its node's addresses on
// the node's ports (node-local.ts); without rules, anything, as the Go agent does, said once at start
// so nobody assumes otherwise. resolve.ts loads the DNS answer code, so it is imported only with rules.
import type { Registry } from 'prom-client';
import { type Cidr, parseCidr } from '../net/cidr.js';
import type { Logger } from '../observability/log.js';
import type { Resolver } from '../dns/resolver.js';
import { DialAllowlist } from './allowlist.js';
import type { DialAuthorizer, HostResolver } from './contract.js';
import { NodeLocalPorts } from './node-local.js';
import type { DialPolicyFlagValues } from './options.js';

export interface DialPolicy {
  /** For AgentDeps.resolve / AgentDeps.authorize; undefined without rules. */
  resolve?: HostResolver;
  authorize?: DialAuthorizer;
  stop(): void;
}

export interface DialPolicyOptions {
  options: DialPolicyFlagValues;
  /** The host= names of --agent-identifiers. */
  identifierHosts?: readonly string[];
  /** --node-ips of a per-node agent. */
  nodeIps?: readonly string[];
  /** The DNS server's resolver, over the rules in force; none without rules. */
  resolver?: Resolver;
  registry: Registry;
  log: Logger;
}

export async function startDialPolicy(o: DialPolicyOptions): Promise<DialPolicy> {
  const { resolver } = o;
  if (!resolver) {
    o.log.warn(
      'no rules (--cluster-name is not set): the agent dials any address the hub names, as the Go agent does; set --cluster-name to allow only rule targets and --allowed-cidrs',
    );
    return { stop: () => {} };
  }
  const cidrs = o.options.allowedCidrs.map(parseCidr).filter((c): c is Cidr => typeof c !== 'string'); // validated as flags
  const { resolveForDial } = await import('./resolve.js');
  const allowlist = new DialAllowlist({
    resolveForDial: (host) => resolveForDial(resolver, host),
    cidrs,
    identifierHosts: o.identifierHosts,
    node: o.nodeIps?.length
      ? new NodeLocalPorts({
          ips: o.nodeIps,
          kubeletPort: o.options.kubeletPort,
          localPorts: o.options.nodeLocalPorts.map(Number),
        })
      : undefined,
    registry: o.registry,
  });
  const { holder } = resolver;
  void allowlist.refresh(holder.current);
  const stop = holder.onChange((next) => void allowlist.refresh(next));
  return { resolve: allowlist.resolve, authorize: allowlist.authorize, stop };
}
