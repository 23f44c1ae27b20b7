// A hand-written protobuf codec for the one message on the agent's stream, `Packet`
// (client.proto), so the agent needs neither protobufjs nor proto-loader: no message objects in
// between, one allocation per encoded frame, and an outgoing DATA payload copied exactly once.
//
// It agrees with proto-loader/protobufjs as the agent configured them ({keepCase, longs: String,
// enums: Number, defaults: true, oneofs: true}), byte for byte on encode and object for object on
// decode (packet-codec.test.ts checks both against protobufjs), with two deliberate differences:
// decoding is strict (malformed input throws instead of being clamped or skipped as a group), and
// a packet with two oneof members keeps only the last one on the wire, as Go does.
import { grpcPrefixBytes, writeGrpcPrefix } from './grpc-framing.js';
import { PacketType, type OutPacket, type Packet, type PayloadName } from './packet-types.js';

// Wire types used by the schema, plus the two fixed-size ones we only skip.
const VARINT = 0;
const I64 = 1;
const LEN = 2;
const I32 = 5;

enum Kind {
  String,
  Int64,
  Bytes,
}

const EMPTY = Buffer.alloc(0);

interface FieldSpec {
  readonly name: string;
  readonly number: number;
  readonly kind: Kind;
}
interface MemberSpec {
  readonly name: PayloadName;
  readonly number: number;
  readonly fields: readonly FieldSpec[];
  /** The member with its proto3 defaults, as one object literal so every decoded copy shares a shape. */
  readonly empty: () => Record<string, unknown>;
}

/** `oneof payload`, in field-number order; every field number is below 16, so each tag is one byte. */
const MEMBERS: readonly MemberSpec[] = [
  {
    name: 'dialRequest',
    number: 2,
    fields: [
      { name: 'protocol', number: 1, kind: Kind.String },
      { name: 'address', number: 2, kind: Kind.String },
      { name: 'random', number: 3, kind: Kind.Int64 },
    ],
    empty: () => ({ protocol: '', address: '', random: '0' }),
  },
  {
    name: 'dialResponse',
    number: 3,
    fields: [
      { name: 'error', number: 1, kind: Kind.String },
      { name: 'connectID', number: 2, kind: Kind.Int64 },
      { name: 'random', number: 3, kind: Kind.Int64 },
    ],
    empty: () => ({ error: '', connectID: '0', random: '0' }),
  },
  {
    name: 'data',
    number: 4,
    fields: [
      { name: 'connectID', number: 1, kind: Kind.Int64 },
      { name: 'error', number: 2, kind: Kind.String },
      { name: 'data', number: 3, kind: Kind.Bytes },
    ],
    empty: () => ({ connectID: '0', error: '', data: EMPTY }),
  },
  {
    name: 'closeRequest',
    number: 5,
    fields: [{ name: 'connectID', number: 1, kind: Kind.Int64 }],
    empty: () => ({ connectID: '0' }),
  },
  {
    name: 'closeResponse',
    number: 6,
    fields: [
      { name: 'error', number: 1, kind: Kind.String },
      { name: 'connectID', number: 2, kind: Kind.Int64 },
    ],
    empty: () => ({ error: '', connectID: '0' }),
  },
  {
    name: 'closeDial',
    number: 7,
    fields: [{ name: 'random', number: 1, kind: Kind.Int64 }],
    empty: () => ({ random: '0' }),
  },
  { name: 'drain', number: 8, fields: [], empty: () => ({}) },
];
const MEMBER_BY_NUMBER: ReadonlyArray<MemberSpec | undefined> = MEMBERS.reduce<Array<MemberSpec | undefined>>(
  (all, m) => {
    all[m.number] = m;
    return all;
  },
  [],
);

const wireTypeOf = (kind: Kind): number => (kind === Kind.Int64 ? VARINT : LEN);
const tagOf = (number: number, wireType: number): number => (number << 3) | wireType;

// ---- Decoding ----------------------------------------------------------------------------------
// A cursor over one input, held in module variables: decoding is synchronous and never re-entered.
let buf: Buffer = EMPTY;
let pos = 0;
// The last varint read, as two uint32 halves (JS numbers hold 53 bits; int64 needs 64).
let lo = 0;
let hi = 0;

