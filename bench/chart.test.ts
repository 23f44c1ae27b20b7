import { describe, expect, it } from 'vitest';
import { chartRows, resultsSvg } from './chart.js';
import type { Row } from './row.js';

const row = (over: Partial<Row>): Row => ({
  section: 'S',
  metric: 'm',
  subject: 'ours',
  value: 2,
  unit: 'x',
  baseline: { subject: 'Go agent', value: 1 },
  ratio: 2,
  ...over,
});

describe('results chart', () => {
  it('keeps rows with a target or a reference, not direct-TCP or idle baselines', () => {
    const rows = [
      row({ metric: 'vs go' }),
      row({ metric: 'vs direct', baseline: { subject: 'direct TCP', value: 1 } }),
      row({
        metric: 'target only',
        baseline: { subject: 'no connection', value: 1 },
        target: { text: '< 200 MB', met: true },
      }),
      row({ metric: 'no baseline', baseline: undefined, ratio: undefined }),
    ];
    expect(chartRows(rows).map((r) => r.metric)).toEqual(['vs go', 'target only']);
  });

  it('draws one bar per row, coloured by the target, with escaped labels', () => {
    const svg = resultsSvg(
      [row({ metric: 'a < b & c', target: { text: 't', met: false } }), row({ metric: 'plain', ratio: 0.5 })],
      'title',
    );
    expect(svg.startsWith('<svg')).toBe(true);
    expect(svg).toContain('a &lt; b &amp; c');
    expect(svg).toContain('fill="#c62828"');
    expect(svg).toContain('fill="#1565c0"');
    expect(svg).toContain('x0.50 vs Go agent');
    expect(svg.match(/<rect x=/g)).toHaveLength(2);
  });
});
