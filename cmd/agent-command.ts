// `spoke-agent [flags]`: the composition root. `start` reads top-down as the agent comes up; each step
// is a function below it, and each registers how to undo itself, so a failed start or a signal stops
// what has started, in reverse.
import { getHeapStatistics } from 'node:v8';
import { Agent } from '../agent/agent.js';
import { dialsHandler } from '../agent/dials-handler.js';
import { tlsFilesProblem } from '../agent/credentials.js';
import { agentFlags, validateAgentOptions } from '../agent/options.js';
import { apiServerFlags, servesApi, validateApiServerOptions } from '../apiserver/options.js';
import { type DialPolicy, startDialPolicy } from '../dial-policy/dial-policy.js';
import { dialPolicyFlags } from '../dial-policy/options.js';
import { noRulesHandler } from '../dns/no-rules.js';
import { dnsFlags } from '../dns/options.js';
import { FlagError, type FlagSet, type Parsed, parseFlags, usage } from '../flags/flags.js';
import type { KubeApiClient } from '../kube/api-client.js';
import {
  defaultRulesConfigmap,
  kubeFlags,
  serviceAccountNamespace,
  usesKubeApi,
  validateKubeOptions,
} from '../kube/options.js';
import { followRuleIdentifiers } from '../kube/reregister.js';
import type { Guards } from '../kube/sources.js';
import { joinHostPort, splitHostPort } from '../net/address.js';
import { HealthServer, processRegistry } from '../observability/health-server.js';
import { releaseMemoryWhenIdle } from '../memory/idle-memory.js';
import { localSocketPath, socketName } from '../observability/local-socket.js';
import { createLogger, type LogFormat, type Logger } from '../observability/log.js';
import { identifierHosts } from '../proto/agent-identifiers.js';
import { deriveIdentity } from '../rules/cluster-proxy.js';
import { agentIdentifiers } from '../rules/identifiers.js';
import { ruleFlags } from '../rules/options.js';
import type { Registry } from 'prom-client';
import type { RulesAndDns } from './agent-rules.js';
import { processMemoryLimit } from '../memory/container-memory.js';
import { systemClock } from '../clock/clock.js';
import type { Demo } from './demo.js';
import type { LocalHub } from './local-hub.js';

export const agentCommandFlags = {
  ...agentFlags,
  ...ruleFlags,
  ...dnsFlags,
  ...dialPolicyFlags,
  ...kubeFlags,
  ...apiServerFlags,
} satisfies FlagSet;

type Flags = Parsed<typeof agentCommandFlags>;
/** The flags' values once what was not given is derived (cluster-proxy's identity, the demo): never changed after. */
type Options = Readonly<Flags['values']>;

/** Flags that say which names to serve (or which hub to use): any of them turns `npm start`'s demo off. */
const demoOffFlags = ['proxy-server-host', 'cluster-name', 'expose', 'rules-file', 'rules-configmap', 'auto-expose'];

/** A start-up problem the operator must fix: printed as one line, exit code 2. */
class UsageError extends Error {}

/** What every step is given: where to log and count, and where to register how to stop what it starts. */
interface Context {
  log: Logger;
  registry: Registry;
  started: Started;
}

/** What has started, stopped in reverse order. */
class Started {
  private readonly stops: Array<() => Promise<void> | void> = [];
  add(stop: () => Promise<void> | void): void {
    this.stops.push(stop);
  }
  async stopAll(): Promise<void> {
    for (const stop of this.stops.splice(0).reverse()) await stop();
  }
}

export async function runAgentCommand(argv: string[]): Promise<number> {
  if (argv.includes('--help') || argv.includes('-h')) {
    process.stdout.write(
      `Usage: spoke-agent [flags]\n       spoke-agent dial|dns|resolve|queries|dials --help\n\n` +
        `Without --proxy-server-host it starts a local hub. Without any of --${demoOffFlags.join(', --')}: also the demo of README.md's quick start.\n\nFlags:\n${usage(agentCommandFlags)}\n`,
    );
    return 0;
  }
  const started = new Started();
  try {
    return await start(argv, started);
  } catch (err) {
    await started.stopAll();
    if (err instanceof UsageError || err instanceof FlagError) {
      process.stderr.write(`spoke-agent: ${err.message}\n`);
      return 2;
    }
    throw err;
  }
}