function readVarint(): void {
  lo = 0;
  hi = 0;
  for (let i = 0; i < 10; i++) {
    if (pos >= buf.length) throw new Error(`truncated varint at byte ${pos}`);
    const b = buf[pos++]!;
    // Bits 0-27 in bytes 0-3; byte 4 straddles the halves; bytes 5-9 fill the high half (the
    // tenth byte's bits past 64 are dropped, as protobufjs and Go do).
    if (i < 4) lo |= (b & 0x7f) << (7 * i);
    else if (i === 4) {
      lo |= (b & 0x0f) << 28;
      hi = (b & 0x7f) >> 4;
    } else hi |= (b & 0x7f) << (7 * i - 32);
    if (b < 0x80) {
      lo >>>= 0;
      hi >>>= 0;
      return;
    }
  }
  throw new Error(`varint longer than 10 bytes at byte ${pos - 10}`);
}

/** A length (or a tag): must fit in 32 bits. */
function readUint32(what: string): number {
  readVarint();
  if (hi !== 0) throw new Error(`${what} too large at byte ${pos}`);
  return lo;
}

/** The end of a length-delimited field starting at the cursor. */
function readLengthEnd(): number {
  const length = readUint32('length');
  if (length > buf.length - pos)
    throw new Error(`length ${length} at byte ${pos} runs past the end (${buf.length - pos} bytes left)`);
  return pos + length;
}

/** The last varint as a signed int64 in decimal, exactly. */
function int64String(): string {
  if (hi === 0) return String(lo);
  if (hi < 0x200000) return String(hi * 0x100000000 + lo); // below 2^53: exact as a number
  return BigInt.asIntN(64, (BigInt(hi) << 32n) | BigInt(lo)).toString();
}

function skipField(wireType: number, end: number): void {
  let size: number;
  switch (wireType) {
    case VARINT:
      readVarint();
      size = 0;
      break;
    case I64:
      size = 8;
      break;
    case I32:
      size = 4;
      break;
    case LEN:
      pos = readLengthEnd();
      size = 0;
      break;
    default:
      throw new Error(`invalid wire type ${wireType} at byte ${pos}`);
  }
  if (size > end - pos) throw new Error(`truncated fixed-size field at byte ${pos}`);
  pos += size;
  if (pos > end) throw new Error(`field runs past its message at byte ${pos}`);
}

/** The wire type of the last tag read. */
let wireType = 0;

/** Reads the next tag: sets wireType, returns the field number. */
function readTag(): number {
  const tag = readUint32('tag');
  wireType = tag & 7;
  const number = tag >>> 3;
  if (number === 0) throw new Error(`field number 0 at byte ${pos}`);
  return number;
}

function expectWireType(expected: number, field: string): void {
  if (wireType !== expected) throw new Error(`${field} has wire type ${wireType}, expected ${expected} (byte ${pos})`);
}

/** One member message, its proto3 defaults filled in; `data` is copied (see decodePacket). */
function decodeMember(spec: MemberSpec, end: number): Record<string, unknown> {
  const out = spec.empty();
  while (pos < end) {
    const number = readTag();
    let f: FieldSpec | undefined;
    for (const field of spec.fields) if (field.number === number) f = field;
    if (!f) {
      skipField(wireType, end);
      continue;
    }
    expectWireType(wireTypeOf(f.kind), `${spec.name}.${f.name}`);
    if (f.kind === Kind.Int64) {
      readVarint();
      out[f.name] = int64String();
    } else {
      const fieldEnd = readLengthEnd();
      if (fieldEnd > end) throw new Error(`${spec.name}.${f.name} runs past its message at byte ${pos}`);
      out[f.name] =
        f.kind === Kind.String ? buf.toString('utf8', pos, fieldEnd) : Buffer.from(buf.subarray(pos, fieldEnd));
      pos = fieldEnd;
    }
    if (pos > end) throw new Error(`${spec.name}.${f.name} runs past its message at byte ${pos}`);
  }
  return out;
}

/**
 * Decodes a `Packet` from protobuf bytes (without the gRPC prefix) into the shape proto-loader
 * gives the agent. A DATA payload is a copy: the agent queues it on the target socket, so it must
 * outlive `bytes`, which the transport may reuse. Throws on malformed input.
 */
