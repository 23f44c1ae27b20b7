// What a per-node agent may dial on its own node: its node's addresses (--node-ips) on --kubelet-port
// and --node-local-ports only, whatever else allows the address, so kube-apiserver's egress reaches
// the kubelet and the operator's node-local targets, and nothing else listening on the node. Another
// node's addresses are not this agent's: they are denied unless a rule or --allowed-cidrs allows them
// (allowlist.ts), and another node's name is denied outright (resolve.ts). Pure: no Node watch.
import { canonicalIp } from '../net/ip.js';

export interface NodeLocalOptions {
  /** --node-ips. */
  ips: readonly string[];
  kubeletPort: number;
  /** --node-local-ports. */
  localPorts: readonly number[];
}

export class NodeLocalPorts {
  private readonly ips: ReadonlySet<string>;
  private readonly ports: ReadonlySet<number>;

  constructor(private readonly opts: NodeLocalOptions) {
    this.ips = new Set(opts.ips.map(canonicalIp));
    this.ports = new Set([opts.kubeletPort, ...opts.localPorts]);
  }

  /** Whether `address` is one of this node's. */
  owns(address: string): boolean {
    return this.ips.has(canonicalIp(address));
  }

  /** For one of this node's addresses: why `port` may not be dialled there, or undefined when it may. */
  portDenial(address: string, port: number): string | undefined {
    if (this.ports.has(port)) return undefined;
    const allowed = [...this.ports].sort((a, b) => a - b).join(', ');
    return `not allowed: ${address} is this node's address, where only ports ${allowed} are dialled (--kubelet-port, --node-local-ports)`;
  }

  /** The clause an IP-literal denial adds: the address is not this node's either. */
  get notMine(): string {
    return `not this node's address (--node-ips=${this.opts.ips.join(',')})`;
  }
}

/** Why --node-local-ports is unusable, or undefined. */
export function portsProblem(ports: readonly string[]): string | undefined {
  const bad = ports.find((p) => !/^\d+$/.test(p) || Number(p) < 1 || Number(p) > 65535);
  return bad === undefined ? undefined : `"${bad}" is not a port (1-65535)`;
}
