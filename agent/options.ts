// The agent's flags. Names and defaults follow the Go agent (cmd/agent/app/options/options.go) so
// spoke-agent can replace its binary in cluster-proxy's proxy-agent container; flags that only
// make sense for the Go binary are accepted and ignored rather than rejected.
import { existsSync } from 'node:fs';
import { bool, duration, int, list, str, type FlagSet, type Values } from '../flags/flags.js';
import { labelSelectorProblem } from '../flags/label-selector.js';
import { klogFlags } from '../observability/klog-flags.js';
import { logFormats, logLevels } from '../observability/log.js';
import { validateIdentifiers } from '../proto/agent-identifiers.js';

const fileExists = (what: string) => (path: string) =>
  path !== '' && !existsSync(path) ? `${what} ${path} does not exist` : undefined;
const positive = (what: string) => (n: number) => (n <= 0 ? `${what} ${n} must be greater than 0` : undefined);
const port = (n: number) => (n < 0 || n > 65535 ? `port ${n} out of range` : undefined);

export const agentFlags = {
  proxyServerHost: list(
    'proxy-server-host',
    ['127.0.0.1'],
    'The hostname to use to connect to the proxy-server. Several (comma-separated or repeated, each HOST or HOST:PORT) are all kept connected. When not given, spoke-agent starts a local hub on loopback.',
  ),
  proxyServerPort: int('proxy-server-port', 8091, 'The port the proxy server is listening on.', {
    validate: (n) => (n <= 0 ? `proxy server port ${n} must be greater than 0` : port(n)),
  }),
  agentCert: str('agent-cert', '', 'If non-empty secure communication with this cert (mTLS client certificate).', {
    validate: fileExists('agent cert'),
  }),
  agentKey: str('agent-key', '', 'If non-empty secure communication with this key.', {
    validate: fileExists('agent key'),
  }),
  caCert: str('ca-cert', '', 'If non-empty the CAs we use to validate the proxy-server (re-read on every connect).', {
    validate: fileExists('CA cert'),
  }),
  alpnProto: list(
    'alpn-proto',
    [],
    'Additional ALPN protocols to be presented when connecting to the server. Useful to distinguish between network proxy and apiserver connections that share the same destination address. h2 is always offered last.',
  ),
  agentID: str(
    'agent-id',
    '',
    "The unique ID of this agent. Can also be set by the 'PROXY_AGENT_ID' environment variable. Default to a generated uuid if not set.",
    { env: 'PROXY_AGENT_ID', defaultText: 'random uuid' },
  ),
  agentIdentifiers: str(
    'agent-identifiers',
    '',
    'Identifiers of the agent that will be used by the server when choosing agent, URL-encoded, e.g. host=localhost&host=node1.mydomain.com&ipv4=1.2.3.4&default-route=true',
    { validate: validateIdentifiers },
  ),
  serviceAccountTokenPath: str(
    'service-account-token-path',
    '',
    'If non-empty proxy agent uses this token (re-read on every connect) to prove its identity to the proxy server.',
    { validate: fileExists('service account token path') },
  ),
  syncInterval: duration(
    'sync-interval',
    1000,
    'The initial interval by which the agent periodically checks if it has connections to all instances of the proxy server.',
    { validate: positive('sync interval') },
  ),
  syncIntervalCap: duration(
    'sync-interval-cap',
    10_000,
    'The maximum interval for the SyncInterval to back off to when unable to connect to the proxy server.',
    { validate: positive('sync interval cap') },
  ),
  probeInterval: duration(
    'probe-interval',
    1000,
    'The interval by which the Go agent checks whether its connections to the proxy server are ready; spoke-agent learns of a lost connection from the connection itself.',
    { ignored: true, validate: positive('probe interval') },
  ),
  syncForever: bool(
    'sync-forever',
    false,
    'If true, the agent continues syncing, in order to support server count changes.',
  ),
  keepaliveTime: duration(
    'keepalive-time',
    60_000,
    'Time for gRPC agent client keepalive pings, which find a dead transport (Go agent: 1h). At least 30s: the proxy-server answers faster pings with GOAWAY.',
    { validate: (ms) => (ms < 30_000 ? 'must be at least 30s (the proxy-server rejects faster pings)' : undefined) },
  ),
  tcpKeepaliveTime: duration(
    'tcp-keepalive-time',
    3000,
    'Idle time after which TCP keepalive probes (one a second) check each connection to a proxy-server; they cost a probe and its answer per idle period and none while traffic flows. 0 turns them off (the Go agent: 15s).',
    { validate: (ms) => (ms !== 0 && ms < 1000 ? 'must be 0 (off) or at least 1s' : undefined) },
  ),
  tcpUserTimeout: duration(
    'tcp-user-timeout',
    8000,
    'A connection to a proxy-server on which nothing sent (data or a keepalive probe) has been acknowledged for this long is dropped and redialled (TCP_USER_TIMEOUT): how fast a path that went silent (no RST, no FIN) is found, idle or busy. Too short drops a slow but live link. 0: the kernel default, ~15 minutes while data is outstanding (the Go agent: 20s).',
    {
      validate: (ms) =>
        ms !== 0 && ms < 1000
          ? 'must be 0 (the kernel default) or at least 1s'
          : ms > 2_147_483_647
            ? 'too long'
            : undefined,
    },
  ),
  tcpCongestionControl: str(
    'tcp-congestion-control',
    'cubic',
    "TCP congestion control of the connections to the proxy-servers (each carries a whole stream of tunnelled connections): cubic backs off when the hub's side drops packets, where BBR v1 keeps sending into the loss (measured: a burst twice as slow against a hub under TCP memory pressure). '' keeps the node's default; the kernel must allow the name to unprivileged processes (net.ipv4.tcp_allowed_congestion_control).",
    { validate: (v) => (/^[a-z0-9_]{0,15}$/.test(v) ? undefined : `"${v}" is not a congestion control name`) },
  ),
  dialTimeout: duration('dial-timeout', 5000, 'Timeout for dialing a target on behalf of the proxy-server.', {
    validate: positive('dial timeout'),
  }),
  drainTimeout: duration(
    'drain-timeout',
    30_000,
    "After the first SIGTERM/SIGINT: how long in-flight connections may finish before the agent exits (below cluster-proxy's 40s grace period).",
  ),
  dialLogSize: int(
    'dial-log-size',
    1000,
    'Recent tunnelled connections kept in memory for the dial log (/debug/dials, and the dials resource of the dns.spoke-agent.io API): server, destination, rule, address, result, bytes, duration; about 400 bytes each; 0 turns it off',
    { validate: (n) => (n < 0 ? 'must not be negative' : n > 100_000 ? 'at most 100000 (about 40 MiB)' : undefined) },
  ),
  maxConnectionBuffer: int(
    'max-connection-buffer',
    8 << 20,
    'Bytes buffered for one target that reads slower than the hub sends; past this the connection is closed with an error instead of stalling every other connection on the stream.',
    { validate: positive('max connection buffer') },
  ),
  maxTotalBuffer: int(
    'max-total-buffer',
    0,
    'Bytes buffered for targets across all connections. Past this, the connections whose targets stopped reading are closed with an error, largest first, and every server stream is paused while none has; 0: the default.',
    {
      defaultText: '1/4 of the container memory limit, 256 MiB without one',
      validate: (n) => (n < 0 ? `max total buffer ${n} must not be negative` : undefined),
    },
  ),
  targetReceiveBuffer: int(
    'target-receive-buffer',
    512 << 10,
    "The kernel's receive buffer of each connection to a target: what a target can have in flight toward the agent before the agent reads it. Fixed, so a burst of connections cannot fill the node's TCP memory; one connection's throughput is about this per round trip. 0: the kernel sizes it (up to net.ipv4.tcp_rmem's maximum).",
    { validate: (n) => (n < 0 ? 'must not be negative' : undefined) },
  ),
  healthServerHost: str('health-server-host', '', 'The host address to listen on, without port.'),
  healthServerPort: int(
    'health-server-port',
    8093,
    'The port the health server (/healthz, /readyz, /metrics, /debug) is listening on.',
    { validate: port },
  ),
  debugSocket: bool(
    'debug-socket',
    true,
    "Also serve the health server's routes on the abstract Unix socket @spoke-agent-health-<health-server-port> (Linux), where /debug needs no token: only processes in the pod's network namespace reach it (`kubectl exec ... resolve`, the pod's other containers), never a network caller or the hub (the agent dials TCP only). Turn it off when the pod shares the host's network (hostNetwork).",
  ),
  logLevel: str('log-level', 'info', `Log level: ${logLevels.join(', ')}.`, {
    validate: (l) =>
      (logLevels as readonly string[]).includes(l) ? undefined : `must be one of ${logLevels.join(', ')}`,
  }),
  logFormat: str(
    'log-format',
    'auto',
    'Log lines: json (one JSON object a line, for collectors), text (HH:MM:SS.mmm LEVEL message key=value; coloured on a terminal unless NO_COLOR is set), or auto: text when stdout is a terminal, else json.',
    {
      validate: (f) =>
        (logFormats as readonly string[]).includes(f) ? undefined : `must be one of ${logFormats.join(', ')}`,
    },
  ),
  // The Go agent's admin server, for profiling only (pprof's Node counterpart: observability/profiling.ts).
  adminServerPort: int(
    'admin-server-port',
    8094,
    'The port the admin server is listening on, with --enable-profiling (it also serves /metrics, /healthz and /readyz).',
    { validate: port },
  ),
  adminBindAddress: str(
    'admin-bind-address',
    '127.0.0.1',
    'Bind address for admin connections. Loopback by default: a heap snapshot holds every secret the agent has in memory.',
  ),
  enableProfiling: bool(
    'enable-profiling',
    false,
    'Serve profiles on the admin port: /debug/pprof/profile?seconds=N (a CPU profile, .cpuprofile) and /debug/pprof/heap (a heap snapshot, .heapsnapshot; the agent pauses while it is taken), both opened by Chrome DevTools. The /debug authentication (--debug-auth) applies.',
  ),
  // Accepted for drop-in compatibility with the Go binary; they configure things spoke-agent does differently or not at all.
  enableContentionProfiling: bool(
    'enable-contention-profiling',
    false,
    "Go's mutex and block profiles; Node's JavaScript holds no locks to profile, so this needs --enable-profiling (as in Go) and does nothing more.",
    { ignored: true },
  ),
  warnOnChannelLimit: bool(
    'warn-on-channel-limit',
    false,
    'Turns on a warning if the system is going to push to a full channel.',
    { ignored: true },
  ),
  xfrChannelSize: int(
    'xfr-channel-size',
    150,
    'Set the size of the channel for transferring data between the agent and the proxy server (spoke-agent bounds bytes instead: --max-connection-buffer).',
    { ignored: true, validate: (n) => (n <= 0 ? `channel size ${n} must be greater than 0` : undefined) },
  ),
  // ANP v0.31-v0.36 (master's --lease-label-selector too): the server count from the proxy-servers' Leases (kube/lease-counter.ts).
  countServerLeases: bool(
    'count-server-leases',
    false,
    "Enables lease counting system to determine the number of proxy servers to connect to: the valid Leases the proxy-servers publish (--enable-lease-controller) in --lease-namespace, watched through the Kubernetes API (--kubeconfig, else the pod's service account; the agent needs get, list and watch on leases there: manifests/lease-counting). Until they can be read, the serverCount header counts.",
  ),
  leaseNamespace: str('lease-namespace', 'kube-system', 'Namespace where lease objects are managed.', {
    validate: (v) =>
      /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/.test(v) && v.length <= 63
        ? undefined
        : `lease namespace "${v}" is not a namespace name`,
  }),
  leaseLabelSelector: str(
    'lease-label-selector',
    '',
    'Label selector for leases to take into account when counting servers, in the full Kubernetes syntax (key=value, key==value, key!=value, key in (a,b), key notin (a,b), key, !key; comma-separated).',
    { defaultText: 'k8s-app=konnectivity-server (from --lease-label)', validate: labelSelectorProblem },
  ),
  leaseLabel: str(
    'lease-label',
    'k8s-app=konnectivity-server',
    'Deprecated alias of --lease-label-selector (the same syntax; --lease-label-selector wins when both are given).',
    { validate: labelSelectorProblem },
  ),
  serverCountSource: str(
    'server-count-source',
    'default',
    "How server counts are combined: 'default' (with --count-server-leases the Leases alone, else the serverCount header) or 'max' (the larger of the two).",
    {
      validate: (s) =>
        ['', 'default', 'max'].includes(s)
          ? undefined
          : `--server-count-source must be one of '', 'default', 'max', got ${s}`,
    },
  ),
  kubeApiContentType: str(
    'kube-api-content-type',
    'application/vnd.kubernetes.protobuf',
    'Content type of requests sent to apiserver (spoke-agent reads the few objects it watches as JSON).',
    { ignored: true },
  ),
  ...klogFlags,
} satisfies FlagSet;

export type AgentFlagValues = Values<typeof agentFlags>;

/** Checks that span several flags, as the Go agent's Validate does. */
export function validateAgentOptions(o: AgentFlagValues): string | undefined {
  if (o.agentKey !== '' && o.agentCert === '')
    return `cannot have agent cert empty when agent key is set to "${o.agentKey}" (--agent-cert)`;
  if (o.agentCert !== '' && o.agentKey === '')
    return `cannot have agent key empty when agent cert is set to "${o.agentCert}" (--agent-key)`;
  if (o.syncInterval > o.syncIntervalCap)
    return `sync interval ${o.syncInterval}ms must be less than sync interval cap ${o.syncIntervalCap}ms (--sync-interval)`;
  if (o.enableContentionProfiling && !o.enableProfiling)
    return 'if --enable-contention-profiling is set, --enable-profiling must also be set';
  return undefined;
}
