// meta.k8s.io Tables: what `kubectl get` prints. kubectl asks for
// `application/json;as=Table;v=v1;g=meta.k8s.io` first and, without one, prints only NAME and AGE.
// Each resource declares its columns here: priority 0 is what `kubectl get` shows, 1 what `-o wide`
// adds. Pure: objects in, a Table out.
import { type Rule, targetText } from '../rules/rule-set.js';

/** What `?includeObject=` asks each row to carry (kubectl's default is Metadata). */
export type IncludeObject = 'None' | 'Metadata' | 'Object';

export interface TableOptions {
  /** `meta.k8s.io/v1` (kubectl since 1.15) or `meta.k8s.io/v1beta1`. */
  apiVersion: string;
  includeObject: IncludeObject;
  /** Watch events after the first leave them out, as the API server does: kubectl keeps the last ones. */
  withColumns: boolean;
  /** For the AGE column. */
  now: number;
  resourceVersion?: string;
}

export interface Column<T> {
  name: string;
  type: 'string' | 'integer' | 'number' | 'date';
  format?: 'name';
  description: string;
  /** 0: `kubectl get`; 1: only with `-o wide`. */
  priority: 0 | 1;
  cell(object: T, now: number): string | number;
}

export interface ObjectWithMeta {
  metadata: { name: string; creationTimestamp?: string; resourceVersion?: string };
}

const none = '<none>';
const orNone = (text: string | undefined) => (text === undefined || text === '' ? none : text);

/** The first `max` values, then how many more, as kubectl's own printers shorten lists. */
export function shortList(values: readonly string[], max = 3): string {
  if (values.length === 0) return none;
  return values.length <= max ? values.join(',') : `${values.slice(0, max).join(',')} + ${values.length - max} more...`;
}

/**
 * A duration as `kubectl get` prints an age: seconds up to 2 minutes, then minutes (with seconds
 * under 10 minutes), hours (with minutes under 8 hours), days (with hours under 8 days), years.
 */
export function humanDuration(ms: number): string {
  const seconds = Math.floor(ms / 1000);
  if (seconds < -1) return '<invalid>';
  if (seconds < 0) return '0s';
  if (seconds < 120) return `${seconds}s`;
  const minutes = Math.floor(seconds / 60);
  const withRest = (whole: number, unit: string, rest: number, restUnit: string) =>
    rest === 0 ? `${whole}${unit}` : `${whole}${unit}${rest}${restUnit}`;
  if (minutes < 10) return withRest(minutes, 'm', seconds % 60, 's');
  if (minutes < 180) return `${minutes}m`;
  const hours = Math.floor(minutes / 60);
  if (hours < 8) return withRest(hours, 'h', minutes % 60, 'm');
  if (hours < 48) return `${hours}h`;
  const days = Math.floor(hours / 24);
  if (hours < 24 * 8) return withRest(days, 'd', hours % 24, 'h');
  if (hours < 24 * 365 * 2) return `${days}d`;
  const years = Math.floor(days / 365);
  if (hours < 24 * 365 * 8) return withRest(years, 'y', days % 365, 'd');
  return `${years}y`;
}

const nameColumn: Column<ObjectWithMeta> = {
  name: 'Name',
  type: 'string',
  format: 'name',
  description:
    'Name must be unique within a namespace (here: the cluster); see the resource for what it is named after.',
  priority: 0,
  cell: (o) => o.metadata.name,
};

const ageColumn: Column<ObjectWithMeta> = {
  name: 'Age',
  type: 'string',
  description: 'Time since the object was created (metadata.creationTimestamp).',
  priority: 0,
  cell: (o, now) =>
    o.metadata.creationTimestamp ? humanDuration(now - Date.parse(o.metadata.creationTimestamp)) : '<unknown>',
};

/** The fields of a Resolution that its columns read (apiserver/objects.ts builds it). */
export interface ResolutionObject extends ObjectWithMeta {
  spec: { name: string; type: string };
  status: {
    action: string;
    reason: string;
    rule?: { source: string };
    target?: string;
    rcode: string;
    cnameChain: string[];
    addresses: string[];
    flags: string[];
    ms: number;
  };
}

