// The dial policy's flags.
import { int, list, type FlagSet, type Values } from '../flags/flags.js';
import { cidrsProblem } from '../net/cidr.js';
import { portsProblem } from './node-local.js';

export const dialPolicyFlags = {
  allowedCidrs: list(
    'allowed-cidrs',
    [],
    'With rules (--cluster-name, given or derived), the agent dials only addresses its rules resolve to and the host= names of --agent-identifiers; these CIDRs (comma-separated, IPv4 or IPv6) are reachable too. Without rules every address is reachable, as with the Go agent.',
    { validate: cidrsProblem },
  ),
  kubeletPort: int(
    'kubelet-port',
    10250,
    "With --node-ips and rules: the port the agent dials on its own node's addresses for kube-apiserver (kubectl logs, exec, port-forward, /api/v1/nodes/N/proxy); other ports there only with --node-local-ports",
    { validate: (n) => portsProblem([String(n)]) },
  ),
  nodeLocalPorts: list(
    'node-local-ports',
    [],
    "With --node-ips and rules: more ports the agent dials on its own node's addresses (node-exporter, hostNetwork pods), comma-separated",
    { validate: portsProblem },
  ),
} satisfies FlagSet;

export type DialPolicyFlagValues = Values<typeof dialPolicyFlags>;
