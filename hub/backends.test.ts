import { describe, expect, it } from 'vitest';
import { Backends, type Backend } from './backends.js';
import { parseAgentIdentifiers, removePortFromHost } from './identifiers.js';

const agent = (agentID: string, ids = '', draining = false): Backend => ({
  agentID,
  identifiers: parseAgentIdentifiers(ids),
  draining,
});

describe('parseAgentIdentifiers', () => {
  it('accumulates repeated keys and ignores unknown ones', () => {
    expect(
      parseAgentIdentifiers(
        'host=localhost&host=node1.mydomain.com&cidr=127.0.0.1/16&ipv4=1.2.3.4&ipv6=:::::&default-route=true&color=blue',
      ),
    ).toEqual({
      host: ['localhost', 'node1.mydomain.com'],
      cidr: ['127.0.0.1/16'],
      ipv4: ['1.2.3.4'],
      ipv6: [':::::'],
      defaultRoute: true,
    });
  });
  it('reads default-route with strconv.ParseBool, first value only', () => {
    expect(parseAgentIdentifiers('default-route=T').defaultRoute).toBe(true);
    expect(parseAgentIdentifiers('default-route=yes').defaultRoute).toBe(false);
    expect(parseAgentIdentifiers('default-route=false&default-route=true').defaultRoute).toBe(false);
  });
  it('unescapes like url.ParseQuery and rejects what it rejects', () => {
    expect(parseAgentIdentifiers('host=a%2Eb+c').host).toEqual(['a.b c']);
    expect(() => parseAgentIdentifiers('host=%zz')).toThrow(
      'fail to parse url encoded string: invalid URL escape "%zz"',
    );
    expect(() => parseAgentIdentifiers('host=a;host=b')).toThrow('invalid semicolon separator in query');
  });
});

describe('removePortFromHost', () => {
  it.each([
    ['example.com:443', 'example.com'],
    ['example.com', 'example.com'],
    ['10.0.0.1:80', '10.0.0.1'],
    ['[fd00::1]:443', 'fd00::1'],
    ['fd00::1', 'fd00::1'],
    // Go's quirk: a bracketed address without port loses its last group.
    ['[::1]', ':'],
  ])('%s -> %s', (input, host) => expect(removePortFromHost(input)).toBe(host));
});

describe('Backends', () => {
  it('default: nothing connected means no agent', () => {
    expect(new Backends(['default']).pick('a:1')).toBeUndefined();
  });

  it('default: a random agent, skipping draining ones while others exist', () => {
    const a = agent('a', '', true);
    const b = agent('b');
    const c = agent('c', '', true);
    for (const r of [0, 0.4, 0.9]) {
      const bs = new Backends<Backend>(['default'], () => r);
      for (const x of [a, b, c]) bs.add(x);
      expect(bs.pick('x:1')).toBe(b);
    }
  });

  it('default: draining agents are used only when nothing else is left', () => {
    const a = agent('a', '', true);
    const bs = new Backends<Backend>(['default'], () => 0);
    bs.add(a);
    expect(bs.pick('x:1')).toBe(a);
    bs.remove(a);
    expect(bs.pick('x:1')).toBeUndefined();
  });

  it('default: the random start walks the agents in order', () => {
    const [a, b, c] = ['a', 'b', 'c'].map((id) => agent(id));
    const bs = new Backends<Backend>(['default'], () => 0.5);
    for (const x of [a, b, c]) bs.add(x!);
    expect(bs.pick('x:1')).toBe(b);
  });

  it('default: two streams of one agent prefer the first', () => {
    const first = agent('a');
    const second = agent('a');
    const bs = new Backends<Backend>(['default'], () => 0);
    bs.add(first);
    bs.add(second);
    expect(bs.pick('x:1')).toBe(first);
    bs.remove(first);
    expect(bs.pick('x:1')).toBe(second);
  });

  it('destHost: exact, case-sensitive match of the host without port; NotFound falls through', () => {
    const web = agent('web', 'host=web.svc&ipv4=10.0.0.5&ipv6=fd00::5');
    const bs = new Backends<Backend>(['destHost']);
    bs.add(web);
    expect(bs.pick('web.svc:443')).toBe(web);
    expect(bs.pick('10.0.0.5:80')).toBe(web);
    expect(bs.pick('[fd00::5]:80')).toBe(web);
    expect(bs.pick('WEB.svc:443')).toBeUndefined();
    expect(bs.pick('x.web.svc:443')).toBeUndefined();
    expect(bs.pick('web:443')).toBeUndefined();
  });

  it('destHost: first non-draining in registration order, not random', () => {
    const one = agent('one', 'host=h');
    const two = agent('two', 'host=h');
    const three = agent('three', 'host=h');
    const bs = new Backends<Backend>(['destHost'], () => 0.99);
    for (const x of [one, two, three]) bs.add(x);
    expect(bs.pick('h:1')).toBe(one);
    (one as { draining: boolean }).draining = true;
    expect(bs.pick('h:1')).toBe(two);
    (two as { draining: boolean }).draining = true;
    (three as { draining: boolean }).draining = true;
    expect(bs.pick('h:1')).toBe(one);
  });

  it('strategies are tried in order: destHost, then defaultRoute, then default', () => {
    const hosted = agent('hosted', 'host=db');
    const router = agent('router', 'default-route=true');
    const plain = agent('plain');
    const all = new Backends<Backend>(['destHost', 'defaultRoute', 'default'], () => 0);
    for (const x of [plain, hosted, router]) all.add(x);
    expect(all.pick('db:5432')).toBe(hosted);
    expect(all.pick('elsewhere:80')).toBe(router);
    all.remove(router);
    expect(all.pick('elsewhere:80')).toBe(plain);

    const strict = new Backends<Backend>(['destHost', 'defaultRoute']);
    strict.add(plain);
    expect(strict.pick('elsewhere:80')).toBeUndefined();
  });

  it('readiness follows the first strategy only', () => {
    const bs = new Backends<Backend>(['destHost', 'default']);
    bs.add(agent('plain'));
    expect(bs.ready).toBe(false);
    bs.add(agent('h', 'host=x'));
    expect(bs.ready).toBe(true);
  });
});
