// Faults on the path between an agent and the hub's agent port, made by iptables inside the test's own
// network namespace. Every packet on that namespace's `lo` passes its OUTPUT chain exactly once, so a
// DROP there loses it whichever way it goes, and a rule without a target counts without double counting.
// All rules sit in one chain of ours (heal() flushes it); the SYN counter comes first in it, so it also
// counts the SYNs that a DROP after it then loses.
import type { Netns } from './netns.js';

const chain = 'SPOKE-NF';

/** An established TCP connection as `ss` reports it inside the namespace. */
export interface Flow {
  local: string;
  peer: string;
  pids: number[];
}

/** `[::ffff:127.0.0.1]:8091` (a dual-stack listener's view) as `127.0.0.1:8091`, what iptables matches. */
const unmapped = (address: string) => address.replace(/^\[::ffff:([\d.]+)\]/, '$1');

/** Established TCP connections in the namespace (`ss -tnp`), with the PIDs that hold them. */
export function establishedFlows(ns: Netns): Flow[] {
  const out = ns.exec('ss', ['-tnpH', 'state', 'established']);
  const flows: Flow[] = [];
  for (const line of out.split('\n')) {
    const m = /^\s*\d+\s+\d+\s+(\S+)\s+(\S+)\s*(.*)$/.exec(line);
    if (!m) continue;
    const pids = [...m[3]!.matchAll(/pid=(\d+)/g)].map((p) => Number(p[1]));
    flows.push({ local: unmapped(m[1]!), peer: unmapped(m[2]!), pids });
  }
  return flows;
}

const port = (address: string) => Number(address.slice(address.lastIndexOf(':') + 1));
const host = (address: string) => address.slice(0, address.lastIndexOf(':'));

/** The connections process `pid` holds to port `to` (on any address, or on `address` only). */
export function agentFlows(ns: Netns, pid: number, to: number, address?: string): Flow[] {
  return establishedFlows(ns).filter(
    (f) => f.pids.includes(pid) && port(f.peer) === to && (address === undefined || host(f.peer) === address),
  );
}

export class Faults {
  constructor(
    private readonly ns: Netns,
    /** The hub's agent port: what every fault is about. */
    private readonly agentPort: number,
  ) {
    ns.sh(`iptables -w -N ${chain} && iptables -w -I OUTPUT -j ${chain}`);
    this.heal();
  }

  private rule(spec: string): void {
    this.ns.sh(`iptables -w -A ${chain} ${spec}`);
  }

  /** The counters at zero: the SYNs counted are those sent since the fault began, not the agent's first. */
  private zero(): void {
    this.ns.sh(`iptables -w -Z ${chain}`);
  }

  /** Removes every fault, and puts back the SYN counter (at zero). */
  heal(): void {
    this.ns.sh(`iptables -w -F ${chain}`);
    this.rule(`-p tcp --syn --dport ${this.agentPort}`);
  }

  /**
   * Every packet of `flows` dropped both ways, no RST, no FIN: what a load balancer's idle timeout or
   * a conntrack flush does to an established flow. New connections still pass.
   */
  silentLoss(flows: readonly Flow[]): void {
    for (const f of flows) {
      const [s, d] = [f.local, f.peer];
      this.rule(`-p tcp -s ${host(s)} --sport ${port(s)} -d ${host(d)} --dport ${port(d)} -j DROP`);
      this.rule(`-p tcp -s ${host(d)} --sport ${port(d)} -d ${host(s)} --dport ${port(s)} -j DROP`);
    }
  }

  /** Every packet to and from the agent port (on `address` only, when given) dropped: SYNs hang. */
  blackhole(address?: string): void {
    this.zero();
    const d = address ? `-d ${address} ` : '';
    const s = address ? `-s ${address} ` : '';
    this.rule(`-p tcp ${d}--dport ${this.agentPort} -j DROP`);
    this.rule(`-p tcp ${s}--sport ${this.agentPort} -j DROP`);
  }

  /**
   * New connections to the agent port dropped (their SYNs) until the returned function is called:
   * holds an agent that noticed a loss in its not-ready state long enough for a probe to see it.
   */
  holdNewConnections(): () => void {
    const spec = `-p tcp --syn --dport ${this.agentPort} -j DROP`;
    this.rule(spec);
    return () => this.ns.sh(`iptables -w -D ${chain} ${spec}`);
  }

  /** A share `p` of the packets to and from the agent port dropped at random, each way. */
  lossy(p: number): void {
    this.zero();
    const random = `-m statistic --mode random --probability ${p}`;
    this.rule(`-p tcp --dport ${this.agentPort} ${random} -j DROP`);
    this.rule(`-p tcp --sport ${this.agentPort} ${random} -j DROP`);
  }

  /** SYNs sent to the agent port since the blackhole or loss began (or the last heal), retransmissions included. */
  synCount(): number {
    const out = this.ns.exec('iptables', ['-w', '-L', chain, '-v', '-x', '-n']);
    const line = out.split('\n').find((l) => /flags:0x17\/0x02/.test(l));
    return Number(line?.trim().split(/\s+/)[0] ?? NaN);
  }
}
