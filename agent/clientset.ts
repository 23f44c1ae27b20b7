// The set of server connections (the Go agent's clientset.go): one per distinct serverID behind each
// configured proxy-server address, as many as the server count asks (agent/server-count.ts), kept up
// by a sync loop with backoff, and replaced gracefully when the TLS material they were opened with
// changes. Rule names come and go as streams on the connections (server-connection.ts).
// The loop waits on events, not a clock: a connection lost, a new server count (a header, the
// Leases), the TLS files changed (tls/folder-watch.ts), new rule names. An agent that holds every
// server does nothing until one of them happens; the Go agent checks every --sync-interval.
import type { Logger } from '../observability/log.js';
import { splitHostPort } from '../net/address.js';
import { Backoff } from '../clock/backoff.js';
import type { BufferBudget } from './buffer-budget.js';
import { watchCredentialFolders, type CredentialWatch } from '../tls/folder-watch.js';
import { loadCredentials, TlsFingerprint, type CredentialFiles } from './credentials.js';
import type { AgentMetrics } from './metrics.js';
import { ServerConnection } from './server-connection.js';
import { ServerCount, type ServerCountOptions } from './server-count.js';
import type { Dial } from './connection-table.js';

export interface ClientSetOptions {
  /** host:port of each proxy-server address (each may be a load balancer over several replicas). */
  targets: string[];
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
  drainTimeoutMs: number;
  /** How long after its last DIAL_REQ a draining stream counts as no longer routed to. */
  quietMs?: number;
  dial: Dial;
  maxBuffer: number;
  budget: BufferBudget;
  metrics: AgentMetrics;
  log: Logger;
  random?: () => number;
}

/** The host of a `host:port` target: the name the server's certificate must carry. */
function hostOf(target: string): string {
  const hp = splitHostPort(target);
  return typeof hp === 'string' ? target : hp.host;
}

interface Held {
  conn: ServerConnection;
  target: string;
  /** The TLS material it was opened with; a connection whose generation is stale is replaced. */
  generation: string;
}

export class ClientSet {
  private readonly held = new Set<Held>();
  private readonly backoff: Backoff;
  private readonly random: () => number;
  private readonly tlsFingerprint: TlsFingerprint;
  private readonly count: ServerCount;
  private groups: readonly string[];
  private generation: string;
  private nextTarget = 0;
  private duplicates = 0;
  /** After a failed or duplicate attempt, no new one before this (performance.now()): an event wakes the loop, not the backoff. */
  private nextAttemptAt = 0;
  /** The wait is the duplicates' (replicas we hold answered): a replica lost or a new one counted ends it. */
  private waitingOnDuplicates = false;
  // The proxy-server keys established connections by (agentID, connectID) (ANP server.go addEstablished):
  // every stream of every connection draws from one counter.
  private nextConnectID = 1;
  private draining = false;
  private stopped = false;
  private syncTimer?: NodeJS.Timeout;
  private wake?: () => void;
  /** Something happened since the loop last looked (a wake-up that found it busy is not lost). */
  private dirty = false;
  private credentialWatch?: CredentialWatch;

  constructor(private readonly opts: ClientSetOptions) {
    this.random = opts.random ?? Math.random;
    // After a lost stream the first retries come at 1/8, 3/8 and 7/8 of --sync-interval: a
    // restarted server is back sooner than the Go agent's next 1 s tick would find it, and past
    // the first interval a server that stays down is retried as the Go agent would (x1.5 to the cap).
    this.backoff = new Backoff(
      { initialMs: opts.syncIntervalMs, capMs: opts.syncIntervalCapMs, firstMs: opts.syncIntervalMs / 8 },
      this.random,
    );
    this.groups = opts.groups ?? [];
    this.tlsFingerprint = new TlsFingerprint(opts.credentials);
    this.count = new ServerCount(opts.serverCount);
    this.generation = this.currentGeneration();
    opts.metrics.knownServerCount.set(this.count.value);
  }

  start(): void {
    const { caCert, agentCert, agentKey } = this.opts.credentials;
    this.credentialWatch = watchCredentialFolders([caCert, agentCert, agentKey], () => this.poke());
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
    this.opts.log.info({ groups: groups.length }, 'rule names changed: registering them');
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
    this.opts.metrics.knownServerCount.set(after);
    this.opts.log.info({ serverCount: after, from: before, source: this.count.origin }, 'server count changed');
    if (after > before) this.replicaMissing();
    this.poke();
  }

  /** A replica is newly missing: the duplicates seen so far say nothing of it, so look for it at once. */
  private replicaMissing(): void {
    this.duplicates = 0;
    if (this.waitingOnDuplicates) this.nextAttemptAt = 0;
  }

  /** Something the loop acts on happened: it looks again now. */
  private poke(): void {
    this.dirty = true;
    this.wake?.();
  }

