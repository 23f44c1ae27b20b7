// What an agent with --cluster-name adds: the rules, the DNS server, and the /debug routes over them.
// cmd/agent-command.ts imports this only then, so an agent without rules does not load dns2, yaml and
// the resolver (bench/README.md).
import type { Registry } from 'prom-client';
import { resolveHandler, rulesHandler } from '../dns/explain.js';
import type { DnsFlagValues } from '../dns/options.js';
import { queriesHandler } from '../dns/queries-handler.js';
import { type DnsStack, type PortBinder, startDns } from '../dns/setup.js';
import type { RouteHandler } from '../observability/health-server.js';
import type { Logger } from '../observability/log.js';
import { rulesFromFlags } from '../rules/from-flags.js';
import { RuleHolder } from '../rules/holder.js';
import type { RuleFlagValues } from '../rules/options.js';

export interface RulesAndDns {
  holder: RuleHolder;
  dns: DnsStack;
  resolveHandler: RouteHandler;
  rulesHandler: RouteHandler;
  queriesHandler: RouteHandler;
  close(): Promise<void>;
}

/** Rules from the flags, and the DNS server over them; throws a message for the operator when either fails. */
export async function startRulesAndDns(
  options: RuleFlagValues & DnsFlagValues,
  registry: Registry,
  log: Logger,
  bindPort: PortBinder,
): Promise<RulesAndDns> {
  const parsed = rulesFromFlags(options);
  if (!parsed.ok) throw new Error(`invalid rules: ${parsed.errors.join('; ')}`);
  const holder = new RuleHolder(parsed.value);
  let dns: DnsStack;
  try {
    dns = await startDns(options, holder, registry, log.child({ component: 'dns' }), bindPort);
  } catch (err) {
    throw new Error(`DNS server: ${(err as Error).message}`);
  }
  return {
    holder,
    dns,
    resolveHandler: resolveHandler(dns.resolver),
    rulesHandler: rulesHandler(holder),
    queriesHandler: queriesHandler(dns.resolver.queryLog),
    close: () => dns.close(),
  };
}
