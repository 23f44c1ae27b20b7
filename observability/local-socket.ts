// Where the agent's health server is also reachable from its own pod only (--debug-socket); kept apart
// from health-server.ts so `spoke-agent resolve` finds it without loading prom-client.

/**
 * The abstract Unix socket (Linux; the leading NUL) where an agent whose health server listens on
 * `port` also serves it, guards skipped (--debug-socket). Abstract sockets belong to the network
 * namespace: only the pod's own processes can connect, and nothing reaches them over the network.
 */
export const localSocketPath = (port: number): string => `\0spoke-agent-health-${port}`;

/** How a local socket path is written for people: @name. */
export const socketName = (path: string): string => path.replace(/^\0/, '@');
