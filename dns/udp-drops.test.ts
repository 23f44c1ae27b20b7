import { Counter, Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import type { Logger } from '../observability/log.js';
import { ManualClock } from '../test/support/manual-clock.js';
import { UdpDrops } from './udp-drops.js';

function setup() {
  const registry = new Registry();
  const counter = new Counter({ name: 'dropped_total', help: 'x', labelNames: ['reason'], registers: [registry] });
  const lines: Array<{ level: string; fields: Record<string, unknown>; msg: string }> = [];
  const at = (level: string) => (fields: Record<string, unknown>, msg: string) => lines.push({ level, fields, msg });
  const log = { warn: at('warn'), error: at('error') } as unknown as Logger;
  const clock = new ManualClock();
  const drops = new UdpDrops(counter, log, 10_000, clock);
  const count = async (reason: string) =>
    (await counter.get()).values.find((v) => v.labels.reason === reason)?.value ?? 0;
  return { drops, lines, clock, count };
}

describe('UDP drops', () => {
  it('counts every drop by reason, and logs the first at once and the rest at most once per interval', async () => {
    const { drops, lines, clock, count } = setup();
    drops.add('truncated', 1);
    expect(lines).toEqual([
      { level: 'warn', fields: { dropped: { truncated: 1, failed: 0, unsent: 0 } }, msg: 'DNS UDP queries dropped' },
    ]);
    await clock.advance(1_000);
    drops.add('unsent', 5);
    drops.add('truncated', 2);
    await clock.advance(8_999);
    expect(lines).toHaveLength(1);
    await clock.advance(1);
    expect(lines[1]).toEqual({
      level: 'warn',
      fields: { dropped: { truncated: 2, failed: 0, unsent: 5 } },
      msg: 'DNS UDP queries dropped',
    });
    await clock.advance(60_000);
    expect(lines).toHaveLength(2); // nothing more to say
    expect(await count('truncated')).toBe(3);
    expect(await count('unsent')).toBe(5);
  });

  it('logs failures at error level with the last error; nothing for zero', async () => {
    const { drops, lines, count } = setup();
    drops.add('unsent', 0);
    expect(lines).toEqual([]);
    const err = new Error('boom');
    drops.add('failed', 1, err);
    expect(lines).toEqual([
      {
        level: 'error',
        fields: { dropped: { truncated: 0, failed: 1, unsent: 0 }, err },
        msg: 'DNS UDP queries dropped',
      },
    ]);
    expect(await count('failed')).toBe(1);
  });

  it('stops its timer on close', async () => {
    const { drops, clock } = setup();
    drops.add('unsent', 1);
    drops.add('unsent', 1);
    expect(clock.waiting).toBe(1);
    drops.close();
    expect(clock.waiting).toBe(0);
  });
});
