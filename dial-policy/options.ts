// The dial policy's flags.
import { list, type FlagSet, type Values } from '../flags/flags.js';
import { cidrsProblem } from '../net/cidr.js';

export const dialPolicyFlags = {
  allowedCidrs: list(
    'allowed-cidrs',
    [],
    'With rules (--cluster-name, given or derived), the agent dials only addresses its rules resolve to and the host= names of --agent-identifiers; these CIDRs (comma-separated, IPv4 or IPv6) are reachable too. Without rules every address is reachable, as with the Go agent.',
    { validate: cidrsProblem },
  ),
} satisfies FlagSet;

export type DialPolicyFlagValues = Values<typeof dialPolicyFlags>;
