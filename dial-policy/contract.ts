// What the agent asks of a dial policy, and what the policy answers: the agent's dialer imports these
// (agent/ sits above dial-policy/), the policy implements them (allowlist.ts). Both answers are
// values: an address or name the policy denies is an answer, not an exception.

/** Where a dial's host resolved: its addresses, and the rule that served it and that rule's target name (for the dial log). */
export interface HostResolution {
  addresses: string[];
  rule?: string;
  name?: string;
}

/** The policy denies the host by its name (another node's): the dial fails with this reason, before any lookup. */
export interface HostDenied {
  denied: string;
}

/** Resolves a dial's host name (IP literals never reach it). */
export type HostResolver = (host: string) => Promise<HostResolution | HostDenied>;

/** Why `address` (an IP) may not be dialled on `port` for `host`, or undefined when it may. */
export type DialAuthorizer = (host: string, address: string, port: number) => string | undefined;
