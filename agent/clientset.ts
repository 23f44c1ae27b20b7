// The set of server connections (the Go agent's clientset.go): one per distinct serverID behind each
// configured proxy-server address, as many as the server count asks (agent/server-count.ts), kept up
// by a sync loop with backoff, and replaced gracefully when the TLS material they were opened with
// changes. Rule names come and go as streams on the connections (server-connection.ts).
// The loop waits on events: a connection lost, a new server count (a header, the Leases), the TLS
// files changed (tls/folder-watch.ts), new rule names; and between attempts on its clock, as
// sync-policy.ts says. An agent that holds every server does nothing until one of them happens; the
// Go agent checks every --sync-interval.
import { splitHostPort } from '../net/address.js';
import { sleep, type Clock } from '../clock/clock.js';
import { watchCredentialFolders, type CredentialWatch } from '../tls/folder-watch.js';
import { CredentialLoader, type CredentialFiles } from './credentials.js';
import { KnownServerError, ServerConnection, type ServerConnectionOptions } from './server-connection.js';
import { SyncPolicy, type AttemptOutcome } from './sync-policy.js';
import { ServerCount, type ServerCountOptions } from './server-count.js';
import type { HubTcp } from './agent-session.js';
import type { TunnelContext } from './tunnel-context.js';

export interface ClientSetOptions {
  /** host:port of each proxy-server address (each may be a load balancer over several replicas). */
  serverAddresses: string[];
  credentials: CredentialFiles;
  agentID: string;
  /** The agent's own identifiers, on the first stream of every connection. */
  identifiers: string;
  /** Rule names, a stream per group (rules/identifiers.ts ruleIdentifierGroups). */
  groups?: readonly string[];
  serverCount: ServerCountOptions;
  syncIntervalMs: number;
  syncIntervalCapMs: number;
  syncForever: boolean;
  keepaliveMs: number;
  /** --tcp-keepalive-time and --tcp-user-timeout on every connection to a proxy-server. */
  tcp: HubTcp;
  drainTimeoutMs: number;
  /** How long after its last DIAL_REQ a draining stream counts as no longer routed to. */
  quietMs?: number;
  /** What every layer of the tunnel shares (tunnel-context.ts), handed to each connection whole. */
  tunnel: TunnelContext;
  random?: () => number;
  /** Opens a connection (default ServerConnection.open); tests pass their own. */
  open?: (opts: ServerConnectionOptions) => Promise<ServerConnection>;
}

/** The host of a `host:port` address: the name the server's certificate must carry. */
function hostOf(address: string): string {
  const hp = splitHostPort(address);
  return typeof hp === 'string' ? address : hp.host;
}

interface Held {
  conn: ServerConnection;
  address: string;
  /** The TLS material it was opened with; a connection whose generation is stale is replaced. */
  generation: string;
}

export class ClientSet {
  private readonly held = new Set<Held>();
  private readonly policy: SyncPolicy;
  private readonly random: () => number;
  private readonly clock: Clock;
  private readonly credentials: CredentialLoader;
  private readonly count: ServerCount;
  private groups: readonly string[];
  private generation: string;
  private nextAddress = 0;
  /** Which held replica's session ticket the next attempt offers (they take turns). */
  private nextResume = 0;
  /** No attempt before this (clock.now()): an event wakes the loop, not the wait. */
  private nextAttemptAt = 0;
  /** What the wait until nextAttemptAt follows. */
  private waitingAfter?: AttemptOutcome;
  private draining = false;
  private stopped = false;
  private wake?: () => void;
  /** Something happened since the loop last looked (a wake-up that found it busy is not lost). */
  private dirty = false;
  private credentialWatch?: CredentialWatch;

  constructor(private readonly opts: ClientSetOptions) {
    this.random = opts.random ?? Math.random;
    this.clock = opts.tunnel.clock;
    this.policy = new SyncPolicy({
      intervalMs: opts.syncIntervalMs,
      capMs: opts.syncIntervalCapMs,
      random: this.random,
    });
    this.groups = opts.groups ?? [];
    this.credentials = new CredentialLoader(opts.credentials, opts.tunnel.log);
    this.count = new ServerCount(opts.serverCount);
    this.generation = this.currentGeneration();
    opts.tunnel.metrics.knownServerCount.set(this.count.value);
  }

  start(): void {
    const { caCert, agentCert, agentKey } = this.opts.credentials;
    this.credentialWatch = watchCredentialFolders([caCert, agentCert, agentKey], () => this.poke(), this.clock);
    void this.syncLoop();
  }

  /** Connections whose transport is up (draining ones included: they still carry connections). */
  get healthyCount(): number {
    let n = 0;
    for (const h of this.held) if (h.conn.transportReady) n++;
    return n;
  }

