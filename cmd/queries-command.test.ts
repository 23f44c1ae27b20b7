// `spoke-agent queries`'s line for a query, without a socket.
import { describe, expect, it } from 'vitest';
import { queryHeader, queryLine } from './queries-command.js';

const q = {
  seq: 3,
  resourceVersion: 'ab12cd34-3',
  time: '2026-11-10T12:00:01.234Z',
  name: 'search.default.cluster1',
  type: 'A',
  client: '10.0.3.7',
  clientPort: 53211,
  transport: 'udp' as const,
  rcode: 'NOERROR',
  source: 'rule' as const,
  rule: '--expose=default/search',
  truncated: false,
  cached: false,
  ms: 0.41,
};

describe('queryLine', () => {
  it('prints time, client, transport, type, rcode, name, rule and latency, aligned under the header', () => {
    expect(queryLine(q)).toBe(
      '12:00:01.234Z 10.0.3.7:53211        udp   A     NOERROR  search.default.cluster1 --expose=default/search 0.41ms',
    );
    for (const [column, value] of [
      ['CLIENT', '10.0.3.7'],
      ['PROTO', 'udp'],
      ['RCODE', 'NOERROR'],
      ['QUERY', 'search'],
    ])
      expect(queryHeader.indexOf(column!)).toBe(queryLine(q).indexOf(value!));
  });

  it('brackets an IPv6 client, and says cached, or nothing, for answers that were not timed', () => {
    const { ms: _, ...untimed } = q;
    expect(queryLine({ ...untimed, client: 'fd00::7', cached: true })).toContain('[fd00::7]:53211 ');
    expect(queryLine({ ...untimed, cached: true }).endsWith(' cached')).toBe(true);
    expect(queryLine({ ...untimed, name: '', type: '', rcode: 'FORMERR', source: 'error', rule: undefined })).toMatch(
      / - {5}FORMERR {2}<none> - -$/,
    );
  });
});
