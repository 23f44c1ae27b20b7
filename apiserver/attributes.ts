// What a request asks to do, as Kubernetes' RequestInfo names it, for the SubjectAccessReview:
// /apis/GROUP/VERSION/RESOURCE[/NAME] is a resource request (GET of a name: get, of the collection:
// list, or watch with ?watch=true; POST: create; PUT: update; PATCH: patch; DELETE: delete or
// deletecollection); anything else (/apis, discovery, /openapi/v2) is a non-resource path with the
// lower-cased method as verb. Pure.
import type { AccessAttributes } from '../kube/delegated-auth.js';
import { isWatch } from '../live-log/stream.js';

/** A path segment decoded; a malformed escape stays as sent (it then matches nothing). */
export function decodeSegment(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    return segment;
  }
}

const resourceVerbs: Record<string, string> = { POST: 'create', PUT: 'update', PATCH: 'patch' };

export function requestAttributes(method: string, url: URL): AccessAttributes {
  const parts = url.pathname.split('/').filter((p) => p !== '');
  if (parts[0] !== 'apis' || parts.length < 4 || parts.length > 6)
    return { verb: method.toLowerCase(), path: url.pathname };
  const [, group, version, resource, name, subresource] = parts.map(decodeSegment) as [
    string,
    string,
    string,
    string,
    string?,
    string?,
  ];
  let verb = resourceVerbs[method] ?? method.toLowerCase();
  if (method === 'GET' || method === 'HEAD') verb = name === undefined ? (isWatch(url) ? 'watch' : 'list') : 'get';
  if (method === 'DELETE' && name === undefined) verb = 'deletecollection';
  return {
    verb,
    group,
    version,
    resource,
    ...(name !== undefined ? { name } : {}),
    ...(subresource !== undefined ? { subresource } : {}),
  };
}
