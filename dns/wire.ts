// DNS messages as bytes (RFC 1035 §4, EDNS RFC 6891). The query path reads and patches raw buffers
// instead of decoding them into objects: a query is parsed into one small record and a cache key, and
// a cached answer goes out as a copy with the ID and the question's case patched in.
import { ipAddressBytes } from '../net/ip.js';

export const TYPE = {
  A: 1,
  NS: 2,
  CNAME: 5,
  SOA: 6,
  PTR: 12,
  MX: 15,
  TXT: 16,
  AAAA: 28,
  SRV: 33,
  OPT: 41,
  SVCB: 64,
  HTTPS: 65,
  ANY: 255,
} as const;
export const TYPE_NAME: Record<number, string> = Object.fromEntries(Object.entries(TYPE).map(([k, v]) => [v, k]));
export const typeName = (code: number) => TYPE_NAME[code] ?? `TYPE${code}`;
/** `A`, `aaaa`, `TYPE65` (RFC 3597) to a type code. */
export function typeCode(name: string): number | undefined {
  const upper = name.toUpperCase();
  const known = (TYPE as Record<string, number>)[upper];
  if (known !== undefined) return known;
  const m = /^TYPE(\d{1,5})$/.exec(upper);
  return m && Number(m[1]) <= 0xffff ? Number(m[1]) : undefined;
}

export const CLASS_IN = 1;
export const CLASS_ANY = 255;

export const RCODE = { NOERROR: 0, FORMERR: 1, SERVFAIL: 2, NXDOMAIN: 3, NOTIMP: 4, REFUSED: 5, BADVERS: 16 } as const;
export const RCODE_NAME: Record<number, string> = Object.fromEntries(Object.entries(RCODE).map(([k, v]) => [v, k]));
export const rcodeName = (code: number) => RCODE_NAME[code] ?? `RCODE${code}`;

/** The UDP payload size we advertise in our OPT (the DNS flag day 2020 value: no IP fragmentation). */
const OUR_UDP_SIZE = 1232;
const HEADER = 12;
const OPT_SIZE = 11;

export interface Edns {
  udpSize: number;
  do: boolean;
  version: number;
}

export interface Query {
  id: number;
  rd: boolean;
  cd: boolean;
  /** Offset just past the question name (where QTYPE starts). */
  nameEnd: number;
  qtype: number;
  qclass: number;
  edns?: Edns;
  /** Lower-cased name, type, class and the flags that change an answer: equal keys, interchangeable answers. */
  key: string;
}

/** A query answered with an error before its question is read (bad opcode, count, name or OPT). */
export interface BadQuery {
  id: number;
  opcode: number;
  rd: boolean;
  rcode: number;
}

const keyScratch = Buffer.allocUnsafe(256 + 5);

/**
 * Reads a query. Undefined means drop it: too short to carry an ID, or a response (answering responses
 * is how resolvers loop). Only the question is decoded; answer and authority records are skipped and
 * the additional section is read for an OPT.
 */
export function parseQuery(msg: Buffer): Query | BadQuery | undefined {
  if (msg.length < HEADER || msg[2]! & 0x80) return undefined;
  const id = (msg[0]! << 8) | msg[1]!;
  const opcode = (msg[2]! >> 3) & 0xf;
  const rd = (msg[2]! & 1) === 1;
  if (opcode !== 0) return { id, opcode, rd, rcode: RCODE.NOTIMP };
  const formerr: BadQuery = { id, opcode, rd, rcode: RCODE.FORMERR };
  if (msg.readUInt16BE(4) !== 1) return formerr;

  // The question name: plain labels (a compression pointer has nothing to point at in a query).
  let pos = HEADER;
  for (;;) {
    if (pos >= msg.length) return formerr;
    const len = msg[pos]!;
    if (len === 0) break;
    if (len > 63) return formerr;
    pos += len + 1;
    if (pos - HEADER > 254) return formerr; // name over 255 octets with its root label
  }
  const nameEnd = pos + 1;
  if (nameEnd + 4 > msg.length) return formerr;
  const qtype = msg.readUInt16BE(nameEnd);
  const qclass = msg.readUInt16BE(nameEnd + 2);

  pos = nameEnd + 4;
  const skipped = msg.readUInt16BE(6) + msg.readUInt16BE(8);
  const additional = msg.readUInt16BE(10);
  let edns: Edns | undefined;
  for (let i = 0; i < skipped + additional; i++) {
    const owner = pos;
    pos = skipName(msg, pos);
    if (pos < 0 || pos + 10 > msg.length) return formerr;
    const type = msg.readUInt16BE(pos);
    const end = pos + 10 + msg.readUInt16BE(pos + 8);
    if (end > msg.length) return formerr;
    if (type === TYPE.OPT) {
      // RFC 6891 §6.1.1: one OPT, in the additional section, owned by the root.
      if (edns || i < skipped || msg[owner] !== 0) return formerr;
      edns = { udpSize: msg.readUInt16BE(pos + 2), do: (msg[pos + 6]! & 0x80) !== 0, version: msg[pos + 5]! };
    }
    pos = end;
  }
  const cd = (msg[3]! & 0x10) !== 0;

  let n = 0;
  for (let i = HEADER; i < nameEnd; i++) {
    const b = msg[i]!;
    keyScratch[n++] = lower(b); // length octets are < 64: never in A-Z
  }
  msg.copy(keyScratch, n, nameEnd, nameEnd + 4);
  n += 4;
  keyScratch[n++] = (edns ? 1 : 0) | (edns?.do ? 2 : 0) | (cd ? 4 : 0) | (rd ? 8 : 0);
  return { id, rd, cd, nameEnd, qtype, qclass, edns, key: keyScratch.toString('latin1', 0, n) };
}

