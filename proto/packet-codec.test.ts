import { describe, expect, it } from 'vitest';
import { AgentService, PacketType, type OutPacket, type Packet } from './packets.js';
import { decodePacket, encodeDataFrame, encodeFrame } from './packet-codec.js';
import { seededRandom } from '../test/support/seeded-random.js';
import { grpcPrefixBytes } from './grpc-framing.js';

// protobufjs, as proto-loader configures it for the agent, is the oracle.
const connect = AgentService.service.Connect!;
const serialize = (p: OutPacket): Buffer => connect.requestSerialize(p) as Buffer;
const deserialize = (bytes: Buffer): Packet => connect.responseDeserialize(bytes) as Packet;

const int64s = [
  '0',
  '1',
  '127',
  '128',
  '300',
  '2147483648',
  '4294967296',
  '9007199254740993',
  '9223372036854775807',
  '-1',
  '-9223372036854775808',
];
const strings = ['', 'tcp', '127.0.0.1:8080', 'dial tcp: lookup héllo.svc → 世界 🙂 failed', 'x'.repeat(200)];
const payloads = [0, 1, 127, 128, 65536, 262144].map((size) => Buffer.alloc(size, size & 0xff));

function outPackets(): OutPacket[] {
  const out: OutPacket[] = [{ type: PacketType.DRAIN, drain: {} }];
  for (const n of int64s) {
    out.push(
      { type: PacketType.DIAL_REQ, dialRequest: { protocol: 'tcp', address: '10.0.0.1:443', random: n } },
      { type: PacketType.DIAL_RSP, dialResponse: { random: n, connectID: n } },
      { type: PacketType.DIAL_RSP, dialResponse: { random: n, error: 'connection refused' } },
      { type: PacketType.CLOSE_REQ, closeRequest: { connectID: n } },
      { type: PacketType.CLOSE_RSP, closeResponse: { connectID: n } },
      { type: PacketType.DIAL_CLS, closeDial: { random: n } },
      { type: PacketType.DATA, data: { connectID: n, data: payloads[1]! } },
    );
  }
  for (const s of strings) {
    out.push(
      { type: PacketType.DIAL_REQ, dialRequest: { protocol: s, address: s, random: '5' } },
      { type: PacketType.DIAL_RSP, dialResponse: { random: '5', connectID: '6', error: s } },
      { type: PacketType.CLOSE_RSP, closeResponse: { connectID: '7', error: s } },
      { type: PacketType.DATA, data: { connectID: '8', error: s, data: payloads[2]! } },
    );
  }
  for (const data of payloads) out.push({ type: PacketType.DATA, data: { connectID: '9007199254740993', data } });
  return out;
}

// Buffer.toJSON runs before a replacer would, so the payload is swapped out first.
const label = (p: OutPacket): string =>
  JSON.stringify(
    p.type === PacketType.DATA ? { ...p, data: { ...p.data, data: `<${p.data.data.length} bytes>` } } : p,
  ).slice(0, 160);

function expectFrame(frame: Buffer, body: Buffer): void {
  expect(frame.length).toBe(grpcPrefixBytes + body.length);
  expect(frame[0]).toBe(0);
  expect(frame.readUInt32BE(1)).toBe(body.length);
  expect(frame.subarray(grpcPrefixBytes).equals(body)).toBe(true);
}

/** toEqual, with DATA payloads compared as bytes (element-wise comparison of 256 KiB is slow). */
function expectSamePacket(ours: Packet, theirs: Packet, what: string): void {
  if (ours.data && theirs.data) {
    expect(ours.data.data.equals(theirs.data.data), what).toBe(true);
    expect({ ...ours, data: { ...ours.data, data: null } }, what).toEqual({
      ...theirs,
      data: { ...theirs.data, data: null },
    });
  } else expect(ours, what).toEqual(theirs);
}

/** A length-delimited field with a short (one-byte-length) body. */
const lenField = (number: number, body: Buffer): Buffer =>
  Buffer.concat([Buffer.from([(number << 3) | 2, body.length]), body]);

/** Ours must throw, or agree with protobufjs (which is laxer, so it may accept what we refuse). */
function expectThrowsOrAgrees(bytes: Buffer): 'threw' | 'agreed' {
  let ours: Packet;
  try {
    ours = decodePacket(bytes);
  } catch (err) {
    expect(err).toBeInstanceOf(Error);
    return 'threw';
  }
  const theirs = deserialize(bytes);
  // protobufjs keeps every oneof member it saw; we keep the last, as Go does.
  const members = ['dialRequest', 'dialResponse', 'data', 'closeRequest', 'closeResponse', 'closeDial', 'drain'].filter(
    (m) => m in theirs,
  );
  if (members.length <= 1) expect(ours, bytes.toString('hex')).toEqual(theirs);
  return 'agreed';
}

