// The agent's connection to one proxy-server replica (the Go agent's client.go): one HTTP/2 session
// (agent-session.ts) and on it one Connect stream per identifier group (server-stream.ts). The first
// stream carries the agent's own identifiers (--agent-identifiers, the cluster's names) and the
// server's serverID and serverCount headers; each group of rule names that come and go together (an
// exposed Service and its hashed name) has a stream of its own, opened and retired as rules change.
// So a rules edit never hands a name from one stream to another: the Go proxy-server keeps the
// streams of an identifier in a list and always expected the first to go last ("This should not
// happen. Removed connection that is not the first connection"), and ANP 0.30 routes every dial of a
// name to its first stream. A new name is routable as soon as its stream is accepted.
import { EventEmitter } from 'node:events';
import { Header } from '../proto/packet-types.js';
import type { Logger } from '../observability/log.js';
import { AgentSession, type HubTcp, type LossCause } from './agent-session.js';
import { Backoff } from '../clock/backoff.js';
import type { ServerCredentials } from './credentials.js';
import { ServerStream, type ServerStreamOptions } from './server-stream.js';

/** What every stream of a connection is opened with (server-stream.ts), and what the connection adds. */
export interface ServerConnectionOptions extends Omit<ServerStreamOptions, 'identifiers' | 'authorization'> {
  /** host:port of the proxy-server's agent port. */
  address: string;
  credentials: ServerCredentials;
  /** The first stream's identifiers: the agent's own, which do not change while it runs. */
  identifiers: string;
  keepaliveMs: number;
  /** --tcp-keepalive-time and --tcp-user-timeout. */
  tcp: HubTcp;
  /** The most a retired stream waits for its connections before it is closed anyway. */
  drainTimeoutMs: number;
  random?: () => number;
  /**
   * A session ticket of a replica the agent holds: a server that resumes it is that replica, and the
   * attempt ends after the TLS handshake (KnownServerError), before it costs the server a registration.
   */
  resume?: { serverID: string; session: Buffer; held: () => boolean };
}

class HandshakeError extends Error {}

/** The TLS handshake resumed a session of a replica already held: a duplicate, known before HTTP/2. */
export class KnownServerError extends Error {
  constructor(readonly serverID: string) {
    super(`resumed the TLS session of ${serverID}, which is already connected`);
  }
}

export class ServerConnection extends EventEmitter<{ closed: [reason: string] }> {
  serverID = '';
  serverCount = 1;
  /** Why the connection went when the agent did not close it itself (clientset.ts counts it). */
  lossCause?: LossCause;
  readonly log: Logger;
  private session?: AgentSession;
  private firstStream?: ServerStream;
  /** The group streams in force, by their identifiers. */
  private readonly groupStreams = new Map<string, ServerStream>();
  private readonly opening = new Set<string>();
  private readonly retiring = new Set<ServerStream>();
  /** The rule names, a stream per group (setGroups, once the connection is adopted: a duplicate of a server already held opens none). */
  private wanted: readonly string[] = [];
  private readonly retryBackoff: Backoff;
  private cancelRetry?: () => void;
  private closed = false;
  private drained = false;

  private constructor(private readonly opts: ServerConnectionOptions) {
    super();
    this.log = opts.tunnel.log;
    this.retryBackoff = new Backoff({ initialMs: 1000, capMs: 30_000 }, opts.random);
  }

  /** Connects, opens the first stream and waits for the server's headers; setGroups opens the rest. */
  static async open(opts: ServerConnectionOptions): Promise<ServerConnection> {
    const conn = new ServerConnection(opts);
    try {
      await conn.connect();
    } catch (err) {
      conn.close(`handshake failed: ${(err as Error).message}`);
      // The TLS side names a refusal when its socket closes, which may come a tick after the error.
      await new Promise((resolve) => setImmediate(resolve));
      const tls = opts.credentials.tls.problem;
      throw tls ? new HandshakeError(tls) : err;
    }
    return conn;
  }

