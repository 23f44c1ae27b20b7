import { describe, expect, it } from 'vitest';
import { decodeMessage, type DnsRecord, encodeMessage } from './dns2.js';
import { encodeQuery, TYPE } from './wire.js';

const record = (type: number, fields: object): DnsRecord => ({ name: 'x.test', type, class: 1, ttl: 30, ...fields });

describe('dns2 seam', () => {
  it('decodes each record into the shape of its type, and encodes them back', () => {
    const answers = [
      record(TYPE.CNAME, { domain: 'y.test' }),
      record(TYPE.A, { address: '10.0.0.1' }),
      record(TYPE.AAAA, { address: 'fd00::1' }),
      record(TYPE.TXT, { data: ['hello'] }),
      record(TYPE.HTTPS, { data: Buffer.from('0001000001000302683200', 'hex') }),
    ];
    const soa = record(TYPE.SOA, {
      primary: 'ns.test',
      admin: 'hostmaster.test',
      serial: 7,
      refresh: 1,
      retry: 2,
      expiration: 3,
      minimum: 4,
    });
    const bytes = encodeMessage({
      header: { id: 42, qr: 1, rd: 1, ra: 1 },
      questions: [{ name: 'x.test', type: TYPE.A, class: 1 }],
      answers,
      authorities: [soa],
      additionals: [{ name: '', type: TYPE.OPT, class: 1232, ttl: 0 }],
    });
    const m = decodeMessage(bytes);
    expect(m.header).toMatchObject({ id: 42, qr: 1, rd: 1, ra: 1, aa: 0, ad: 0, cd: 0, ancount: 5, nscount: 1 });
    expect(m.questions).toEqual([{ name: 'x.test', type: TYPE.A, class: 1 }]);
    expect(m.answers).toEqual(answers);
    expect(m.authorities).toEqual([soa]);
    expect(m.additionals).toEqual([{ name: '', type: TYPE.OPT, class: 1232, ttl: 0 }]);
  });

  it('reads the AD and CD bits', () => {
    const query = encodeQuery('x.test', TYPE.A);
    query[3]! |= 0x30; // AD, CD
    expect(decodeMessage(query).header).toMatchObject({ ad: 1, cd: 1, qr: 0 });
  });
});