export function decodePacket(bytes: Uint8Array): Packet {
  buf = Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  pos = 0;
  try {
    const packet: Packet = { type: 0 };
    let member: MemberSpec | undefined;
    let value: Record<string, unknown> | undefined;
    while (pos < buf.length) {
      const number = readTag();
      if (number === 1) {
        expectWireType(VARINT, 'type');
        readVarint();
        packet.type = lo | 0; // an int32 enum: the low 32 bits, signed
        continue;
      }
      const spec = MEMBER_BY_NUMBER[number];
      if (!spec) {
        skipField(wireType, buf.length);
        continue;
      }
      expectWireType(LEN, spec.name);
      const end = readLengthEnd();
      member = spec;
      value = decodeMember(spec, end);
    }
    if (member) {
      packet.payload = member.name;
      (packet as unknown as Record<string, unknown>)[member.name] = value;
    }
    return packet;
  } finally {
    buf = EMPTY; // do not pin the caller's buffer
  }
}

// ---- Encoding ----------------------------------------------------------------------------------
// Two passes over a flat plan of fields: the first sizes every field (and the member's length
// header), the second writes them into one buffer with room for the gRPC prefix in front.
enum Op {
  Varint,
  String,
  Bytes,
  Header,
}
let count = 0;
const ops: Op[] = [];
const tags: number[] = [];
const los: number[] = [];
const his: number[] = [];
const lengths: number[] = [];
const values: Array<string | Uint8Array | undefined> = [];

function varintSize(low: number, high: number): number {
  let n = 1;
  while (high !== 0) {
    low = ((low >>> 7) | (high << 25)) >>> 0;
    high >>>= 7;
    n++;
  }
  while (low > 0x7f) {
    low >>>= 7;
    n++;
  }
  return n;
}

function writeVarint(out: Buffer, at: number, low: number, high: number): number {
  while (high !== 0) {
    out[at++] = (low & 0x7f) | 0x80;
    low = ((low >>> 7) | (high << 25)) >>> 0;
    high >>>= 7;
  }
  while (low > 0x7f) {
    out[at++] = (low & 0x7f) | 0x80;
    low >>>= 7;
  }
  out[at++] = low;
  return at;
}

/** Adds a field to the plan; returns its encoded size. */
function plan(op: Op, tag: number, low: number, high: number, length: number, value?: string | Uint8Array): number {
  ops[count] = op;
  tags[count] = tag;
  los[count] = low;
  his[count] = high;
  lengths[count] = length;
  values[count] = value;
  count++;
  const body = op === Op.Varint ? varintSize(low, high) : varintSize(length, 0) + (op === Op.Header ? 0 : length);
  return 1 + body;
}

function planInt64(tag: number, value: bigint): number {
  const v = BigInt.asUintN(64, value);
  return plan(Op.Varint, tag, Number(v & 0xffffffffn), Number(v >> 32n), 0);
}

/**
 * An int64 given as a decimal string, as two's-complement uint32 halves, without BigInt (Go's
 * random dial IDs all need 63 bits, so every dial would pay for it). Wraps modulo 2^64 as
 * protobufjs's Long does.
 */
function planInt64String(tag: number, value: string): number {
  const negative = value.charCodeAt(0) === 0x2d;
  let low = 0;
  let high = 0;
  const first = negative ? 1 : 0;
  if (value.length === first) throw new Error(`invalid int64 ${JSON.stringify(value)}`);
  // Six digits at a time: (high, low) * 10^6 + chunk stays below 2^53, exact in doubles.
  for (let i = first; i < value.length; ) {
    const stop = Math.min(i + 6, value.length);
    let chunk = 0;
    let scale = 1;
    for (; i < stop; i++) {
      const digit = value.charCodeAt(i) - 0x30;
      if (digit < 0 || digit > 9) throw new Error(`invalid int64 ${JSON.stringify(value)}`);
      chunk = chunk * 10 + digit;
      scale *= 10;
    }
    low = low * scale + chunk;
    high = (high * scale + Math.floor(low / 0x100000000)) >>> 0;
    low >>>= 0;
  }
  if (negative) {
    low = (~low + 1) >>> 0;
    high = (~high + (low === 0 ? 1 : 0)) >>> 0;
  }
  return plan(Op.Varint, tag, low, high, 0);
}