  get isDraining(): boolean {
    return this.draining;
  }

  serverIDs(): string[] {
    return [...this.held].filter((h) => !h.conn.isClosed).map((h) => h.conn.serverID);
  }

  connections(): ServerConnection[] {
    return [...this.held].map((h) => h.conn);
  }

  /** New rule names: each connection opens streams for the new groups and retires those of the groups gone. */
  setIdentifierGroups(groups: readonly string[]): void {
    this.groups = groups;
    this.opts.tunnel.log.info({ groups: groups.length }, 'rule names changed: registering them');
    for (const h of this.held) h.conn.setGroups(groups);
  }

  /** The proxy-servers' valid Leases (kube/lease-counter.ts); undefined while they cannot be read. */
  setLeaseCount(count: number | undefined): void {
    const before = this.count.value;
    this.count.fromLeases(count);
    this.countChanged(before);
  }

  private countChanged(before: number): void {
    const after = this.count.value;
    if (after === before) return;
    this.opts.tunnel.metrics.knownServerCount.set(after);
    this.opts.tunnel.log.info({ serverCount: after, from: before, source: this.count.origin }, 'server count changed');
    // A replica newly counted is up (the Leases' count rises when a restarted server is back): look
    // for it now, unless the wait is a failure's backoff (the hub is not answering at all).
    if (after > before && this.waitingAfter !== 'failed') this.nextAttemptAt = 0;
    this.poke();
  }

  /** Something the loop acts on happened: it looks again now. */
  private poke(): void {
    this.dirty = true;
    this.wake?.();
  }

  private currentGeneration(): string {
    return this.credentials.generation;
  }

  private async syncLoop(): Promise<void> {
    while (!this.stopped && !this.draining) {
      this.dirty = false;
      const wait = await this.syncOnce();
      if (this.stopped || this.draining) return;
      if (this.dirty) continue;
      const nap = Number.isFinite(wait) ? sleep(this.clock, wait) : undefined;
      await new Promise<void>((resolve) => {
        this.wake = resolve;
        void nap?.done.then(resolve);
      });
      nap?.cancel();
      this.wake = undefined;
    }
  }

  /** One sync step; returns how long to wait before the next (Infinity: until something happens). */
  private async syncOnce(): Promise<number> {
    const generation = this.currentGeneration();
    if (generation !== this.generation) {
      this.generation = generation;
      this.policy.reset();
      this.nextAttemptAt = 0;
      this.opts.tunnel.log.info('TLS material changed on disk: replacing the connections to the proxy-servers');
    }
    const current = [...this.held].filter((h) => h.generation === this.generation && !h.conn.isClosed);
    const connected = new Set(current.map((h) => h.address));
    // Every address must hold at least one connection, and together they must cover the server count.
    const missingAddress = this.opts.serverAddresses.find((a) => !connected.has(a));
    const enough = current.length >= Math.max(this.count.value, this.opts.serverAddresses.length);
    // Nothing to do until an event (--sync-forever: keep looking for new servers); where the TLS
    // folders cannot be watched, look again each interval.
    if (enough && !missingAddress && !this.opts.syncForever)
      return this.credentialWatch?.complete === false ? this.policy.steady() : Infinity;
    const early = this.nextAttemptAt - this.clock.now();
    if (early > 0) return early;
    return this.connectOnce(
      missingAddress ?? this.opts.serverAddresses[this.nextAddress++ % this.opts.serverAddresses.length]!,
      current,
    );
  }

  /** A ticket of a held replica behind `address`, so that reaching it again costs a resumed handshake only. */
  private resumeFor(address: string, current: Held[]): ServerConnectionOptions['resume'] {
    const candidates = current.filter((h) => h.address === address && h.conn.tlsSession);
    const pick = candidates[this.nextResume++ % Math.max(1, candidates.length)];
    if (!pick) return undefined;
    const { conn } = pick;
    return { serverID: conn.serverID, session: conn.tlsSession!, held: () => !conn.isClosed && this.held.has(pick) };
  }

