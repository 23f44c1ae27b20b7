// The set of server streams (the Go agent's clientset.go): one per distinct serverID behind each
// configured proxy-server address, kept up by a sync loop with backoff, and replaced gracefully
// when what a stream was opened with (identifiers, TLS material) changes.
import type { Logger } from '../observability/log.js';
import { splitHostPort } from './address.js';
import { Backoff } from './backoff.js';
import { loadCredentials, TlsFingerprint, type CredentialFiles } from './credentials.js';
import type { BufferBudget } from './buffer-budget.js';
import type { AgentMetrics } from './metrics.js';
import { ServerConnection } from './server-connection.js';
import type { Dial } from './tunnel.js';

export interface ClientSetOptions {
  /** host:port of each proxy-server address (each may be a load balancer over several replicas). */
  targets: string[];
  credentials: CredentialFiles;
  agentID: string;
  identifiers: string;
  syncIntervalMs: number;
  syncIntervalCapMs: number;
  probeIntervalMs: number;
  syncForever: boolean;
  keepaliveMs: number;
  drainTimeoutMs: number;
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

interface Stream {
  conn: ServerConnection;
  target: string;
  /** What the stream was opened with; a stream whose generation is stale is replaced. */
  generation: string;
}

export class ClientSet {
  private readonly streams = new Set<Stream>();
  private readonly backoff: Backoff;
  private readonly random: () => number;
  private readonly tlsFingerprint: TlsFingerprint;
  private identifiers: string;
  private generation: string;
  private serverCount = 1;
  private nextTarget = 0;
  private duplicates = 0;
  // The proxy-server keys established connections by (agentID, connectID) (ANP server.go addEstablished):
  // while old and new streams overlap during a re-registration, per-stream counters would collide.
  private nextConnectID = 1;
  private draining = false;
  private stopped = false;
  private syncTimer?: NodeJS.Timeout;
  private probeTimer?: NodeJS.Timeout;
  private wake?: () => void;

  constructor(private readonly opts: ClientSetOptions) {
    this.random = opts.random ?? Math.random;
    // After a lost stream the first retries come at 1/8, 3/8 and 7/8 of --sync-interval: a
    // restarted server is back sooner than the Go agent's next 1 s tick would find it, and past
    // the first interval a server that stays down is retried as the Go agent would (x1.5 to the cap).
    this.backoff = new Backoff({ initialMs: opts.syncIntervalMs, capMs: opts.syncIntervalCapMs, firstMs: opts.syncIntervalMs / 8 }, this.random);
    this.identifiers = opts.identifiers;
    this.tlsFingerprint = new TlsFingerprint(opts.credentials);
    this.generation = this.currentGeneration();
  }

  start(): void {
    void this.syncLoop();
    this.probeTimer = setInterval(() => this.probe(), this.opts.probeIntervalMs);
    this.probeTimer.unref();
  }

  /** Streams whose transport is up (draining ones included: they still carry connections). */
  get healthyCount(): number {
    let n = 0;
    for (const s of this.streams) if (s.conn.transportReady) n++;
    return n;
  }

  get isDraining(): boolean {
    return this.draining;
  }

  serverIDs(): string[] {
    return [...this.streams].filter((s) => !s.conn.isClosed).map((s) => s.conn.serverID);
  }

  connections(): ServerConnection[] {
    return [...this.streams].map((s) => s.conn);
  }

  /** New identifiers: new streams register them, then the old streams drain (no dial is lost). */
  setIdentifiers(identifiers: string): void {
    if (identifiers === this.identifiers) return;
    this.identifiers = identifiers;
    this.opts.log.info({ identifiers }, 'agent identifiers changed: re-registering');
    this.refreshGeneration();
  }

  /** Re-reads the TLS material's fingerprint; a change replaces every stream gracefully. */
  private refreshGeneration(): void {
    const generation = this.currentGeneration();
    if (generation === this.generation) return;
    this.generation = generation;
    this.backoff.reset();
    this.wake?.();
  }

  private currentGeneration(): string {
    let tls: string;
    try {
      tls = this.tlsFingerprint.current();
    } catch {
      tls = 'unreadable';
    }
    return `${tls}|${this.identifiers}`;
  }

  private async syncLoop(): Promise<void> {
    while (!this.stopped && !this.draining) {
      const wait = await this.syncOnce();
      if (this.stopped || this.draining) return;
      await new Promise<void>((resolve) => {
        this.wake = resolve;
        this.syncTimer = setTimeout(resolve, wait);
      });
      this.wake = undefined;
    }
  }

