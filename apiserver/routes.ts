// What the API serves once a request is authenticated and authorized: discovery, resolutions and
// rules, as plain JSON or as the Tables kubectl prints. Errors are Status objects.
import type { Resolver } from '../dns/resolver.js';
import { explain } from '../dns/explain.js';
import type { RuleHolder } from '../rules/holder.js';
import { decodeSegment } from './attributes.js';
import { apiGroup, apiGroupList, apiResourceList, group, groupVersion, resources } from './discovery.js';
import { contentType, negotiate, type Representation } from './negotiation.js';
import { resolution, ruleList, status } from './objects.js';
import { resolutionColumns, ruleColumns, table, type Column, type IncludeObject, type ObjectWithMeta } from './tables.js';

export interface Answer {
  code: number;
  body: unknown;
  contentType?: string;
}

export interface RouteDeps {
  resolver: Resolver;
  holder: RuleHolder;
}

const notFound = (path: string): Answer => ({ code: 404, body: status(404, `the server could not find the requested resource (${path})`) });
const onlyVerbs = (verbs: string[], what: string): Answer => ({ code: 405, body: status(405, `${what} supports only ${verbs.join(', ')}`) });
const notAcceptable = (accept: string | undefined, tables: boolean): Answer => ({
  code: 406,
  body: status(406, `only application/json${tables ? ' and meta.k8s.io Tables (as=Table;v=v1;g=meta.k8s.io)' : ''} are served here (Accept: ${accept})`),
});
const includeObjects: readonly IncludeObject[] = ['None', 'Metadata', 'Object'];

/** The answer in the representation asked for: the object itself, or a Table of `rows` with `columns`. */
function present<T extends ObjectWithMeta>(how: Representation, url: URL, body: unknown, columns: readonly Column<T>[], rows: readonly T[], resourceVersion?: string): Answer {
  if (how.kind === 'json') return { code: 200, body };
  const includeObject = (url.searchParams.get('includeObject') ?? 'Metadata') as IncludeObject;
  if (!includeObjects.includes(includeObject)) return { code: 400, body: status(400, `includeObject must be one of ${includeObjects.join(', ')}`) };
  return { code: 200, contentType: contentType(how), body: table(columns, rows, { apiVersion: how.apiVersion, includeObject, withColumns: true, now: Date.now(), resourceVersion }) };
}

export async function route(method: string, url: URL, accept: string | undefined, deps: RouteDeps): Promise<Answer> {
  const read = method === 'GET' || method === 'HEAD';
  const path = url.pathname.replace(/\/$/, '');
  const discovery = path === '/apis' ? apiGroupList : path === `/apis/${group}` ? apiGroup : path === `/apis/${groupVersion}` ? apiResourceList : undefined;
  if (discovery) {
    if (!read) return onlyVerbs(['GET'], url.pathname);
    return negotiate(accept, false) ? { code: 200, body: discovery() } : notAcceptable(accept, false);
  }
  const [resource, name, ...rest] = path.startsWith(`/apis/${groupVersion}/`) ? path.slice(`/apis/${groupVersion}/`.length).split('/') : [];
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
      if (name === undefined) return onlyVerbs(resources.resolutions.verbs, `${resources.resolutions.name} (ask for one name: ${resources.resolutions.name}/NAME[?type=AAAA])`);
      if (!read) return onlyVerbs(resources.resolutions.verbs, resources.resolutions.name);
      if (!how) return notAcceptable(accept, true);
      const asked = decodeSegment(name);
      let object;
      try {
        object = resolution(await explain(deps.resolver, asked, url.searchParams.get('type') ?? 'A'));
      } catch (err) {
        return { code: 400, body: status(400, `${resources.resolutions.name} "${asked}": ${(err as Error).message}`, { name: asked, group, kind: resources.resolutions.name }) };
      }
      return present(how, url, object, resolutionColumns, [object]);
    }
  }
  return notFound(url.pathname);
}
