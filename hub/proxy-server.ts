// The local hub: a konnectivity proxy-server with an agent port (AgentService), a gRPC frontend port
// (ProxyService) and an HTTP CONNECT port, wired around one switchboard. See hub/README.md.
import { randomUUID } from 'node:crypto';
import { once, type EventEmitter } from 'node:events';
import type http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import * as grpc from '@grpc/grpc-js';
import { joinHostPort } from '../net/address.js';
import { createLogger, type Logger } from '../observability/log.js';
import { AgentService, type PacketType, ProxyService, type Packet } from '../proto/packets.js';
import { agentConnectHandler, type AgentStream, type AgentTokenValidator } from './agent-port.js';
import type { ProxyStrategy } from './backends.js';
import { proxyHandler } from './frontend-grpc.js';
import { systemClock, type Clock } from '../clock/clock.js';
import { createHttpConnectServer } from './frontend-http-connect.js';
import { onSessions, widenWindows } from './grpc-sessions.js';
import {
  agentPortPolicy,
  defaultPolicy,
  watchPings,
  type EnforcementPolicy,
  type PingStrikes,
} from './keepalive-policy.js';
import { Switchboard, type AgentInfo, type HubCounters, type SwitchboardEvents } from './switchboard.js';

/** PEM text. With `ca`, clients must present a certificate signed by it (Go: RequireAndVerifyClientCert). */
export interface ServingTls {
  cert: string | Buffer;
  key: string | Buffer;
  ca?: string | Buffer;
}

export interface ProxyHubOptions {
  /** Go --server-id; default a random UUID. */
  serverID?: string;
  /** Go --server-count, sent to agents in the serverCount header; default 1. */
  serverCount?: number;
  /** Go --proxy-strategies, in order; default ['default']. */
  proxyStrategies?: ProxyStrategy[];
  /** Address every port binds to; default 127.0.0.1. */
  host?: string;
  /** Go --agent-port; default 8091, 0 for an ephemeral port. */
  agentPort?: number;
  /** Go --server-port in grpc mode; default 8090, 0 ephemeral, null for none. */
  serverPort?: number | null;
  /** Go --server-port in http-connect mode (here a port of its own); default none, 0 ephemeral. */
  httpConnectPort?: number | null;
  /** Go --cluster-cert/--cluster-key/--cluster-ca-cert; absent: the agent port is plaintext. */
  agentTls?: ServingTls;
  /** Go --server-cert/--server-key/--server-ca-cert, for both frontend ports; absent: plaintext. */
  frontendTls?: ServingTls;
  /** Go --backend-dial-timeout; default 0 (wait for the agent's DIAL_RSP forever). */
  backendDialTimeoutMs?: number;
  /** Go --keepalive-time / --frontend-keepalive-time: server pings after this much idle; default 1 h. */
  keepaliveTimeMs?: number;
  /** Go's TokenReview check, when agents must send a bearer token. */
  validateAgentToken?: AgentTokenValidator;
  log?: Logger;
  /** What the backend dial timeout and the ping policy wait on; default the system clock. */
  clock?: Clock;
}

export interface HubPorts {
  agent: number;
  /** gRPC frontend (ProxyService). */
  server?: number;
  httpConnect?: number;
}

function grpcCredentials(tls: ServingTls | undefined): grpc.ServerCredentials {
  if (!tls) return grpc.ServerCredentials.createInsecure();
  const ca = tls.ca ? Buffer.from(tls.ca) : null;
  return grpc.ServerCredentials.createSsl(
    ca,
    [{ cert_chain: Buffer.from(tls.cert), private_key: Buffer.from(tls.key) }],
    ca !== null,
  );
}

async function bindGrpc(server: grpc.Server, host: string, port: number, tls: ServingTls | undefined): Promise<number> {
  return new Promise((resolve, reject) =>
    server.bindAsync(joinHostPort(host, port), grpcCredentials(tls), (err, bound) =>
      err ? reject(err) : resolve(bound),
    ),
  );
}

export class ProxyHub {
  /** agentConnected, agentDisconnected, agentPacket (every packet from an agent, before routing). */
  readonly events: EventEmitter<SwitchboardEvents>;
  private readonly switchboard: Switchboard;
  private readonly agentStreams = new Set<AgentStream>();
  private readonly grpcServers: grpc.Server[] = [];
  private httpServer?: http.Server;
  private readonly connectSockets = new Set<Socket>();

  private constructor(
    readonly serverID: string,
    readonly host: string,
    readonly ports: HubPorts,
    switchboard: Switchboard,
  ) {
    this.switchboard = switchboard;
    this.events = switchboard.events;
  }

