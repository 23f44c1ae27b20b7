// meta.k8s.io Tables: what `kubectl get` prints. kubectl asks for
// `application/json;as=Table;v=v1;g=meta.k8s.io` first and, without one, prints only NAME and AGE.
// A column reads a cell from an object; priority 0 is what `kubectl get` shows, 1 what `-o wide`
// adds. Each resource's columns are in columns.ts. Pure: objects in, a Table out.

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

export const none = '<none>';
export const orNone = (text: string | undefined) => (text === undefined || text === '' ? none : text);

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

export const nameColumn: Column<ObjectWithMeta> = {
  name: 'Name',
  type: 'string',
  format: 'name',
  description:
    'Name must be unique within a namespace (here: the cluster); see the resource for what it is named after.',
  priority: 0,
  cell: (o) => o.metadata.name,
};

export const ageColumn: Column<ObjectWithMeta> = {
  name: 'Age',
  type: 'string',
  description: 'Time since the object was created (metadata.creationTimestamp).',
  priority: 0,
  cell: (o, now) =>
    o.metadata.creationTimestamp ? humanDuration(now - Date.parse(o.metadata.creationTimestamp)) : '<unknown>',
};

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