async function start(argv: string[], started: Started): Promise<number> {
  const flags = parseAgentFlags(argv);
  const ctx: Context = { log: startLogging(flags), registry: processRegistry(), started };
  const demo = await startDemo(flags, ctx);
  const options = deriveOptions(flags, demo, ctx);
  const listen = portsOrDemoFallback(flags, demo, ctx);
  const rulesAndDns = await startRulesAndDns(options, listen, ctx);
  const policy = await startPolicy(options, rulesAndDns, ctx);
  const hub = await hubToConnect(flags, options, ctx);
  const agent = createAgent(options, hub, rulesAndDns, policy, ctx);
  const kube = await connectToKubernetes(options, ctx);
  const healthPort = await startHealthServer(agent, rulesAndDns, kube, listen, ctx);
  await startAdminServer(options, agent, kube, ctx);
  await startAggregatedApi(options, agent, rulesAndDns, kube, ctx);
  followKubernetes(options, agent, rulesAndDns, kube, ctx);
  startAgent(agent, hub, ctx);
  if (hub.local) announceLocalHub(hub.local, demo, rulesAndDns, agent, healthPort);
  return waitForSignals(agent, options.drainTimeout, ctx.log, () => started.stopAll());
}

function parseAgentFlags(argv: string[]): Flags {
  const flags = parseFlags(agentCommandFlags, argv, process.env);
  if (flags.positionals.length > 0)
    throw new UsageError(
      `unexpected argument "${flags.positionals[0]}" (subcommands: dial, dns, resolve, queries, dials)`,
    );
  const o = flags.values;
  const problem = validateAgentOptions(o) ?? validateKubeOptions(o) ?? tlsFilesProblem(o);
  if (problem) throw new UsageError(problem);
  return flags;
}

function startLogging(flags: Flags): Logger {
  const o = flags.values;
  const level = flags.given.has('log-level') || o.v < 4 ? o.logLevel : 'debug';
  const log = createLogger(level, undefined, o.logFormat as LogFormat); // validated as a flag
  const ignored = Object.values(agentCommandFlags)
    .filter((f) => 'ignored' in f && f.ignored && flags.given.has(f.name))
    .map((f) => `--${f.name}`);
  if (ignored.length) log.info({ flags: ignored }, 'flags accepted for compatibility with the Go agent have no effect');
  return log;
}

/**
 * No flag naming names or a hub: `npm start`'s demo (a cluster name, a rule, a page to reach by it).
 * Loaded only then, like the local hub: neither is part of a deployed agent.
 */
async function startDemo(flags: Flags, { started }: Context): Promise<Demo | undefined> {
  if (demoOffFlags.some((f) => flags.given.has(f))) return undefined;
  const demo = await (await import('./demo.js')).startDemo(demoOffFlags);
  started.add(() => demo.close());
  return demo;
}

/**
 * Under cluster-proxy nothing can be set per cluster: the cluster, the namespace and the rules
 * ConfigMap come from what its hub renders and the pod's service account, unless flags say otherwise.
 */
function deriveOptions(flags: Flags, demo: Demo | undefined, { log }: Context): Options {
  const given = { ...flags.values, ...demo?.options };
  const identity = deriveIdentity({
    identifiers: given.agentIdentifiers,
    clusterName: given.clusterName,
    agentNamespace: given.agentNamespace,
    serviceAccountNamespace: serviceAccountNamespace(),
  });
  for (const { flag, value, from } of identity.derived) log.info({ flag, value, from }, `${flag} not given: derived`);
  if (identity.problem) log.warn(identity.problem);
  const derived = { ...given, clusterName: identity.clusterName, agentNamespace: identity.agentNamespace };
  if (derived.nodeName !== '' && derived.clusterName === '')
    throw new UsageError(`--node-name=${derived.nodeName} needs --cluster-name: its name is <node>.node.<cluster>`);
  // After the derivation: under cluster-proxy --api-server-port comes from additionalArgs, the cluster name from it.
  const apiProblem = validateApiServerOptions(derived);
  if (apiProblem) throw new UsageError(apiProblem);
  if (flags.given.has('rules-configmap')) return derived;
  const rulesConfigmap = defaultRulesConfigmap(derived);
  if (rulesConfigmap !== '')
    log.info(
      { configmap: rulesConfigmap },
      "--rules-configmap not given: watching spoke-agent-rules in the agent's namespace (--rules-configmap= turns this off)",
    );
  return { ...derived, rulesConfigmap };
}

