import { Writable } from 'node:stream';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { formatLine, textDestination } from './log-text.js';

const at = new Date(2026, 10, 30, 9, 5, 7, 42).getTime(); // local time, as the text shows it

describe('formatLine', () => {
  it('renders time, level, message and the fields as key=value, quoting what needs it', () => {
    const line = JSON.stringify({
      level: 30,
      time: at,
      msg: 'DNS server listening',
      address: '127.0.0.1',
      port: 5353,
      forward: true,
      note: 'two words',
      flags: ['--a'],
      q: 'a=b',
    });
    expect(formatLine(line, false)).toBe(
      '09:05:07.042 INFO  DNS server listening address=127.0.0.1 port=5353 forward=true note="two words" flags=["--a"] q="a=b"\n',
    );
  });

  it('colours the time, the level and the keys only when asked', () => {
    const line = JSON.stringify({ level: 40, time: at, msg: 'careful', port: 1 });
    expect(formatLine(line, true)).toBe(
      '\x1b[2m09:05:07.042\x1b[0m \x1b[33mWARN \x1b[0m careful \x1b[2mport=\x1b[0m1\n',
    );
    expect(formatLine(line, false)).not.toContain('\x1b');
  });

  it('escapes control characters from the message and the values (a logged DNS name cannot drive the terminal)', () => {
    const line = JSON.stringify({ level: 50, time: at, msg: 'bad\x1b[2Jname\nnext', name: 'x\x1b[31m' });
    expect(formatLine(line, false)).toBe('09:05:07.042 ERROR bad\\u001b[2Jname\\nnext name="x\\u001b[31m"\n');
  });

  it("shows an error's message as the value and its stack indented below", () => {
    const line = JSON.stringify({
      level: 50,
      time: at,
      msg: 'failed',
      err: { type: 'Error', message: 'boom', stack: 'Error: boom\n    at f (x.ts:1:1)' },
    });
    expect(formatLine(line, false)).toBe(
      '09:05:07.042 ERROR failed err=boom\n    Error: boom\n        at f (x.ts:1:1)\n',
    );
  });

  it('passes a line that is not JSON through as it came', () => {
    expect(formatLine('not json', false)).toBe('not json\n');
  });
});

describe('textDestination', () => {
  it('takes the lines a pino logger writes (levels, children, errors)', () => {
    let out = '';
    const sink = new Writable({
      write: (chunk: Buffer, _e, done) => {
        out += chunk.toString();
        done();
      },
    });
    const log = pino({ level: 'debug', base: {} }, textDestination(sink, false));
    log.child({ component: 'dns' }).debug({ name: 'demo.default.cluster1', type: 'A' }, 'query');
    log.error({ err: new Error('boom') }, 'failed');
    const lines = out.split('\n');
    expect(lines[0]).toMatch(/^\d\d:\d\d:\d\d\.\d{3} DEBUG query component=dns name=demo\.default\.cluster1 type=A$/);
    expect(lines[1]).toMatch(/^\d\d:\d\d:\d\d\.\d{3} ERROR failed err=boom$/);
    expect(lines[2]).toBe('    Error: boom');
  });
});
