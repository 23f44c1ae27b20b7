// The OpenAPI documents of dns.spoke-agent.io/v1alpha1, so the aggregator merges them and `kubectl
// explain` prints every field. One description of the types, rendered two ways: OpenAPI v3 (what
// kube-apiserver 1.27+ aggregates from /openapi/v3 and kubectl explain reads) and Swagger 2.0
// (/openapi/v2, which the aggregator reads when a backend has no v3, and older tools read). Both are
// built once per process and served with an ETag. Pure.
import { createHash } from 'node:crypto';
import { group, groupVersion, resources, version } from './discovery.js';
import { type DialField, dialSchema } from '../agent/dial.js';
import { dialFields } from '../agent/dial-selector.js';
import { queryFields } from '../dns/query-selector.js';
import { type Fields, selectableFields } from '../live-log/selector.js';

type Schema = Record<string, unknown>;
/** A reference to one of `definitions` by its name, rendered per dialect. */
const ref = (name: string, description?: string): Schema => ({ $ref: name, ...(description ? { description } : {}) });

const prefix = 'io.spoke-agent.dns.v1alpha1';
const meta = 'io.k8s.apimachinery.pkg.apis.meta.v1';
const str = (description: string, extra: Schema = {}): Schema => ({ type: 'string', description, ...extra });
const int = (description: string): Schema => ({ type: 'integer', format: 'int32', description });
const num = (description: string): Schema => ({ type: 'number', format: 'double', description });
const bool = (description: string): Schema => ({ type: 'boolean', description });
const strings = (description: string): Schema => ({ type: 'array', items: { type: 'string' }, description });
const object = (description: string, properties: Record<string, Schema>, required?: string[]): Schema => ({
  type: 'object',
  description,
  properties,
  ...(required ? { required } : {}),
});
/** One part of a Dial (spec or status), from what agent/dial.ts says of each field. */
function fromDialSchema(part: DialField['in'], description: string): Schema {
  const fields = (Object.entries(dialSchema) as Array<[string, DialField]>).filter(([, f]) => f.in === part);
  const schemaOf = (f: DialField): Schema => {
    switch (f.type) {
      case 'string':
        return str(f.description, f.enum ? { enum: f.enum } : {});
      case 'date-time':
        return str(f.description, { format: 'date-time' });
      case 'integer':
        return int(f.description);
      case 'number':
        return num(f.description);
      case 'boolean':
        return bool(f.description);
    }
  };
  return object(
    description,
    Object.fromEntries(fields.map(([key, f]) => [key, schemaOf(f)])),
    fields.filter(([, f]) => !f.optional).map(([key]) => key),
  );
}
const typeMeta = {
  apiVersion: str(
    'APIVersion defines the versioned schema of this representation of an object: dns.spoke-agent.io/v1alpha1.',
  ),
  kind: str('Kind is a string value representing the REST resource this object represents.'),
};
/** A kind the API serves: apiVersion and kind, then `properties`, tied to its group, version and kind. */
const kindSchema = (kind: string, description: string, properties: Record<string, Schema>): Schema => ({
  ...object(description, { ...typeMeta, ...properties }),
  'x-kubernetes-group-version-kind': [{ group, kind, version }],
});

