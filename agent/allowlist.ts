// The dial allowlist: with rules, the agent dials only what its rules resolve to, plus --allowed-cidrs,
// so a hub cannot use it to reach the cloud metadata service or a node's SSH port. The decision is made
// on the resolved address, before any connection attempt (dialer.ts calls `authorize` for every
// candidate first). CIDR matching is pure; the only I/O is the resolver passed in.
import { isIP } from 'node:net';
import { Counter, type Registry } from 'prom-client';
import type { RuleSet } from '../rules/rule-set.js';
import type { DialAuthorizer, HostResolver } from './dialer.js';
import { ipAddressBytes } from './ip.js';

/** A parsed CIDR: the network's bytes (4 or 16) and its prefix length. */
export interface Cidr {
  text: string;
  bytes: Uint8Array;
  prefix: number;
}

/** 4 bytes for IPv4 (also for IPv4-mapped IPv6, so `::ffff:10.0.0.1` is the IPv4 address), 16 for IPv6. */
export function ipBytes(ip: string): Uint8Array | undefined {
  const zone = ip.indexOf('%');
  const addr = zone === -1 ? ip : ip.slice(0, zone);
  if (!isIP(addr)) return undefined;
  const bytes = ipAddressBytes(addr);
  const mapped =
    bytes.length === 16 && bytes.subarray(0, 10).every((b) => b === 0) && bytes[10] === 0xff && bytes[11] === 0xff;
  return mapped ? bytes.slice(12) : bytes;
}

/** `10.0.0.0/8`, `fd00::/8`, or a bare address (a /32 or /128); a message when malformed. */
export function parseCidr(text: string): Cidr | string {
  const slash = text.indexOf('/');
  const ip = slash === -1 ? text : text.slice(0, slash);
  const bytes = ip.includes('%') ? undefined : ipBytes(ip);
  if (!bytes) return `"${text}" is not a CIDR (want e.g. 10.0.0.0/8 or fd00::/8)`;
  const max = bytes.length * 8;
  const prefixText = slash === -1 ? String(max) : text.slice(slash + 1);
  // An IPv4-mapped IPv6 network keeps its IPv6 prefix length: shift it onto the IPv4 bytes.
  const shift = isIP(ip) === 6 && bytes.length === 4 ? 96 : 0;
  const prefix = Number(prefixText) - (slash === -1 ? 0 : shift);
  if (!/^\d{1,3}$/.test(prefixText) || prefix < 0 || prefix > max) return `"${text}" has an invalid prefix length`;
  return { text, bytes, prefix };
}

export function cidrContains(cidr: Cidr, ip: string): boolean {
  const bytes = ipBytes(ip);
  if (!bytes || bytes.length !== cidr.bytes.length) return false;
  const full = cidr.prefix >> 3;
  for (let i = 0; i < full; i++) if (bytes[i] !== cidr.bytes[i]) return false;
  const bits = cidr.prefix & 7;
  if (bits === 0) return true;
  const mask = (0xff << (8 - bits)) & 0xff;
  return (bytes[full]! & mask) === (cidr.bytes[full]! & mask);
}

/** Flag validation for --allowed-cidrs. */
export function cidrsProblem(values: readonly string[]): string | undefined {
  for (const v of values) {
    const parsed = parseCidr(v);
    if (typeof parsed === 'string') return parsed;
  }
  return undefined;
}

/** What the embedded resolver answers for a dial (dns/dial.ts resolveForDial): the addresses, and the rule that serves the name, if one does. */
export interface DialResolution {
  addresses: ReadonlyArray<{ address: string }>;
  match?: { rule: { source: string } };
}
export type ResolveForDial = (host: string) => Promise<DialResolution>;

export type DenyReason = 'no_rule' | 'not_a_rule_address';

export interface DialAllowlistOptions {
  resolveForDial: ResolveForDial;
  cidrs: readonly Cidr[];
  /**
   * The `host=` names of --agent-identifiers: the hub was told this agent serves them (cluster-proxy's
   * service-proxy host, which the pod's /etc/hosts maps to its sidecar), so a dial by one of these
   * names is allowed to whatever it resolves to (the system resolver, for a name no rule serves).
   */
  identifierHosts?: readonly string[];
  registry: Registry;
  /** Called once per refusal, for the log. */
  onDenied?: (host: string, address: string, reason: string) => void;
}