/** Past a possibly compressed name; -1 when it runs off the message or uses a reserved label type. */
function skipName(msg: Buffer, pos: number): number {
  for (;;) {
    if (pos >= msg.length) return -1;
    const len = msg[pos]!;
    if (len === 0) return pos + 1;
    if ((len & 0xc0) === 0xc0) return pos + 2 <= msg.length ? pos + 2 : -1;
    if (len & 0xc0) return -1;
    pos += len + 1;
  }
}

/**
 * The question name in presentation form, case kept, no trailing dot (`.` for the root). Octets that
 * cannot appear in a host name are escaped (RFC 4343 `\DDD`, `\.`) so they never match a rule.
 */
export function questionName(msg: Buffer): string {
  return nameAt(msg, HEADER);
}

/** The uncompressed name at `pos` of `buf` in presentation form, as `questionName` gives it. */
export function nameAt(buf: Uint8Array, pos: number): string {
  let out = '';
  while (buf[pos] !== 0) {
    const len = buf[pos]!;
    if (out !== '') out += '.';
    for (let i = pos + 1; i <= pos + len; i++) {
      const b = buf[i]!;
      if (b === 0x2e || b === 0x5c) out += `\\${String.fromCharCode(b)}`;
      else if (b <= 0x20 || b >= 0x7f) out += `\\${String(b).padStart(3, '0')}`;
      else out += String.fromCharCode(b);
    }
    pos += len + 1;
  }
  return out === '' ? '.' : out;
}

/** How many bytes a UDP answer to `q` may take. */
export function udpBudget(q: Query): number {
  return q.edns ? Math.max(512, q.edns.udpSize) : 512;
}

export interface Flags {
  aa?: boolean;
  ra?: boolean;
  tc?: boolean;
}

/** A header with no question, for queries whose question we could not read. */
export function headerOnlyResponse(bad: BadQuery): Buffer {
  const out = Buffer.alloc(HEADER);
  out.writeUInt16BE(bad.id, 0);
  out[2] = 0x80 | (bad.opcode << 3) | (bad.rd ? 1 : 0);
  out[3] = bad.rcode & 0xf;
  return out;
}

export interface SoaData {
  mname: string;
  rname: string;
  serial: number;
  refresh: number;
  retry: number;
  expire: number;
  minimum: number;
}

export type RecordData =
  | { type: typeof TYPE.A | typeof TYPE.AAAA; address: string }
  | { type: typeof TYPE.CNAME; target: string }
  | { type: typeof TYPE.SOA; soa: SoaData };

/** A record to encode. `owner` undefined means the question's name (a pointer to it, so it keeps the query's case). */
export type Rec = RecordData & { owner?: string; ttl: number };

export interface ResponseParts {
  rcode: number;
  flags: Flags;
  answers?: readonly Rec[];
  authority?: readonly Rec[];
}

