// How many proxy-server replicas the agent keeps a connection to (the Go agent's server_counter.go):
// the serverCount header of the servers it connects to, or the proxy-servers' Leases
// (--count-server-leases, kube/lease-counter.ts), combined as --server-count-source says.
export type ServerCountSource = 'default' | 'max';

export interface ServerCountOptions {
  /** --count-server-leases */
  countLeases: boolean;
  /** --server-count-source: `default` takes the Lease count alone when counting Leases, `max` the larger of the two. */
  source: ServerCountSource;
}

export class ServerCount {
  /** The last serverCount header from a server the agent had not connected to before; 0 before any. */
  private header = 0;
  /** The Lease count, undefined until the Leases have been listed (or while they cannot be). */
  private leases?: number;

  constructor(private readonly opts: ServerCountOptions) {}

  /**
   * A header from a connection to a new, unique server. A replica of a rolling update that is about
   * to go can announce a stale count, but a repeat connection to it says nothing new (ANP #739, #775).
   */
  fromHeader(count: number): void {
    this.header = count;
  }

  /** The valid Leases (at least 1), or undefined when they are not known (not yet listed, or forbidden). */
  fromLeases(count: number | undefined): void {
    this.leases = count;
  }

  /** The count in force, at least 1. Without a Lease count yet, the header's: the agent serves meanwhile. */
  get value(): number {
    const header = Math.max(1, this.header);
    if (!this.opts.countLeases || this.leases === undefined) return header;
    return this.opts.source === 'max' ? Math.max(this.leases, header) : Math.max(1, this.leases);
  }

  /** Where the count comes from, for the log. */
  get origin(): 'header' | 'leases' | 'fallback' {
    if (
      this.opts.countLeases &&
      this.leases !== undefined &&
      (this.opts.source !== 'max' || this.leases >= this.header)
    )
      return 'leases';
    return this.header > 0 ? 'header' : 'fallback';
  }
}