type Listen = <T>(flag: string, port: number, bind: (port: number) => Promise<T>) => Promise<T>;

/**
 * The demo's default ports may be taken (5353 by avahi or another agent): it then takes free ones and
 * prints them. A port given on the command line is kept or fails.
 */
function portsOrDemoFallback(flags: Flags, demo: Demo | undefined, { log }: Context): Listen {
  return async (flag, port, bind) => {
    try {
      return await bind(port);
    } catch (err) {
      if (!demo || flags.given.has(flag) || (err as NodeJS.ErrnoException).code !== 'EADDRINUSE') throw err;
      log.warn({ port }, `--${flag}=${port} is taken: the demo listens on a free port instead`);
      return bind(0);
    }
  };
}

/**
 * Rules and the DNS server exist only with a cluster name; without them the agent dials like the Go
 * agent. Loaded only then (./agent-rules.ts).
 */
async function startRulesAndDns(
  options: Options,
  listen: Listen,
  { log, registry, started }: Context,
): Promise<RulesAndDns | undefined> {
  if (options.clusterName === '') return undefined;
  const { startRulesAndDns } = await import('./agent-rules.js');
  const rulesAndDns = await startRulesAndDns(options, registry, log, (port, bind) =>
    listen('dns-port', port, bind),
  ).catch((err: Error) => {
    throw new UsageError(err.message);
  });
  started.add(() => rulesAndDns.close());
  return rulesAndDns;
}

async function startPolicy(
  options: Options,
  rulesAndDns: RulesAndDns | undefined,
  { log, registry, started }: Context,
): Promise<DialPolicy> {
  const policy = await startDialPolicy({
    options,
    identifierHosts: identifierHosts(options.agentIdentifiers),
    nodeIps: options.nodeIps,
    resolver: rulesAndDns?.dns.resolver,
    registry,
    log,
  });
  started.add(() => policy.stop());
  return policy;
}

interface Hub {
  /** host:port of each proxy-server address. */
  serverAddresses: string[];
  /** The agent's options, with the local hub's credentials when it runs one. */
  options: Options;
  local?: LocalHub;
}

/** The proxy-servers of --proxy-server-host; without it, a local hub in this process. */
async function hubToConnect(flags: Flags, options: Options, { log, started }: Context): Promise<Hub> {
  if (flags.given.has('proxy-server-host')) {
    // Each --proxy-server-host is HOST or HOST:PORT (a bare IPv6 address takes --proxy-server-port).
    const serverAddresses = options.proxyServerHost.map((h) =>
      typeof splitHostPort(h) === 'string' ? joinHostPort(h, options.proxyServerPort) : h,
    );
    return { serverAddresses, options };
  }
  const local = await (await import('./local-hub.js')).startLocalHub(log);
  started.add(() => local.close());
  // A local demo: keep /debug and /metrics (unauthenticated outside a cluster) off other interfaces.
  const healthServerHost = flags.given.has('health-server-host') ? options.healthServerHost : '127.0.0.1';
  return {
    serverAddresses: [local.agentTarget],
    options: { ...options, ...local.agentCredentials, healthServerHost },
    local,
  };
}

function createAgent(
  options: Options,
  hub: Hub,
  rulesAndDns: RulesAndDns | undefined,
  policy: DialPolicy,
  { log, registry }: Context,
): Agent {
  return new Agent(hub.options, hub.serverAddresses, {
    log,
    registry,
    resolve: policy.resolve,
    authorize: policy.authorize,
    identifiers: agentIdentifiers(options.agentIdentifiers, rulesAndDns?.holder.current, options.nodeIps),
    memoryLimit: processMemoryLimit(),
  });
}

