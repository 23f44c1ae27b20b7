// Kept only for agent/server-connection.ts on the grpc-js transport; the codec is packet-codec.ts.
// Delete this file when that import goes (the lean HTTP/2 transport imports packet-codec.ts).
export { encodeDataPacket } from './packet-codec.js';