  /** One sync step; returns how long to wait before the next. */
  private async syncOnce(): Promise<number> {
    this.refreshGeneration();
    const current = [...this.streams].filter((s) => s.generation === this.generation && !s.conn.isClosed);
    const connected = new Set(current.map((s) => s.target));
    // Every address must hold at least one stream, and together they must cover serverCount replicas.
    const missingTarget = this.opts.targets.find((t) => !connected.has(t));
    const enough = current.length >= Math.max(this.serverCount, this.opts.targets.length);
    if (enough && !missingTarget && !this.opts.syncForever) return this.backoff.steady();
    const target = missingTarget ?? this.opts.targets[this.nextTarget++ % this.opts.targets.length]!;
    return this.connectOnce(target, current);
  }

  private async connectOnce(target: string, current: Stream[]): Promise<number> {
    const generation = this.generation;
    let conn: ServerConnection;
    try {
      conn = await ServerConnection.open({
        target,
        credentials: loadCredentials(this.opts.credentials, target, hostOf(target)),
        agentID: this.opts.agentID,
        agentIdentifiers: this.identifiers,
        keepaliveMs: this.opts.keepaliveMs,
        handshakeTimeoutMs: Math.max(this.opts.syncIntervalCapMs, 10_000),
        dial: this.opts.dial,
        maxBuffer: this.opts.maxBuffer,
        budget: this.opts.budget,
        connectIDs: () => String(this.nextConnectID++),
        metrics: this.opts.metrics,
        log: this.opts.log.child({ target }),
      });
    } catch (err) {
      this.opts.metrics.serverConnectAttempts.inc({ result: 'failed' });
      const wait = this.backoff.next();
      this.opts.log.warn({ target, error: (err as Error).message, retryInMs: Math.round(wait) }, 'cannot connect to proxy-server');
      return wait;
    }
    // The newest handshake says how many replicas there are now (ANP #739: counts go stale).
    this.serverCount = Math.max(1, conn.serverCount);
    this.opts.metrics.knownServerCount.set(this.serverCount);
    if (this.stopped || this.draining || generation !== this.generation || current.some((s) => s.conn.serverID === conn.serverID && s.generation === generation && !s.conn.isClosed)) {
      conn.close('duplicate serverID');
      this.opts.metrics.serverConnectAttempts.inc({ result: 'duplicate' });
      // Behind a load balancer the next attempt may well reach the missing replica: retry soon,
      // with jitter, growing only while we keep hitting known replicas (ANP #816).
      this.duplicates++;
      return Math.min(this.opts.syncIntervalMs, 20 * 2 ** Math.min(this.duplicates - 1, 10)) * (0.5 + this.random());
    }
    this.duplicates = 0;
    this.backoff.reset();
    this.adopt({ conn, target, generation });
    return 20 * this.random();
  }

  private adopt(stream: Stream): void {
    const { conn } = stream;
    this.streams.add(stream);
    this.updateGauge();
    this.opts.metrics.serverConnectAttempts.inc({ result: 'connected' });
    conn.log.info({ serverID: conn.serverID, serverCount: conn.serverCount, identifiers: this.identifiers }, 'connected to proxy-server');
    conn.on('closed', () => {
      this.streams.delete(stream);
      this.updateGauge();
      this.wake?.();
    });
    // Streams of an older generation to the same replica are replaced by this one.
    for (const old of this.streams) {
      if (old !== stream && old.generation !== stream.generation && old.conn.serverID === conn.serverID && !old.conn.isDraining) {
        old.conn.drain();
        void old.conn.closeWhenIdle(this.opts.drainTimeoutMs, 'replaced by a stream with new identifiers or credentials');
      }
    }
  }

  /** Drops streams whose transport is gone, so the server stops being offered them and sync re-dials. */
  private probe(): void {
    for (const s of this.streams) {
      if (!s.conn.isClosed && !s.conn.transportReady) s.conn.close('transport not ready');
    }
  }

  private updateGauge(): void {
    this.opts.metrics.openServerConnections.set(this.streams.size);
  }

  /** First signal: DRAIN every stream, open no new ones, wait for in-flight connections. */
  async drain(timeoutMs: number): Promise<void> {
    this.draining = true;
    clearTimeout(this.syncTimer);
    this.wake?.();
    for (const s of this.streams) s.conn.drain();
    await Promise.all([...this.streams].map((s) => s.conn.closeWhenIdle(timeoutMs, 'agent shutting down')));
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.syncTimer);
    clearInterval(this.probeTimer);
    this.wake?.();
    for (const s of [...this.streams]) s.conn.close('agent stopped');
  }
}