  private currentGeneration(): string {
    try {
      return this.tlsFingerprint.current();
    } catch {
      return 'unreadable';
    }
  }

  private async syncLoop(): Promise<void> {
    while (!this.stopped && !this.draining) {
      this.dirty = false;
      const wait = await this.syncOnce();
      if (this.stopped || this.draining) return;
      if (this.dirty) continue;
      await new Promise<void>((resolve) => {
        this.wake = resolve;
        if (Number.isFinite(wait)) this.syncTimer = setTimeout(resolve, wait);
      });
      clearTimeout(this.syncTimer);
      this.wake = undefined;
    }
  }

  /** One sync step; returns how long to wait before the next (Infinity: until something happens). */
  private async syncOnce(): Promise<number> {
    const generation = this.currentGeneration();
    if (generation !== this.generation) {
      this.generation = generation;
      this.backoff.reset();
      this.nextAttemptAt = 0;
      this.opts.log.info('TLS material changed on disk: replacing the connections to the proxy-servers');
    }
    const current = [...this.held].filter((h) => h.generation === this.generation && !h.conn.isClosed);
    const connected = new Set(current.map((h) => h.target));
    // Every address must hold at least one connection, and together they must cover the server count.
    const missingTarget = this.opts.targets.find((t) => !connected.has(t));
    const enough = current.length >= Math.max(this.count.value, this.opts.targets.length);
    // Nothing to do until an event (--sync-forever: keep looking for new servers); where the TLS
    // folders cannot be watched, look again each interval.
    if (enough && !missingTarget && !this.opts.syncForever)
      return this.credentialWatch?.complete === false ? this.backoff.steady() : Infinity;
    const early = this.nextAttemptAt - performance.now();
    if (early > 0) return early;
    return this.connectOnce(missingTarget ?? this.opts.targets[this.nextTarget++ % this.opts.targets.length]!, current);
  }

  private async connectOnce(target: string, current: Held[]): Promise<number> {
    const generation = this.generation;
    let conn: ServerConnection;
    try {
      conn = await ServerConnection.open({
        target,
        credentials: loadCredentials(this.opts.credentials, target, hostOf(target)),
        agentID: this.opts.agentID,
        identifiers: this.opts.identifiers,
        keepaliveMs: this.opts.keepaliveMs,
        handshakeTimeoutMs: Math.max(this.opts.syncIntervalCapMs, 10_000),
        dial: this.opts.dial,
        maxBuffer: this.opts.maxBuffer,
        budget: this.opts.budget,
        connectIDs: () => String(this.nextConnectID++),
        quietMs: this.opts.quietMs ?? 1000,
        drainTimeoutMs: this.opts.drainTimeoutMs,
        metrics: this.opts.metrics,
        log: this.opts.log.child({ target }),
        random: this.random,
      });
    } catch (err) {
      this.opts.metrics.serverConnectAttempts.inc({ result: 'failed' });
      const wait = this.backoff.next();
      this.opts.log.warn(
        { target, error: (err as Error).message, retryInMs: Math.round(wait) },
        'cannot connect to proxy-server',
      );
      return this.retryIn(wait, false);
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
      this.opts.metrics.serverConnectAttempts.inc({ result: 'duplicate' });
      // Behind a load balancer the next attempt may well reach the missing replica: retry soon,
      // with jitter, growing only while we keep hitting known replicas (ANP #816).
      this.duplicates++;
      return this.retryIn(
        Math.min(this.opts.syncIntervalMs, 20 * 2 ** Math.min(this.duplicates - 1, 10)) * (0.5 + this.random()),
        true,
      );
    }
    this.duplicates = 0;
    this.backoff.reset();
    this.adopt({ conn, target, generation });
    return 20 * this.random();
  }

  private retryIn(ms: number, duplicate: boolean): number {
    this.waitingOnDuplicates = duplicate;
    this.nextAttemptAt = performance.now() + ms;
    return ms;
  }

  private adopt(held: Held): void {
    const { conn } = held;
    this.held.add(held);
    this.updateGauge();
    this.opts.metrics.serverConnectAttempts.inc({ result: 'connected' });
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
      this.replicaMissing();
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

  private updateGauge(): void {
    this.opts.metrics.openServerConnections.set(this.held.size);
  }

  /** First signal: DRAIN every stream, open no new connections, wait until the servers stopped routing here. */
  async drain(timeoutMs: number): Promise<void> {
    this.draining = true;
    clearTimeout(this.syncTimer);
    this.wake?.();
    await Promise.all([...this.held].map((h) => h.conn.closeWhenIdle(timeoutMs, 'agent shutting down')));
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.syncTimer);
    this.credentialWatch?.close();
    this.wake?.();
    for (const h of [...this.held]) h.conn.close('agent stopped');
  }
}