export const resolutionColumns: Column<ResolutionObject>[] = [
  nameColumn,
  {
    name: 'Type',
    type: 'string',
    priority: 0,
    description: 'The query type asked (?type=, default A).',
    cell: (o) => o.spec.type,
  },
  {
    name: 'Action',
    type: 'string',
    priority: 0,
    description: 'What the DNS server does with the name: rule, nxdomain, other-node, forward or refused.',
    cell: (o) => o.status.action,
  },
  {
    name: 'Rule',
    type: 'string',
    priority: 0,
    description: 'The rule that matched (its source: a flag, a rules-file entry, a ConfigMap, a Service).',
    cell: (o) => orNone(o.status.rule?.source),
  },
  {
    name: 'Target',
    type: 'string',
    priority: 0,
    description: 'Where the rule sends the name: an in-cluster FQDN or addresses.',
    cell: (o) => orNone(o.status.target),
  },
  {
    name: 'Rcode',
    type: 'string',
    priority: 0,
    description: 'The response code of the answer.',
    cell: (o) => o.status.rcode,
  },
  {
    name: 'Addresses',
    type: 'string',
    priority: 0,
    description: 'The A and AAAA records of the answer.',
    cell: (o) => shortList(o.status.addresses),
  },
  {
    name: 'CNAME Chain',
    type: 'string',
    priority: 1,
    description: 'The CNAME records of the answer, owner -> target.',
    cell: (o) => orNone(o.status.cnameChain.join(', ')),
  },
  {
    name: 'Flags',
    type: 'string',
    priority: 1,
    description: 'The header flags of the answer.',
    cell: (o) => o.status.flags.join(' '),
  },
  {
    name: 'Latency',
    type: 'string',
    priority: 1,
    description: 'How long the answer took, in milliseconds.',
    cell: (o) => `${o.status.ms}ms`,
  },
  {
    name: 'Reason',
    type: 'string',
    priority: 1,
    description: 'Why the server answers as it does, in one sentence.',
    cell: (o) => o.status.reason,
  },
];

export interface RuleObject extends ObjectWithMeta {
  spec: Rule;
}

export const ruleColumns: Column<RuleObject>[] = [
  nameColumn,
  {
    name: 'Kind',
    type: 'string',
    priority: 0,
    description: 'cluster, service, namespace or static.',
    cell: (o) => o.spec.kind,
  },
  {
    name: 'Names',
    type: 'string',
    priority: 0,
    description: 'The names the rule serves (all of them in spec.names).',
    cell: (o) => shortList(o.spec.names),
  },
  {
    name: 'Target',
    type: 'string',
    priority: 0,
    description: 'Where the rule sends its names: an in-cluster FQDN or addresses.',
    cell: (o) => targetText(o.spec.target),
  },
  {
    name: 'Source',
    type: 'string',
    priority: 0,
    description: 'Where the rule comes from: a flag, a rules-file entry, a ConfigMap, a Service.',
    cell: (o) => o.spec.source,
  },
  ageColumn,
  {
    name: 'Wildcard',
    type: 'string',
    priority: 1,
    description: 'For a whole-namespace rule, the names it matches by shape.',
    cell: (o) => orNone(o.spec.wildcard),
  },
];

/** The fields of a Query that its columns read (apiserver/objects.ts builds it). */
export interface QueryObject extends ObjectWithMeta {
  spec: { name: string; type: string; client: string; clientPort: number; transport: string };
  status: {
    rcode: string;
    source: string;
    rule?: string;
    target?: string;
    answer?: string[];
    cached: boolean;
    ms?: number;
    time: string;
  };
}

export const queryColumns: Column<QueryObject>[] = [
  nameColumn,
  {
    name: 'Query',
    type: 'string',
    priority: 0,
    description: 'The name asked, as the client wrote it.',
    cell: (o) => orNone(o.spec.name),
  },
  { name: 'Type', type: 'string', priority: 0, description: 'The query type.', cell: (o) => orNone(o.spec.type) },
  {
    name: 'Client',
    type: 'string',
    priority: 0,
    description: 'The address the query came from.',
    cell: (o) => o.spec.client,
  },
  {
    name: 'Rcode',
    type: 'string',
    priority: 0,
    description: 'The response code of the answer.',
    cell: (o) => o.status.rcode,
  },
  {
    name: 'Rule',
    type: 'string',
    priority: 0,
    description: 'The rule that answered, if one did.',
    cell: (o) => orNone(o.status.rule),
  },
  {
    name: 'Latency',
    type: 'string',
    priority: 0,
    description: 'How long the answer took; "cached" for answers from the answers cache (microseconds, not timed).',
    cell: (o) => (o.status.ms !== undefined ? `${o.status.ms}ms` : o.status.cached ? 'cached' : none),
  },
  ageColumn,
  { name: 'Transport', type: 'string', priority: 1, description: 'udp or tcp.', cell: (o) => o.spec.transport },
  {
    name: 'Source',
    type: 'string',
    priority: 1,
    description: 'What answered: rule, zone (NXDOMAIN in the cluster zone), forward or error.',
    cell: (o) => o.status.source,
  },
  {
    name: 'Target',
    type: 'string',
    priority: 1,
    description: "The rule's target, or the upstream a forwarded query went to.",
    cell: (o) => orNone(o.status.target),
  },
  {
    name: 'Answer',
    type: 'string',
    priority: 1,
    description: "Our own answer's records (forwarded answers are not decoded).",
    cell: (o) => shortList(o.status.answer ?? []),
  },
  {
    name: 'Time',
    type: 'string',
    priority: 1,
    description: 'When the query arrived, to the millisecond.',
    cell: (o) => o.status.time,
  },
];

