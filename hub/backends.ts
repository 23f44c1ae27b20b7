// Choosing the agent stream ("backend") for a dial: the Go server's backend managers
// (ANP pkg/server/backend_manager.go, desthost_backend_manager.go, default_route_backend_manager.go).
// Pure logic over whatever object stands for an agent stream; no sockets here.
import { removePortFromHost, type Identifiers } from './identifiers.js';

export type ProxyStrategy = 'default' | 'destHost' | 'defaultRoute';

/** What the managers need to know about one agent stream. */
export interface Backend {
  readonly agentID: string;
  readonly identifiers: Identifiers;
  /** Set by a DRAIN from the agent; such a backend is used only when nothing else is left. */
  readonly draining: boolean;
}

/**
 * Backends under a key (an agentID, or a host for destHost). Several streams of the same agent share a
 * key; the first one registered is preferred, since an agent closes its later duplicates.
 */
class Storage<B extends Backend> {
  private readonly byKey = new Map<string, B[]>();
  /** The keys again, as an array to start a random pick from. */
  private keys: string[] = [];

  constructor(private readonly onFirstRemoved?: (key: string) => void) {}

  add(key: string, backend: B): void {
    const list = this.byKey.get(key);
    if (!list) {
      this.byKey.set(key, [backend]);
      this.keys.push(key);
    } else if (!list.includes(backend)) {
      list.push(backend);
    }
  }

  remove(key: string, backend: B): void {
    const before = this.byKey.get(key);
    const list = before?.filter((b) => b !== backend);
    if (!before || !list) return;
    // Go logs "This should not happen. Removed connection that is not the first connection" here.
    if (before[0] === backend && list.length > 0) this.onFirstRemoved?.(key);
    if (list.length > 0) {
      this.byKey.set(key, list);
      return;
    }
    this.byKey.delete(key);
    this.keys = this.keys.filter((k) => k !== key);
  }

  get size(): number {
    return this.byKey.size;
  }

  /** First non-draining backend under `key` in registration order, else the first draining one. */
  firstUnder(key: string): B | undefined {
    const list = this.byKey.get(key) ?? [];
    return list.find((b) => !b.draining) ?? list[0];
  }

  /**
   * Starts at a random key and walks the keys in order, taking each key's first backend: the first
   * non-draining one wins, else the first draining one seen.
   */
  randomFirst(random: () => number): B | undefined {
    if (this.keys.length === 0) return undefined;
    const start = Math.floor(random() * this.keys.length);
    let fallback: B | undefined;
    for (let i = 0; i < this.keys.length; i++) {
      const backend = this.byKey.get(this.keys[(start + i) % this.keys.length]!)![0]!;
      if (!backend.draining) return backend;
      fallback ??= backend;
    }
    return fallback;
  }
}

interface Manager<B extends Backend> {
  add(backend: B): void;
  remove(backend: B): void;
  /** undefined is Go's ErrNotFound: the next manager is asked. */
  pick(destHost: string): B | undefined;
  readonly size: number;
}

/** `default`: a random agent among all, keyed by agentID. */
function defaultManager<B extends Backend>(random: () => number, onFirstRemoved?: (key: string) => void): Manager<B> {
  const s = new Storage<B>(onFirstRemoved);
  return {
    add: (b) => s.add(b.agentID, b),
    remove: (b) => s.remove(b.agentID, b),
    pick: () => s.randomFirst(random),
    get size() {
      return s.size;
    },
  };
}

/** `defaultRoute`: like default, among agents that advertise `default-route=true` only. */
function defaultRouteManager<B extends Backend>(
  random: () => number,
  onFirstRemoved?: (key: string) => void,
): Manager<B> {
  const s = new Storage<B>(onFirstRemoved);
  return {
    add: (b) => b.identifiers.defaultRoute && s.add(b.agentID, b),
    remove: (b) => b.identifiers.defaultRoute && s.remove(b.agentID, b),
    pick: () => s.randomFirst(random),
    get size() {
      return s.size;
    },
  };
}

/** `destHost`: exact, case-sensitive match of the dial host against ipv4, ipv6 and host identifiers. */
function destHostManager<B extends Backend>(onFirstRemoved?: (key: string) => void): Manager<B> {
  const s = new Storage<B>(onFirstRemoved);
  const keysOf = (b: B) => [...b.identifiers.ipv4, ...b.identifiers.ipv6, ...b.identifiers.host];
  return {
    add: (b) => {
      for (const k of keysOf(b)) s.add(k, b);
    },
    remove: (b) => {
      for (const k of keysOf(b)) s.remove(k, b);
    },
    pick: (destHost) => (destHost === '' ? undefined : s.firstUnder(destHost)),
    get size() {
      return s.size;
    },
  };
}

/** The managers of `--proxy-strategies`, asked in order until one finds a backend. */
export class Backends<B extends Backend> {
  private readonly managers: Manager<B>[];

  /**
   * `onFirstRemoved`: a key's first stream was removed while later ones remain, which the Go server
   * logs as "This should not happen. Removed connection that is not the first connection": its
   * storage expects an agent to close its later streams first.
   */
  constructor(
    strategies: readonly ProxyStrategy[],
    random: () => number = Math.random,
    onFirstRemoved?: (key: string) => void,
  ) {
    this.managers = strategies.map((strategy) => {
      switch (strategy) {
        case 'default':
          return defaultManager<B>(random, onFirstRemoved);
        case 'destHost':
          return destHostManager<B>(onFirstRemoved);
        case 'defaultRoute':
          return defaultRouteManager<B>(random, onFirstRemoved);
        default:
          throw new Error(`unknown proxy strategy: ${strategy satisfies never}`);
      }
    });
  }

  add(backend: B): void {
    for (const m of this.managers) m.add(backend);
  }

  remove(backend: B): void {
    for (const m of this.managers) m.remove(backend);
  }

  /** The backend for a dial address ("host:port"); undefined means "No agent available". */
  pick(address: string): B | undefined {
    const destHost = removePortFromHost(address);
    for (const m of this.managers) {
      const backend = m.pick(destHost);
      if (backend) return backend;
    }
    return undefined;
  }

  /** Readiness as the Go server sees it: its first manager has at least one backend. */
  get ready(): boolean {
    return (this.managers[0]?.size ?? 0) > 0;
  }
}

/** Go's ErrNotFound text, sent in DIAL_RSP.error. */
export const noAgentAvailable = 'No agent available';
