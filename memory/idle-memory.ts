// Memory-reducing collections when the agent goes quiet. V8 grows the young generation while the
// modules load and again under a burst of work, and keeps it, with the garbage of the burst, until its
// own memory reducer happens to run; nothing in an idle agent prompts it. A "last resort" collection
// gives both back (what it saves: bench/README.md, "Idle footprint"). The young generation grows again
// if traffic needs it. It stops the agent for two full collections, so it runs only when the agent is
// quiet: from a second after start, at the first quarter second with little CPU used; and after each
// busy stretch, once a 5 s window passes with little CPU used. Steady traffic never pays for it.
// Start-up code runs once: its bytecode is flushed after 3 full collections without a call instead of
// V8's 6, so the few an idle agent has (this start-up one, V8's memory reducer) give it back. A
// function flushed and called again is compiled again, lazily, as at start.
// `gc` is exposed only inside a throwaway context, not on the agent's global.
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { systemClock, type Clock } from '../clock/clock.js';

type Gc = (options: { type: 'major'; execution: 'sync'; flavor: 'last-resort' }) => void;

export interface IdleMemoryOptions {
  /** Length of the window over which CPU use is judged. */
  windowMs?: number;
  /** CPU share of a window above which it counts as busy, and below which as quiet. */
  busyShare?: number;
  /** From when the start-up collection is due, and how long a quiet stretch lets it run. */
  startupMs?: number;
  startupQuietMs?: number;
  /** What the windows run on; the process's CPU time; the collection (tests pass their own). */
  clock?: Clock;
  cpuUsage?: (since?: NodeJS.CpuUsage) => NodeJS.CpuUsage;
  collect?: () => void;
}

/** Collections without a call after which a function's bytecode is flushed (V8's default: 6). */
const bytecodeOldAge = 3;

/** Starts watching; returns what stops it. */
export function releaseMemoryWhenIdle({
  windowMs = 5000,
  busyShare = 0.02,
  startupMs = 1000,
  startupQuietMs = 250,
  clock = systemClock,
  cpuUsage = (since) => process.cpuUsage(since),
  collect: collectGarbage = lastResortCollection,
}: IdleMemoryOptions = {}): () => void {
  if (!process.execArgv.some((a) => a.startsWith('--bytecode-old-age')))
    setFlagsFromString(`--bytecode-old-age=${bytecodeOldAge}`);
  const busy = (since: NodeJS.CpuUsage, ms: number) => {
    const used = cpuUsage(since);
    return (used.user + used.system) / 1000 > ms * busyShare;
  };
  let armed = false;
  /** Where the current window's CPU is counted from. */
  let last = cpuUsage();
  const collect = () => {
    collectGarbage();
    last = cpuUsage(); // the collection (and before it start-up) is not activity to the windows below
  };
  // Start-up: the first quiet stretch from startupMs on.
  let mark = cpuUsage();
  const startedAt = clock.now();
  const startup = every(clock, startupQuietMs, () => {
    const quiet = !busy(mark, startupQuietMs);
    mark = cpuUsage();
    const age = clock.now() - startedAt;
    if (age < startupMs) return true;
    if (quiet) collect();
    else if (age < windowMs) return true; // busy all along: the windows below saw it and take over
    return false;
  });
  const window = every(clock, windowMs, () => {
    const wasBusy = busy(last, windowMs);
    last = cpuUsage();
    if (wasBusy) armed = true;
    else if (armed) {
      armed = false;
      collect();
    }
    return true;
  });
  return () => {
    startup();
    window();
  };
}

/** Calls `tick` every `ms` on `clock` while it returns true; returns what stops it. */
function every(clock: Clock, ms: number, tick: () => boolean): () => void {
  let cancel = () => {};
  const schedule = () => {
    cancel = clock.after(ms, () => {
      if (tick()) schedule();
    });
  };
  schedule();
  return () => cancel();
}

let gc: Gc | undefined;

/** A full, memory-reducing collection: V8's last resort, which also shrinks the young generation. */
function lastResortCollection(): void {
  if (!gc) {
    setFlagsFromString('--expose-gc');
    gc = runInNewContext('gc') as Gc;
    setFlagsFromString('--no-expose-gc');
  }
  gc({ type: 'major', execution: 'sync', flavor: 'last-resort' });
}