/** Plans a member's length header; its length is filled in by closeMember once its fields are planned. */
function openMember(spec: MemberSpec): number {
  plan(Op.Header, tagOf(spec.number, LEN), 0, 0, 0);
  return count - 1;
}

function closeMember(header: number, inner: number): number {
  lengths[header] = inner;
  return 1 + varintSize(inner, 0) + inner;
}

/** A member message: its header, then its fields as given (protobufjs writes every field present, zero or not). */
function planMember(spec: MemberSpec, message: Record<string, unknown>): number {
  const header = openMember(spec);
  let inner = 0;
  for (const f of spec.fields) {
    const v = message[f.name];
    if (v === undefined || v === null) continue;
    const tag = tagOf(f.number, wireTypeOf(f.kind));
    if (f.kind === Kind.Int64) inner += planInt64String(tag, v as string);
    else if (f.kind === Kind.String) inner += plan(Op.String, tag, 0, 0, Buffer.byteLength(v as string), v as string);
    else inner += plan(Op.Bytes, tag, 0, 0, (v as Uint8Array).length, v as Uint8Array);
  }
  return closeMember(header, inner);
}

function planPacket(packet: OutPacket): number {
  count = 0;
  const type = packet.type as number;
  let size = plan(Op.Varint, tagOf(1, VARINT), type >>> 0, type < 0 ? 0xffffffff : 0, 0); // int32: negatives take 10 bytes
  const fields = packet as unknown as Record<string, unknown>;
  for (const spec of MEMBERS) {
    const message = fields[spec.name];
    if (message !== undefined && message !== null) size += planMember(spec, message as Record<string, unknown>);
  }
  return size;
}

/** Writes the plan into a new buffer after `offset` bytes left for the caller. */
/** Where a frame may be written instead of a new buffer: `size` bytes, or undefined for a new buffer. */
export interface FrameBuffers {
  take(size: number): Buffer | undefined;
}

function writePlan(size: number, offset: number, into?: FrameBuffers): Buffer {
  const out = into?.take(offset + size) ?? Buffer.allocUnsafe(offset + size);
  let at = offset;
  for (let i = 0; i < count; i++) {
    out[at++] = tags[i]!;
    const op = ops[i]!;
    if (op === Op.Varint) {
      at = writeVarint(out, at, los[i]!, his[i]!);
      continue;
    }
    at = writeVarint(out, at, lengths[i]!, 0);
    if (op === Op.String) at += out.write(values[i] as string, at, 'utf8');
    else if (op === Op.Bytes) {
      out.set(values[i] as Uint8Array, at);
      at += lengths[i]!;
    }
    values[i] = undefined; // do not pin the caller's payload
  }
  return out;
}

function withPrefix(size: number, into?: FrameBuffers): Buffer {
  const out = writePlan(size, grpcPrefixBytes, into);
  writeGrpcPrefix(out, size);
  return out;
}

/** `packet` as one gRPC message: the 5-byte prefix, then its protobuf bytes as protobufjs writes them. */
export function encodeFrame(packet: OutPacket): Buffer {
  return withPrefix(planPacket(packet));
}

const DATA = MEMBERS[2]!;

/** DATA from a target, straight from the socket's read buffer: no packet object, one copy. */
function planData(connectID: bigint, payload: Uint8Array): number {
  count = 0;
  const size = plan(Op.Varint, tagOf(1, VARINT), PacketType.DATA, 0, 0);
  const header = openMember(DATA);
  return (
    size +
    closeMember(
      header,
      planInt64(tagOf(1, VARINT), connectID) + plan(Op.Bytes, tagOf(3, LEN), 0, 0, payload.length, payload),
    )
  );
}

/**
 * `Packet{type: DATA, data: {connectID, data: payload}}` as one gRPC message (prefix included), in
 * the buffer `into` gives for its size (a reused frame), or a new one when it gives none.
 */
export function encodeDataFrame(connectID: bigint, payload: Uint8Array, into?: FrameBuffers): Buffer {
  return withPrefix(planData(connectID, payload), into);
}
