// DATA frames of one stream carved out of one buffer and reused once the stream has written them out
// (target -> hub). Each read of a target becomes one frame; allocated fresh, a burst's frames are
// garbage that only a collection frees, and V8 collects for memory outside its heap about every
// 64 MiB of it, so a burst held that much more RSS (bench/README.md, "Bursts"). Node's HTTP/2 stream
// calls a write back once the frame is out on the connection (TLS has encrypted it: nothing reads the
// frame any more), and one stream's writes complete in the order they were made, so frames are freed
// oldest first, as a ring frees them. Small frames (an interactive session's) are left to Node's
// allocator: the ring is for bulk, and is only allocated once a stream carries some.
import type { FrameBuffers } from '../proto/packet-codec.js';

/** Frames smaller than this are not worth a place in the ring. */
const minRingFrame = 16 << 10;

export class FrameRing implements FrameBuffers {
  private ring: Buffer | undefined;
  /** Where the next frame starts. */
  private head = 0;
  /** Where each frame not yet written out starts, oldest first. */
  private readonly starts: number[] = [];

  constructor(private readonly capacity: number) {}

  /** `size` bytes of the ring to encode a frame into, or undefined (allocate instead): too small, or no room. */
  take(size: number): Buffer | undefined {
    if (size < minRingFrame || size > this.capacity) return undefined;
    this.ring ??= Buffer.allocUnsafeSlow(this.capacity);
    let start = 0;
    const tail = this.starts[0];
    if (tail !== undefined) {
      if (this.head > tail) {
        if (this.capacity - this.head >= size) start = this.head;
        else if (tail <= size) return undefined;
      } else if (tail - this.head > size) start = this.head;
      else return undefined;
    }
    this.starts.push(start);
    this.head = start + size;
    return this.ring.subarray(start, start + size);
  }

  /** Whether `frame` came from `take`: its release is due when it is written out. */
  owns(frame: Buffer): boolean {
    return this.ring !== undefined && frame.buffer === this.ring.buffer;
  }

  /** The oldest frame from `take` is written out: its bytes may be reused. */
  release(): void {
    this.starts.shift();
    if (this.starts.length === 0) this.head = 0;
  }
}
