// The objects the API answers with, Kubernetes-style (apiVersion, kind, metadata), and Status for
// errors, so kubectl prints them as it prints any API server's. Each object's type is what its
// builder returns; a Dial's spec and status are its fields as agent/dial.ts describes them.
import { explanationReason, type Explanation } from '../dns/explain.js';
import { type DialField, type DialView, dialSchema } from '../agent/dial.js';
import type { DialEntry, DialLog } from '../agent/dial-log.js';
import type { QueryEntry, QueryLog } from '../dns/query-log.js';
import type { LiveEntry, LiveLog } from '../live-log/live-log.js';
import type { RuleHolder } from '../rules/holder.js';
import { groupVersion, resources } from './discovery.js';

export interface Status {
  kind: 'Status';
  apiVersion: 'v1';
  metadata: Record<string, never>;
  status: 'Failure';
  message: string;
  reason: string;
  code: number;
  details?: { name?: string; group?: string; kind?: string };
}

const reasons: Record<number, string> = {
  400: 'BadRequest',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'NotFound',
  405: 'MethodNotAllowed',
  406: 'NotAcceptable',
  500: 'InternalError',
  503: 'ServiceUnavailable',
};

export function status(code: number, message: string, details?: Status['details']): Status {
  return {
    kind: 'Status',
    apiVersion: 'v1',
    metadata: {},
    status: 'Failure',
    message,
    reason: reasons[code] ?? 'Unknown',
    code,
    ...(details ? { details } : {}),
  };
}

/** A metav1.Time: RFC 3339 in UTC, whole seconds. */
const timestamp = (ms: number) => new Date(ms).toISOString().replace(/\.\d+Z$/, 'Z');

export type ResolutionObject = ReturnType<typeof resolution>;
export type RuleObject = ReturnType<typeof ruleList>['items'][number];
export type QueryObject = ReturnType<typeof query>;

/** `Resolution NAME`: the explanation (made now), plus its reason in words and the CNAME chain and addresses pulled out. */
export function resolution(e: Explanation, now = Date.now()) {
  return {
    apiVersion: groupVersion,
    kind: resources.resolutions.kind,
    metadata: { name: e.name, creationTimestamp: timestamp(now) },
    spec: { name: e.name, type: e.type },
    status: {
      action: e.action,
      reason: explanationReason(e),
      rule: e.rule,
      target: e.target,
      rcode: e.rcode,
      cnameChain: e.answer.filter((r) => r.type === 'CNAME').map((r) => `${r.name} -> ${r.data}`),
      addresses: e.answer.filter((r) => r.type === 'A' || r.type === 'AAAA').map((r) => r.data),
      flags: e.flags,
      answer: e.answer,
      authority: e.authority,
      ms: e.ms,
    },
  };
}

/**
 * `RuleList`: each rule is an item named after the first name it serves (or its wildcard), created
 * when it came into force.
 */
export function ruleList(holder: RuleHolder) {
  const rules = holder.current;
  return {
    apiVersion: groupVersion,
    kind: `${resources.rules.kind}List`,
    metadata: { resourceVersion: String(holder.generation) },
    naming: rules.naming,
    items: rules.rules.map((r, i) => ({
      apiVersion: groupVersion,
      kind: resources.rules.kind,
      metadata: { name: r.names[0] ?? r.wildcard ?? `rule-${i}`, creationTimestamp: timestamp(holder.since(r)) },
      spec: r,
    })),
  };
}

/**
 * `Query NAME`: one entry of the query log, named (and versioned) `<log instance>-<seq>`, created
 * when the query arrived.
 */
export function query(e: QueryEntry, log: QueryLog) {
  const version = log.version(e.seq);
  return {
    apiVersion: groupVersion,
    kind: resources.queries.kind,
    metadata: { name: version, resourceVersion: version, creationTimestamp: timestamp(e.time) },
    spec: { name: e.name, type: e.type, client: e.client, clientPort: e.clientPort, transport: e.transport },
    status: {
      rcode: e.rcode,
      source: e.source,
      ...(e.rule !== undefined ? { rule: e.rule } : {}),
      ...(e.target !== undefined ? { target: e.target } : {}),
      ...(e.answer !== undefined ? { answer: e.answer } : {}),
      truncated: e.truncated,
      cached: e.cached,
      ...(e.ms !== undefined ? { ms: e.ms } : {}),
      time: new Date(e.time).toISOString(),
    },
  };
}

/** The fields of a dial the API puts in its spec (what the hub asked); the rest are its status. */
type DialSpecField = {
  [K in keyof DialView]-?: (typeof dialSchema)[K]['in'] extends 'spec' ? K : never;
}[keyof DialView];

export interface DialObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; resourceVersion: string; creationTimestamp: string };
  spec: Pick<DialView, DialSpecField>;
  status: Omit<DialView, DialSpecField | 'time'> & { time: string };
}

/**
 * `Dial NAME`: one dial of the dial log in its latest state, named `<log instance>-<id>` and versioned
 * by its latest change, created when the hub asked for it.
 */
export function dial(e: DialEntry, log: DialLog): DialObject {
  const parts: Record<DialField['in'], Record<string, unknown>> = { spec: {}, status: {} };
  for (const [key, field] of Object.entries(dialSchema) as Array<[keyof DialView, DialField]>) {
    const value = e[key];
    if (value !== undefined)
      parts[field.in][key] = field.type === 'date-time' ? new Date(value as number).toISOString() : value;
  }
  return {
    apiVersion: groupVersion,
    kind: resources.dials.kind,
    metadata: { name: log.nameOf(e), resourceVersion: log.version(e.seq), creationTimestamp: timestamp(e.time) },
    spec: parts.spec as DialObject['spec'],
    status: parts.status as DialObject['status'],
  };
}

/** `<Kind>List`: the entries given (the log's, oldest first), at the log's newest version. */
export function liveList<E extends LiveEntry, O>(
  kind: string,
  log: LiveLog<E>,
  entries: readonly E[],
  object: (e: E) => O,
) {
  return {
    apiVersion: groupVersion,
    kind: `${kind}List`,
    metadata: { resourceVersion: log.version(log.last) },
    items: entries.map(object),
  };
}
