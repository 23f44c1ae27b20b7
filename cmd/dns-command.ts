// `spoke-agent dns`: the DNS server alone (a sidecar). The command wires flags into the library and does
// nothing else.
import { agentFlags } from '../agent/options.js';
import { resolveHandler, rulesHandler } from '../dns/explain.js';
import { queriesHandler } from '../dns/queries-handler.js';
import { dnsFlags } from '../dns/options.js';
import { startDns } from '../dns/setup.js';
import { bool, FlagError, parseFlags, usage, type Values } from '../flags/flags.js';
import { HealthServer, processRegistry } from '../observability/health-server.js';
import { createLogger, type LogFormat } from '../observability/log.js';
import { RuleHolder } from '../rules/holder.js';
import { rulesFromFlags } from '../rules/from-flags.js';
import { ruleFlags } from '../rules/options.js';

const dnsCommandFlags = {
  ...ruleFlags,
  ...dnsFlags,
  logLevel: agentFlags.logLevel,
  logFormat: agentFlags.logFormat,
  healthServerHost: agentFlags.healthServerHost,
  healthServerPort: agentFlags.healthServerPort,
  help: bool('help', false, 'Show this help.'),
};

export async function runDnsCommand(argv: string[]): Promise<number> {
  let values: Values<typeof dnsCommandFlags>;
  try {
    values = parseFlags(dnsCommandFlags, argv, process.env).values;
  } catch (err) {
    if (!(err instanceof FlagError)) throw err;
    process.stderr.write(`spoke-agent dns: ${err.message}\n`);
    return 2;
  }
  if (values.help) {
    process.stdout.write(
      `Usage: spoke-agent dns [flags]\n\nRuns the DNS server alone (e.g. as a sidecar).\n\nFlags:\n${usage(dnsCommandFlags)}\n`,
    );
    return 0;
  }
  if (values.clusterName === '') {
    process.stderr.write('spoke-agent dns: --cluster-name is required\n');
    return 2;
  }
  const parsed = rulesFromFlags(values);
  if (!parsed.ok) {
    process.stderr.write(`spoke-agent dns: invalid rules:\n${parsed.errors.map((e) => `  ${e}\n`).join('')}`);
    return 2;
  }
  const log = createLogger(values.logLevel, undefined, values.logFormat as LogFormat); // validated as a flag
  const registry = processRegistry();
  const holder = new RuleHolder(parsed.value);
  const dns = await startDns(values, holder, registry, log);
  const health = new HealthServer({ host: values.healthServerHost, port: values.healthServerPort, registry, log });
  health.addRoute('/debug/resolve', resolveHandler(dns.resolver));
  health.addRoute('/debug/rules', rulesHandler(holder));
  health.addRoute('/debug/queries', queriesHandler(dns.resolver.queryLog));
  await health.listen();

  // SIGHUP re-reads the flags' rules file; a bad edit is logged and the old rules stay.
  const reload = () => {
    const next = rulesFromFlags(values);
    if (next.ok) {
      holder.replace(next.value);
      log.info({ generation: holder.generation }, 'rules reloaded');
    } else log.error({ errors: next.errors }, 'rules not reloaded');
  };
  process.on('SIGHUP', reload);
  await new Promise<void>((resolve) => {
    process.once('SIGTERM', resolve);
    process.once('SIGINT', resolve);
  });
  process.off('SIGHUP', reload);
  await Promise.all([dns.close(), health.close()]);
  return 0;
}
