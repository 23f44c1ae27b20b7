// What a burst's streams carry and how a reader checks it: every stream is a window of one fixed
// pseudo-random block (its length odd, so streams starting at different offsets differ), and the
// reader compares each byte it gets with the byte expected at that position: a stream cut short,
// reordered or corrupted is told apart from a whole one, with where it went wrong.
import { pattern } from '../test/support/targets.js';

/** The block's period; the buffer holds it and a further 1 MiB of its start, so any window up to 1 MiB is contiguous. */
export const burstBlockLength = (1 << 20) + 7;
const period = pattern(burstBlockLength, 7);
export const burstBlock = Buffer.concat([period, period.subarray(0, 1 << 20)]);

/** The 16-byte request a burst target reads: how many bytes, from which offset of the block. */
export function burstRequest(bytes: number, offset: number): Buffer {
  const head = Buffer.alloc(16);
  head.writeBigUInt64BE(BigInt(bytes), 0);
  head.writeBigUInt64BE(BigInt(offset % burstBlockLength), 8);
  return head;
}

/** Checks one stream's bytes as they arrive against what the target sends for (bytes, offset). */
export class StreamCheck {
  received = 0;
  /** The stream position of the first byte that differs, if any. */
  mismatchAt: number | undefined;
  /** What ended the stream other than its end: an error, a dial that failed. */
  private failure: string | undefined;

  constructor(
    readonly bytes: number,
    readonly offset: number,
  ) {}

  push(chunk: Buffer): void {
    let from = 0;
    while (from < chunk.length) {
      const at = (this.offset + this.received) % burstBlockLength;
      const n = Math.min(chunk.length - from, 1 << 20);
      if (this.mismatchAt === undefined && this.received + n <= this.bytes) {
        if (burstBlock.compare(chunk, from, from + n, at, at + n) !== 0) this.mismatchAt = this.received;
      }
      this.received += n;
      from += n;
    }
  }

  /** The stream ended with an error (`why`) rather than its end: not whole, whatever arrived. */
  fail(why: string): void {
    this.failure ??= why;
  }

  /** Whole: every byte expected arrived, none more, all as sent, and the stream ended cleanly. */
  get whole(): boolean {
    return this.received === this.bytes && this.mismatchAt === undefined && this.failure === undefined;
  }

  describe(): string {
    if (this.failure !== undefined) return this.failure;
    if (this.mismatchAt !== undefined) return `bytes differ from position ${this.mismatchAt}`;
    return this.received < this.bytes
      ? `ended after ${this.received} of ${this.bytes} bytes`
      : `${this.received - this.bytes} bytes more than the ${this.bytes} sent`;
  }
}