/** The protobuf bytes of a packet: the frame without its gRPC prefix. */
const encodePacket = (p: OutPacket): Buffer => encodeFrame(p).subarray(grpcPrefixBytes);

describe('encodeFrame', () => {
  it('writes the bytes protobufjs writes, for every packet kind and edge value, and frames them with the gRPC prefix', () => {
    for (const p of outPackets()) {
      const reference = serialize(p);
      expectFrame(encodeFrame(p), reference);
    }
  });

  it('wraps int64 strings beyond the range modulo 2^64, as protobufjs does, and refuses what is not a decimal integer', () => {
    for (const connectID of [
      '18446744073709551615',
      '18446744073709551616',
      '-9223372036854775809',
      '99999999999999999999999',
      '007',
      '-0',
    ]) {
      const p: OutPacket = { type: PacketType.CLOSE_REQ, closeRequest: { connectID } };
      expect(encodePacket(p).equals(serialize(p)), connectID).toBe(true);
    }
    // protobufjs reads 'abc' as 0 and '1e3' as 1; a bad ID is our bug, better loud.
    for (const connectID of ['', '-', 'abc', '1e3', ' 5', '+5', '12a']) {
      expect(() => encodePacket({ type: PacketType.CLOSE_REQ, closeRequest: { connectID } }), connectID).toThrow(
        /invalid int64/,
      );
    }
  });

  it('writes DRAIN as an empty but present member', () => {
    expect(encodePacket({ type: PacketType.DRAIN, drain: {} }).toString('hex')).toBe('08064200');
  });
});

describe('encodeDataFrame', () => {
  it('is byte-identical to protobufjs for every size class and connectID range', () => {
    for (const connectID of int64s) {
      for (const payload of payloads) {
        const reference = serialize({ type: PacketType.DATA, data: { connectID, data: payload } });
        expectFrame(encodeDataFrame(BigInt(connectID), payload), reference);
      }
    }
  });

  it('takes a plain Uint8Array view and copies it', () => {
    const backing = new Uint8Array([9, 1, 2, 3, 9]);
    const frame = encodeDataFrame(7n, backing.subarray(1, 4));
    backing.fill(0);
    expect(decodePacket(frame.subarray(grpcPrefixBytes)).data?.data).toEqual(Buffer.from([1, 2, 3]));
  });
});

