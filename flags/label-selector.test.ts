import { describe, expect, it } from 'vitest';
import { selectorMatches } from '../test/support/fake-apiserver.js';
import { parseLabelSelector } from './label-selector.js';

const matches = (selector: string, labels: Record<string, string>) => {
  const r = parseLabelSelector(selector);
  if (typeof r === 'string') throw new Error(r);
  return selectorMatches(r, labels);
};

describe('label selectors (apimachinery labels.Parse)', () => {
  it('parses every operator, with spaces where Kubernetes allows them', () => {
    expect(
      parseLabelSelector(
        'k8s-app=konnectivity-server, tier==hub,env != dev,zone in (a, b),stage notin (canary),example.com/owned,!legacy,gen>2,rank<10',
      ),
    ).toEqual([
      { key: 'k8s-app', operator: '=', values: ['konnectivity-server'] },
      { key: 'tier', operator: '==', values: ['hub'] },
      { key: 'env', operator: '!=', values: ['dev'] },
      { key: 'zone', operator: 'in', values: ['a', 'b'] },
      { key: 'stage', operator: 'notin', values: ['canary'] },
      { key: 'example.com/owned', operator: 'exists', values: [] },
      { key: 'legacy', operator: '!', values: [] },
      { key: 'gen', operator: 'gt', values: ['2'] },
      { key: 'rank', operator: 'lt', values: ['10'] },
    ]);
    expect(parseLabelSelector('')).toEqual([]);
    expect(parseLabelSelector('a=')).toEqual([{ key: 'a', operator: '=', values: [''] }]);
  });

  it.each([
    ['*notavalidlabel*', /key "\*notavalidlabel\*"/],
    ['a=b,', /empty requirement/],
    ['a in (b', /unbalanced parentheses/],
    ['a in ()', /needs at least one value/],
    ['a=b=c', /a value has no/],
    ['a>b', /needs an integer/],
    ['Example.com/a=b', /prefix must be a DNS subdomain/],
    [`${'x'.repeat(64)}=b`, /1-63 characters/],
    ['a=-b', /value "-b"/],
    ['a b', /is not a requirement/],
  ])('refuses %s, saying why', (selector, why) => {
    const r = parseLabelSelector(selector);
    expect(typeof r).toBe('string');
    expect(r).toMatch(why);
  });

  it('matches as the API server filters', () => {
    const lease = { 'k8s-app': 'konnectivity-server', zone: 'a' };
    expect(matches('k8s-app=konnectivity-server', lease)).toBe(true);
    expect(matches('zone in (a,b),!canary', lease)).toBe(true);
    expect(matches('zone notin (a)', lease)).toBe(false);
    expect(matches('zone notin (a)', {})).toBe(true);
    expect(matches('zone!=b', lease)).toBe(true);
    expect(matches('k8s-app', {})).toBe(false);
    expect(matches('gen>2', { gen: '3' })).toBe(true);
    expect(matches('gen>2', { gen: 'x' })).toBe(false);
  });
});
