// The konnectivity packet shapes (client.proto) as plain TypeScript, with no library behind them,
// so code that only reads or builds packets (the agent) does not load protobufjs or grpc-js.
// int64 fields (random, connectID) are decimal strings: Go picks them with rand.Int63(), which
// does not fit in a JS number without losing precision.

export enum PacketType {
  DIAL_REQ = 0,
  DIAL_RSP = 1,
  CLOSE_REQ = 2,
  CLOSE_RSP = 3,
  DATA = 4,
  DIAL_CLS = 5,
  DRAIN = 6,
}

export interface DialRequest {
  protocol: string;
  address: string;
  random: string;
}
export interface DialResponse {
  error: string;
  connectID: string;
  random: string;
}
export interface CloseRequest {
  connectID: string;
}
export interface CloseResponse {
  error: string;
  connectID: string;
}
export interface CloseDial {
  random: string;
}
export interface Data {
  connectID: string;
  error: string;
  data: Buffer;
}

/** The members of `oneof payload`, in field-number order (2..8). */
export type PayloadName =
  | 'dialRequest'
  | 'dialResponse'
  | 'data'
  | 'closeRequest'
  | 'closeResponse'
  | 'closeDial'
  | 'drain';

/** A decoded packet: `payload` names the oneof member that is set (if any). */
export interface Packet {
  type: PacketType;
  payload?: PayloadName;
  dialRequest?: DialRequest;
  dialResponse?: DialResponse;
  data?: Data;
  closeRequest?: CloseRequest;
  closeResponse?: CloseResponse;
  closeDial?: CloseDial;
  drain?: Record<string, never>;
}

/** What we write: only the member that matters; proto3 defaults fill the rest. */
export type OutPacket =
  | { type: PacketType.DIAL_REQ; dialRequest: DialRequest }
  | { type: PacketType.DIAL_RSP; dialResponse: Partial<DialResponse> & { random: string } }
  | { type: PacketType.DATA; data: Partial<Data> & { connectID: string; data: Buffer } }
  | { type: PacketType.CLOSE_REQ; closeRequest: CloseRequest }
  | { type: PacketType.CLOSE_RSP; closeResponse: Partial<CloseResponse> & { connectID: string } }
  | { type: PacketType.DIAL_CLS; closeDial: CloseDial }
  | { type: PacketType.DRAIN; drain: Record<string, never> };

/** gRPC metadata keys, as ANP proto/header/header.go spells them (gRPC lower-cases them on the wire). */
export const Header = {
  agentID: 'agentID',
  agentIdentifiers: 'agentIdentifiers',
  serverID: 'serverID',
  serverCount: 'serverCount',
  authorization: 'Authorization',
} as const;

export function packetTypeName(type: number): string {
  return PacketType[type] ?? `UNKNOWN(${type})`;
}