/** The fields of a Dial that its columns read (apiserver/objects.ts builds it). */
export interface DialObject extends ObjectWithMeta {
  spec: { server: string; destination: string };
  status: {
    result: string;
    reason?: string;
    connectID?: string;
    rule?: string;
    name?: string;
    address?: string;
    open: boolean;
    dialMs: number;
    bytesToTarget: number;
    bytesFromTarget: number;
    durationMs?: number;
    closedBy?: string;
    time: string;
  };
}

export const dialColumns: Column<DialObject>[] = [
  nameColumn,
  {
    name: 'Destination',
    type: 'string',
    priority: 0,
    description: 'host:port as the hub asked.',
    cell: (o) => o.spec.destination,
  },
  {
    name: 'Rule',
    type: 'string',
    priority: 0,
    description: 'The rule the destination resolved through, if one did.',
    cell: (o) => orNone(o.status.rule),
  },
  {
    name: 'Address',
    type: 'string',
    priority: 0,
    description: 'The address dialled (or refused).',
    cell: (o) => orNone(o.status.address),
  },
  {
    name: 'Result',
    type: 'string',
    priority: 0,
    description: 'connected, refused (by the dial policy), error or cancelled (DIAL_CLS); "open" while connected.',
    cell: (o) => (o.status.open ? 'open' : o.status.result),
  },
  {
    name: 'Bytes',
    type: 'string',
    priority: 0,
    description: 'Payload bytes to the target / from it, once closed.',
    cell: (o) => (o.status.durationMs === undefined ? none : `${o.status.bytesToTarget}/${o.status.bytesFromTarget}`),
  },
  {
    name: 'Duration',
    type: 'string',
    priority: 0,
    description: 'From the dial request to the close, once closed.',
    cell: (o) => (o.status.durationMs !== undefined ? `${o.status.durationMs}ms` : none),
  },
  ageColumn,
  { name: 'Server', type: 'string', priority: 1, description: 'The proxy-server ID.', cell: (o) => o.spec.server },
  {
    name: 'ConnectID',
    type: 'string',
    priority: 1,
    description: 'The connection ID the agent gave it.',
    cell: (o) => orNone(o.status.connectID),
  },
  {
    name: 'Target',
    type: 'string',
    priority: 1,
    description: "The rule's target name.",
    cell: (o) => orNone(o.status.name),
  },
  {
    name: 'Dial',
    type: 'string',
    priority: 1,
    description: 'How long the dial took.',
    cell: (o) => `${o.status.dialMs}ms`,
  },
  {
    name: 'Reason',
    type: 'string',
    priority: 1,
    description: 'Why it did not connect, or how it closed.',
    cell: (o) => orNone(o.status.reason ?? o.status.closedBy),
  },
];

/** A Table of `objects` with `columns`. */
export function table<T extends ObjectWithMeta>(columns: readonly Column<T>[], objects: readonly T[], o: TableOptions) {
  const rowObject = (obj: T) =>
    o.includeObject === 'Object'
      ? obj
      : o.includeObject === 'Metadata'
        ? { kind: 'PartialObjectMetadata', apiVersion: o.apiVersion, metadata: obj.metadata }
        : undefined;
  return {
    kind: 'Table',
    apiVersion: o.apiVersion,
    metadata: o.resourceVersion !== undefined ? { resourceVersion: o.resourceVersion } : {},
    ...(o.withColumns
      ? {
          columnDefinitions: columns.map(({ name, type, format, description, priority }) => ({
            name,
            type,
            format: format ?? '',
            description,
            priority,
          })),
        }
      : {}),
    rows: objects.map((obj) => {
      const object = rowObject(obj);
      return { cells: columns.map((c) => c.cell(obj, o.now)), ...(object ? { object } : {}) };
    }),
  };
}