/** A response to `q`: the question copied from `msg`, then the records, then an OPT when the query had one. */
export function encodeResponse(msg: Buffer, q: Query, parts: ResponseParts): Buffer {
  const answers = parts.answers ?? [];
  const authority = parts.authority ?? [];
  let size = q.nameEnd + 4 + (q.edns ? OPT_SIZE : 0);
  for (const r of answers) size += recordSize(r);
  for (const r of authority) size += recordSize(r);
  const out = Buffer.allocUnsafe(size);
  msg.copy(out, 0, 0, 2);
  const f = parts.flags;
  out[2] = 0x80 | (f.aa ? 4 : 0) | (f.tc ? 2 : 0) | (q.rd ? 1 : 0);
  out[3] = (f.ra ? 0x80 : 0) | (q.cd ? 0x10 : 0) | (parts.rcode & 0xf);
  out.writeUInt16BE(1, 4);
  out.writeUInt16BE(answers.length, 6);
  out.writeUInt16BE(authority.length, 8);
  out.writeUInt16BE(q.edns ? 1 : 0, 10);
  msg.copy(out, HEADER, HEADER, q.nameEnd + 4);
  let pos = q.nameEnd + 4;
  for (const r of answers) pos = writeRecord(out, pos, r);
  for (const r of authority) pos = writeRecord(out, pos, r);
  if (q.edns) {
    out[pos] = 0; // root owner
    out.writeUInt16BE(TYPE.OPT, pos + 1);
    out.writeUInt16BE(OUR_UDP_SIZE, pos + 3);
    out[pos + 5] = parts.rcode >> 4; // extended rcode (BADVERS)
    out[pos + 6] = 0; // version
    out[pos + 7] = q.edns.do ? 0x80 : 0; // RFC 3225: DO is copied into the response
    out[pos + 8] = 0;
    out.writeUInt16BE(0, pos + 9);
  }
  return out;
}

/** The answer cut down to header, question and OPT with TC set: the client retries over TCP. */
export function truncatedResponse(msg: Buffer, q: Query, full: Buffer): Buffer {
  return encodeResponse(msg, q, {
    rcode: full[3]! & 0xf,
    flags: { aa: (full[2]! & 4) !== 0, ra: (full[3]! & 0x80) !== 0, tc: true },
  });
}

function nameSize(name: string | undefined): number {
  return name === undefined ? 2 : name === '' ? 1 : name.length + 2;
}

function rdataSize(r: Rec): number {
  switch (r.type) {
    case TYPE.A:
      return 4;
    case TYPE.AAAA:
      return 16;
    case TYPE.CNAME:
      return nameSize(r.target);
    case TYPE.SOA:
      return nameSize(r.soa.mname) + nameSize(r.soa.rname) + 20;
  }
}

const recordSize = (r: Rec) => nameSize(r.owner) + 10 + rdataSize(r);

function writeName(out: Buffer, pos: number, name: string | undefined): number {
  if (name === undefined) {
    out.writeUInt16BE(0xc000 | HEADER, pos);
    return pos + 2;
  }
  if (name !== '') {
    for (const label of name.split('.')) {
      out[pos++] = label.length;
      pos += out.write(label, pos, 'latin1');
    }
  }
  out[pos] = 0;
  return pos + 1;
}

function writeRecord(out: Buffer, pos: number, r: Rec): number {
  pos = writeName(out, pos, r.owner);
  out.writeUInt16BE(r.type, pos);
  out.writeUInt16BE(CLASS_IN, pos + 2);
  out.writeUInt32BE(r.ttl, pos + 4);
  const start = pos + 10;
  let end: number;
  switch (r.type) {
    case TYPE.A:
    case TYPE.AAAA: {
      const bytes = ipAddressBytes(r.address);
      out.set(bytes, start);
      end = start + bytes.length;
      break;
    }
    case TYPE.CNAME:
      end = writeName(out, start, r.target);
      break;
    case TYPE.SOA: {
      const s = r.soa;
      end = writeName(out, writeName(out, start, s.mname), s.rname);
      for (const v of [s.serial, s.refresh, s.retry, s.expire, s.minimum]) end = out.writeUInt32BE(v >>> 0, end);
    }
  }
  out.writeUInt16BE(end - start, pos + 8);
  return end;
}

/** A plain query for `name` (presentation form, valid labels) with RD and an OPT, ID 0. */
export function encodeQuery(name: string, qtype: number): Buffer {
  const labels = name === '' || name === '.' ? [] : name.replace(/\.$/, '').split('.');
  const nameLen = labels.reduce((n, l) => n + l.length + 1, 1);
  const out = Buffer.alloc(HEADER + nameLen + 4 + OPT_SIZE);
  out[2] = 1; // RD
  out.writeUInt16BE(1, 4);
  out.writeUInt16BE(1, 10);
  let pos = writeName(out, HEADER, labels.join('.'));
  out.writeUInt16BE(qtype, pos);
  out.writeUInt16BE(CLASS_IN, pos + 2);
  pos += 4;
  out.writeUInt16BE(TYPE.OPT, pos + 1);
  out.writeUInt16BE(OUR_UDP_SIZE, pos + 3);
  return out;
}

