// Content negotiation, as the API server does it: the Accept header's media ranges in order of
// preference (q, then position), the first one we can serve wins. We serve plain JSON and, for
// resources, meta.k8s.io Tables (`application/json;as=Table;v=v1;g=meta.k8s.io`, v1beta1 too).
// Another kind (`as=APIGroupDiscoveryList`, protobuf) is not served: when nothing else is acceptable
// the answer is 406, which is how kube-apiserver 1.28's aggregator learns to fall back from
// aggregated discovery to /apis/GROUP/VERSION. Pure.

export type Representation = { kind: 'json' } | { kind: 'table'; apiVersion: 'meta.k8s.io/v1' | 'meta.k8s.io/v1beta1' };

interface MediaRange {
  type: string;
  params: Map<string, string>;
  q: number;
}

function parseAccept(accept: string): MediaRange[] {
  return accept
    .split(',')
    .map((range, index) => {
      const [type = '', ...rest] = range.split(';').map((p) => p.trim());
      const params = new Map<string, string>();
      for (const p of rest) {
        const eq = p.indexOf('=');
        if (eq > 0) params.set(p.slice(0, eq).trim().toLowerCase(), p.slice(eq + 1).trim());
      }
      const q = params.has('q') ? Number(params.get('q')) : 1;
      params.delete('q');
      return { type: type.toLowerCase(), params, q: Number.isFinite(q) ? q : 0, index };
    })
    .filter((r) => r.type !== '' && r.q > 0)
    .sort((a, b) => b.q - a.q || a.index - b.index);
}

const jsonTypes = ['*/*', 'application/*', 'application/json'];

function servable(r: MediaRange, tables: boolean): Representation | undefined {
  if (!jsonTypes.includes(r.type)) return undefined;
  const as = r.params.get('as');
  if (as === undefined) return { kind: 'json' };
  if (!tables || as !== 'Table' || r.params.get('g') !== 'meta.k8s.io') return undefined;
  const v = r.params.get('v');
  return v === 'v1' || v === 'v1beta1' ? { kind: 'table', apiVersion: `meta.k8s.io/${v}` } : undefined;
}

/** What to answer with; undefined: nothing acceptable (406). `tables`: whether the path has a Table. */
export function negotiate(accept: string | undefined, tables: boolean): Representation | undefined {
  if (accept === undefined || accept.trim() === '') return { kind: 'json' };
  for (const range of parseAccept(accept)) {
    const chosen = servable(range, tables);
    if (chosen) return chosen;
  }
  return undefined;
}

/** The Content-Type of an answer in `r`. */
export const contentType = (r: Representation) =>
  r.kind === 'table'
    ? `application/json;as=Table;v=${r.apiVersion.slice('meta.k8s.io/'.length)};g=meta.k8s.io`
    : 'application/json';