const definitions: Record<string, Schema> = {
  [`${meta}.ObjectMeta`]: object(
    'ObjectMeta is metadata that all persisted resources must have; these objects have what is listed here.',
    {
      name: str(
        'Name of the object: for a resolution the name asked, for a rule the first name it serves, for a query `<log instance>-<seq>`.',
      ),
      creationTimestamp: str(
        'When the object came to be, RFC 3339 in UTC: when the resolution was made, when the rule came into force, when the query arrived.',
        { format: 'date-time' },
      ),
      resourceVersion: str("For a query, its place in the agent's log (the same as its name); opaque."),
    },
  ),
  [`${meta}.ListMeta`]: object('ListMeta describes the list.', {
    resourceVersion: str(
      'The version of the list: for rules, the generation of the rule set; for queries, the newest entry of the log, from which a watch continues.',
    ),
  }),
  [`${prefix}.Resolution`]: kindSchema(
    resources.resolutions.kind,
    'What the DNS server answers for a name, and why: a real query through the resolver, answered now.',
    {
      metadata: ref(`${meta}.ObjectMeta`, 'Standard object metadata: the name is the name asked.'),
      spec: ref(`${prefix}.ResolutionSpec`, 'What was asked.'),
      status: ref(`${prefix}.ResolutionStatus`, 'What the DNS server answered, and why.'),
    },
  ),
  [`${prefix}.ResolutionSpec`]: object(
    'The question.',
    {
      name: str('The name asked.'),
      type: str('The query type (?type=, default A): A, AAAA, CNAME, TXT, HTTPS, TYPE65, ...'),
    },
    ['name', 'type'],
  ),
  [`${prefix}.ResolutionStatus`]: object(
    'The answer and its explanation.',
    {
      action: str(
        "What the server does with the name: rule (a rule answers), nxdomain (in the cluster zone, no rule), other-node (another node's <node>.node.<cluster>: REFUSED, that node's agent answers it), forward (to the upstream) or refused (no rule and --dns-forward=false).",
        { enum: ['rule', 'nxdomain', 'other-node', 'forward', 'refused'] },
      ),
      reason: str('Why, in one sentence.'),
      rule: ref(`${prefix}.RuleRef`, 'The rule that matched, if one did.'),
      target: str('Where the rule sends the name: an in-cluster FQDN, or addresses.'),
      rcode: str('The response code: NOERROR, NXDOMAIN, SERVFAIL, REFUSED, ...'),
      cnameChain: strings('The CNAME records of the answer, each "owner -> target".'),
      addresses: strings('The A and AAAA records of the answer.'),
      flags: strings('The header flags of the answer: qr, aa, tc, rd, ra, ad, cd.'),
      answer: { type: 'array', items: ref(`${prefix}.Record`), description: 'The answer section.' },
      authority: {
        type: 'array',
        items: ref(`${prefix}.Record`),
        description: 'The authority section (the SOA of a negative answer).',
      },
      ms: num('How long the answer took, in milliseconds.'),
    },
    ['action', 'reason', 'rcode', 'cnameChain', 'addresses', 'flags', 'answer', 'authority', 'ms'],
  ),
  [`${prefix}.RuleRef`]: object('A rule, by where it comes from.', {
    source: str(
      'Where the rule comes from: a flag (--expose=default/search), a rules-file entry, the rules ConfigMap, an auto-exposed Service.',
    ),
    kind: str('cluster, node, service, namespace or static.'),
  }),
  [`${prefix}.Record`]: object('A resource record in presentation form.', {
    name: str('The owner name.'),
    type: str('The record type.'),
    ttl: int('The TTL in seconds.'),
    data: str('The record data: an address, a target name, an SOA in short.'),
  }),
  [`${prefix}.RuleList`]: kindSchema(
    `${resources.rules.kind}List`,
    'Every rule in force, and the naming context they were built in.',
    {
      metadata: ref(`${meta}.ListMeta`, 'Standard list metadata.'),
      naming: ref(`${prefix}.NamingContext`, 'The names the rules are built from.'),
      items: { type: 'array', items: ref(`${prefix}.Rule`), description: 'The rules, in the order they are matched.' },
    },
  ),
  [`${prefix}.NamingContext`]: object('What the served names are built from.', {
    cluster: str(
      '--cluster-name: the name of this cluster on the hub, and the zone the DNS server is authoritative for.',
    ),
    agentNamespace: str('--agent-namespace: <cluster>.<agent-namespace> is served too (empty: not).'),
    node: object('--node-name and --node-ips of a per-node agent: <node>.node.<cluster> is served too (absent: not).', {
      name: str('--node-name.'),
      ips: { type: 'array', items: { type: 'string' }, description: '--node-ips, as Go prints them.' },
    }),
    clusterDomain: str('--cluster-domain: targets are <service>.<namespace>.svc.<cluster-domain>.'),
  }),
  [`${prefix}.Rule`]: kindSchema(
    resources.rules.kind,
    'A rule: names the DNS server answers, and where it sends them.',
    {
      metadata: ref(
        `${meta}.ObjectMeta`,
        'Standard object metadata: named after the first name the rule serves (or its wildcard), created when it came into force.',
      ),
      spec: ref(`${prefix}.RuleSpec`, 'The rule.'),
    },
  ),
  [`${prefix}.RuleSpec`]: object(
    'What a rule serves.',
    {
      source: str(
        'Where the rule comes from: a flag, a rules-file entry, the rules ConfigMap, an auto-exposed Service.',
      ),
      kind: str(
        'cluster (the cluster name itself), service (one Service), namespace (every Service of a namespace) or static (a name with fixed addresses or a target FQDN).',
        { enum: ['cluster', 'service', 'namespace', 'static'] },
      ),
      names: strings(
        "The exact names the rule serves, lower-case (a Service rule also serves cluster-proxy's hashed name).",
      ),
      wildcard: str('For a whole-namespace rule: *.<namespace>.<cluster>, any Service name in the * position.'),
      target: ref(`${prefix}.RuleTarget`, 'Where the names go.'),
    },
    ['source', 'kind', 'names', 'target'],
  ),
  [`${prefix}.RuleTarget`]: object('An in-cluster FQDN (answered as a CNAME, then its records) or fixed addresses.', {
    kind: str('fqdn or ip.', { enum: ['fqdn', 'ip'] }),
    fqdn: str(
      "For kind fqdn: the name the rule's names answer as (for a whole-namespace rule, * is the Service asked).",
    ),
    v4: strings('For kind ip: the IPv4 addresses.'),
    v6: strings('For kind ip: the IPv6 addresses.'),
  }),
  [`${prefix}.Query`]: kindSchema(
    resources.queries.kind,
    'One query a client sent the DNS server, and what it got: an entry of the live query log (--dns-query-log-size).',
    {
      metadata: ref(
        `${meta}.ObjectMeta`,
        'Standard object metadata: named <log instance>-<seq>, created when the query arrived.',
      ),
      spec: ref(`${prefix}.QuerySpec`, 'What the client asked.'),
      status: ref(`${prefix}.QueryStatus`, 'What it got.'),
    },
  ),
  [`${prefix}.QuerySpec`]: object(
    'The question and who asked it.',
    {
      name: str(
        'The name asked, as the client wrote it (case kept); empty when the question could not be read (FORMERR, NOTIMP).',
      ),
      type: str('The query type: A, AAAA, SRV, ...'),
      client: str('The address the query came from (an IPv4 client of an IPv6 socket as IPv4).'),
      clientPort: int('The port it came from.'),
      transport: str('udp or tcp.', { enum: ['udp', 'tcp'] }),
    },
    ['name', 'type', 'client', 'clientPort', 'transport'],
  ),
  [`${prefix}.QueryStatus`]: object(
    'The answer.',
    {
      rcode: str('The response code: NOERROR, NXDOMAIN, SERVFAIL, REFUSED, FORMERR, ...'),
      source: str('What answered: rule, zone (NXDOMAIN in the cluster zone), forward (the upstream) or error.', {
        enum: ['rule', 'zone', 'forward', 'error'],
      }),
      rule: str('The rule that answered (its source), if one did.'),
      target: str("The rule's target, or the upstream a forwarded query went to."),
      answer: strings(
        'Our own answer\'s records in short form ("CNAME x.svc.cluster.local", "A 10.0.0.1"), or why it failed; forwarded answers are not decoded.',
      ),
      truncated: bool(
        "The UDP answer was over the client's budget and went out truncated (TC): the client retries over TCP.",
      ),
      cached: bool('Answered from the answers cache (our own answers, built from the rules).'),
      ms: num(
        'How long the answer took, in milliseconds, for answers that waited for something (building from the rules, the upstream); absent for those given at once (the answers cache, errors), which take microseconds and are not timed.',
      ),
      time: str('When the query arrived, RFC 3339 with milliseconds.', { format: 'date-time' }),
    },
    ['rcode', 'source', 'truncated', 'cached', 'time'],
  ),
  [`${prefix}.Dial`]: kindSchema(
    resources.dials.kind,
    'One connection the hub asked this agent to make through the tunnel, and what came of it: an entry of the dial log (--dial-log-size), updated when it closes.',
    {
      metadata: ref(
        `${meta}.ObjectMeta`,
        'Standard object metadata: named <log instance>-<id>, versioned by its latest change, created when the hub asked.',
      ),
      spec: ref(`${prefix}.DialSpec`, 'What the hub asked.'),
      status: ref(`${prefix}.DialStatus`, 'What came of it.'),
    },
  ),
  [`${prefix}.DialSpec`]: fromDialSchema('spec', 'The dial request.'),
  [`${prefix}.DialStatus`]: fromDialSchema('status', 'The outcome, and once closed the traffic.'),
  [`${prefix}.DialList`]: kindSchema(
    `${resources.dials.kind}List`,
    'The most recent dials this agent served, oldest first.',
    {
      metadata: ref(`${meta}.ListMeta`, 'Standard list metadata: the resourceVersion to watch from.'),
      items: { type: 'array', items: ref(`${prefix}.Dial`), description: 'The dials.' },
    },
  ),
  [`${prefix}.QueryList`]: kindSchema(
    `${resources.queries.kind}List`,
    'The most recent queries this agent answered, oldest first.',
    {
      metadata: ref(`${meta}.ListMeta`, 'Standard list metadata: the resourceVersion to watch from.'),
      items: { type: 'array', items: ref(`${prefix}.Query`), description: 'The queries.' },
    },
  ),
};

