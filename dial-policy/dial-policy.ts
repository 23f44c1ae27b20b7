// Where the agent may dial, for the agent command: with rules, only what they resolve to, the host=
// names of --agent-identifiers and --allowed-cidrs (allowlist.ts, kept current as the rules change),
// and for a per-node agent its node's addresses on the node's ports (node-local.ts);
// without rules, anything, as the Go agent does, said once at start so nobody assumes otherwise.
import type { Registry } from 'prom-client';
import { type Cidr, parseCidr } from '../net/cidr.js';
import type { Logger } from '../observability/log.js';
import type { RuleHolder } from '../rules/holder.js';
import { DialAllowlist, type ResolveForDial } from './allowlist.js';
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
  /** The rules and how a dial's host resolves through them (resolve.ts, loaded with the rules). */
  rules?: { holder: RuleHolder; resolveForDial: ResolveForDial };
  registry: Registry;
  log: Logger;
}

export function startDialPolicy(o: DialPolicyOptions): DialPolicy {
  if (!o.rules) {
    o.log.warn(
      'no rules (--cluster-name is not set): the agent dials any address the hub names, as the Go agent does; set --cluster-name to allow only rule targets and --allowed-cidrs',
    );
    return { stop: () => {} };
  }
  const cidrs = o.options.allowedCidrs.map(parseCidr).filter((c): c is Cidr => typeof c !== 'string'); // validated as flags
  const allowlist = new DialAllowlist({
    resolveForDial: o.rules.resolveForDial,
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
  const { holder } = o.rules;
  void allowlist.refresh(holder.current);
  const stop = holder.onChange((next) => void allowlist.refresh(next));
  return { resolve: allowlist.resolve, authorize: allowlist.authorize, stop };
}
