// `spoke-agent [flags]`: parse and validate flags, then start, in order: the rules and the DNS
// server (when --cluster-name is set), the dial policy, the health server, the agent (with a local
// hub when no --proxy-server-host is given) and the Kubernetes watches; shut down gracefully on signals.
import { getHeapStatistics } from 'node:v8';
import { Agent } from '../agent/agent.js';
import { apiServerFlags, servesApi, validateApiServerOptions } from '../apiserver/options.js';
import { joinHostPort, splitHostPort } from '../agent/address.js';
import { tlsFilesProblem } from '../agent/credentials.js';
import { identifierHosts } from '../proto/agent-identifiers.js';
import { agentFlags, validateAgentOptions } from '../agent/options.js';
import { noRulesHandler } from '../dns/no-rules.js';
import { dnsFlags } from '../dns/options.js';
import { dialPolicy } from '../kube/dial-policy.js';
import {
  defaultRulesConfigmap,
  kubeFlags,
  serviceAccountNamespace,
  usesKubeApi,
  validateKubeOptions,
} from '../kube/options.js';
import { followRuleIdentifiers } from '../kube/reregister.js';
import type { Guards } from '../kube/sources.js';
import type { KubeApiClient } from '../kube/api-client.js';
import { HealthServer, processRegistry } from '../observability/health-server.js';
import { localSocketPath, socketName } from '../observability/local-socket.js';
import { createLogger, type LogFormat, type Logger } from '../observability/log.js';
import { releaseMemoryWhenIdle } from '../observability/idle-memory.js';
import { deriveIdentity } from '../rules/cluster-proxy.js';
import { agentIdentifiers } from '../rules/identifiers.js';
import { ruleFlags } from '../rules/options.js';
import { FlagError, parseFlags, usage, type FlagSet } from '../flags/flags.js';
import type { RuleHolder } from '../rules/holder.js';
import { processMemoryLimit } from './container-memory.js';

export const agentCommandFlags = {
  ...agentFlags,
  ...ruleFlags,
  ...dnsFlags,
  ...kubeFlags,
  ...apiServerFlags,
} satisfies FlagSet;

/** Flags that say which names to serve (or which hub to use): any of them turns `npm start`'s demo off. */
const demoOffFlags = ['proxy-server-host', 'cluster-name', 'expose', 'rules-file', 'rules-configmap', 'auto-expose'];

/** A start-up problem the operator must fix: printed as one line, exit code 2. */
class UsageError extends Error {}

export async function runAgentCommand(argv: string[]): Promise<number> {
  if (argv.includes('--help') || argv.includes('-h')) {
    process.stdout.write(
      `Usage: spoke-agent [flags]\n       spoke-agent dial|dns|resolve|queries --help\n\n` +
        `Without --proxy-server-host it starts a local hub. Without any of --${demoOffFlags.join(', --')}: also the demo of README.md's quick start.\n\nFlags:\n${usage(agentCommandFlags)}\n`,
    );
    return 0;
  }
  const cleanups: Array<() => Promise<void> | void> = [];
  const shutdown = async () => {
    for (const c of cleanups.splice(0).reverse()) await c();
  };
  try {
    return await start(argv, cleanups, shutdown);
  } catch (err) {
    await shutdown();
    if (err instanceof UsageError || err instanceof FlagError) {
      process.stderr.write(`spoke-agent: ${err.message}\n`);
      return 2;
    }
    throw err;
  }
}

