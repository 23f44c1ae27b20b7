import { describe, expect, it } from 'vitest';
import { AgentService, PacketType } from './packets.js';
import { encodeDataPacket } from './data-codec.js';

const serialize = AgentService.service.Connect!.requestSerialize;

describe('encodeDataPacket', () => {
  it('is byte-identical to protobufjs for every size class and connectID range', () => {
    for (const connectID of ['1', '127', '128', '300', '2147483648', '9007199254740993', '9223372036854775807']) {
      for (const size of [0, 1, 127, 128, 4096, 65536, 262144]) {
        const payload = Buffer.alloc(size, size & 0xff);
        const reference = serialize({ type: PacketType.DATA, data: { connectID, data: payload } }) as Buffer;
        expect(encodeDataPacket(BigInt(connectID), payload).equals(reference), `${connectID}/${size}`).toBe(true);
      }
    }
  });
});
