import { describe, expect, it } from 'vitest';
import { GrpcFramingError, GrpcMessageReader, grpcPrefixBytes } from './grpc-framing.js';

function frame(body: Buffer, flag = 0): Buffer {
  const prefix = Buffer.alloc(grpcPrefixBytes);
  prefix[0] = flag;
  prefix.writeUInt32BE(body.length, 1);
  return Buffer.concat([prefix, body]);
}

function read(chunks: Buffer[], max = 1 << 20): string[] {
  const reader = new GrpcMessageReader(max);
  const out: string[] = [];
  for (const c of chunks) reader.push(c, (m) => out.push(m.toString()));
  return out;
}

describe('GrpcMessageReader', () => {
  const messages = ['', 'a', 'hello', 'x'.repeat(300)];
  const stream = Buffer.concat(messages.map((m) => frame(Buffer.from(m))));

  it('reads several messages from one chunk, empty ones included', () => {
    expect(read([stream])).toEqual(messages);
  });

  it('reads the same messages whatever the chunk boundaries, down to a byte at a time', () => {
    for (let cut = 1; cut < stream.length; cut++)
      expect(read([stream.subarray(0, cut), stream.subarray(cut)]), `cut at ${cut}`).toEqual(messages);
    expect(read([...stream].map((b) => Buffer.from([b])))).toEqual(messages);
  });

  it('hands out a message that arrives whole as a view, without a copy', () => {
    const chunk = frame(Buffer.from('view'));
    const reader = new GrpcMessageReader(100);
    reader.push(chunk, (m) => expect(m.buffer).toBe(chunk.buffer));
  });

  it('refuses a compressed message and one over the limit, before buffering it', () => {
    expect(() => read([frame(Buffer.from('z'), 1)])).toThrow(GrpcFramingError);
    expect(() => read([frame(Buffer.from('z'), 1)])).toThrow(/compressed message/);
    const big = Buffer.alloc(grpcPrefixBytes);
    big.writeUInt32BE(2000, 1);
    expect(() => read([big], 1000)).toThrow(/message of 2000 bytes exceeds the limit of 1000/);
    // The prefix alone, split, is enough to refuse it.
    expect(() => read([big.subarray(0, 3), big.subarray(3)], 1000)).toThrow(/exceeds the limit/);
  });
});
