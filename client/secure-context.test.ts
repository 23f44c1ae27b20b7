import { describe, expect, it } from 'vitest';
import { createCa } from '../hub/ephemeral-pki.js';
import { DialError, dialThroughProxy } from './dial.js';
import { secureContextFor } from './secure-context.js';

describe('the TLS material of a dial, parsed once', () => {
  const ca = createCa('test ca');
  const client = ca.issue('client', { client: true });

  it('hands out one context for the same material, as text or as bytes', () => {
    const context = secureContextFor({ ca: ca.cert, cert: client.cert, key: client.key });
    expect(secureContextFor({ ca: ca.cert, cert: client.cert, key: client.key })).toBe(context);
    expect(
      secureContextFor({ ca: Buffer.from(ca.cert), cert: Buffer.from(client.cert), key: Buffer.from(client.key) }),
    ).toBe(context);
  });

  it('builds a new one for rotated material', () => {
    const rotated = ca.issue('client', { client: true });
    expect(secureContextFor({ ca: ca.cert, cert: rotated.cert, key: rotated.key })).not.toBe(
      secureContextFor({ ca: ca.cert, cert: client.cert, key: client.key }),
    );
  });

  it('a key that does not parse fails the dial with a DialError before any connection', async () => {
    const dial = dialThroughProxy({
      mode: 'http-connect',
      proxyHost: '127.0.0.1',
      proxyPort: 1,
      address: '127.0.0.1:1',
      ca: ca.cert,
      cert: client.cert,
      key: 'not a key',
    });
    await expect(dial).rejects.toBeInstanceOf(DialError);
    await expect(dial).rejects.toThrow(/^TLS credentials for the proxy-server: /);
  });
});