type Dialect = 'v2' | 'v3';

/** Our `ref()`s as the dialect writes them: v3 wraps a described reference in allOf, as Kubernetes does (siblings of $ref are ignored there). */
function render(schema: unknown, dialect: Dialect): unknown {
  if (Array.isArray(schema)) return schema.map((s) => render(s, dialect));
  if (schema === null || typeof schema !== 'object') return schema;
  const { $ref, ...rest } = schema as Schema;
  if (typeof $ref === 'string') {
    const target = dialect === 'v2' ? `#/definitions/${$ref}` : `#/components/schemas/${$ref}`;
    if (dialect === 'v2' || Object.keys(rest).length === 0) return { $ref: target, ...rest };
    return { ...rest, allOf: [{ $ref: target }] };
  }
  return Object.fromEntries(Object.entries(schema).map(([k, v]) => [k, render(v, dialect)]));
}

interface Operation {
  path: string;
  kind: string;
  action: 'get' | 'list';
  response: string;
  summary: string;
  parameters: Array<{
    name: string;
    in: 'path' | 'query';
    description: string;
    type: 'string' | 'boolean' | 'integer';
    required?: boolean;
  }>;
}

const name = {
  name: 'name',
  in: 'path' as const,
  description: 'Name of the object.',
  type: 'string' as const,
  required: true,
};
const includeObject = {
  name: 'includeObject',
  in: 'query' as const,
  description:
    'For a Table (Accept: application/json;as=Table;v=v1;g=meta.k8s.io): what each row carries, None, Metadata (the default) or Object.',
  type: 'string' as const,
};
const base = `/apis/${groupVersion}`;

