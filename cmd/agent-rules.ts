// What an agent with --cluster-name adds: the rules and the DNS server. cmd/agent-command.ts imports
// this only then, so an agent without rules does not load dns2, yaml and the resolver (bench/README.md).
export { resolveForDial } from '../dns/dial.js';
export { resolveHandler, rulesHandler } from '../dns/explain.js';
export { queriesHandler } from '../dns/queries-handler.js';
export { startDns } from '../dns/setup.js';
export { RuleHolder } from '../rules/holder.js';
export { rulesFromFlags } from '../rules/from-flags.js';
