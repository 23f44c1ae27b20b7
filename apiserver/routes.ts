// What the API serves once a request is authenticated and authorized: discovery, resolutions, rules
// and the query log (get, list, watch), as plain JSON or as the Tables kubectl prints. Errors are
// Status objects.
import { explain } from '../dns/explain.js';
import type { DialEntry, DialLog } from '../agent/dial-log.js';
import { dialFields } from '../agent/dial-selector.js';
import type { QueryEntry } from '../dns/query-log.js';
import { queryFields } from '../dns/query-selector.js';
import type { LiveEntry, LiveLog } from '../live-log/live-log.js';
import { entryFilter, type Fields } from '../live-log/selector.js';
import { isWatch, type LiveStream } from '../live-log/stream.js';
import type { Resolver } from '../dns/resolver.js';
import type { RuleHolder } from '../rules/holder.js';
import { decodeSegment } from './attributes.js';
import { apiGroup, apiGroupList, apiResourceList, group, groupVersion, resources } from './discovery.js';
import { contentType, negotiate, type Representation } from './negotiation.js';
import { dial, liveList, query, type ResolutionObject, resolution, ruleList, status } from './objects.js';
import { openApiV2, openApiV3, openApiV3Discovery, openApiV3Path } from './openapi.js';
import { dialColumns, queryColumns, resolutionColumns, ruleColumns } from './columns.js';
import { table, type Column, type IncludeObject, type ObjectWithMeta, type TableOptions } from './tables.js';

/**
 * A JSON answer (`raw`: already serialized), or a watch the server streams. With an `etag`, a
 * request whose If-None-Match holds it gets 304.
 */
export type Answer =
  | { code: number; body?: unknown; raw?: string; contentType?: string; etag?: string }
  | { code: 200; watch: LiveStream<never> };

/** The request headers routes read. */
export interface RouteHeaders {
  accept?: string;
  'if-none-match'?: string;
}

export interface RouteDeps {
  resolver: Resolver;
  holder: RuleHolder;
  /** The agent's dial log; undefined with --dial-log-size=0. */
  dialLog?: DialLog;
}

const notFound = (path: string): Answer => ({
  code: 404,
  body: status(404, `the server could not find the requested resource (${path})`),
});
const onlyVerbs = (verbs: string[], what: string): Answer => ({
  code: 405,
  body: status(405, `${what} supports only ${verbs.join(', ')}`),
});
const notAcceptable = (accept: string | undefined, tables: boolean): Answer => ({
  code: 406,
  body: status(
    406,
    `only application/json${tables ? ' and meta.k8s.io Tables (as=Table;v=v1;g=meta.k8s.io)' : ''} are served here (Accept: ${accept})`,
  ),
});
const includeObjects: readonly IncludeObject[] = ['None', 'Metadata', 'Object'];

/** The Table options a request asks for, or the 400 for a bad `includeObject`. */
function tableOptions(
  how: Extract<Representation, { kind: 'table' }>,
  url: URL,
): Omit<TableOptions, 'withColumns' | 'now'> | Answer {
  const includeObject = (url.searchParams.get('includeObject') ?? 'Metadata') as IncludeObject;
  if (!includeObjects.includes(includeObject))
    return { code: 400, body: status(400, `includeObject must be one of ${includeObjects.join(', ')}`) };
  return { apiVersion: how.apiVersion, includeObject };
}

/** The answer in the representation asked for: the object itself, or a Table of `rows` with `columns`. */
function present<T extends ObjectWithMeta>(
  how: Representation,
  url: URL,
  body: unknown,
  columns: readonly Column<T>[],
  rows: readonly T[],
  resourceVersion?: string,
): Answer {
  if (how.kind === 'json') return { code: 200, body };
  const options = tableOptions(how, url);
  if ('code' in options) return options;
  return {
    code: 200,
    contentType: contentType(how),
    body: table(columns, rows, { ...options, withColumns: true, now: Date.now(), resourceVersion }),
  };
}

