// Loads the konnectivity protos and gives the packet shapes a TypeScript type.
// int64 fields (random, connectID) are decimal strings: Go picks them with rand.Int63(), which
// does not fit in a JS number without losing precision.
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';

export enum PacketType {
  DIAL_REQ = 0,
  DIAL_RSP = 1,
  CLOSE_REQ = 2,
  CLOSE_RSP = 3,
  DATA = 4,
  DIAL_CLS = 5,
  DRAIN = 6,
}

export interface DialRequest { protocol: string; address: string; random: string }
export interface DialResponse { error: string; connectID: string; random: string }
export interface CloseRequest { connectID: string }
export interface CloseResponse { error: string; connectID: string }
export interface CloseDial { random: string }
export interface Data { connectID: string; error: string; data: Buffer }

/** A decoded packet: `payload` names the oneof member that is set (if any). */
export interface Packet {
  type: PacketType;
  payload?: 'dialRequest' | 'dialResponse' | 'data' | 'closeRequest' | 'closeResponse' | 'closeDial' | 'drain';
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

// proto/ beside this file, or dist/proto/ beside the bundle's dist/cmd/ and dist/chunks/.
const protoDir = fileURLToPath(new URL('../proto/', import.meta.url));

const definition = protoLoader.loadSync(['agent.proto', 'client.proto'], {
  includeDirs: [protoDir],
  keepCase: true,
  longs: String,
  enums: Number,
  defaults: true,
  oneofs: true,
});

const loaded = grpc.loadPackageDefinition(definition) as unknown as {
  AgentService: grpc.ServiceClientConstructor;
  ProxyService: grpc.ServiceClientConstructor;
};

/** `/AgentService/Connect`: the agent is the gRPC client. */
export const AgentService = loaded.AgentService;
/** `/ProxyService/Proxy`: a frontend (hub client) dials the proxy-server. */
export const ProxyService = loaded.ProxyService;

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
