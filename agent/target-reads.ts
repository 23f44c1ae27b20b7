// How the agent reads its target sockets (target -> hub): into one buffer shared by every connection,
// instead of a fresh 64 KiB buffer per read (which was most of the agent's garbage); each read is
// encoded into a DATA frame, a copy, before the next read can reuse the buffer.
// How much one read may take is the socket's own: a socket starts at `minReadBytes` and doubles, up
// to `maxReadBytes`, each time a read fills it; a read that does not fill it (the target has sent
// all it had) brings it back to the start. A download reaches 256 KiB reads within a few reads (fewer
// reads, fewer packets); a socket that sends little, or is idle, reads little. That bounds what a
// crowd of sockets that become readable at once (a burst of downloads answering together) brings
// into the agent before their stream's turns (send-turns.ts) pause them: one small read each.
import type net from 'node:net';

export const minReadBytes = 16 << 10;
export const maxReadBytes = 256 << 10;

/** One buffer for all reads, and a view of it for every read size (so a read allocates nothing). */
const sharedReadBuffer = Buffer.allocUnsafe(maxReadBytes);
const views = new Map<number, Buffer>();
for (let size = minReadBytes; size <= maxReadBytes; size *= 2) views.set(size, sharedReadBuffer.subarray(0, size));

type Relay = (chunk: Uint8Array) => boolean;
/**
 * Where a socket's reads go: its relay, or until one is attached the bytes read so far (not
 * expected: reads arrive as I/O callbacks after the dial settles). Properties of the socket rather
 * than entries in a WeakMap: 10k idle connections hold 10k of them (bench/README.md, "Scale").
 */
const readTarget = Symbol('readTarget');
const readSize = Symbol('readSize');
type TargetSocket = net.Socket & { [readTarget]?: Relay | Buffer[]; [readSize]?: number };

/**
 * The size of the read that just happened decides the next one's; Node asks for the next buffer
 * (`nextBuffer`) right after `onRead` returns, for the same socket, so it is passed between the two
 * here. A new socket's first buffer is asked for with nothing passed: the smallest.
 */
let next = minReadBytes;

/** The size of a socket's next read, after a read of `nread` bytes into a buffer of `size`. */
export function nextReadSize(size: number, nread: number): number {
  return nread >= size ? Math.min(size * 2, maxReadBytes) : minReadBytes;
}

/** One read callback and one options object for every socket, so none keeps closures alive while it is open. */
function onRead(this: TargetSocket, nread: number): boolean {
  next = this[readSize] = nextReadSize(this[readSize] ?? minReadBytes, nread);
  // Every view starts at the shared buffer's start: read from it, whichever view Node passes (the
  // one it knows may be older than the one `readMost` gave the socket).
  const chunk = sharedReadBuffer.subarray(0, nread);
  const target = this[readTarget];
  if (typeof target !== 'function') {
    target?.push(Buffer.from(chunk));
    return true;
  }
  const goOn = target(chunk);
  // Paused for its turn: that read will find the kernel buffer full (readMost says why).
  if (!goOn) next = this[readSize] = maxReadBytes;
  return goOn;
}

function nextBuffer(): Buffer {
  const size = next;
  next = minReadBytes;
  return views.get(size)!;
}

/** `net.connect`'s `onread` for a target socket whose reads `relayTargetReads` takes. */
export const targetReads: net.OnReadOpts = { buffer: nextBuffer, callback: onRead };

/** Marks a socket made with `targetReads` (before it connects), so its reads are kept until a relay takes them. */
export function holdTargetReads(socket: net.Socket): void {
  (socket as TargetSocket)[readTarget] = [];
}

/** Sends the reads of a `targetReads` socket to `relay` (false from it pauses the socket); false for other streams. */
export function relayTargetReads(socket: unknown, relay: Relay): boolean {
  const held = (socket as TargetSocket)[readTarget];
  if (!Array.isArray(held)) return false;
  const s = socket as TargetSocket & net.Socket;
  s[readTarget] = relay;
  for (const chunk of held) if (!relay(chunk)) s.pause();
  return true;
}

/**
 * `socket`'s next read may take the most: its turn after waiting (send-turns.ts), when its kernel
 * buffer is full and the target waits for room. A smaller read would not free enough of the TCP
 * window for the kernel to tell the target (it announces a window only once at least a segment's
 * worth is free), and the target would wait for its next zero-window probe, up to seconds later.
 */
export function readMost(socket: object): void {
  if (!(readTarget in socket)) return;
  const s = socket as TargetSocket & { _handle?: { useUserBuffer?: (b: Buffer) => void } };
  if (s[readSize] === maxReadBytes) return;
  s[readSize] = maxReadBytes;
  // The buffer of a socket's next read was picked after its last read (`nextBuffer`); a socket held
  // back before reading at all picked the smallest. Node's own call for a user buffer swaps it.
  s._handle?.useUserBuffer?.(views.get(maxReadBytes)!);
}

/** How much the next read of `socket` may bring (its read size; `maxReadBytes` for other streams). */
export function nextReadBytes(socket: object): number {
  return (socket as TargetSocket)[readSize] ?? (readTarget in socket ? minReadBytes : maxReadBytes);
}
