// Starts the real agent in-process against a hub, configured through its own flag parser.
import { Agent, type AgentDeps } from '../../agent/agent.js';
import { agentFlags, validateAgentOptions } from '../../agent/options.js';
import { parseFlags } from '../../flags/flags.js';
import { createLogger } from '../../observability/log.js';
import { waitUntil } from './wait.js';

export interface StartedAgent {
  agent: Agent;
  stop(): void;
  /** Resolves once `n` server streams are up. */
  ready(n?: number, timeoutMs?: number): Promise<void>;
}

export function startAgent(serverAddresses: string[], flags: string[], deps: Partial<AgentDeps> = {}): StartedAgent {
  const { values } = parseFlags(agentFlags, flags);
  const problem = validateAgentOptions(values);
  if (problem) throw new Error(problem);
  const agent = new Agent(values, serverAddresses, {
    log: createLogger(process.env.TEST_LOG_LEVEL ?? 'silent', 'agent'),
    ...deps,
  });
  agent.start();
  return {
    agent,
    stop: () => agent.stop(),
    ready: (n = 1, timeoutMs = 30_000) =>
      waitUntil(() => agent.clients.healthyCount >= n, timeoutMs, `${n} server stream(s)`),
  };
}
