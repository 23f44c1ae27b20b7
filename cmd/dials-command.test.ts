// `spoke-agent dials`'s line for a change of a dial, without a socket.
import { describe, expect, it } from 'vitest';
import { dialHeader, dialLine } from './dials-command.js';

const open = {
  seq: 4,
  id: 4,
  resourceVersion: 'ab12cd34-4',
  objectName: 'ab12cd34-4',
  event: 'ADDED' as const,
  time: '2026-11-10T12:00:01.234Z',
  server: 'server-a',
  connectID: '7',
  destination: 'web.prod.cluster1:443',
  rule: '--expose=prod/web',
  address: '10.0.0.5',
  result: 'connected' as const,
  dialMs: 1.2,
  open: true,
  bytesToTarget: 0,
  bytesFromTarget: 0,
};

describe('dialLine', () => {
  it('prints time, result (open while connected), destination, address, rule, aligned under the header', () => {
    const line = dialLine(open);
    expect(line).toBe(
      '12:00:01.234Z open      web.prod.cluster1:443            10.0.0.5               --expose=prod/web - -',
    );
    for (const [column, value] of [
      ['RESULT', 'open'],
      ['DESTINATION', 'web.prod.cluster1'],
      ['ADDRESS', '10.0.0.5'],
      ['RULE', '--expose'],
    ])
      expect(dialHeader.indexOf(column!)).toBe(line.indexOf(value!));
  });

  it('adds bytes, duration and how it closed once closed, and the reason of a refusal', () => {
    expect(
      dialLine({
        ...open,
        event: 'MODIFIED',
        open: false,
        bytesToTarget: 5,
        bytesFromTarget: 7,
        durationMs: 12.5,
        closedBy: 'CLOSE_REQ',
      }),
    ).toMatch(/ connected +web\.prod\.cluster1:443 +10\.0\.0\.5 +--expose=prod\/web 5\/7 12\.5ms CLOSE_REQ$/);
    const { rule: _, connectID: __, ...bare } = open;
    expect(
      dialLine({
        ...bare,
        open: false,
        result: 'refused',
        address: '169.254.169.254',
        destination: '169.254.169.254:80',
        reason: 'not allowed',
      }),
    ).toMatch(/ refused +169\.254\.169\.254:80 +169\.254\.169\.254 +- - - not allowed$/);
  });
});
