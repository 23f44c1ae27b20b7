// The results as a picture: every comparison with a reference (the Go agent, dnsmasq, the naive DNS
// server) and every row with a target, as a ratio bar on a log scale around x1. Plain SVG, no
// dependency: GitHub and any browser show it.
import { fmt, type Row } from './row.js';

const width = 1200;
const labelWidth = 640;
const barArea = width - labelWidth - 260;
const rowHeight = 22;
const top = 56;
// Log scale from x0.01 (the Go agent beside a stalled target) to x10.
const [minLog, maxLog] = [-2, 1];

const x = (ratio: number) =>
  labelWidth + ((Math.min(maxLog, Math.max(minLog, Math.log10(ratio))) - minLog) / (maxLog - minLog)) * barArea;

const escapeXml = (text: string) => text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

/** The rows worth a bar: a target, a reference agent or server, or the same connection alone (slow consumer). */
export function chartRows(rows: Row[]): Row[] {
  return rows.filter(
    (r) =>
      r.ratio !== undefined &&
      Number.isFinite(r.ratio) &&
      r.ratio > 0 &&
      (r.target !== undefined || /Go agent|dnsmasq|naive|alone/.test(r.baseline?.subject ?? '')),
  );
}

export function resultsSvg(rows: Row[], title: string): string {
  const shown = chartRows(rows);
  // A section heading before its first bar; the subject after the metric when one metric has several.
  const lines: Array<{ heading: string } | { row: Row; label: string }> = [];
  for (const r of shown) {
    if (lines.every((l) => !('heading' in l) || l.heading !== r.section)) lines.push({ heading: r.section });
    const shared = shown.filter((o) => o.section === r.section && o.metric === r.metric).length > 1;
    lines.push({ row: r, label: shared ? `${r.metric} [${r.subject}]` : r.metric });
  }
  const height = top + lines.length * rowHeight + 40;
  const out = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" font-family="sans-serif" font-size="12">`,
    `<rect width="100%" height="100%" fill="white"/>`,
    `<text x="10" y="20" font-size="15" font-weight="bold">${escapeXml(title)}</text>`,
    `<text x="10" y="38" fill="#555">ratio = ours / reference, same run (log scale). Green: target met; red: not met; blue: no target. Read each row's unit: for latency and memory, lower is better.</text>`,
  ];
  for (const tick of [0.01, 0.1, 1, 10]) {
    out.push(
      `<line x1="${x(tick)}" y1="${top - 6}" x2="${x(tick)}" y2="${height - 30}" stroke="${tick === 1 ? '#333' : '#ddd'}"/>`,
    );
    out.push(`<text x="${x(tick)}" y="${height - 16}" text-anchor="middle" fill="#555">x${tick}</text>`);
  }
  lines.forEach((line, i) => {
    const y = top + i * rowHeight;
    if ('heading' in line) {
      out.push(`<text x="10" y="${y + 15}" font-weight="bold">${escapeXml(line.heading)}</text>`);
      return;
    }
    const { row: r, label } = line;
    const colour = r.target ? (r.target.met ? '#2e7d32' : '#c62828') : '#1565c0';
    const [from, to] = [x(1), x(r.ratio!)].sort((a, b) => a - b) as [number, number];
    out.push(
      `<text x="${labelWidth - 8}" y="${y + 14}" text-anchor="end">${escapeXml(label.length > 95 ? `${label.slice(0, 94)}…` : label)}</text>`,
    );
    out.push(
      `<rect x="${from}" y="${y + 3}" width="${Math.max(1, to - from)}" height="${rowHeight - 8}" fill="${colour}"/>`,
    );
    out.push(
      `<text x="${Math.max(from, to) + 4}" y="${y + 14}">x${fmt(r.ratio!)} vs ${escapeXml(r.baseline!.subject)}</text>`,
    );
  });
  out.push('</svg>');
  return `${out.join('\n')}\n`;
}