/** What caching needs from a response: where its TTLs are and how long it may be kept. */
export interface ResponseInfo {
  rcode: number;
  tc: boolean;
  /** Offsets of the TTL fields of every record except OPT (whose TTL holds flags). */
  ttlOffsets: number[];
  ttls: number[];
  /**
   * Seconds the response stays valid: the smallest record TTL for an answer, the SOA's
   * min(TTL, MINIMUM) for NXDOMAIN / NODATA (RFC 2308 §5); undefined when nothing says.
   */
  ttl: number | undefined;
}

/** Walks a response's records; undefined when it is malformed. */
export function inspectResponse(msg: Buffer): ResponseInfo | undefined {
  if (msg.length < HEADER) return undefined;
  const rcode = msg[3]! & 0xf;
  const counts = [msg.readUInt16BE(6), msg.readUInt16BE(8), msg.readUInt16BE(10)] as const;
  let pos = HEADER;
  for (let i = msg.readUInt16BE(4); i > 0; i--) {
    pos = skipName(msg, pos);
    if (pos < 0 || pos + 4 > msg.length) return undefined;
    pos += 4;
  }
  const ttlOffsets: number[] = [];
  const ttls: number[] = [];
  let minTtl = Infinity;
  let negativeTtl: number | undefined;
  for (let section = 0; section < 3; section++) {
    for (let i = 0; i < counts[section]!; i++) {
      pos = skipName(msg, pos);
      if (pos < 0 || pos + 10 > msg.length) return undefined;
      const type = msg.readUInt16BE(pos);
      const ttl = Math.min(msg.readUInt32BE(pos + 4), 0x7fffffff);
      const end = pos + 10 + msg.readUInt16BE(pos + 8);
      if (end > msg.length) return undefined;
      if (type !== TYPE.OPT) {
        ttlOffsets.push(pos + 4);
        ttls.push(ttl);
        minTtl = Math.min(minTtl, ttl);
        if (section === 1 && type === TYPE.SOA && end - pos - 10 >= 22)
          negativeTtl = Math.min(ttl, msg.readUInt32BE(end - 4));
      }
      pos = end;
    }
  }
  const negative = rcode === RCODE.NXDOMAIN || (rcode === RCODE.NOERROR && counts[0] === 0);
  return {
    rcode,
    tc: (msg[2]! & 2) !== 0,
    ttlOffsets,
    ttls,
    ttl: negative ? negativeTtl : minTtl === Infinity ? undefined : minTtl,
  };
}

/** Whether `response` carries the question of `query` (a plain-label name, compared without regard to case). */
export function sameQuestion(query: Buffer, response: Buffer): boolean {
  if (response.length < HEADER || response.readUInt16BE(4) !== query.readUInt16BE(4)) return false;
  let nameEnd = HEADER;
  while (nameEnd < query.length && query[nameEnd] !== 0) nameEnd += query[nameEnd]! + 1;
  nameEnd++;
  if (nameEnd + 4 > query.length || nameEnd + 4 > response.length) return false;
  for (let i = HEADER; i < nameEnd + 4; i++) {
    if (query[i] !== response[i] && (i >= nameEnd || lower(query[i]!) !== lower(response[i]!))) return false;
  }
  return true;
}

const lower = (b: number) => (b >= 0x41 && b <= 0x5a ? b | 0x20 : b);

/**
 * A stored response made into the answer to another query with the same key: its ID, its question's
 * case (RFC 4343; resolvers using 0x20 randomization check it), and TTLs reduced by `age` seconds.
 */
export function reuseResponse(
  stored: Buffer,
  info: Pick<ResponseInfo, 'ttlOffsets' | 'ttls'>,
  ageSeconds: number,
  msg: Buffer,
  q: Query,
): Buffer {
  const out = Buffer.allocUnsafe(stored.length);
  stored.copy(out);
  out[0] = msg[0]!;
  out[1] = msg[1]!;
  msg.copy(out, HEADER, HEADER, q.nameEnd);
  if (ageSeconds > 0) {
    const { ttlOffsets, ttls } = info;
    for (let i = 0; i < ttlOffsets.length; i++) out.writeUInt32BE(Math.max(0, ttls[i]! - ageSeconds), ttlOffsets[i]!);
  }
  return out;
}
