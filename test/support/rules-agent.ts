// The rules path as cmd/agent-command.ts wires it, for tests that edit rules while dials flow: a
// RuleHolder, the DNS resolver and the dial allowlist that follow it, and the real agent re-registering
// its names with the hub on each change.
import { Registry } from 'prom-client';
import { DialAllowlist } from '../../dial-policy/allowlist.js';
import { resolveForDial } from '../../dial-policy/resolve.js';
import { createResolver } from '../../dns/setup.js';
import { followRuleIdentifiers } from '../../kube/reregister.js';
import { createLogger } from '../../observability/log.js';
import { RuleHolder } from '../../rules/holder.js';
import { agentIdentifiers } from '../../rules/identifiers.js';
import type { RuleSet } from '../../rules/rule-set.js';
import { startAgent, type StartedAgent } from './agent.js';
import { testDnsValues } from './dns-values.js';

export interface RulesAgent {
  agent: StartedAgent;
  /** Edit the rules here (`holder.replace`); the allowlist and the agent's identifiers follow. */
  holder: RuleHolder;
  stop(): void;
}

/** The agent dialling `hubAgentAddress` with `flags`, serving `initial` (await `agent.ready()`). */
export function startRulesAgent(hubAgentAddress: string, flags: string[], initial: RuleSet): RulesAgent {
  const log = createLogger(process.env.TEST_LOG_LEVEL ?? 'silent');
  const holder = new RuleHolder(initial);
  const registry = new Registry();
  // Port 9 (discard): nothing in these tests is left to an upstream.
  const resolver = createResolver(testDnsValues('127.0.0.1:9'), holder, registry, log);
  const allowlist = new DialAllowlist({
    resolveForDial: (host) => resolveForDial(resolver, host),
    cidrs: [],
    registry,
  });
  const stopRefresh = holder.onChange((next) => void allowlist.refresh(next));
  const agent = startAgent([hubAgentAddress], flags, {
    registry,
    resolve: allowlist.resolve,
    authorize: allowlist.authorize,
    identifiers: agentIdentifiers('', holder.current),
  });
  const stopFollowing = followRuleIdentifiers({ holder, clients: agent.agent.clients, extra: '', log });
  return {
    agent,
    holder,
    stop: () => {
      stopFollowing();
      stopRefresh();
      agent.stop();
    },
  };
}
