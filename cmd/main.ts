#!/usr/bin/env node
// spoke-agent: the agent by default; `dial`, `dns`, `resolve`, `queries` and `dials` are subcommands.
import { tuneMemoryAtStart } from '../memory/container-memory.js';

// First, before the agent's modules load: a heap that fits the container and few malloc arenas (this may re-execute).
tuneMemoryAtStart();

const subcommands: Record<string, (argv: string[]) => Promise<number>> = {
  dial: async (argv) => (await import('./dial-command.js')).runDialCommand(argv),
  dns: async (argv) => (await import('./dns-command.js')).runDnsCommand(argv),
  resolve: async (argv) => (await import('./resolve-command.js')).runResolveCommand(argv),
  queries: async (argv) => (await import('./queries-command.js')).runQueriesCommand(argv),
  dials: async (argv) => (await import('./dials-command.js')).runDialsCommand(argv),
};

const [first, ...rest] = process.argv.slice(2);
const sub = first !== undefined ? subcommands[first] : undefined;
const run = sub ? sub(rest) : (await import('./agent-command.js')).runAgentCommand(process.argv.slice(2));
run.then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    process.stderr.write(`spoke-agent: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exitCode = 1;
  },
);
