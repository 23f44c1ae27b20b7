// What the aggregator and kubectl read to learn the API: the group list (/apis), the group, and the
// version's resource list. Pure data; the aggregator asks /apis for the aggregated-discovery type
// only, and a 406 sends it to /apis/GROUP/VERSION instead (how 1.28's aggregator falls back:
// negotiation.ts).
export const group = 'dns.spoke-agent.io';
export const version = 'v1alpha1';
export const groupVersion = `${group}/${version}`;

export interface ResourceInfo {
  name: string;
  singularName: string;
  kind: string;
  verbs: string[];
}

export const resources = {
  /** `resolutions/NAME[?type=AAAA]`: what the DNS server answers for NAME, and why. */
  resolutions: { name: 'resolutions', singularName: 'resolution', kind: 'Resolution', verbs: ['get'] },
  /** `rules`: every rule in force and the names it serves. */
  rules: { name: 'rules', singularName: 'rule', kind: 'Rule', verbs: ['list'] },
  /** `queries`: the live query log, what clients asked and got (a permission of its own). */
  queries: { name: 'queries', singularName: 'query', kind: 'Query', verbs: ['get', 'list', 'watch'] },
  /** `dials`: the dial log, who reached what through the tunnel (a permission of its own). */
  dials: { name: 'dials', singularName: 'dial', kind: 'Dial', verbs: ['get', 'list', 'watch'] },
} satisfies Record<string, ResourceInfo>;

const groupBody = () => ({
  name: group,
  versions: [{ groupVersion, version }],
  preferredVersion: { groupVersion, version },
});

export const apiGroupList = () => ({ kind: 'APIGroupList', apiVersion: 'v1', groups: [groupBody()] });

export const apiGroup = () => ({ kind: 'APIGroup', apiVersion: 'v1', ...groupBody() });

export const apiResourceList = () => ({
  kind: 'APIResourceList',
  apiVersion: 'v1',
  groupVersion,
  resources: Object.values(resources).map((r) => ({ ...r, namespaced: false })),
});
