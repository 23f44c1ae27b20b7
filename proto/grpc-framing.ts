// gRPC's length-prefixed messages on an HTTP/2 stream: a compressed flag, a big-endian uint32
// length, the message. The reader cuts a stream of chunks into messages without copying a message
// that arrives whole in one chunk (all but the largest DATA packets).

/** Bytes before each message: the compressed flag and the length. */
export const grpcPrefixBytes = 5;

export class GrpcFramingError extends Error {}

/** Writes the prefix of an uncompressed message of `length` bytes at the start of `out`. */
export function writeGrpcPrefix(out: Buffer, length: number): void {
  out[0] = 0;
  out.writeUInt32BE(length, 1);
}

export class GrpcMessageReader {
  /** Bytes of an incomplete prefix or message, kept until the rest arrives. */
  private pending: Buffer[] = [];
  private pendingBytes = 0;

  /** `maxMessageBytes`: a longer message is an error (gRPC's RESOURCE_EXHAUSTED), not a buffer. */
  constructor(private readonly maxMessageBytes: number) {}

  /** Feeds one chunk; calls `onMessage` for each complete message in order. Throws GrpcFramingError. */
  push(chunk: Buffer, onMessage: (message: Buffer) => void): void {
    let buf = chunk;
    if (this.pendingBytes > 0) {
      this.pending.push(chunk);
      this.pendingBytes += chunk.length;
      if (this.pendingBytes < grpcPrefixBytes) return;
      const first = this.pending[0]!;
      const length =
        first.length >= grpcPrefixBytes
          ? this.messageLength(first, 0)
          : this.messageLength(Buffer.concat(this.pending, this.pendingBytes), 0);
      if (this.pendingBytes < grpcPrefixBytes + length) return;
      buf = Buffer.concat(this.pending, this.pendingBytes);
      this.pending = [];
      this.pendingBytes = 0;
    }
    let at = 0;
    while (buf.length - at >= grpcPrefixBytes) {
      const length = this.messageLength(buf, at);
      if (buf.length - at < grpcPrefixBytes + length) break;
      onMessage(buf.subarray(at + grpcPrefixBytes, at + grpcPrefixBytes + length));
      at += grpcPrefixBytes + length;
    }
    if (at < buf.length) {
      this.pending.push(buf.subarray(at));
      this.pendingBytes = buf.length - at;
    }
  }

  /** The length in the prefix at `at` (read in place: no view per message), checked. */
  private messageLength(buf: Buffer, at: number): number {
    if (buf[at] !== 0)
      throw new GrpcFramingError(`compressed message (flag ${buf[at]}) but no compression was negotiated`);
    const length = buf.readUInt32BE(at + 1);
    if (length > this.maxMessageBytes)
      throw new GrpcFramingError(`message of ${length} bytes exceeds the limit of ${this.maxMessageBytes}`);
    return length;
  }
}
