// The few DER (ITU-T X.690) encodings an X.509 certificate needs, for hub/ephemeral-pki.ts. Encoding
// only: certificates are read back with Node's X509Certificate.

/** A tag and its contents, with the definite length DER requires (short form below 128 bytes). */
function tlv(tag: number, ...contents: Uint8Array[]): Buffer {
  const body = Buffer.concat(contents);
  const n = body.length;
  if (n < 0x80) return Buffer.concat([Buffer.from([tag, n]), body]);
  const length: number[] = [];
  for (let rest = n; rest > 0; rest = Math.floor(rest / 256)) length.unshift(rest % 256);
  return Buffer.concat([Buffer.from([tag, 0x80 | length.length, ...length]), body]);
}

export const sequence = (...items: Uint8Array[]) => tlv(0x30, ...items);
export const set = (...items: Uint8Array[]) => tlv(0x31, ...items);
export const boolean = (value: boolean) => tlv(0x01, Buffer.from([value ? 0xff : 0x00]));
export const octetString = (bytes: Uint8Array) => tlv(0x04, bytes);
export const utf8String = (text: string) => tlv(0x0c, Buffer.from(text, 'utf8'));
/** Context-specific tag `n`, constructed (EXPLICIT wrapping of another encoding). */
export const explicit = (n: number, inner: Uint8Array) => tlv(0xa0 | n, inner);
/** Context-specific tag `n`, primitive (IMPLICIT tagging of a primitive value's contents). */
export const implicit = (n: number, contents: Uint8Array) => tlv(0x80 | n, contents);

/** A non-negative INTEGER from its big-endian magnitude, in the minimal two's-complement form DER requires. */
export function unsignedInteger(magnitude: Uint8Array): Buffer {
  let start = 0;
  while (start < magnitude.length - 1 && magnitude[start] === 0) start++;
  const bytes = magnitude.subarray(start);
  return tlv(0x02, bytes[0]! & 0x80 ? Buffer.concat([Buffer.from([0]), bytes]) : bytes);
}

/** A BIT STRING whose last `unusedBits` bits are padding. */
export const bitString = (bytes: Uint8Array, unusedBits = 0) => tlv(0x03, Buffer.from([unusedBits]), bytes);

/** An OBJECT IDENTIFIER from its dotted form. */
export function objectIdentifier(dotted: string): Buffer {
  const [first = 0, second = 0, ...rest] = dotted.split('.').map(Number);
  const bytes: number[] = [];
  for (const arc of [first * 40 + second, ...rest]) {
    const base128 = [arc & 0x7f];
    for (let v = Math.floor(arc / 128); v > 0; v = Math.floor(v / 128)) base128.unshift(0x80 | (v & 0x7f));
    bytes.push(...base128);
  }
  return tlv(0x06, Buffer.from(bytes));
}

/** A certificate validity time: UTCTime through 2049, GeneralizedTime after (RFC 5280 4.1.2.5). */
export function time(date: Date): Buffer {
  const digits = date
    .toISOString()
    .replace(/\.\d+Z$/, 'Z')
    .replace(/[-:T]/g, '');
  return date.getUTCFullYear() < 2050 ? tlv(0x17, Buffer.from(digits.slice(2))) : tlv(0x18, Buffer.from(digits));
}