  private newStream(identifiers: string): ServerStream {
    const { address, credentials, keepaliveMs, tcp, drainTimeoutMs, random, resume, ...common } = this.opts;
    return new ServerStream({
      ...common,
      identifiers,
      authorization: credentials.authorization,
      server: () => this.serverID,
    });
  }

  private async connect(): Promise<void> {
    const { opts } = this;
    this.session = await AgentSession.open({
      address: opts.address,
      secure: async (socket) => {
        const { tls } = opts.credentials;
        const secured = await tls.handshake(socket, opts.resume?.session);
        if (tls.resumed && opts.resume?.held()) {
          secured.destroy();
          throw new KnownServerError(opts.resume.serverID);
        }
        return secured;
      },
      timeoutMs: opts.handshakeTimeoutMs,
      // A larger HTTP/2 window than the 64 KiB default keeps bulk transfers from stalling on round trips.
      windowBytes: 4 << 20,
      keepaliveMs: opts.keepaliveMs,
      keepaliveTimeoutMs: 20_000,
      clock: opts.tunnel.clock,
      tcp: opts.tcp,
      onClose: (status, cause) => {
        if (!this.closed) this.lossCause = cause;
        this.close(`connection lost: ${status.details}`);
      },
    });
    if (this.session.tcpProblem)
      this.log.debug({ problem: this.session.tcpProblem }, 'TCP fault detection not applied');
    const firstStream = this.newStream(opts.identifiers);
    this.firstStream = firstStream;
    const headers = await firstStream.open(this.session);
    const one = (name: string): string => {
      const value = headers[name.toLowerCase()];
      const values = value === undefined ? [] : Array.isArray(value) ? value : [value];
      if (values.length !== 1)
        throw new HandshakeError(
          `expected one ${name === Header.serverID ? 'server ID' : 'server count'} in the response headers, got ${values.length}`,
        );
      return values[0]!;
    };
    const id = one(Header.serverID);
    const countText = one(Header.serverCount);
    const count = Number(countText);
    if (!Number.isInteger(count) || count < 0) throw new HandshakeError(`invalid server count ${countText}`);
    this.serverID = id;
    this.serverCount = count;
    // The first stream is the connection: when the server ends it, it has let the agent go. (Once
    // draining, the streams retire one by one, and closeWhenIdle ends the connection after the last.)
    firstStream.onClosed((reason) => {
      // A connection that is going ends its streams first and says why when it has closed (onClose).
      if (this.drained || !this.session?.ready) return;
      // The connection is up: the server let the agent go.
      if (!this.closed) this.lossCause ??= 'closed';
      this.close(reason);
    });
  }

  /** The rule names changed: streams for new groups, the streams of groups gone retire. */
  setGroups(groups: readonly string[]): void {
    this.wanted = groups;
    if (this.closed || this.drained) return;
    const wanted = new Set(groups);
    for (const [identifiers, stream] of this.groupStreams) {
      if (wanted.has(identifiers)) continue;
      this.groupStreams.delete(identifiers);
      this.retireStream(stream, 'its names are no longer served');
    }
    void this.openMissingGroups();
  }

  private retireStream(stream: ServerStream, reason: string): void {
    this.retiring.add(stream);
    void stream.retire(this.opts.drainTimeoutMs, reason).then(() => this.retiring.delete(stream));
  }

