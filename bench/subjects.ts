// The paths a section measures, in order: direct loopback TCP (the baseline), our agent behind our
// hub (gRPC and HTTP CONNECT frontends), and with ANP_BIN_DIR the Go agent and our agent behind the
// same Go proxy-server (http-connect, the anchor's set-up). Processes start on first use; a Go-hub
// subject owns the hub's only agent while it runs, so the two agents take turns.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  anpBinDir,
  directRoute,
  hubRoute,
  startGoAgent,
  startGoHub,
  startOurAgent,
  startOurHub,
  type AgentProc,
  type Hub,
  type Route,
  type TestPki,
} from './env.js';

export type Role = 'direct' | 'ours' | 'go-agent@go-hub' | 'ours@go-hub';

export interface Subject {
  name: string;
  role: Role;
  route: Route;
  /** The agent process while `use` runs (none for direct). */
  agent?: AgentProc;
  /** The hub while `use` runs: only the Go proxy-server's is read (its dial timing). */
  hub?: Hub;
  use<T>(fn: (s: Subject) => Promise<T>): Promise<T>;
}

export class Subjects {
  private ourHub?: Promise<{ hub: Hub; agent: AgentProc }>;
  private goHub?: Promise<Hub>;
  private goUdsHub?: Promise<Hub>;
  private udsDir?: string;

  constructor(private readonly pki: TestPki) {}

  /** Our own stack: started once, kept for every section. */
  ours(): Promise<{ hub: Hub; agent: AgentProc }> {
    this.ourHub ??= (async () => {
      const hub = await startOurHub(this.pki);
      return { hub, agent: await startOurAgent(this.pki, hub) };
    })();
    return this.ourHub;
  }

  private go(): Promise<Hub> {
    this.goHub ??= startGoHub(this.pki, 'http-connect');
    return this.goHub;
  }

  private goUds(): Promise<Hub> {
    this.udsDir ??= mkdtempSync(join(tmpdir(), 'spoke-bench-uds-'));
    this.goUdsHub ??= startGoHub(this.pki, 'http-connect', undefined, join(this.udsDir, 'proxy.sock'));
    return this.goUdsHub;
  }

  /** `modes` limits our own hub's frontends (e.g. only http-connect for a cheaper section). */
  list(modes: Array<'grpc' | 'http-connect'> = ['grpc', 'http-connect']): Subject[] {
    const out: Subject[] = [{ name: 'direct TCP', role: 'direct', route: directRoute, use: (fn) => fn(out[0]!) }];
    for (const mode of modes) {
      const s: Subject = {
        name: `ours: our hub (${mode}) + our agent`,
        role: 'ours',
        route: lazyRoute(async () => hubRoute(s.name, this.pki, (await this.ours()).hub, mode)),
        use: async (fn) => {
          s.agent = (await this.ours()).agent;
          return fn(s);
        },
      };
      out.push(s);
    }
    if (anpBinDir) out.push(...this.behindGo(() => this.go(), 'Go proxy-server (http-connect)'));
    return out;
  }

  /**
   * The Go agent and ours behind a Go proxy-server whose frontend is a Unix socket, as kube-apiserver's
   * egress reaches it: plaintext, no TLS handshake per dial. Empty without the Go binaries.
   */
  behindGoOnUnixSocket(): Subject[] {
    return anpBinDir ? this.behindGo(() => this.goUds(), 'Go proxy-server (http-connect, Unix socket)') : [];
  }

  /** The Go agent, then ours, taking turns as the only agent of the Go proxy-server `hub` starts. */
  private behindGo(hub: () => Promise<Hub>, label: string): Subject[] {
    return (['go-agent@go-hub', 'ours@go-hub'] as const).map((role) => {
      const start = role === 'go-agent@go-hub' ? startGoAgent : startOurAgent;
      const s: Subject = {
        name: `${label} + ${role === 'go-agent@go-hub' ? 'Go agent' : 'our agent'}`,
        role,
        route: lazyRoute(async () => hubRoute(s.name, this.pki, await hub(), 'http-connect')),
        use: async (fn) => {
          s.hub = await hub();
          s.agent = await start(this.pki, s.hub);
          try {
            return await fn(s);
          } finally {
            await s.agent.proc.stop();
            s.agent = undefined;
            // The Go proxy-server forgets an agent a moment after its stream ends.
            await new Promise((r) => setTimeout(r, 300));
          }
        },
      };
      return s;
    });
  }

  async close(): Promise<void> {
    const ours = await this.ourHub?.catch(() => undefined);
    await ours?.agent.proc.stop();
    await ours?.hub.proc.stop();
    for (const hub of [this.goHub, this.goUdsHub]) await (await hub?.catch(() => undefined))?.proc.stop();
    if (this.udsDir) rmSync(this.udsDir, { recursive: true, force: true });
  }
}

function lazyRoute(make: () => Promise<Route>): Route {
  let route: Promise<Route> | undefined;
  return {
    get name() {
      return 'lazy';
    },
    dial: async (address) => {
      route ??= make();
      return (await route).dial(address);
    },
  };
}
