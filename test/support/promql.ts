// The metric and label names a PromQL expression (as written in alert rules and Grafana panels)
// refers to, and its label matchers, so a test can hold them against what the agent exports. Not a
// parser: strings, label matchers, grouping lists and ranges are cut out, then every identifier not
// followed by `(` (a function or an aggregation) and not a keyword is a metric name. promtool checks
// the syntax. Also what tests and the bench read off an exposition.

const keywords = new Set(['and', 'or', 'unless', 'bool', 'offset', 'inf', 'nan']);

export interface Matcher {
  metric: string;
  label: string;
  op: '=' | '!=' | '=~' | '!~';
  value: string;
}

export interface PromqlNames {
  metrics: string[];
  labels: string[];
  /** Label matchers of metric selectors, with their literal values. */
  matchers: Matcher[];
}

export function promqlNames(expr: string): PromqlNames {
  const labels = new Set<string>();
  const matchers: Matcher[] = [];
  const strings: string[] = [];
  let rest = expr
    // String contents (label values, Grafana's "$cluster") can hold anything: out of the way, kept by index.
    .replace(/"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`/g, (s) => `"${strings.push(s.slice(1, -1)) - 1}"`)
    // Grafana variables outside strings ($__rate_interval in a range, $__range).
    .replace(/\$\{?\w+\}?/g, ' ')
    .replace(
      /(?<![\w:])([a-zA-Z_:][\w:]*)?(\s*)\{([^}]*)\}/g,
      (_, metric: string | undefined, space: string, list: string) => {
        for (const m of list.matchAll(/([a-zA-Z_]\w*)\s*(=~|!~|!=|=)\s*"(\d+)"/g)) {
          labels.add(m[1]!);
          if (metric) matchers.push({ metric, label: m[1]!, op: m[2] as Matcher['op'], value: strings[Number(m[3])]! });
        }
        return `${metric ?? ''}${space} `;
      },
    )
    .replace(/\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)/g, (_, list: string) => {
      for (const l of list
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean))
        labels.add(l);
      return ' ';
    })
    .replace(/\[[^\]]*\]/g, ' ');
  rest = rest.replace(/\boffset\s+-?[\w.]+/g, ' ');
  if (labels.has('__name__')) throw new Error(`${expr}: selecting by __name__ hides the metric name from this check`);
  const metrics = new Set<string>();
  for (const m of rest.matchAll(/(?<![\w.:])([a-zA-Z_:][\w:]*)(\s*\()?/g)) {
    if (m[2] === undefined && !keywords.has(m[1]!.toLowerCase())) metrics.add(m[1]!);
  }
  return { metrics: [...metrics].sort(), labels: [...labels].sort(), matchers };
}

/** Metric families in Prometheus text format, as the names a query uses (histograms: _bucket, _sum, _count). */
export function exportedNames(text: string): Map<string, string> {
  const names = new Map<string, string>();
  for (const [, name, type] of text.matchAll(/^# TYPE (\S+) (\S+)$/gm)) {
    const family = name!;
    if (type === 'histogram') for (const s of ['_bucket', '_sum', '_count']) names.set(family + s, family);
    else if (type === 'summary') for (const s of ['', '_sum', '_count']) names.set(family + s, family);
    else names.set(family, family);
  }
  return names;
}

/**
 * The value of `series` in Prometheus text format: a name with its labels as exported, or a bare
 * name for its first series whatever the labels. Undefined when absent.
 */
export function sampleValue(text: string, series: string): number | undefined {
  const escaped = series.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  const m = new RegExp(`^${escaped}(?:\\{[^}]*\\})? (\\S+)$`, 'm').exec(text);
  return m ? Number(m[1]) : undefined;
}
