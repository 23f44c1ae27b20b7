// A hand-written encoder for the one packet on the data path, DATA from the agent. It copies the
// payload exactly once, straight from the socket's read buffer into the message, with no packet
// object in between; protobufjs gives byte-identical output (tested) but allocates more.

function varintLength(value: bigint): number {
  let n = 1;
  while (value >= 0x80n) {
    value >>= 7n;
    n++;
  }
  return n;
}

function smallVarintLength(value: number): number {
  let n = 1;
  while (value >= 0x80) {
    value = Math.floor(value / 128);
    n++;
  }
  return n;
}

function writeVarint(out: Buffer, at: number, value: number): number {
  while (value >= 0x80) {
    out[at++] = (value & 0x7f) | 0x80;
    value = Math.floor(value / 128);
  }
  out[at++] = value;
  return at;
}

function writeBigVarint(out: Buffer, at: number, value: bigint): number {
  while (value >= 0x80n) {
    out[at++] = Number(value & 0x7fn) | 0x80;
    value >>= 7n;
  }
  out[at++] = Number(value);
  return at;
}

/** `Packet{type: DATA, data: {connectID, data: payload}}` in protobuf wire format. */
export function encodeDataPacket(connectID: bigint, payload: Uint8Array): Buffer {
  // Data: field 1 (connectID, varint) + field 3 (bytes); both always present, as protobufjs writes them.
  const inner = 1 + varintLength(connectID) + 1 + smallVarintLength(payload.length) + payload.length;
  // Packet: field 1 (type = 4) + field 4 (Data, length-delimited).
  const out = Buffer.allocUnsafe(2 + 1 + smallVarintLength(inner) + inner);
  out[0] = 0x08;
  out[1] = 4;
  out[2] = 0x22;
  let at = writeVarint(out, 3, inner);
  out[at++] = 0x08;
  at = writeBigVarint(out, at, connectID);
  out[at++] = 0x1a;
  at = writeVarint(out, at, payload.length);
  out.set(payload, at);
  return out;
}
