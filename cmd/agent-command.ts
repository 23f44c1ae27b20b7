// `spoke-agent [flags]`: parse and validate flags, start the health server and the agent (and a
// local hub when no --proxy-server-host is given), and shut down gracefully on signals.
import { Registry } from 'prom-client';
import { Agent } from '../agent/agent.js';
import { agentFlags, validateAgentOptions } from '../agent/options.js';
import { HealthServer } from '../observability/health-server.js';
import { createLogger, type Logger } from '../observability/log.js';
import { FlagError, parseFlags, usage, type FlagSet } from './flags.js';
import { startLocalHub } from './local-hub.js';

export const agentCommandFlags = { ...agentFlags } satisfies FlagSet;

export async function runAgentCommand(argv: string[]): Promise<number> {
  if (argv.includes('--help') || argv.includes('-h')) {
    process.stdout.write(`Usage: spoke-agent [flags]\n       spoke-agent dial|dns|resolve --help\n\nFlags:\n${usage(agentCommandFlags)}\n`);
    return 0;
  }
  let parsed;
  try {
    parsed = parseFlags(agentCommandFlags, argv, process.env);
  } catch (err) {
    if (!(err instanceof FlagError)) throw err;
    process.stderr.write(`spoke-agent: ${err.message}\n`);
    return 2;
  }
  const o = parsed.values;
  if (parsed.positionals.length > 0) {
    process.stderr.write(`spoke-agent: unexpected argument "${parsed.positionals[0]}" (subcommands: dial, dns, resolve)\n`);
    return 2;
  }
  const problem = validateAgentOptions(o);
  if (problem) {
    process.stderr.write(`spoke-agent: ${problem}\n`);
    return 2;
  }
  const level = parsed.given.has('log-level') || o.v < 4 ? o.logLevel : 'debug';
  const log = createLogger(level);
  const ignored = Object.values(agentCommandFlags).filter((f) => 'ignored' in f && f.ignored && parsed.given.has(f.name)).map((f) => `--${f.name}`);
  if (ignored.length) log.info({ flags: ignored }, 'flags accepted for compatibility with the Go agent have no effect');

  const registry = Agent.withProcessMetrics(new Registry());
  const cleanups: Array<() => Promise<void> | void> = [];
  let targets = o.proxyServerHost.map((h) => (/:\d+$/.test(h) && !h.endsWith(']') ? h : `${h}:${o.proxyServerPort}`));
  if (!parsed.given.has('proxy-server-host')) {
    const hub = await startLocalHub(log, `127.0.0.1:${o.healthServerPort}`);
    cleanups.push(() => hub.close());
    Object.assign(o, hub.agentCredentials);
    targets = [hub.agentTarget];
  }

  const agent = new Agent(o, targets, { log, registry });
  const health = new HealthServer({ host: o.healthServerHost, port: o.healthServerPort, registry, log });
  health.addCheck(agent.readiness);
  try {
    const addr = await health.listen();
    log.info({ port: addr.port }, 'health server listening: /healthz /readyz /metrics');
  } catch (err) {
    log.fatal({ err }, `cannot listen on --health-server-port ${o.healthServerPort}`);
    for (const c of cleanups) await c();
    return 1;
  }
  cleanups.unshift(() => health.close());
  agent.start();
  log.info({ agentID: agent.agentID, targets, identifiers: o.agentIdentifiers }, 'spoke-agent started');
  return waitForSignals(agent, o.drainTimeout, log, async () => {
    agent.stop();
    for (const c of cleanups) await c();
  });
}

/** First SIGTERM/SIGINT drains (DRAIN sent, in-flight connections finish); a second exits at once. */
function waitForSignals(agent: Agent, drainTimeoutMs: number, log: Logger, shutdown: () => Promise<void>): Promise<number> {
  return new Promise((resolve) => {
    let received = 0;
    const onSignal = (signal: NodeJS.Signals) => {
      received++;
      if (received > 1) {
        log.warn({ signal }, 'second signal: exiting without waiting for connections');
        process.exit(1);
      }
      log.info({ signal, drainTimeoutMs }, 'draining: DRAIN sent to every proxy-server, waiting for in-flight connections');
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