/** A live log's list (and watch) and get. */
function liveOperations(
  info: { name: string; kind: string },
  plural: string,
  fields: Fields<never>,
  summary: string,
): Operation[] {
  return [
    {
      path: `${base}/${info.name}`,
      kind: info.kind,
      action: 'list',
      response: `${prefix}.${info.kind}List`,
      summary: `${summary}, or a watch of them.`,
      parameters: [
        {
          name: 'fieldSelector',
          in: 'query',
          description: `Selects ${plural} by field, FIELD=VALUE, FIELD==VALUE or FIELD!=VALUE joined by commas: ${selectableFields(fields).join(', ')}.`,
          type: 'string',
        },
        {
          name: 'watch',
          in: 'query',
          description: `Stream changes of the ${plural} as watch events instead of listing.`,
          type: 'boolean',
        },
        {
          name: 'resourceVersion',
          in: 'query',
          description: `For a watch: continue after this version of this log (a list's); unset or 0: everything held, then new ${plural}; another log's: from now.`,
          type: 'string',
        },
        {
          name: 'timeoutSeconds',
          in: 'query',
          description: 'For a watch: end it after this many seconds (default 30 to 60 minutes).',
          type: 'integer',
        },
        includeObject,
      ],
    },
    {
      path: `${base}/${info.name}/{name}`,
      kind: info.kind,
      action: 'get',
      response: `${prefix}.${info.kind}`,
      summary: `One of the ${plural}, while the log holds it.`,
      parameters: [name, includeObject],
    },
  ];
}

