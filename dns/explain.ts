// Debugging: what a name does and why. The answer is produced by sending a real query through the
// resolver in process, so it is exactly what a client gets (cache included).
import { json, type RouteHandler } from '../observability/health-server.js';
import type { RuleHolder } from '../rules/holder.js';
import { hostNameProblem, normalizeName } from '../rules/naming.js';
import { otherNodeReason } from '../rules/node.js';
import { targetText } from '../rules/target.js';
import { decodeMessage, type DnsRecord, type Header } from './dns2.js';
import type { Resolver } from './resolver.js';
import { encodeQuery, rcodeName, typeCode, typeName } from './wire.js';

export interface ExplainedRecord {
  name: string;
  type: string;
  ttl: number;
  data: string;
}

export interface Explanation {
  name: string;
  type: string;
  /**
   * What the server does with the name: answer from a rule, NXDOMAIN in the cluster zone, refuse
   * another node's name, forward, or refuse.
   */
  action: 'rule' | 'nxdomain' | 'other-node' | 'forward' | 'refused';
  /** For other-node: the node whose name it is. */
  node?: string;
  rule?: { source: string; kind: string };
  target?: string;
  rcode: string;
  flags: string[];
  answer: ExplainedRecord[];
  authority: ExplainedRecord[];
  ms: number;
}

/** Presentation form of decoded records. */
export function describeRecords(records: readonly DnsRecord[]): ExplainedRecord[] {
  return records.map((r) => {
    const data =
      'address' in r
        ? r.address
        : 'domain' in r
          ? r.domain
          : 'primary' in r
            ? `${r.primary} ${r.admin} ${r.serial}`
            : Buffer.isBuffer(r.data)
              ? `\\# ${r.data.length} ${r.data.toString('hex')}`
              : JSON.stringify(r.data ?? '');
    return { name: r.name, type: typeName(r.type), ttl: r.ttl, data };
  });
}

export function flagsOf(header: Header): string[] {
  return (['qr', 'aa', 'tc', 'rd', 'ra', 'ad', 'cd'] as const).filter((f) => header[f]);
}

export async function explain(resolver: Resolver, name: string, type = 'A'): Promise<Explanation> {
  const qtype = typeCode(type);
  if (qtype === undefined) throw new Error(`unknown type "${type}"`);
  const normalized = normalizeName(name);
  const problem = hostNameProblem(normalized, 'name');
  if (problem) throw new Error(problem);
  const named = resolver.holder.current.classify(normalized);
  const match = named.kind === 'rule' ? named.match : undefined;
  const node = named.kind === 'other-node' ? named.node : undefined;
  const action =
    named.kind === 'rule' || named.kind === 'other-node'
      ? named.kind
      : named.kind === 'zone'
        ? 'nxdomain'
        : resolver.forwarding
          ? 'forward'
          : 'refused';
  const started = performance.now();
  const response = await new Promise<Buffer>((resolve) => resolver.handle(encodeQuery(name, qtype), 'tcp', resolve));
  const ms = +(performance.now() - started).toFixed(3);
  const packet = decodeMessage(response);
  return {
    name,
    type: typeName(qtype),
    action,
    node,
    rule: match && { source: match.rule.source, kind: match.rule.kind },
    target: match && targetText(match.target),
    rcode: rcodeName(packet.header.rcode),
    flags: flagsOf(packet.header),
    answer: describeRecords(packet.answers),
    authority: describeRecords(packet.authorities),
    ms,
  };
}

/** Why the server answers as it does, in one sentence. */
export function explanationReason(e: Pick<Explanation, 'action' | 'rule' | 'target' | 'node'>): string {
  if (e.rule) return `rule ${e.rule.source} (${e.rule.kind}) -> ${e.target}`;
  if (e.action === 'other-node') return `${otherNodeReason(e.node ?? '')}: REFUSED`;
  return e.action === 'nxdomain'
    ? 'in the cluster zone, no rule matches: NXDOMAIN'
    : e.action === 'forward'
      ? 'no rule: forwarded upstream'
      : 'no rule and forwarding is off: REFUSED';
}

/** `/debug/resolve?name=search.default.cluster1[&type=AAAA]`: rule, target and the answer. */
export function resolveHandler(resolver: Resolver): RouteHandler {
  return async (_req, res, url) => {
    const name = url.searchParams.get('name');
    if (!name) return json(res, 400, { error: 'missing ?name=' });
    try {
      json(res, 200, await explain(resolver, name, url.searchParams.get('type') ?? 'A'));
    } catch (err) {
      json(res, 400, { error: (err as Error).message });
    }
  };
}

/** `/debug/rules`: the naming context and every rule with the names it serves. */
export function rulesHandler(holder: RuleHolder): RouteHandler {
  return (_req, res) => {
    json(res, 200, { generation: holder.generation, ...holder.current.toJSON() });
  };
}
