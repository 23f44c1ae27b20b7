import { describe, expect, it } from 'vitest';
import { agentFlags, validateAgentOptions } from '../agent/options.js';
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
    const { values, given, positionals } = parseFlags(set, ['--host=a', '--port', '9', '--on', '-every=1m30s', '--names=a,b', '--names', 'c', 'rest']);
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

describe('agent flags', () => {
  it('keep the Go agent defaults', () => {
    const { values } = parseFlags(agentFlags, []);
    expect(values).toMatchObject({ proxyServerHost: ['127.0.0.1'], proxyServerPort: 8091, syncInterval: 1000, syncIntervalCap: 10_000, probeInterval: 1000, healthServerPort: 8093, adminServerPort: 8094, xfrChannelSize: 150, dialTimeout: 5000 });
  });
  it('validate like the Go agent', () => {
    expect(() => parseFlags(agentFlags, ['--agent-identifiers=host=a&nope=b'])).toThrow(/unknown address type: nope/);
    expect(() => parseFlags(agentFlags, ['--agent-identifiers=host=a;b'])).toThrow(/semicolon/);
    expect(() => parseFlags(agentFlags, ['--proxy-server-port=0'])).toThrow(/--proxy-server-port/);
    expect(() => parseFlags(agentFlags, ['--ca-cert=/nonexistent/ca.crt'])).toThrow(/--ca-cert.*does not exist/);
    expect(() => parseFlags(agentFlags, ['--keepalive-time=10s'])).toThrow(/--keepalive-time/);
    const ok = parseFlags(agentFlags, ['--agent-identifiers=host=cluster1&host=cluster1.ns&ipv4=1.2.3.4&default-route=true']).values;
    expect(validateAgentOptions(ok)).toBeUndefined();
    expect(validateAgentOptions({ ...ok, syncInterval: 20_000 })).toMatch(/sync interval/);
    expect(parseFlags(agentFlags, [], { PROXY_AGENT_ID: 'from-env' }).values.agentID).toBe('from-env');
  });
});
