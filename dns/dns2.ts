// The one door to dns2, a DNS message codec other than our own (wire.ts): it decodes whole messages
// for `spoke-agent resolve`, /debug/resolve and the upstream's records behind a rewritten name, and
// tests decode our answers and play an upstream with it. dns2 types every record as one interface with
// every field optional and leaves the header's AD and CD bits untyped; here are the shapes we rely on.
import dns2 from 'dns2';
import { TYPE } from './wire.js';

const { Packet } = dns2;

type Bit = 0 | 1;

export interface Header {
  id: number;
  qr: Bit;
  opcode: number;
  aa: Bit;
  tc: Bit;
  rd: Bit;
  ra: Bit;
  ad: Bit;
  cd: Bit;
  rcode: number;
  qdcount: number;
  ancount: number;
  nscount: number;
  arcount: number;
}

export interface Question {
  name: string;
  type: number;
  class: number;
}

interface RecordHeader {
  /** The owner name, without the trailing dot. */
  name: string;
  type: number;
  /** For OPT, the requester's UDP payload size. */
  class: number;
  ttl: number;
}

/** A and AAAA. */
export interface AddressRecord extends RecordHeader {
  address: string;
}

/** CNAME and PTR: the name it points at. */
export interface AliasRecord extends RecordHeader {
  domain: string;
}

export interface SoaRecord extends RecordHeader {
  primary: string;
  admin: string;
  serial: number;
  refresh: number;
  retry: number;
  expiration: number;
  minimum: number;
}

/**
 * Any other type: TXT's strings, the raw RDATA of a type dns2 has no codec for (HTTPS, SVCB), or
 * nothing (what dns2 decodes into other fields, which we do not read).
 */
export interface OtherRecord extends RecordHeader {
  data?: Buffer | string | string[];
}

/** One record; tell the kinds apart with `in` (`'address' in r`). */
export type DnsRecord = AddressRecord | AliasRecord | SoaRecord | OtherRecord;

export interface Message {
  header: Header;
  questions: Question[];
  answers: DnsRecord[];
  authorities: DnsRecord[];
  additionals: DnsRecord[];
}

const bit = (value: unknown): Bit => (value === 1 ? 1 : 0);

function fromDns2(r: dns2.Packet.Resource): DnsRecord {
  const head = { name: r.name, type: r.type, class: r.class, ttl: r.ttl };
  if ((r.type === TYPE.A || r.type === TYPE.AAAA) && r.address !== undefined) return { ...head, address: r.address };
  if ((r.type === TYPE.CNAME || r.type === TYPE.PTR) && r.domain !== undefined) return { ...head, domain: r.domain };
  if (r.type === TYPE.SOA && r.primary !== undefined)
    return {
      ...head,
      primary: r.primary,
      admin: r.admin ?? '',
      serial: r.serial ?? 0,
      refresh: r.refresh ?? 0,
      retry: r.retry ?? 0,
      expiration: Number(r.expiration ?? 0),
      minimum: r.minimum ?? 0,
    };
  return r.data === undefined ? head : { ...head, data: r.data };
}

/** Decodes a DNS message; throws when it has no usable header. Records dns2 cannot decode are left out. */
export function decodeMessage(bytes: Buffer): Message {
  const packet = Packet.parse(bytes);
  const h = packet.header;
  // dns2 decodes AD and CD but its Header type lacks them.
  const ad = 'ad' in h ? h.ad : 0;
  const cd = 'cd' in h ? h.cd : 0;
  return {
    header: {
      id: h.id,
      qr: h.qr,
      opcode: h.opcode,
      aa: h.aa,
      tc: h.tc,
      rd: h.rd,
      ra: h.ra,
      ad: bit(ad),
      cd: bit(cd),
      rcode: h.rcode,
      qdcount: h.qdcount,
      ancount: h.ancount,
      nscount: h.nscount,
      arcount: h.arcount,
    },
    questions: packet.questions.map((q) => ({ name: q.name, type: q.type, class: q.class })),
    answers: packet.answers.map(fromDns2),
    authorities: packet.authorities.map(fromDns2),
    additionals: packet.additionals.map(fromDns2),
  };
}

/** What encodeMessage writes: header fields left out are 0; the section counts follow the sections. */
export interface MessageToEncode {
  header: Partial<Omit<Header, 'qdcount' | 'ancount' | 'nscount' | 'arcount'>>;
  questions: Question[];
  answers?: DnsRecord[];
  authorities?: DnsRecord[];
  additionals?: DnsRecord[];
}

/** dns2's record: an OPT record is written from its options (none here). */
const toDns2 = (r: DnsRecord) => new Packet.Resource(r.type === TYPE.OPT ? { ...r, rdata: [] } : r);

/** Encodes a DNS message with dns2 (names compressed). */
export function encodeMessage(m: MessageToEncode): Buffer {
  const packet = new Packet();
  packet.header = new Packet.Header(m.header);
  packet.questions = m.questions.map((q) => new Packet.Question(q));
  packet.answers = (m.answers ?? []).map(toDns2);
  packet.authorities = (m.authorities ?? []).map(toDns2);
  packet.additionals = (m.additionals ?? []).map(toDns2);
  return packet.toBuffer();
}