const badRequest = (message: string): Answer => ({ code: 400, body: status(400, message) });

/** How long a watch lasts without ?timeoutSeconds=: as kube-apiserver's, 30 to 60 minutes (--min-request-timeout=1800, randomized). */
const defaultWatchMs = () => (1 + Math.random()) * 1800_000;

/** What the API serves of one live log: its resource, field selectors, objects and Table columns. */
interface LiveResource<E extends LiveEntry, O extends ObjectWithMeta> {
  info: { name: string; kind: string };
  fields: Fields<E>;
  object: (e: E) => O;
  columns: readonly Column<O>[];
}

/** `RESOURCE`, `RESOURCE/NAME`, `RESOURCE?watch=true`: a live log, filtered by ?fieldSelector=. */
function live<E extends LiveEntry, O extends ObjectWithMeta>(
  liveLog: LiveLog<E>,
  r: LiveResource<E, O>,
  how: Representation,
  url: URL,
  name: string | undefined,
): Answer {
  const kind = r.info.name;
  if (name !== undefined) {
    const asked = decodeSegment(name);
    const id = liveLog.seqOf(asked);
    const entry = id === undefined ? undefined : liveLog.get(id);
    if (!entry)
      return {
        code: 404,
        body: status(
          404,
          `${kind}.${group} "${asked}" not found (this agent's log holds ${liveLog.version(liveLog.oldest)} to ${liveLog.version(liveLog.last)})`,
          { name: asked, group, kind },
        ),
      };
    const object = r.object(entry);
    return present(how, url, object, r.columns, [object]);
  }
  const keep = entryFilter(r.fields, url.searchParams.get('fieldSelector') ?? '', liveLog);
  if (typeof keep !== 'function') return badRequest(`fieldSelector: ${keep.error}`);
  if (!isWatch(url)) {
    const list = liveList(r.info.kind, liveLog, liveLog.current().filter(keep), r.object);
    return present(how, url, list, r.columns, list.items, list.metadata.resourceVersion);
  }
  const timeout = url.searchParams.get('timeoutSeconds');
  if (timeout !== null && !/^\d+$/.test(timeout))
    return badRequest(`timeoutSeconds must be a whole number of seconds, got "${timeout}"`);
  const options = how.kind === 'table' ? tableOptions(how, url) : undefined;
  if (options && 'code' in options) return options;
  const line = (e: E, first: boolean) => {
    const object = r.object(e);
    // Events after the first leave out the column definitions, as the API server sends them: kubectl keeps the first.
    const shown = options ? table(r.columns, [object], { ...options, withColumns: first, now: Date.now() }) : object;
    return `${JSON.stringify({ type: liveLog.changeType(e), object: shown })}\n`;
  };
  const watch: LiveStream<E> = {
    liveLog,
    after: liveLog.watchAfter(url.searchParams.get('resourceVersion')),
    keep,
    line,
    contentType: 'application/json',
    timeoutMs: timeout === null ? defaultWatchMs() : Number(timeout) * 1000,
  };
  return { code: 200, watch: watch as unknown as LiveStream<never> };
}

/** The query log (`queries`), or 404 when it is off. */
function queries(deps: RouteDeps, how: Representation, url: URL, name: string | undefined): Answer {
  const liveLog = deps.resolver.queryLog;
  if (!liveLog) return logOff('query', '--dns-query-log-size');
  const object = (e: QueryEntry) => query(e, liveLog);
  return live(liveLog, { info: resources.queries, fields: queryFields, object, columns: queryColumns }, how, url, name);
}

/** The dial log (`dials`), or 404 when it is off. */
function dials(deps: RouteDeps, how: Representation, url: URL, name: string | undefined): Answer {
  const liveLog = deps.dialLog;
  if (!liveLog) return logOff('dial', '--dial-log-size');
  const object = (e: DialEntry) => dial(e, liveLog);
  return live(liveLog, { info: resources.dials, fields: dialFields, object, columns: dialColumns }, how, url, name);
}