  private async openMissingGroups(): Promise<void> {
    const missing = this.wanted.filter((g) => !this.groupStreams.has(g) && !this.opening.has(g));
    const failed: string[] = [];
    await Promise.all(
      missing.map(async (identifiers) => {
        if (this.closed || this.drained) return;
        const session = this.session!;
        this.opening.add(identifiers);
        const stream = this.newStream(identifiers);
        try {
          await stream.open(session);
        } catch (err) {
          failed.push(identifiers);
          this.log.warn(
            { serverID: this.serverID, identifiers, error: (err as Error).message },
            'the proxy-server refused a stream for these names: retrying',
          );
          return;
        } finally {
          this.opening.delete(identifiers);
        }
        if (this.closed || this.drained || !this.wanted.includes(identifiers))
          return this.closed
            ? stream.close('connection closed')
            : this.retireStream(stream, 'its names are no longer served');
        this.groupStreams.set(identifiers, stream);
        this.log.debug({ serverID: this.serverID, identifiers }, 'registered names');
        stream.onClosed((reason) => {
          if (this.groupStreams.get(identifiers) !== stream || this.drained || this.closed) return;
          // Ended by the server while the names are still served: open it again.
          this.groupStreams.delete(identifiers);
          this.log.warn({ serverID: this.serverID, identifiers, reason }, 'a stream for rule names ended: reopening');
          this.scheduleRetry();
        });
      }),
    );
    if (failed.length > 0) this.scheduleRetry();
    else if (missing.length > 0) this.retryBackoff.reset();
  }

  private scheduleRetry(): void {
    if (this.cancelRetry || this.closed || this.drained) return;
    this.cancelRetry = this.opts.tunnel.clock.after(this.retryBackoff.next(), () => {
      this.cancelRetry = undefined;
      void this.openMissingGroups();
    });
  }

  /** The server's latest TLS session ticket, for a later attempt to tell it apart (`resume`). */
  get tlsSession(): Buffer | undefined {
    return this.opts.credentials.tls.session;
  }

  /** Every stream of this connection, the retiring ones too. */
  streams(): ServerStream[] {
    return [...(this.firstStream ? [this.firstStream] : []), ...this.groupStreams.values(), ...this.retiring];
  }

  /** Connections open through this server, over all its streams. */
  get connectionCount(): number {
    return this.streams().reduce((n, r) => n + r.table.connectionCount, 0);
  }

  /** Dials in progress through this server, over all its streams. */
  get pendingDialCount(): number {
    return this.streams().reduce((n, r) => n + r.table.pendingDialCount, 0);
  }

  get isClosed(): boolean {
    return this.closed;
  }

  get isDraining(): boolean {
    return this.drained;
  }

  /** True while the connection is up (the Go agent's probe). */
  get transportReady(): boolean {
    return !this.closed && this.session?.ready === true;
  }

  /** DRAIN on every stream: the server prefers other agents (and other connections of ours) for new dials. */
  drain(): void {
    if (this.drained || this.closed) return;
    this.drained = true;
    this.cancelRetry?.();
    for (const stream of this.streams()) stream.drain();
    this.log.info(
      { serverID: this.serverID, streams: this.streams().length },
      'draining the connection to the proxy-server',
    );
  }

  /**
   * DRAIN, then close once every stream has retired (the server stopped routing to it), or after
   * `timeoutMs`. The first stream retires last: the Go server's default strategy keys every stream
   * by agentID and logs "This should not happen" when a key's first stream goes before the others.
   */
  async closeWhenIdle(timeoutMs: number, reason: string): Promise<void> {
    this.drain();
    const { clock } = this.opts.tunnel;
    const deadline = clock.now() + timeoutMs;
    const { firstStream } = this;
    await Promise.all(
      this.streams()
        .filter((r) => r !== firstStream)
        .map((r) => r.retire(timeoutMs, reason)),
    );
    await firstStream?.retire(Math.max(0, deadline - clock.now()), reason);
    this.close(reason, true);
  }

  /** `graceful`: the streams have ended; let what is written reach the server before the connection goes. */
  close(reason: string, graceful = false): void {
    if (this.closed) return;
    this.closed = true;
    this.cancelRetry?.();
    for (const stream of this.streams()) stream.close(reason);
    if (graceful) this.session?.end();
    else this.session?.close();
    this.log.info({ serverID: this.serverID, reason }, 'disconnected from proxy-server');
    this.emit('closed', reason);
  }
}
