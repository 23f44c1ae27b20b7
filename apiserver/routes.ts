// What the API serves once a request is authenticated and authorized: discovery, resolutions and
// rules. Answers are JSON with a status code; errors are Status objects.
import type { Resolver } from '../dns/resolver.js';
import { explain } from '../dns/explain.js';
import type { RuleHolder } from '../rules/holder.js';
import { decodeSegment } from './attributes.js';
import { acceptsJson, apiGroup, apiGroupList, apiResourceList, group, groupVersion, resources } from './discovery.js';
import { resolution, ruleList, status } from './objects.js';

export interface Answer {
  code: number;
  body: unknown;
}

export interface RouteDeps {
  resolver: Resolver;
  holder: RuleHolder;
}

const notFound = (path: string): Answer => ({ code: 404, body: status(404, `the server could not find the requested resource (${path})`) });
const onlyVerbs = (verbs: string[], what: string): Answer => ({ code: 405, body: status(405, `${what} supports only ${verbs.join(', ')}`) });

export async function route(method: string, url: URL, accept: string | undefined, deps: RouteDeps): Promise<Answer> {
  if (!acceptsJson(accept)) return { code: 406, body: status(406, `only application/json is served (Accept: ${accept})`) };
  const read = method === 'GET' || method === 'HEAD';
  switch (url.pathname.replace(/\/$/, '')) {
    case '/apis':
      return read ? { code: 200, body: apiGroupList() } : onlyVerbs(['GET'], '/apis');
    case `/apis/${group}`:
      return read ? { code: 200, body: apiGroup() } : onlyVerbs(['GET'], url.pathname);
    case `/apis/${groupVersion}`:
      return read ? { code: 200, body: apiResourceList() } : onlyVerbs(['GET'], url.pathname);
    case `/apis/${groupVersion}/${resources.rules.name}`:
      if (!read || url.searchParams.has('watch')) return onlyVerbs(resources.rules.verbs, resources.rules.name);
      return { code: 200, body: ruleList(deps.holder) };
    case `/apis/${groupVersion}/${resources.resolutions.name}`:
      return onlyVerbs(resources.resolutions.verbs, `${resources.resolutions.name} (ask for one name: ${resources.resolutions.name}/NAME[?type=AAAA])`);
  }
  const prefix = `/apis/${groupVersion}/${resources.resolutions.name}/`;
  if (!url.pathname.startsWith(prefix) || url.pathname.slice(prefix.length).includes('/')) return notFound(url.pathname);
  if (!read) return onlyVerbs(resources.resolutions.verbs, resources.resolutions.name);
  const name = decodeSegment(url.pathname.slice(prefix.length));
  try {
    return { code: 200, body: resolution(await explain(deps.resolver, name, url.searchParams.get('type') ?? 'A')) };
  } catch (err) {
    return { code: 400, body: status(400, `${resources.resolutions.name} "${name}": ${(err as Error).message}`, { name, group, kind: resources.resolutions.name }) };
  }
}
