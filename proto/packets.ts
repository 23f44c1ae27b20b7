// Loads the konnectivity protos through proto-loader for the grpc-js users (hub/, client/, tests).
// The packet shapes live in packet-types.ts, re-exported here; the agent imports them from there
// and its transport encodes/decodes with packet-codec.ts, so it need not load protobufjs.
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';

export * from './packet-types.js';

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
