import { describe, expect, it } from 'vitest';
import { ServerCount } from './server-count.js';

describe('the server count', () => {
  it('without Leases: the last header, 1 before any', () => {
    const c = new ServerCount({ countLeases: false, source: 'default' });
    expect(c.value).toBe(1);
    c.fromHeader(3);
    expect([c.value, c.origin]).toEqual([3, 'header']);
    c.fromLeases(5); // not counting: ignored
    expect(c.value).toBe(3);
  });

  it('default: the Leases alone once they are known; the header until then', () => {
    const c = new ServerCount({ countLeases: true, source: 'default' });
    c.fromHeader(1);
    expect([c.value, c.origin]).toEqual([1, 'header']);
    c.fromLeases(3);
    expect([c.value, c.origin]).toEqual([3, 'leases']);
    c.fromHeader(5);
    expect(c.value).toBe(3);
    c.fromLeases(undefined);
    expect(c.value).toBe(5);
  });

  it('max: the larger of the Leases and the header', () => {
    const c = new ServerCount({ countLeases: true, source: 'max' });
    c.fromHeader(5);
    c.fromLeases(3);
    expect([c.value, c.origin]).toEqual([5, 'header']);
    c.fromLeases(6);
    expect([c.value, c.origin]).toEqual([6, 'leases']);
  });
});
