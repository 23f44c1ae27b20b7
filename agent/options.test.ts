import { describe, expect, it } from 'vitest';
import { parseFlags } from '../flags/flags.js';
import { agentFlags, validateAgentOptions } from './options.js';

describe('agent flags', () => {
  it('keep the Go agent defaults', () => {
    const { values } = parseFlags(agentFlags, []);
    expect(values).toMatchObject({
      proxyServerHost: ['127.0.0.1'],
      proxyServerPort: 8091,
      syncInterval: 1000,
      syncIntervalCap: 10_000,
      probeInterval: 1000,
      healthServerPort: 8093,
      adminServerPort: 8094,
      xfrChannelSize: 150,
      dialTimeout: 5000,
    });
  });
  it('validate like the Go agent', () => {
    expect(() => parseFlags(agentFlags, ['--agent-identifiers=host=a&nope=b'])).toThrow(/unknown address type: nope/);
    expect(() => parseFlags(agentFlags, ['--agent-identifiers=host=a;b'])).toThrow(/semicolon/);
    expect(() => parseFlags(agentFlags, ['--proxy-server-port=0'])).toThrow(/--proxy-server-port/);
    expect(() => parseFlags(agentFlags, ['--ca-cert=/nonexistent/ca.crt'])).toThrow(/--ca-cert.*does not exist/);
    expect(() => parseFlags(agentFlags, ['--keepalive-time=10s'])).toThrow(/--keepalive-time/);
    const ok = parseFlags(agentFlags, [
      '--agent-identifiers=host=cluster1&host=cluster1.ns&ipv4=1.2.3.4&default-route=true',
    ]).values;
    expect(validateAgentOptions(ok)).toBeUndefined();
    expect(validateAgentOptions({ ...ok, syncInterval: 20_000 })).toMatch(/sync interval/);
    expect(parseFlags(agentFlags, [], { PROXY_AGENT_ID: 'from-env' }).values.agentID).toBe('from-env');
  });
  it("take klog's flags as the Go binary does, and refuse klog's log files, which would be lost", () => {
    const { values } = parseFlags(agentFlags, [
      '--vmodule=agent=5',
      '--skip-headers',
      '--log-file=/var/log/a.log',
      '-v=2',
    ]);
    expect(values.v).toBe(2);
    expect(() => parseFlags(agentFlags, ['--logtostderr=false'])).toThrow(
      /"--logtostderr": spoke-agent writes its logs to standard output only/,
    );
  });
});