async function start(
  argv: string[],
  cleanups: Array<() => Promise<void> | void>,
  shutdown: () => Promise<void>,
): Promise<number> {
  const parsed = parseFlags(agentCommandFlags, argv, process.env);
  const o = parsed.values;
  if (parsed.positionals.length > 0)
    throw new UsageError(`unexpected argument "${parsed.positionals[0]}" (subcommands: dial, dns, resolve, queries)`);
  const problem = validateAgentOptions(o) ?? validateKubeOptions(o) ?? tlsFilesProblem(o);
  if (problem) throw new UsageError(problem);
  const level = parsed.given.has('log-level') || o.v < 4 ? o.logLevel : 'debug';
  const log = createLogger(level, undefined, o.logFormat as LogFormat); // validated as a flag
  const ignored = Object.values(agentCommandFlags)
    .filter((f) => 'ignored' in f && f.ignored && parsed.given.has(f.name))
    .map((f) => `--${f.name}`);
  if (ignored.length) log.info({ flags: ignored }, 'flags accepted for compatibility with the Go agent have no effect');
  const registry = processRegistry();

  // No flag naming names or a hub: `npm start`'s demo (a cluster name, a rule, a page to reach by it).
  // Loaded only then, like the local hub: neither is part of a deployed agent.
  const demo = demoOffFlags.some((f) => parsed.given.has(f))
    ? undefined
    : await (await import('./demo.js')).startDemo(o, demoOffFlags);
  if (demo) cleanups.push(() => demo.close());
  // The demo's default ports may be taken (5353 by avahi or another agent): it then takes free ones and
  // prints them. A port given on the command line is kept or fails.
  const listen = async <T>(flag: string, port: number, bind: (port: number) => Promise<T>): Promise<T> => {
    try {
      return await bind(port);
    } catch (err) {
      if (!demo || parsed.given.has(flag) || (err as NodeJS.ErrnoException).code !== 'EADDRINUSE') throw err;
      log.warn({ port }, `--${flag}=${port} is taken: the demo listens on a free port instead`);
      return bind(0);
    }
  };

  // Under cluster-proxy nothing can be set per cluster: the cluster, the namespace and the rules
  // ConfigMap come from what its hub renders and the pod's service account, unless flags say otherwise.
  const identity = deriveIdentity({
    identifiers: o.agentIdentifiers,
    clusterName: o.clusterName,
    agentNamespace: o.agentNamespace,
    serviceAccountNamespace: serviceAccountNamespace(),
  });
  for (const { flag, value, from } of identity.derived) log.info({ flag, value, from }, `${flag} not given: derived`);
  if (identity.problem) log.warn(identity.problem);
  Object.assign(o, { clusterName: identity.clusterName, agentNamespace: identity.agentNamespace });
  // After the derivation: under cluster-proxy --api-server-port comes from additionalArgs, the cluster name from it.
  const apiProblem = validateApiServerOptions(o);
  if (apiProblem) throw new UsageError(apiProblem);
  if (!parsed.given.has('rules-configmap')) {
    o.rulesConfigmap = defaultRulesConfigmap(o);
    if (o.rulesConfigmap !== '')
      log.info(
        { configmap: o.rulesConfigmap },
        "--rules-configmap not given: watching spoke-agent-rules in the agent's namespace (--rules-configmap= turns this off)",
      );
  }

  // Rules and the DNS server exist only with a cluster name; without them the agent dials like the Go agent.
  // Loaded only then (./agent-rules.ts).
  const withRules = o.clusterName !== '' ? await import('./agent-rules.js') : undefined;
  let holder: RuleHolder | undefined;
  let dns: Awaited<ReturnType<NonNullable<typeof withRules>['startDns']>> | undefined;
  if (withRules) {
    const rules = withRules.rulesFromFlags(o);
    if (!rules.ok) throw new UsageError(`invalid rules: ${rules.errors.join('; ')}`);
    holder = new withRules.RuleHolder(rules.value);
    try {
      dns = await withRules.startDns(o, holder, registry, log.child({ component: 'dns' }), (port, bind) =>
        listen('dns-port', port, bind),
      );
    } catch (err) {
      throw new UsageError(`DNS server: ${(err as Error).message}`);
    }
    cleanups.push(() => dns!.close());
  }
  const policy = dialPolicy({
    kube: o,
    identifierHosts: identifierHosts(o.agentIdentifiers),
    rules: holder && dns && { holder, resolveForDial: (h) => withRules!.resolveForDial(dns!.resolver, h) },
    registry,
    log,
  });
  cleanups.push(() => policy.stop());

  // Each --proxy-server-host is HOST or HOST:PORT (a bare IPv6 address takes --proxy-server-port).
  let targets = o.proxyServerHost.map((h) =>
    typeof splitHostPort(h) === 'string' ? joinHostPort(h, o.proxyServerPort) : h,
  );
  const localHub = parsed.given.has('proxy-server-host')
    ? undefined
    : await (await import('./local-hub.js')).startLocalHub(log);
  if (localHub) {
    cleanups.push(() => localHub.close());
    // A local demo: keep /debug and /metrics (unauthenticated outside a cluster) off other interfaces.
    if (!parsed.given.has('health-server-host')) o.healthServerHost = '127.0.0.1';
    Object.assign(o, localHub.agentCredentials);
    targets = [localHub.agentTarget];
  }
  const memoryLimit = processMemoryLimit();
  const identifiers = agentIdentifiers(o.agentIdentifiers, holder?.current);
  const agent = new Agent(o, targets, {
    log,
    registry,
    resolve: policy.resolve,
    authorize: policy.authorize,
    identifiers,
    memoryLimit,
  });

  // Loaded only when needed: the Kubernetes client (kube/api-client.ts), one for every use of the API.
  const kube = usesKubeApi(o) || servesApi(o) || o.countServerLeases ? await import('../kube/sources.js') : undefined;
  let guards: Guards;
  let client: KubeApiClient | undefined;
  try {
    client = kube && (await kube.kubeApiClient(o.kubeconfig));
    guards = kube ? kube.authGuards({ kube: o, log, registry, client }) : {};
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  const health = new HealthServer({ host: o.healthServerHost, port: o.healthServerPort, registry, log });
  health.addCheck(agent.readiness);
  if (guards.metrics) health.protectMetrics(guards.metrics);
  health.addRoute(
    '/debug/resolve',
    withRules && dns ? withRules.resolveHandler(dns.resolver) : noRulesHandler,
    guards.debug,
  );
  health.addRoute('/debug/rules', withRules && holder ? withRules.rulesHandler(holder) : noRulesHandler, guards.debug);
  health.addRoute(
    '/debug/queries',
    withRules && dns ? withRules.queriesHandler(dns.resolver.queryLog) : noRulesHandler,
    guards.queries,
  );
  let healthPort: number;
  try {
    healthPort = (await listen('health-server-port', o.healthServerPort, (port) => health.listen(port))).port;
    log.info(
      { port: healthPort },
      'health server listening: /healthz /readyz /metrics /debug/resolve /debug/rules /debug/queries',
    );
  } catch (err) {
    throw new UsageError(`cannot listen on --health-server-port ${o.healthServerPort}: ${(err as Error).message}`);
  }
  cleanups.push(() => health.close());
  if (o.debugSocket && process.platform === 'linux') {
    // `kubectl exec POD -- ... resolve NAME` explains answers through it with no token (cmd/resolve-command.ts).
    const path = localSocketPath(healthPort);
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
  if (o.enableProfiling) {
    // The Go agent's admin server, like it only on demand here: node:inspector is loaded with it.
    const { addProfilingRoutes } = await import('../observability/profiling.js');
    const admin = new HealthServer({ host: o.adminBindAddress, port: o.adminServerPort, registry, log });
    admin.addCheck(agent.readiness);
    if (guards.metrics) admin.protectMetrics(guards.metrics);
    addProfilingRoutes(admin, log, guards.debug);
    try {
      const addr = await admin.listen();
      log.info(
        { address: addr.address, port: addr.port },
        'admin server listening: /debug/pprof/profile?seconds=N (CPU profile), /debug/pprof/heap (heap snapshot)',
      );
    } catch (err) {
      throw new UsageError(
        `cannot listen on --admin-bind-address ${o.adminBindAddress} --admin-server-port ${o.adminServerPort}: ${(err as Error).message}`,
      );
    }
    cleanups.push(() => admin.close());
  }
  if (servesApi(o) && holder && dns) {
    // kubectl through the aggregation layer (apiserver/README.md); loads client-node, as kube/ does.
    const { startApiServer } = await import('../apiserver/setup.js');
    const api = await startApiServer({ options: o, resolver: dns.resolver, holder, log, registry, client }).catch(
      (err: Error) => {
        throw new UsageError(err.message);
      },
    );
    cleanups.push(() => api.close());
  }

  if (kube && o.countServerLeases) {
    try {
      cleanups.push(
        kube.startLeaseCounting({
          agent: o,
          kube: o,
          client,
          onCount: (n) => agent.clients.setLeaseCount(n),
          log,
          registry,
        }),
      );
    } catch (err) {
      throw new UsageError((err as Error).message);
    }
  }
  if (holder) {
    cleanups.push(followRuleIdentifiers({ holder, clients: agent.clients, extra: o.agentIdentifiers, log }));
    try {
      if (kube) cleanups.push(kube.startKubeSources({ kube: o, rules: o, holder, log, registry, client }));
    } catch (err) {
      throw new UsageError((err as Error).message);
    }
  }
  agent.start();
  cleanups.push(() => agent.stop());
  // Give back what start-up and bursts of work grew, once the agent is quiet (observability/idle-memory.ts).
  cleanups.push(releaseMemoryWhenIdle());
  log.info(
    {
      agentID: agent.agentID,
      targets,
      identifiers,
      memoryLimit: memoryLimit ?? 'none',
      heapLimit: getHeapStatistics().heap_size_limit,
      bufferBudget: agent.budget.limit,
    },
    'spoke-agent started',
  );
  if (localHub) {
    const lines =
      demo && dns
        ? demo.lines({
            httpConnectPort: localHub.ports.httpConnect,
            dns: dns.listening,
            health: { host: o.healthServerHost, port: healthPort },
          })
        : localHub.tunnelLines(holder ? undefined : joinHostPort('127.0.0.1', healthPort));
    localHub.announce(agent.agentID, lines);
  }
  return waitForSignals(agent, o.drainTimeout, log, shutdown);
}

/** First SIGTERM/SIGINT drains (DRAIN sent, in-flight connections finish); a second exits at once. */
function waitForSignals(
  agent: Agent,
  drainTimeoutMs: number,
  log: Logger,
  shutdown: () => Promise<void>,
): Promise<number> {
  return new Promise((resolve) => {
    let firstAt = 0;
    const onSignal = (signal: NodeJS.Signals) => {
      if (firstAt !== 0) {
        // `npm start` under a terminal delivers Ctrl-C twice (the process group, then tsx's relay):
        // only a signal well after the first is the operator insisting.
        if (Date.now() - firstAt < 1000) return;
        log.warn({ signal }, 'second signal: exiting without waiting for connections');
        process.exit(1);
      }
      firstAt = Date.now();
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
