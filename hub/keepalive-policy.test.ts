import { describe, expect, it } from 'vitest';
import { agentPortPolicy, defaultPolicy, PingStrikes } from './keepalive-policy.js';

describe('PingStrikes (grpc-go handlePing)', () => {
  it('allows pings 30 s apart on the agent port, idle or not', () => {
    const s = new PingStrikes(agentPortPolicy);
    for (let t = 0; t < 10; t++) expect(s.ping(t * 30_000, 0)).toBe(false);
  });

  it('goes away on the third ping that comes too soon', () => {
    const s = new PingStrikes(agentPortPolicy);
    expect(s.ping(0, 1)).toBe(false);
    expect(s.ping(1000, 1)).toBe(false);
    expect(s.ping(2000, 1)).toBe(false);
    expect(s.ping(3000, 1)).toBe(true);
  });

  it('forgives strikes once the server has written to the client', () => {
    const s = new PingStrikes(agentPortPolicy);
    s.ping(0, 1);
    s.ping(1000, 1);
    s.ping(2000, 1);
    s.wrote();
    expect(s.ping(3000, 1)).toBe(false);
    expect(s.ping(4000, 1)).toBe(false);
  });

  it('holds idle connections to two hours without PermitWithoutStream', () => {
    const s = new PingStrikes(defaultPolicy);
    s.ping(0, 0);
    s.ping(10 * 60_000, 0);
    s.ping(20 * 60_000, 0);
    expect(s.ping(30 * 60_000, 0)).toBe(true);
  });
});
