// The paths a section measures, in order: direct loopback TCP (the baseline), our agent behind our
// hub (gRPC and HTTP CONNECT frontends), and with ANP_BIN_DIR the Go agent and our agent behind the
// same Go proxy-server (http-connect, the anchor's set-up). Processes start on first use; a Go-hub
// subject owns the hub's only agent while it runs, so the two agents take turns.
import { anpBinDir, directRoute, hubRoute, startGoAgent, startGoHub, startOurAgent, startOurHub, type AgentProc, type Hub, type Route, type TestPki } from './env.js';

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

  constructor(private readonly pki: TestPki) {}

  /** Our own stack: started once, kept for every section. */
  ours(): Promise<{ hub: Hub; agent: AgentProc }> {
    return (this.ourHub ??= (async () => {
      const hub = await startOurHub(this.pki);
      return { hub, agent: await startOurAgent(this.pki, hub) };
    })());
  }

  private go(): Promise<Hub> {
    return (this.goHub ??= startGoHub(this.pki, 'http-connect'));
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
    if (anpBinDir) {
      for (const [role, start] of [
        ['go-agent@go-hub', startGoAgent],
        ['ours@go-hub', startOurAgent],
      ] as const) {
        const s: Subject = {
          name: role === 'go-agent@go-hub' ? 'Go proxy-server (http-connect) + Go agent' : 'Go proxy-server (http-connect) + our agent',
          role,
          route: lazyRoute(async () => hubRoute(s.name, this.pki, await this.go(), 'http-connect')),
          use: async (fn) => {
            const hub = await this.go();
            s.hub = hub;
            s.agent = await start(this.pki, hub);
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
        out.push(s);
      }
    }
    return out;
  }

  async close(): Promise<void> {
    const ours = await this.ourHub?.catch(() => undefined);
    await ours?.agent.proc.stop();
    await ours?.hub.proc.stop();
    const go = await this.goHub?.catch(() => undefined);
    await go?.proc.stop();
  }
}

function lazyRoute(make: () => Promise<Route>): Route {
  let route: Promise<Route> | undefined;
  return {
    get name() {
      return 'lazy';
    },
    dial: async (address) => (await (route ??= make())).dial(address),
  };
}
