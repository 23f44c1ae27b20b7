// `spoke-agent dials [--watch] [--field-selector=...]`: the dial log of a running agent (its
// /debug/dials), one change a line (a connection shows when it connects, and again when it closes,
// with its bytes and duration), as cmd/live-tail.ts tails a live log.
import type { ShownDial } from '../agent/dials-handler.js';
import { aligned, liveTailFlags, runLiveTail } from './live-tail.js';

export const dialsFlags = liveTailFlags(
  'dials',
  'result=denied,rule=--expose=default/web',
  'destination, server, result, rule, address, connectID',
);

// Time of day, result, destination and address have a fixed width; rule, bytes, duration and reason follow.
const line = aligned([13, 9, 32, 22]);

export const dialHeader = line(['TIME', 'RESULT', 'DESTINATION', 'ADDRESS', 'RULE', 'BYTES', 'DURATION', 'REASON']);

/** One change of a dial as a line: time (UTC), result ("open" while connected), destination, address, rule, bytes to/from, duration, reason. Pure. */
export function dialLine(d: ShownDial): string {
  const closed = !d.open;
  return line([
    d.time.slice(11),
    d.open ? 'open' : d.result,
    d.destination,
    d.address ?? '-',
    d.rule ?? '-',
    closed && d.result === 'connected' ? `${d.bytesToTarget}/${d.bytesFromTarget}` : '-',
    d.durationMs !== undefined ? `${d.durationMs}ms` : '-',
    d.reason ?? d.closedBy ?? '',
  ]).trimEnd();
}

export const runDialsCommand = (argv: string[], out?: NodeJS.WritableStream, signal?: AbortSignal) =>
  runLiveTail(
    {
      resource: 'dials',
      flags: dialsFlags,
      what: 'The dial log of a running agent: the connections the hub made through it',
      header: dialHeader,
      line: dialLine,
    },
    argv,
    out,
    signal,
  );
