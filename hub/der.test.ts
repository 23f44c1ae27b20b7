import { describe, expect, it } from 'vitest';
import { bitString, objectIdentifier, octetString, time, unsignedInteger } from './der.js';

const hex = (b: Buffer) => b.toString('hex');

describe('DER', () => {
  it('encodes object identifiers in base 128, the first two arcs in one', () => {
    expect(hex(objectIdentifier('1.2.840.10045.4.3.2'))).toBe('06082a8648ce3d040302');
    expect(hex(objectIdentifier('2.5.29.37'))).toBe('0603551d25');
  });

  it('writes lengths from 128 bytes on in the long form', () => {
    expect(hex(octetString(Buffer.alloc(127))).slice(0, 4)).toBe('047f');
    expect(hex(octetString(Buffer.alloc(128))).slice(0, 6)).toBe('048180');
    expect(hex(octetString(Buffer.alloc(300))).slice(0, 8)).toBe('0482012c');
  });

  it('writes non-negative integers minimally: no leading zeros, one where the top bit is set', () => {
    expect(hex(unsignedInteger(Buffer.from([0, 0, 0x7f])))).toBe('02017f');
    expect(hex(unsignedInteger(Buffer.from([0x80])))).toBe('02020080');
    expect(hex(unsignedInteger(Buffer.from([0])))).toBe('020100');
    expect(hex(bitString(Buffer.from([0x80]), 7))).toBe('03020780');
  });

  it('writes UTCTime through 2049 and GeneralizedTime from 2050 (RFC 5280 4.1.2.5)', () => {
    expect(time(new Date('2049-12-31T23:59:59.999Z')).toString('latin1')).toBe('\x17\x0d491231235959Z');
    expect(time(new Date('2050-01-01T00:00:00Z')).toString('latin1')).toBe('\x18\x0f20500101000000Z');
  });
});
