// CIDR matching (cidr.ts) and the address bytes under it (ip.ts).
import { describe, expect, it } from 'vitest';
import { type Cidr, cidrContains, parseCidr } from './cidr.js';
import { ipBytes } from './ip.js';

const cidr = (text: string): Cidr => {
  const c = parseCidr(text);
  if (typeof c === 'string') throw new Error(c);
  return c;
};

describe('CIDR matching', () => {
  it('parses IPv4 and IPv6, with embedded and mapped IPv4', () => {
    expect([...ipBytes('10.1.2.3')!]).toEqual([10, 1, 2, 3]);
    expect([...ipBytes('::ffff:10.1.2.3')!]).toEqual([10, 1, 2, 3]);
    expect([...ipBytes('::ffff:a01:203')!]).toEqual([10, 1, 2, 3]);
    expect([...ipBytes('fd00::1')!]).toEqual([0xfd, 0, ...new Array(13).fill(0), 1]);
    expect([...ipBytes('64:ff9b::192.0.2.33')!].slice(12)).toEqual([192, 0, 2, 33]);
    expect(ipBytes('fe80::1%eth0')).toHaveLength(16);
    expect(ipBytes('nope')).toBeUndefined();
  });

  it('matches prefixes on and off byte boundaries', () => {
    expect(cidrContains(cidr('10.0.0.0/8'), '10.255.0.1')).toBe(true);
    expect(cidrContains(cidr('10.0.0.0/8'), '11.0.0.1')).toBe(false);
    expect(cidrContains(cidr('172.16.0.0/12'), '172.31.255.255')).toBe(true);
    expect(cidrContains(cidr('172.16.0.0/12'), '172.32.0.0')).toBe(false);
    expect(cidrContains(cidr('0.0.0.0/0'), '169.254.169.254')).toBe(true);
    expect(cidrContains(cidr('10.0.0.5'), '10.0.0.5')).toBe(true);
    expect(cidrContains(cidr('10.0.0.5'), '10.0.0.6')).toBe(false);
    expect(cidrContains(cidr('fd00::/8'), 'fdab::1')).toBe(true);
    expect(cidrContains(cidr('fd00::/8'), 'fe80::1')).toBe(false);
    expect(cidrContains(cidr('2001:db8::/33'), '2001:db8:7fff::1')).toBe(true);
    expect(cidrContains(cidr('2001:db8::/33'), '2001:db8:8000::1')).toBe(false);
    // IPv4-mapped IPv6 is the IPv4 address, both ways
    expect(cidrContains(cidr('10.0.0.0/8'), '::ffff:10.0.0.1')).toBe(true);
    expect(cidrContains(cidr('::ffff:10.0.0.0/104'), '10.0.0.1')).toBe(true);
    // families never mix otherwise
    expect(cidrContains(cidr('::/0'), '10.0.0.1')).toBe(false);
    expect(cidrContains(cidr('0.0.0.0/0'), 'fd00::1')).toBe(false);
  });

  it('rejects malformed CIDRs with a message', () => {
    expect(parseCidr('10.0.0.0/33')).toMatch(/invalid prefix length/);
    expect(parseCidr('10.0.0/8')).toMatch(/is not a CIDR/);
    expect(parseCidr('fd00::/129')).toMatch(/invalid prefix length/);
    expect(parseCidr('10.0.0.0/x')).toMatch(/invalid prefix length/);
  });
});