  static async start(opts: ProxyHubOptions = {}): Promise<ProxyHub> {
    const log = opts.log ?? createLogger('silent', 'hub');
    const host = opts.host ?? '127.0.0.1';
    const serverID = opts.serverID ?? randomUUID();
    const clock = opts.clock ?? systemClock;
    const switchboard = new Switchboard(opts.proxyStrategies ?? ['default'], log, clock);
    const hub = new ProxyHub(serverID, host, { agent: 0 }, switchboard);
    const keepalive = {
      'grpc.keepalive_time_ms': opts.keepaliveTimeMs ?? 3_600_000,
      'grpc.keepalive_timeout_ms': 20_000,
    };
    const backendDialTimeoutMs = opts.backendDialTimeoutMs ?? 0;
    try {
      const newGrpc = async (
        port: number,
        tls: ServingTls | undefined,
        policy: EnforcementPolicy,
        register: (s: grpc.Server, pings: Map<string, PingStrikes>) => void,
      ) => {
        const server = new grpc.Server(keepalive);
        hub.grpcServers.push(server);
        const bound = await bindGrpc(server, host, port, tls);
        const pings = new Map<string, PingStrikes>();
        onSessions(server, log, (session) => {
          widenWindows(session);
          watchPings(session, policy, pings, log, clock);
        });
        register(server, pings);
        return bound;
      };
      hub.ports.agent = await newGrpc(opts.agentPort ?? 8091, opts.agentTls, agentPortPolicy, (server, pingStrikes) => {
        const handler = agentConnectHandler(
          {
            serverID,
            serverCount: opts.serverCount ?? 1,
            switchboard,
            log,
            validateAgentToken: opts.validateAgentToken,
            pingStrikes,
          },
          hub.agentStreams,
        );
        server.addService(AgentService.service, { Connect: handler });
      });
      const serverPort = opts.serverPort === undefined ? 8090 : opts.serverPort;
      if (serverPort !== null) {
        hub.ports.server = await newGrpc(serverPort, opts.frontendTls, defaultPolicy, (server) => {
          server.addService(ProxyService.service, { Proxy: proxyHandler({ switchboard, log, backendDialTimeoutMs }) });
        });
      }
      if (opts.httpConnectPort != null) {
        const tls = opts.frontendTls;
        const server = createHttpConnectServer(
          { switchboard, log, backendDialTimeoutMs },
          tls && {
            cert: tls.cert,
            key: tls.key,
            ca: tls.ca,
            requestCert: tls.ca !== undefined,
            rejectUnauthorized: tls.ca !== undefined,
            minVersion: 'TLSv1.2',
          },
        );
        hub.httpServer = server;
        server.on('connect', (_req, socket: Socket) => {
          hub.connectSockets.add(socket);
          socket.once('close', () => hub.connectSockets.delete(socket));
        });
        server.listen(opts.httpConnectPort, host);
        await Promise.race([
          once(server, 'listening'),
          once(server, 'error').then(([err]) => Promise.reject(err as Error)),
        ]);
        hub.ports.httpConnect = (server.address() as AddressInfo).port;
      }
    } catch (err) {
      await hub.close();
      throw err;
    }
    log.info({ serverID, host, ports: hub.ports }, 'hub listening');
    return hub;
  }

  get counters(): HubCounters {
    return this.switchboard.counters;
  }

  /** Connected agent streams (an agent with several streams appears once per stream). */
  agents(): AgentInfo[] {
    return this.switchboard.listAgents();
  }

  /** Ends every stream of an agent with status OK, as Go does for a retired backend. Returns how many. */
  disconnectAgent(agentID: string): number {
    const streams = [...this.agentStreams].filter((s) => s.agentID === agentID);
    for (const s of streams) s.end();
    return streams.length;
  }

  /** Resolves when an agent (any, or the given agentID) is connected. */
  waitForAgent(agentID?: string, timeoutMs = 10_000): Promise<AgentInfo> {
    const now = this.agents().find((a) => agentID === undefined || a.agentID === agentID);
    if (now) return Promise.resolve(now);
    return this.waitFor('agentConnected', (a) => agentID === undefined || a.agentID === agentID, timeoutMs).then(
      ([a]) => a,
    );
  }

  /** Resolves with the next packet of `type` (and that `match` accepts) from an agent (any, or the given agentID). */
  waitForPacket(
    type: PacketType,
    agentID?: string,
    match: (p: Packet) => boolean = () => true,
    timeoutMs = 10_000,
  ): Promise<[AgentInfo, Packet]> {
    return this.waitFor(
      'agentPacket',
      (a, p) => p.type === type && (agentID === undefined || a.agentID === agentID) && match(p),
      timeoutMs,
    );
  }

  private waitFor<K extends keyof SwitchboardEvents>(
    event: K,
    match: (...args: SwitchboardEvents[K]) => boolean,
    timeoutMs: number,
  ): Promise<SwitchboardEvents[K]> {
    return new Promise((resolve, reject) => {
      const listener = (...args: SwitchboardEvents[K]) => {
        if (!match(...args)) return;
        clearTimeout(timer);
        this.events.off(event, listener as never);
        resolve(args);
      };
      const timer = setTimeout(() => {
        this.events.off(event, listener as never);
        reject(new Error(`hub: no ${event} within ${timeoutMs} ms`));
      }, timeoutMs);
      this.events.on(event, listener as never);
    });
  }

  /** Stops at once, like Go's Stop with no graceful-shutdown-timeout. */
  async close(): Promise<void> {
    for (const s of this.agentStreams) s.close('hub closing');
    for (const server of this.grpcServers) server.forceShutdown();
    for (const socket of this.connectSockets) socket.destroy();
    const http = this.httpServer;
    if (http?.listening) {
      http.closeAllConnections();
      await new Promise<void>((resolve) => http.close(() => resolve()));
    }
  }
}