/**
 * Holds what rules resolve to: per name, the addresses of its latest resolution, and the union of
 * all of them (what an IP-literal dial may reach). `resolve` and `authorize` go to the Agent.
 */
export class DialAllowlist {
  private readonly cidrs: readonly Cidr[];
  private readonly identifierHosts: ReadonlySet<string>;
  private byName = new Map<string, Set<string>>();
  private ruleAddresses = new Set<string>();
  private readonly denied: Counter<'reason'>;

  constructor(private readonly opts: DialAllowlistOptions) {
    this.cidrs = opts.cidrs;
    this.identifierHosts = new Set((opts.identifierHosts ?? []).map(normalize));
    this.denied = new Counter({
      name: 'spoke_agent_dials_denied_total',
      help: 'Dials refused before any connection attempt because no rule resolves to the address and --allowed-cidrs does not cover it, by reason (no_rule, not_a_rule_address).',
      labelNames: ['reason'],
      registers: [opts.registry],
    });
  }

  /** Resolves through the rules and remembers the answer, so `authorize` can check the address against it. */
  readonly resolve: HostResolver = async (host) => {
    const name = normalize(host);
    const answer = await this.opts.resolveForDial(name);
    const addresses = answer.addresses.map((a) => a.address);
    if (answer.match) this.remember(name, addresses);
    return addresses;
  };

  readonly authorize: DialAuthorizer = (host, address) => {
    if (this.cidrs.some((c) => cidrContains(c, address))) return undefined;
    const name = normalize(host);
    let reason: DenyReason | undefined;
    let message = '';
    if (isIP(host) === 0 && this.identifierHosts.has(name)) return undefined;
    if (isIP(host) !== 0) {
      if (!this.ruleAddresses.has(canonical(address))) {
        reason = 'not_a_rule_address';
        message = `not allowed: ${address} is not an address any rule resolves to, nor inside --allowed-cidrs`;
      }
    } else if (!this.byName.get(name)?.has(canonical(address))) {
      reason = 'no_rule';
      message = this.byName.has(name)
        ? `not allowed: ${address} is not what the rule for "${name}" resolves to, nor inside --allowed-cidrs`
        : `not allowed: no rule serves "${name}" and ${address} is not inside --allowed-cidrs`;
    }
    if (!reason) return undefined;
    this.denied.inc({ reason });
    this.opts.onDenied?.(host, address, message);
    return message;
  };

  /**
   * After the rules change: forget names no longer served and resolve one name per rule target, so
   * that an IP-literal dial to a rule's address is known before any named dial happened.
   * Whole-namespace rules are learned as their Services get dialled by name.
   */
  async refresh(rules: RuleSet, concurrency = 16): Promise<void> {
    const names = rules.rules.filter((r) => r.names.length > 0).map((r) => r.names[0]!);
    const byName = new Map<string, Set<string>>();
    let next = 0;
    const worker = async () => {
      while (next < names.length) {
        const name = names[next++]!;
        try {
          const answer = await this.opts.resolveForDial(name);
          if (answer.match) byName.set(name, new Set(answer.addresses.map((a) => canonical(a.address))));
        } catch {
          // Unresolvable now (e.g. a Service without a ClusterIP yet): learned on its first dial.
        }
      }
    };
    await Promise.all(Array.from({ length: Math.min(concurrency, names.length) }, worker));
    for (const [name, addrs] of this.byName) if (!byName.has(name) && rules.match(name)) byName.set(name, addrs);
    this.byName = byName;
    this.ruleAddresses = new Set([...byName.values()].flatMap((s) => [...s]));
  }

  private remember(name: string, addresses: string[]): void {
    const set = new Set(addresses.map(canonical));
    this.byName.set(name, set);
    for (const a of set) this.ruleAddresses.add(a);
  }
}

const normalize = (host: string) => host.toLowerCase().replace(/\.$/, '');

/** One spelling per address, so `::FFFF:10.0.0.1`, `::ffff:a00:1` and `10.0.0.1` compare equal. */
function canonical(ip: string): string {
  const bytes = ipBytes(ip);
  if (!bytes) return ip;
  if (bytes.length === 4) return bytes.join('.');
  return Array.from({ length: 8 }, (_, i) => ((bytes[2 * i]! << 8) | bytes[2 * i + 1]!).toString(16)).join(':');
}