interface Kube {
  /** kube/sources.ts, loaded only when something uses the Kubernetes API. */
  sources?: typeof import('../kube/sources.js');
  client?: KubeApiClient;
  guards: Guards;
}

async function connectToKubernetes(options: Options, { log, registry }: Context): Promise<Kube> {
  if (!usesKubeApi(options) && !servesApi(options) && !options.countServerLeases) return { guards: {} };
  const sources = await import('../kube/sources.js');
  try {
    const client = await sources.kubeApiClient(options.kubeconfig);
    return { sources, client, guards: sources.authGuards({ kube: options, log, registry, client }) };
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
}

/** /healthz, /readyz, /metrics and /debug; also on a local socket for `resolve` inside the pod. Returns its port. */
async function startHealthServer(
  agent: Agent,
  rulesAndDns: RulesAndDns | undefined,
  kube: Kube,
  listen: Listen,
  { log, registry, started }: Context,
): Promise<number> {
  const o = agent.options;
  const health = new HealthServer({ host: o.healthServerHost, port: o.healthServerPort, registry, log });
  health.addCheck(agent.readiness);
  if (kube.guards.metrics) health.protectMetrics(kube.guards.metrics);
  health.addRoute('/debug/resolve', rulesAndDns?.resolveHandler ?? noRulesHandler, kube.guards.debug);
  health.addRoute('/debug/rules', rulesAndDns?.rulesHandler ?? noRulesHandler, kube.guards.debug);
  health.addRoute('/debug/queries', rulesAndDns?.queriesHandler ?? noRulesHandler, kube.guards.queries);
  health.addRoute('/debug/dials', dialsHandler(agent.dialLog), kube.guards.dials);
  let port: number;
  try {
    port = (await listen('health-server-port', o.healthServerPort, (p) => health.listen(p))).port;
    log.info(
      { port },
      'health server listening: /healthz /readyz /metrics /debug/resolve /debug/rules /debug/queries /debug/dials',
    );
  } catch (err) {
    throw new UsageError(`cannot listen on --health-server-port ${o.healthServerPort}: ${(err as Error).message}`);
  }
  started.add(() => health.close());
  if (o.debugSocket && process.platform === 'linux') {
    // `kubectl exec POD -- ... resolve NAME` explains answers through it with no token (cmd/resolve-command.ts).
    const path = localSocketPath(port);
    await health.listenLocal(path).then(
      () =>
        log.info(
          { socket: socketName(path) },
          "health server also on a local socket (the pod's processes only, no token needed for /debug)",
        ),
      (err: Error) =>
        log.warn(
          { socket: socketName(path), error: err.message },
          'cannot listen on the local socket: resolve in the pod will need a token',
        ),
    );
  }
  return port;
}

/** --enable-profiling: the Go agent's admin server, like it only on demand (node:inspector is loaded with it). */
async function startAdminServer(
  options: Options,
  agent: Agent,
  kube: Kube,
  { log, registry, started }: Context,
): Promise<void> {
  if (!options.enableProfiling) return;
  const { addProfilingRoutes } = await import('../observability/profiling.js');
  const admin = new HealthServer({ host: options.adminBindAddress, port: options.adminServerPort, registry, log });
  admin.addCheck(agent.readiness);
  if (kube.guards.metrics) admin.protectMetrics(kube.guards.metrics);
  addProfilingRoutes(admin, log, kube.guards.debug);
  try {
    const addr = await admin.listen();
    log.info(
      { address: addr.address, port: addr.port },
      'admin server listening: /debug/pprof/profile?seconds=N (CPU profile), /debug/pprof/heap (heap snapshot)',
    );
  } catch (err) {
    throw new UsageError(
      `cannot listen on --admin-bind-address ${options.adminBindAddress} --admin-server-port ${options.adminServerPort}: ${(err as Error).message}`,
    );
  }
  started.add(() => admin.close());
}

/** kubectl through the aggregation layer (apiserver/README.md); loads client-node, as kube/ does. */
async function startAggregatedApi(
  options: Options,
  agent: Agent,
  rulesAndDns: RulesAndDns | undefined,
  kube: Kube,
  { log, registry, started }: Context,
): Promise<void> {
  if (!servesApi(options) || !rulesAndDns) return;
  const { startApiServer } = await import('../apiserver/setup.js');
  const api = await startApiServer({
    options,
    resolver: rulesAndDns.dns.resolver,
    holder: rulesAndDns.holder,
    dialLog: agent.dialLog,
    log,
    registry,
    client: kube.client,
  }).catch((err: Error) => {
    throw new UsageError(err.message);
  });
  started.add(() => api.close());
}

/** The proxy-servers' Leases, the rules' sources (a ConfigMap, Services), and the rule names registered as they change. */
function followKubernetes(
  options: Options,
  agent: Agent,
  rulesAndDns: RulesAndDns | undefined,
  kube: Kube,
  { log, registry, started }: Context,
): void {
  const { sources, client } = kube;
  try {
    if (sources && options.countServerLeases) {
      const onCount = (n: number) => agent.clients.setLeaseCount(n);
      started.add(sources.startLeaseCounting({ agent: options, kube: options, client, onCount, log, registry }));
    }
    if (!rulesAndDns) return;
    const { holder } = rulesAndDns;
    started.add(followRuleIdentifiers({ holder, clients: agent.clients, extra: options.agentIdentifiers, log }));
    if (sources)
      started.add(sources.startKubeSources({ kube: options, ruleFlags: options, holder, log, registry, client }));
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
}

function startAgent(agent: Agent, hub: Hub, { log, started }: Context): void {
  agent.start();
  started.add(() => agent.stop());
  // Give back what start-up and bursts of work grew, once the agent is quiet (memory/idle-memory.ts).
  started.add(releaseMemoryWhenIdle());
  log.info(
    {
      agentID: agent.agentID,
      targets: hub.serverAddresses,
      identifiers: agent.identifiers,
      memoryLimit: agent.memoryLimit ?? 'none',
      heapLimit: getHeapStatistics().heap_size_limit,
      bufferBudget: agent.budget.limit,
    },
    'spoke-agent started',
  );
}

/** Once the agent holds the local hub: the demo's lines to try, or a dial through the tunnel. */
function announceLocalHub(
  local: LocalHub,
  demo: Demo | undefined,
  rulesAndDns: RulesAndDns | undefined,
  agent: Agent,
  healthPort: number,
): void {
  const lines =
    demo && rulesAndDns
      ? demo.lines({
          httpConnectPort: local.ports.httpConnect,
          dns: rulesAndDns.dns.listening,
          health: { host: agent.options.healthServerHost, port: healthPort },
        })
      : local.tunnelLines(rulesAndDns ? undefined : joinHostPort('127.0.0.1', healthPort));
  local.announce(agent.agentID, lines);
}

/** First SIGTERM/SIGINT drains (DRAIN sent, in-flight connections finish); a second exits at once. */
function waitForSignals(
  agent: Agent,
  drainTimeoutMs: number,
  log: Logger,
  shutdown: () => Promise<void>,
): Promise<number> {
  return new Promise((resolve) => {
    let firstAt: number | undefined;
    const onSignal = (signal: NodeJS.Signals) => {
      if (firstAt !== undefined) {
        // `npm start` under a terminal delivers Ctrl-C twice (the process group, then tsx's relay):
        // only a signal well after the first is the operator insisting.
        if (systemClock.now() - firstAt < 1000) return;
        log.warn({ signal }, 'second signal: exiting without waiting for connections');
        process.exit(1);
      }
      firstAt = systemClock.now();
      log.info(
        { signal, drainTimeoutMs },
        'draining: DRAIN sent to every proxy-server, waiting for in-flight connections',
      );
      agent
        .drain(drainTimeoutMs)
        .then(shutdown)
        .then(() => {
          log.info('drained, exiting');
          resolve(0);
        });
    };
    process.on('SIGTERM', onSignal);
    process.on('SIGINT', onSignal);
  });
}
