// Metrics declared as data: each component writes its metrics' names, types, labels and help once
// (a histogram's buckets too), builds its prom-client objects from those declarations with the
// functions below, and `npm run docs` lists the declarations as they stand, building nothing.
import {
  Counter,
  type CounterConfiguration,
  Gauge,
  type GaugeConfiguration,
  Histogram,
  type Registry,
} from 'prom-client';

export interface MetricDeclaration<L extends string = string> {
  type: 'counter' | 'gauge' | 'histogram';
  name: string;
  help: string;
  labelNames?: readonly L[];
  buckets?: readonly number[];
}

/** A component's metrics, by the name its code knows each by. */
export type MetricDeclarations = Record<string, MetricDeclaration>;

type Declared<T extends MetricDeclaration['type'], L extends string> = MetricDeclaration<L> & { type: T };

/** The counter `d` declares, in `registry`; `collect` (when given) sets it as it is scraped. */
export const counter = <L extends string = never>(
  d: Declared<'counter', L>,
  registry: Registry,
  collect?: CounterConfiguration<L>['collect'],
): Counter<L> => new Counter<L>({ ...config(d, registry), ...(collect && { collect }) });

/** The gauge `d` declares, in `registry`; `collect` (when given) sets it as it is scraped. */
export const gauge = <L extends string = never>(
  d: Declared<'gauge', L>,
  registry: Registry,
  collect?: GaugeConfiguration<L>['collect'],
): Gauge<L> => new Gauge<L>({ ...config(d, registry), ...(collect && { collect }) });

/** The histogram `d` declares, in `registry`. */
export const histogram = <L extends string = never>(d: Declared<'histogram', L>, registry: Registry): Histogram<L> =>
  new Histogram<L>({ ...config(d, registry), ...(d.buckets && { buckets: [...d.buckets] }) });

function config<L extends string>(d: MetricDeclaration<L>, registry: Registry) {
  return { name: d.name, help: d.help, ...(d.labelNames && { labelNames: d.labelNames }), registers: [registry] };
}
