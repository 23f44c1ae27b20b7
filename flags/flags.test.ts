import { describe, expect, it } from 'vitest';
import { bool, duration, FlagError, int, list, parseDuration, parseFlags, str } from './flags.js';

const set = {
  host: str('host', 'localhost', 'h'),
  port: int('port', 8091, 'p'),
  on: bool('on', false, 'o'),
  every: duration('every', 1000, 'e'),
  names: list('names', [], 'n'),
  id: str('id', '', 'i', { env: 'THE_ID' }),
};

describe('parseFlags', () => {
  it('takes pflag spellings', () => {
    const { values, given, positionals } = parseFlags(set, [
      '--host=a',
      '--port',
      '9',
      '--on',
      '-every=1m30s',
      '--names=a,b',
      '--names',
      'c',
      'rest',
    ]);
    expect(values).toEqual({ host: 'a', port: 9, on: true, every: 90_000, names: ['a', 'b', 'c'], id: '' });
    expect(given.has('host')).toBe(true);
    expect(positionals).toEqual(['rest']);
  });
  it('prefers the flag over the environment', () => {
    expect(parseFlags(set, [], { THE_ID: 'env' }).values.id).toBe('env');
    expect(parseFlags(set, ['--id=flag'], { THE_ID: 'env' }).values.id).toBe('flag');
  });
  it('names the flag in every error', () => {
    expect(() => parseFlags(set, ['--nope'])).toThrow(new FlagError('unknown flag: --nope'));
    expect(() => parseFlags(set, ['--port=x'])).toThrow(/"--port"/);
    expect(() => parseFlags(set, ['--on=maybe'])).toThrow(/"--on"/);
    expect(() => parseFlags(set, ['--every=5'])).toThrow(/"--every"/);
    expect(() => parseFlags(set, ['--host'])).toThrow(/--host/);
  });
  it('parses Go durations', () => {
    expect(parseDuration('1h')).toBe(3_600_000);
    expect(parseDuration('1.5s')).toBe(1500);
    expect(parseDuration('300ms')).toBe(300);
    expect(parseDuration('0')).toBe(0);
    expect(() => parseDuration('10')).toThrow();
  });
});
