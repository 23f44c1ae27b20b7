// The node an agent of the per-node DaemonSet runs on (--node-name, --node-ips from the downward API):
// its name in the cluster's zone, and its addresses as the identifiers kube-apiserver's egress is
// routed by. ANP's destHost strategy matches a dial's host exactly against `ipv4=`/`ipv6=`, and
// kube-apiserver writes a node address as Go prints it, so the identifiers carry that spelling.
import { isIP } from 'node:net';

export interface NodeIdentity {
  /** The Node's name (spec.nodeName). */
  name: string;
  /** Its addresses (status.hostIPs), IPv4 and IPv6, as Go prints them. */
  ips: string[];
}

/** `<node>.node.<cluster>`: the name the hub dials for a target on this node (kubelet, node-exporter). */
export const nodeHost = (cluster: string, node: string) => `${node}.node.${cluster}`;

/** The zone of every node's name; a name there that is not this node's belongs to another node's agent. */
export const nodeZone = (cluster: string) => `node.${cluster}`;

/** Why an agent neither answers nor dials another node's name, for DNS explanations and dial refusals. */
export const otherNodeReason = (node: string) => `the name of node ${node}, which only the agent on that node serves`;

/** An address as Go's net.IP String() prints it: IPv6 lower-case with the longest run of zeros compressed. */
export function goIpString(ip: string): string {
  if (isIP(ip) !== 6) return ip;
  return new URL(`http://[${ip}]/`).hostname.slice(1, -1);
}

/** The node's addresses as identifiers: `ipv4=10.0.0.1&ipv6=fd00::1`. */
export function nodeIdentifiers(ips: readonly string[]): string {
  const query = new URLSearchParams();
  for (const ip of ips) query.append(isIP(ip) === 6 ? 'ipv6' : 'ipv4', goIpString(ip));
  return query.toString();
}

/** Why --node-ips is unusable, or undefined. */
export function nodeIpsProblem(ips: readonly string[]): string | undefined {
  const bad = ips.find((ip) => isIP(ip) === 0);
  return bad === undefined ? undefined : `"${bad}" is not an IP address`;
}