/** A live resource whose log is off on this agent: 404 naming the flag. */
const logOff = (resource: string, flag: string): Answer => ({
  code: 404,
  body: status(404, `the ${resource} log is off on this agent (${flag}=0)`, { group, kind: resource }),
});

/** /openapi/v2, /openapi/v3 and the group-version's v3 document, for the aggregator and kubectl explain. */
function openApi(path: string, headers: RouteHeaders): Answer {
  if (!negotiate(headers.accept, false)) return notAcceptable(headers.accept, false);
  if (path === '/openapi/v3') return { code: 200, body: openApiV3Discovery() };
  const doc = path === '/openapi/v2' ? openApiV2() : openApiV3();
  if (headers['if-none-match'] === doc.etag) return { code: 304, etag: doc.etag };
  return { code: 200, raw: doc.body, etag: doc.etag };
}

export async function route(method: string, url: URL, headers: RouteHeaders, deps: RouteDeps): Promise<Answer> {
  const accept = headers.accept;
  const read = method === 'GET' || method === 'HEAD';
  const path = url.pathname.replace(/\/$/, '');
  if (path === '/openapi/v2' || path === '/openapi/v3' || path === openApiV3Path)
    return read ? openApi(path, headers) : onlyVerbs(['GET'], url.pathname);
  const discovery =
    path === '/apis'
      ? apiGroupList
      : path === `/apis/${group}`
        ? apiGroup
        : path === `/apis/${groupVersion}`
          ? apiResourceList
          : undefined;
  if (discovery) {
    if (!read) return onlyVerbs(['GET'], url.pathname);
    return negotiate(accept, false) ? { code: 200, body: discovery() } : notAcceptable(accept, false);
  }
  const [resource, name, ...rest] = path.startsWith(`/apis/${groupVersion}/`)
    ? path.slice(`/apis/${groupVersion}/`.length).split('/')
    : [];
  if (resource === undefined || rest.length > 0) return notFound(url.pathname);
  const how = negotiate(accept, true);
  switch (resource) {
    case resources.rules.name: {
      if (name !== undefined) return notFound(url.pathname);
      if (!read || url.searchParams.has('watch')) return onlyVerbs(resources.rules.verbs, resources.rules.name);
      if (!how) return notAcceptable(accept, true);
      const list = ruleList(deps.holder);
      return present(how, url, list, ruleColumns, list.items, list.metadata.resourceVersion);
    }
    case resources.resolutions.name: {
      if (name === undefined)
        return onlyVerbs(
          resources.resolutions.verbs,
          `${resources.resolutions.name} (ask for one name: ${resources.resolutions.name}/NAME[?type=AAAA])`,
        );
      if (!read) return onlyVerbs(resources.resolutions.verbs, resources.resolutions.name);
      if (!how) return notAcceptable(accept, true);
      const asked = decodeSegment(name);
      let object: ResolutionObject;
      try {
        object = resolution(await explain(deps.resolver, asked, url.searchParams.get('type') ?? 'A'));
      } catch (err) {
        return {
          code: 400,
          body: status(400, `${resources.resolutions.name} "${asked}": ${(err as Error).message}`, {
            name: asked,
            group,
            kind: resources.resolutions.name,
          }),
        };
      }
      return present(how, url, object, resolutionColumns, [object]);
    }
    case resources.queries.name:
    case resources.dials.name: {
      const info = resource === resources.queries.name ? resources.queries : resources.dials;
      if (!read) return onlyVerbs(info.verbs, info.name);
      if (!how) return notAcceptable(accept, true);
      return info === resources.queries ? queries(deps, how, url, name) : dials(deps, how, url, name);
    }
  }
  return notFound(url.pathname);
}