const operations: Operation[] = [
  {
    path: `${base}/${resources.resolutions.name}/{name}`,
    kind: resources.resolutions.kind,
    action: 'get',
    response: `${prefix}.Resolution`,
    summary: 'What the DNS server answers for a name, and why.',
    parameters: [
      name,
      { name: 'type', in: 'query', description: 'The query type (default A).', type: 'string' },
      includeObject,
    ],
  },
  {
    path: `${base}/${resources.rules.name}`,
    kind: resources.rules.kind,
    action: 'list',
    response: `${prefix}.RuleList`,
    summary: 'Every rule in force.',
    parameters: [includeObject],
  },
  ...liveOperations(resources.queries, 'queries', queryFields, 'The most recent queries this agent answered'),
  ...liveOperations(resources.dials, 'dials', dialFields, 'The most recent dials this agent served'),
];

const operationId = (op: Operation) => `${op.action === 'get' ? 'read' : 'list'}DnsSpokeAgentIoV1alpha1${op.kind}`;
const extensions = (op: Operation) => ({
  'x-kubernetes-action': op.action,
  'x-kubernetes-group-version-kind': { group, kind: op.kind, version },
});

function swagger(): Schema {
  const paths: Record<string, Schema> = {};
  for (const op of operations) {
    paths[op.path] = {
      get: {
        description: op.summary,
        operationId: operationId(op),
        consumes: ['*/*'],
        produces: ['application/json'],
        schemes: ['https'],
        tags: [`dns_spoke_agent_io_${version}`],
        parameters: op.parameters.map((p) => ({ uniqueItems: true, ...p })),
        responses: {
          200: { description: 'OK', schema: ref(op.response) },
          401: { description: 'Unauthorized' },
          403: { description: 'Forbidden' },
        },
        ...extensions(op),
      },
    };
  }
  return render({ swagger: '2.0', info: { title: group, version }, paths, definitions }, 'v2') as Schema;
}

function openapi3(): Schema {
  const paths: Record<string, Schema> = {};
  for (const op of operations) {
    paths[op.path] = {
      get: {
        tags: [`dns_spoke_agent_io_${version}`],
        description: op.summary,
        operationId: operationId(op),
        parameters: op.parameters.map(({ type, ...p }) => ({ ...p, schema: { type, uniqueItems: true } })),
        responses: {
          200: { description: 'OK', content: { 'application/json': { schema: ref(op.response) } } },
          401: { description: 'Unauthorized' },
          403: { description: 'Forbidden' },
        },
        ...extensions(op),
      },
    };
  }
  return render(
    { openapi: '3.0.0', info: { title: group, version }, paths, components: { schemas: definitions } },
    'v3',
  ) as Schema;
}

export interface OpenApiDocument {
  body: string;
  /** Quoted, for the ETag header; the hash of the body. */
  etag: string;
  hash: string;
}

function document(built: Schema): OpenApiDocument {
  const body = JSON.stringify(built);
  const hash = createHash('sha512').update(body).digest('hex').toUpperCase();
  return { body, etag: `"${hash}"`, hash };
}

let v2: OpenApiDocument | undefined;
let v3: OpenApiDocument | undefined;

/** `/openapi/v2`. */
export const openApiV2 = (): OpenApiDocument => (v2 ??= document(swagger()));

/** `/openapi/v3/apis/dns.spoke-agent.io/v1alpha1`. */
export const openApiV3 = (): OpenApiDocument => (v3 ??= document(openapi3()));

/** `/openapi/v3`: where the group-version's document is, with its hash (clients cache by it). */
export const openApiV3Path = `/openapi/v3/apis/${groupVersion}`;
export const openApiV3Discovery = () => ({
  paths: { [`apis/${groupVersion}`]: { serverRelativeURL: `${openApiV3Path}?hash=${openApiV3().hash}` } },
});