describe('decodePacket', () => {
  it('gives what protobufjs gives (proto3 defaults filled) for every packet protobufjs writes', () => {
    for (const p of outPackets()) {
      const bytes = serialize(p);
      expectSamePacket(decodePacket(bytes), deserialize(bytes), label(p));
    }
  });

  it('decodes a packet without payload, an empty message, and the extremes of the type field', () => {
    for (const hex of ['', '0801', '08ffffffffffffffffff01', '08ffffffff0f', '087f']) {
      const bytes = Buffer.from(hex, 'hex');
      expect(decodePacket(bytes), hex).toEqual(deserialize(bytes));
    }
    expect(decodePacket(Buffer.alloc(0))).toEqual({ type: 0 });
  });

  it('reads a Uint8Array view at an offset, and its DATA payload outlives the input', () => {
    const bytes = encodePacket({ type: PacketType.DATA, data: { connectID: '3', data: Buffer.from('hello') } });
    const backing = new Uint8Array(bytes.length + 4);
    backing.set(bytes, 2);
    const packet = decodePacket(backing.subarray(2, 2 + bytes.length));
    backing.fill(0);
    expect(packet).toEqual({
      type: PacketType.DATA,
      payload: 'data',
      data: { connectID: '3', error: '', data: Buffer.from('hello') },
    });
  });

  it('skips unknown fields of every wire type, at the top level and inside the member', () => {
    const unknown = Buffer.concat([
      Buffer.from('789601', 'hex'), // field 15, varint
      Buffer.from('710102030405060708', 'hex'), // field 14, fixed64
      lenField(13, Buffer.from('abc')), // field 13, bytes
      Buffer.from('6501020304', 'hex'), // field 12, fixed32
      Buffer.from('c03e01', 'hex'), // field 1000, varint (a two-byte tag)
    ]);
    const inner = Buffer.concat([
      unknown,
      Buffer.from('0801', 'hex'),
      unknown,
      Buffer.from('1a03', 'hex'),
      Buffer.from('xyz'),
      unknown,
    ]);
    const bytes = Buffer.concat([unknown, Buffer.from('0804', 'hex'), unknown, lenField(4, inner), unknown]);
    expect(decodePacket(bytes)).toEqual(deserialize(bytes));
    expect(decodePacket(bytes)).toEqual({
      type: PacketType.DATA,
      payload: 'data',
      data: { connectID: '1', error: '', data: Buffer.from('xyz') },
    });
    // And inside the empty Drain.
    expect(decodePacket(Buffer.concat([Buffer.from('0806', 'hex'), lenField(8, unknown)]))).toEqual({
      type: PacketType.DRAIN,
      payload: 'drain',
      drain: {},
    });
  });

  it('keeps the last occurrence of a oneof member, replacing (not merging) a repeated one', () => {
    const dial = serialize({
      type: PacketType.DIAL_REQ,
      dialRequest: { protocol: 'tcp', address: 'a:1', random: '1' },
    });
    const close = serialize({ type: PacketType.CLOSE_REQ, closeRequest: { connectID: '2' } });
    expect(decodePacket(Buffer.concat([dial, close]))).toEqual({
      type: PacketType.CLOSE_REQ,
      payload: 'closeRequest',
      closeRequest: { connectID: '2' },
    });
    expect(decodePacket(Buffer.concat([close, dial]))).toEqual({
      type: PacketType.DIAL_REQ,
      payload: 'dialRequest',
      dialRequest: { protocol: 'tcp', address: 'a:1', random: '1' },
    });
    const again = Buffer.concat([dial, lenField(2, Buffer.from('1809', 'hex'))]);
    expect(decodePacket(again)).toEqual(deserialize(again));
    expect(decodePacket(again).dialRequest).toEqual({ protocol: '', address: '', random: '9' });
  });

  it('throws on every truncation that cuts a field', () => {
    const accepted: string[] = [];
    for (const p of outPackets().filter((q) => !(q.type === PacketType.DATA && q.data.data.length > 1000))) {
      const bytes = serialize(p);
      // Cutting right after the two-byte type field leaves a valid packet without payload.
      expect(decodePacket(bytes.subarray(0, 2))).toEqual({ type: p.type });
      for (let cut = 1; cut < bytes.length; cut++) {
        if (cut === 2) continue;
        try {
          decodePacket(bytes.subarray(0, cut));
          accepted.push(`${label(p)} cut at ${cut}`);
        } catch (err) {
          expect(err).toBeInstanceOf(Error);
        }
      }
    }
    expect(accepted).toEqual([]);
  });

  it('throws a clear error on malformed input', () => {
    const cases: Array<[string, RegExp]> = [
      ['0a00', /type has wire type 2/], // type as bytes
      ['1001', /dialRequest has wire type 0/], // a member as a varint
      ['12020801', /dialRequest.protocol has wire type 0/],
      ['12031a0100', /dialRequest.random has wire type 2/],
      ['7b', /invalid wire type 3/],
      ['7c', /invalid wire type 4/],
      ['7e', /invalid wire type 6/],
      ['7f', /invalid wire type 7/],
      ['7100000000', /truncated fixed-size field/],
      ['65000000', /truncated fixed-size field/],
      ['22050801', /length 5 .* runs past the end/],
      ['22ffffffff0f', /length 4294967295 .* runs past the end/],
      ['22ffffffffff01', /length too large/],
      ['08ffffffffffffffffffff01', /varint longer than 10 bytes/],
      ['0880', /truncated varint/],
      ['2204' + '1a05' + '0000' + '000000', /runs past its message/], // a bytes field longer than its member
      ['2203' + '08ffff', /truncated varint|runs past its message/],
      ['0000', /field number 0/],
    ];
    for (const [hex, message] of cases) expect(() => decodePacket(Buffer.from(hex, 'hex')), hex).toThrow(message);
  });

  it('never hangs or returns what protobufjs would not, on random garbage and mutated packets (fixed seed)', () => {
    const next = seededRandom(0x5eed);
    let threw = 0;
    for (let i = 0; i < 3000; i++) {
      const garbage = Buffer.alloc(Math.floor(next() * 48));
      for (let j = 0; j < garbage.length; j++) garbage[j] = Math.floor(next() * 256);
      if (expectThrowsOrAgrees(garbage) === 'threw') threw++;
    }
    expect(threw).toBeGreaterThan(1500);
    const valid = outPackets()
      .filter((q) => !(q.type === PacketType.DATA && q.data.data.length > 1000))
      .map(serialize);
    for (let i = 0; i < 3000; i++) {
      const bytes = Buffer.from(valid[Math.floor(next() * valid.length)]!);
      for (let flips = 1 + Math.floor(next() * 3); flips > 0; flips--)
        bytes[Math.floor(next() * bytes.length)] = Math.floor(next() * 256);
      expectThrowsOrAgrees(bytes);
    }
  });
});
