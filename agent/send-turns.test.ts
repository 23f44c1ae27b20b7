import { describe, expect, it } from 'vitest';
import { ManualClock } from '../test/support/manual-clock.js';
import { SendTurns, type TurnReader } from './send-turns.js';

/** A stream the test drains by hand, readers that send when let read, and the deferral run by hand. */
function setup(limit = 100) {
  let queued = 0;
  const deferred: Array<() => void> = [];
  const clock = new ManualClock();
  const waits: number[] = [];
  const turns = new SendTurns({
    queued: () => queued,
    limit,
    defer: (fn) => deferred.push(fn),
    clock,
    observer: { waiting: (d) => (waitingNow += d), waited: (ms) => waits.push(ms) },
  });
  let waitingNow = 0;
  const resumed: string[] = [];
  const paused: string[] = [];
  const reader = (name: string, nextReadBytes = 40): TurnReader => ({
    nextReadBytes,
    resumeReading: () => resumed.push(name),
    pauseReading: () => paused.push(name),
  });
  /** Runs what the turns deferred (one poll of the event loop, as far as they are concerned). */
  const poll = () => {
    for (const fn of deferred.splice(0)) fn();
  };
  return {
    turns,
    clock,
    waits,
    waitingNow: () => waitingNow,
    reader,
    resumed,
    paused,
    poll,
    setQueued: (n: number) => (queued = n),
    deferredCount: () => deferred.length,
  };
}

describe('SendTurns', () => {
  it('lets everyone read while the stream has room', () => {
    const { turns, reader, setQueued } = setup();
    const a = reader('a');
    expect(turns.join(a)).toBe(true);
    setQueued(99);
    expect(turns.sent(a)).toBe(true);
    expect(turns.waitingCount).toBe(0);
  });

  it('queues a sender once the stream is full, and new connections behind it', () => {
    const { turns, reader, setQueued, deferredCount } = setup();
    const a = reader('a');
    turns.join(a);
    setQueued(100);
    expect(turns.sent(a)).toBe(false);
    expect(turns.join(reader('b'))).toBe(false);
    expect(turns.waitingCount).toBe(2);
    // Nothing is let go while it is full: the drain says when.
    expect(deferredCount()).toBe(0);
  });

  it('stops every connection that sent since the stream last filled, with the one that filled it', () => {
    const { turns, reader, setQueued, paused, resumed, poll } = setup();
    const [a, b, c, quiet] = [reader('a'), reader('b'), reader('c'), reader('quiet')];
    for (const r of [a, b, c, quiet]) turns.join(r);
    setQueued(50);
    expect(turns.sent(a)).toBe(true);
    expect(turns.sent(b)).toBe(true);
    setQueued(100);
    // c fills it: a and b would each read once more in this poll; they stop now, behind c.
    expect(turns.sent(c)).toBe(false);
    expect(paused).toEqual(['a', 'b']);
    expect(turns.waitingCount).toBe(3);
    setQueued(0);
    turns.drained();
    poll();
    expect(resumed).toEqual(['c', 'a', 'b']);
    // One that sent nothing was never stopped: it reads when its target has bytes.
    expect(paused).not.toContain('quiet');
  });

  it('after a drain lets the oldest read first, as many as the room holds', () => {
    const { turns, reader, resumed, poll, setQueued } = setup();
    setQueued(100);
    for (const name of ['a', 'b', 'c', 'd']) turns.join(reader(name));
    setQueued(0);
    turns.drained();
    poll();
    // 100 bytes of room, 40 per read: a, b and c (the third may overshoot by one read).
    expect(resumed).toEqual(['a', 'b', 'c']);
    expect(turns.waitingCount).toBe(1);
  });

  it('counts the read a reader resumes with, not the smaller one it waited with', () => {
    const { turns, reader, resumed, poll, setQueued } = setup();
    setQueued(100);
    for (const name of ['a', 'b', 'c', 'd']) {
      const r = { ...reader(name, 10) };
      // As target-reads.ts does: a reader resumes with its largest read.
      r.resumeReading = () => {
        resumed.push(name);
        r.nextReadBytes = 60;
      };
      turns.join(r);
    }
    setQueued(0);
    turns.drained();
    poll();
    // 100 bytes of room and 60 per read once resumed: two go, not ten bytes' worth of ten.
    expect(resumed).toEqual(['a', 'b']);
  });

  it('lets the next go when the ones let go had nothing to send', () => {
    const { turns, reader, resumed, poll, setQueued } = setup();
    setQueued(100);
    for (const name of ['a', 'b', 'c', 'd', 'e']) turns.join(reader(name));
    setQueued(0);
    turns.drained();
    poll(); // a, b, c let go; their targets had nothing: the room is still there
    poll();
    expect(resumed).toEqual(['a', 'b', 'c', 'd', 'e']);
    expect(turns.waitingCount).toBe(0);
  });

  it('waits for the next drain when the ones let go filled the stream', () => {
    const { turns, reader, resumed, poll, setQueued } = setup();
    setQueued(100);
    for (const name of ['a', 'b', 'c', 'd', 'e']) turns.join(reader(name));
    setQueued(0);
    turns.drained();
    poll();
    setQueued(120); // a, b and c sent
    poll();
    expect(resumed).toEqual(['a', 'b', 'c']);
    setQueued(0);
    turns.drained();
    poll();
    expect(resumed).toEqual(['a', 'b', 'c', 'd', 'e']);
  });

  it('tells the observer how many wait and how long each waited', async () => {
    const { turns, reader, poll, setQueued, clock, waits, waitingNow } = setup();
    setQueued(100);
    const a = reader('a');
    turns.join(a);
    turns.join(reader('b'));
    turns.join(reader('c'));
    expect(waitingNow()).toBe(3);
    turns.leave(a);
    expect(waitingNow()).toBe(2);
    await clock.advance(250);
    setQueued(0);
    turns.drained();
    poll();
    expect(waits).toEqual([250, 250]);
    expect(waitingNow()).toBe(0);
  });

  it('forgets a connection that closed while it waited', () => {
    const { turns, reader, resumed, poll, setQueued } = setup();
    setQueued(100);
    const a = reader('a');
    turns.join(a);
    turns.join(reader('b'));
    turns.leave(a);
    setQueued(0);
    turns.drained();
    poll();
    expect(resumed).toEqual(['b']);
  });

  it('is fair: in a crowd, every connection reads once before any reads twice', () => {
    const { turns, reader, resumed, poll, setQueued } = setup(100);
    const readers = Array.from({ length: 50 }, (_, i) => reader(`r${i}`, 40));
    setQueued(100);
    for (const r of readers) turns.join(r);
    // A reader let go reads and sends 40 bytes at a time until the stream is full; the stream
    // drains between rounds.
    const reads = new Map<string, number>();
    for (let round = 0; round < 100; round++) {
      let queued = 0;
      setQueued(queued);
      turns.drained();
      const before = resumed.length;
      poll();
      for (const name of resumed.slice(before)) {
        const r = readers[Number(name.slice(1))]!;
        do {
          reads.set(name, (reads.get(name) ?? 0) + 1);
          queued += 40;
          setQueued(queued);
        } while (turns.sent(r));
      }
    }
    // Round robin: the first 50 turns went to 50 different connections, in the order they queued.
    expect(resumed.slice(0, 50)).toEqual(readers.map((_, i) => `r${i}`));
    const counts = readers.map((_, i) => reads.get(`r${i}`) ?? 0);
    expect(Math.min(...counts)).toBeGreaterThan(0);
    expect(Math.max(...counts) - Math.min(...counts)).toBeLessThanOrEqual(3);
  });
});
