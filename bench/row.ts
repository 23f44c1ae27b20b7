// One result row, and how a figure is printed: what report.ts writes, chart.ts draws and
// readme-section.ts puts in README.md.
export interface Row {
  section: string;
  /** What was measured, e.g. "1 GiB download, 1 stream". */
  metric: string;
  /** Which path or server, e.g. "ours hub, http-connect". */
  subject: string;
  value: number;
  unit: string;
  baseline?: { subject: string; value: number };
  /** value / baseline, or for "lower is better" units still value / baseline (read with the unit). */
  ratio?: number;
  /** The target for this figure and whether it was met. */
  target?: { text: string; met: boolean };
  note?: string;
}

export function fmt(n: number): string {
  if (!Number.isFinite(n)) return String(n);
  const a = Math.abs(n);
  if (a >= 1000) return Math.round(n).toString();
  if (a >= 100) return n.toFixed(0);
  if (a >= 10) return n.toFixed(1);
  if (a >= 1) return n.toFixed(2);
  return n.toPrecision(2);
}
