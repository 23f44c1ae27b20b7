// What the agent asks of a dial policy, and what the policy answers: the agent's dialer imports these
// (agent/ sits above dial-policy/), the policy implements them (allowlist.ts). Both answers are
// values: an address or name the policy denies is an answer, not an exception.

/**
 * The way a dial went, one object from the policy's answer to the agent's record of the dial: the
 * rule its host resolved through and that rule's target name (the policy's), then the address tried
 * (the dialer's, filled in as it goes).
 */
export interface DialRoute {
  rule?: string;
  name?: string;
  address?: string;
}

/** Where a dial's host resolved: its addresses, and, when a rule served it, the route so far (rule, name). */
export interface HostResolution {
  addresses: string[];
  route?: DialRoute;
}

/** The policy denies the host by its name (another node's): the dial fails with this reason, before any lookup. */
export interface HostDenied {
  denied: string;
}

/** Resolves a dial's host name (IP literals never reach it). */
export type HostResolver = (host: string) => Promise<HostResolution | HostDenied>;

/** Why `address` (an IP) may not be dialled on `port` for `host`, or undefined when it may. */
export type DialAuthorizer = (host: string, address: string, port: number) => string | undefined;