  private async connectOnce(address: string, current: Held[]): Promise<number> {
    const generation = this.generation;
    const startedAt = this.clock.now();
    let conn: ServerConnection;
    try {
      conn = await (this.opts.open ?? ServerConnection.open)({
        address,
        credentials: this.credentials.load(address, hostOf(address)),
        agentID: this.opts.agentID,
        identifiers: this.opts.identifiers,
        keepaliveMs: this.opts.keepaliveMs,
        tcp: this.opts.tcp,
        handshakeTimeoutMs: Math.max(this.opts.syncIntervalCapMs, 10_000),
        quietMs: this.opts.quietMs ?? 1000,
        drainTimeoutMs: this.opts.drainTimeoutMs,
        tunnel: { ...this.opts.tunnel, log: this.opts.tunnel.log.child({ target: address }) },
        random: this.random,
        resume: this.resumeFor(address, current),
      });
    } catch (err) {
      if (err instanceof KnownServerError) {
        this.opts.tunnel.log.debug(
          { target: address, serverID: err.serverID },
          'reached a proxy-server already connected (TLS resumption)',
        );
        return this.attempted('duplicate', address, startedAt);
      }
      const wait = this.attempted('failed', address, startedAt);
      this.opts.tunnel.log.warn(
        { target: address, error: (err as Error).message, retryInMs: Math.round(wait) },
        'cannot connect to proxy-server',
      );
      return wait;
    }
    const known = [...this.held].some((h) => h.conn.serverID === conn.serverID && !h.conn.isClosed);
    if (!known) {
      // A new, unique server says how many replicas there are now; a repeat of a known one may be a
      // stale replica of a rolling update (ANP #739, #775).
      const before = this.count.value;
      this.count.fromHeader(conn.serverCount);
      this.countChanged(before);
    }
    if (
      this.stopped ||
      this.draining ||
      generation !== this.generation ||
      current.some((h) => h.conn.serverID === conn.serverID && !h.conn.isClosed)
    ) {
      conn.close('duplicate serverID');
      return this.attempted('duplicate', address, startedAt);
    }
    this.adopt({ conn, address, generation });
    return this.attempted('connected', address, startedAt);
  }

  /**
   * Counts an attempt and sets when the next may start (sync-policy.ts), counted from when this one
   * started: an attempt into a blackholed hub that ran into the handshake timeout has already waited
   * that long, so the next SYN is not pushed a whole backoff further from the moment the path heals.
   * Returns the wait from now.
   */
  private attempted(outcome: AttemptOutcome, address: string, startedAt: number): number {
    this.opts.tunnel.metrics.serverConnectAttempts.inc({ result: outcome });
    const holding = [...this.held].some((h) => h.address === address && !h.conn.isClosed);
    this.nextAttemptAt = startedAt + this.policy.after(outcome, holding, this.clock.now() - startedAt);
    this.waitingAfter = outcome;
    return Math.max(0, this.nextAttemptAt - this.clock.now());
  }

  private adopt(held: Held): void {
    const { conn } = held;
    this.held.add(held);
    this.updateGauge();
    conn.log.info(
      {
        serverID: conn.serverID,
        serverCount: conn.serverCount,
        identifiers: this.opts.identifiers,
        groups: this.groups.length,
      },
      'connected to proxy-server',
    );
    conn.on('closed', () => {
      this.held.delete(held);
      this.updateGauge();
      if (conn.lossCause) this.opts.tunnel.metrics.serverConnectionsLost.inc({ cause: conn.lossCause });
      if (!this.draining && !this.stopped) this.lost(held);
      this.poke();
    });
    // Its streams for the rule names (a connection that turned out a duplicate opened none).
    conn.setGroups(this.groups);
    // A connection of older TLS material to the same replica is replaced by this one.
    for (const old of this.held) {
      if (
        old !== held &&
        old.generation !== held.generation &&
        old.conn.serverID === conn.serverID &&
        !old.conn.isDraining
      ) {
        void old.conn.closeWhenIdle(this.opts.drainTimeoutMs, 'replaced by a connection with new credentials');
      }
    }
  }

  /**
   * A connection that worked is gone: the next attempt after a random share of the spread
   * (sync-policy.ts), unless one is due sooner. Not for one replaced on purpose (new TLS material).
   */
  private lost(held: Held): void {
    if (held.generation !== this.generation) return;
    const now = this.clock.now();
    const serving = [...this.held].some((h) => !h.conn.isClosed && h.generation === this.generation);
    const spread = now + this.policy.afterLoss(serving);
    this.nextAttemptAt = this.nextAttemptAt > now ? Math.min(this.nextAttemptAt, spread) : spread;
  }

  private updateGauge(): void {
    this.opts.tunnel.metrics.openServerConnections.set(this.held.size);
  }

  /** First signal: DRAIN every stream, open no new connections, wait until the servers stopped routing here. */
  async drain(timeoutMs: number): Promise<void> {
    this.draining = true;
    this.wake?.();
    await Promise.all([...this.held].map((h) => h.conn.closeWhenIdle(timeoutMs, 'agent shutting down')));
  }

  stop(): void {
    this.stopped = true;
    this.credentialWatch?.close();
    this.wake?.();
    for (const h of [...this.held]) h.conn.close('agent stopped');
  }
}
