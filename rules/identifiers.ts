// The agent's identifiers, which the hub's destHost strategy matches against the host of each dial
// (the Go agent's URL-query form, `host=a&host=b`). They are registered in groups, a Connect stream each
// (agent/server-connection.ts): the agent's own (--agent-identifiers, its node's addresses, the cluster's
// names and its node's name), which
// do not change while it runs, and a group per rule (an exposed Service: its name and its hashed
// cluster-proxy name; a static name), which comes and goes with that rule. A rules edit then opens
// and closes streams without handing a name from one stream to another.
import { createHash } from 'node:crypto';
import { mergeIdentifiers } from '../proto/agent-identifiers.js';
import { nodeIdentifiers } from './node.js';
import type { RuleSet } from './rule-set.js';

/**
 * At most this many streams for rule names on each connection to a proxy-server. Past it, groups share
 * streams by a hash of their names (a group stays in its bucket across edits), and an edit replaces
 * its bucket's stream: the names in it are then held by two streams for a moment. Each stream costs
 * the proxy-server a backend (goroutines and a channel), for every agent of the cluster.
 */
const maxGroupStreams = 64;

export interface AgentIdentifiers {
  /** --agent-identifiers (with the node's ipv4=/ipv6=), the cluster's own names and the node's name. */
  own: string;
  /** The rule names, one entry per stream, each sorted (a canonical key). */
  groups: string[];
}

const hostQuery = (hosts: readonly string[]) => hosts.map((h) => `host=${encodeURIComponent(h)}`).join('&');

/** `nodeIps`: a per-node agent's --node-ips, announced as ipv4=/ipv6= (rules/node.ts). */
export function agentIdentifiers(
  flag: string,
  ruleSet: RuleSet | undefined,
  nodeIps: readonly string[] = [],
): AgentIdentifiers {
  const ownRules = (ruleSet?.rules ?? []).filter((r) => r.kind === 'cluster' || r.kind === 'node');
  const own = mergeIdentifiers(flag, nodeIdentifiers(nodeIps), hostQuery(ownRules.flatMap((r) => r.names)));
  const taken = new Set(new URLSearchParams(own).getAll('host'));
  const groups = new Set<string>();
  for (const rule of ruleSet?.rules ?? []) {
    if (ownRules.includes(rule)) continue;
    const names = rule.names.filter((n) => !taken.has(n));
    if (names.length > 0) groups.add(hostQuery([...names].sort()));
  }
  return { own, groups: packGroups([...groups]) };
}

/** Groups beyond `max` share streams: each goes to the bucket its hash picks, the same one every time. */
export function packGroups(groups: readonly string[], max = maxGroupStreams): string[] {
  if (groups.length <= max) return [...groups].sort();
  const buckets = new Map<number, string[]>();
  for (const group of groups) {
    const bucket = createHash('sha256').update(group).digest().readUInt32BE(0) % max;
    buckets.set(bucket, [...(buckets.get(bucket) ?? []), group]);
  }
  return [...buckets.values()].map((members) => members.sort().join('&')).sort();
}
