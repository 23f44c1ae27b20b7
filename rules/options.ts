// Flags that decide the names served: the cluster's identity and the rules. Shared by the agent and
// `spoke-agent dns`. Reading them into rules is rules/from-flags.ts: the flags alone load no rule parser.
import { list, str, type Values } from '../flags/flags.js';
import { nodeIpsProblem } from './node.js';

export const ruleFlags = {
  clusterName: str(
    'cluster-name',
    '',
    'Name of this cluster on the hub; when set, the DNS server runs and serves <cluster>, <cluster>.<agent-namespace> and <service>.<namespace>.<cluster>. The agent, when it is not given: the host=<cluster> of --agent-identifiers whose cluster-proxy service-proxy host (cluster-<sha256>.open-cluster-management.proxy) is listed too, as cluster-proxy renders them',
    {
      defaultText: "from cluster-proxy's --agent-identifiers",
    },
  ),
  agentNamespace: str(
    'agent-namespace',
    '',
    "Namespace the agent runs in, for the <cluster>.<agent-namespace> name. The agent, when it is not given: the host=<cluster>.<namespace> of --agent-identifiers, else the pod's service account namespace",
    {
      env: 'POD_NAMESPACE',
      defaultText: '$POD_NAMESPACE, else derived',
    },
  ),
  clusterDomain: str(
    'cluster-domain',
    'cluster.local',
    "The cluster's DNS domain: <service>.<namespace>.<cluster> answers as <service>.<namespace>.svc.<cluster-domain>",
  ),
  expose: list('expose', [], 'Services to serve, NAMESPACE/SERVICE or NAMESPACE/* (repeatable, comma-separated)'),
  rulesFile: str(
    'rules-file',
    '',
    'YAML or JSON file with more rules: "expose" (as --expose) and "static" names with an IP or FQDN target',
  ),
  nodeName: str(
    'node-name',
    '',
    "The node this agent runs on (a per-node DaemonSet: spec.nodeName from the downward API): it serves <node>.node.<cluster>, resolving to --node-ips, which the hub dials for targets on this node (the kubelet, node-exporter, hostNetwork pods); another node's name there is refused. Needs --cluster-name and --node-ips",
  ),
  nodeIps: list(
    'node-ips',
    [],
    "This node's addresses (status.hostIPs from the downward API; both families on dual-stack), comma-separated: announced as ipv4=/ipv6= agent identifiers, so the hub's destHost strategy sends kube-apiserver's dials to this node's kubelet to this agent; with rules the agent dials them on --kubelet-port and --node-local-ports only",
    { validate: nodeIpsProblem },
  ),
};

export type RuleFlagValues = Values<typeof ruleFlags>;
