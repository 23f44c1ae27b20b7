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

type Gc = (options: { type: 'major'; execution: 'sync'; flavor: 'last-resort' }) => void;

export interface IdleMemoryOptions {
  /** Length of the window over which CPU use is judged. */
  windowMs?: number;
  /** CPU share of a window above which it counts as busy, and below which as quiet. */
  busyShare?: number;
  /** From when the start-up collection is due, and how long a quiet stretch lets it run. */
  startupMs?: number;
  startupQuietMs?: number;
}

/** Collections without a call after which a function's bytecode is flushed (V8's default: 6). */
const bytecodeOldAge = 3;

/** Starts watching; returns what stops it. */
export function releaseMemoryWhenIdle({
  windowMs = 5000,
  busyShare = 0.02,
  startupMs = 1000,
  startupQuietMs = 250,
}: IdleMemoryOptions = {}): () => void {
  if (!process.execArgv.some((a) => a.startsWith('--bytecode-old-age')))
    setFlagsFromString(`--bytecode-old-age=${bytecodeOldAge}`);
  const busy = (since: NodeJS.CpuUsage, ms: number) => {
    const used = process.cpuUsage(since);
    return (used.user + used.system) / 1000 > ms * busyShare;
  };
  let armed = false;
  /** Where the current window's CPU is counted from. */
  let last = process.cpuUsage();
  let gc: Gc | undefined;
  const collect = () => {
    if (!gc) {
      setFlagsFromString('--expose-gc');
      gc = runInNewContext('gc') as Gc;
      setFlagsFromString('--no-expose-gc');
    }
    gc({ type: 'major', execution: 'sync', flavor: 'last-resort' });
    last = process.cpuUsage(); // the collection (and before it start-up) is not activity to the windows below
  };
  // Start-up: the first quiet stretch from startupMs on.
  let mark = process.cpuUsage();
  const startedAt = performance.now();
  const startup = setInterval(() => {
    const quiet = !busy(mark, startupQuietMs);
    mark = process.cpuUsage();
    const age = performance.now() - startedAt;
    if (age < startupMs) return;
    if (quiet) collect();
    else if (age < windowMs) return; // busy all along: the windows below saw it and take over
    clearInterval(startup);
  }, startupQuietMs).unref();
  const window = setInterval(() => {
    const wasBusy = busy(last, windowMs);
    last = process.cpuUsage();
    if (wasBusy) armed = true;
    else if (armed) {
      armed = false;
      collect();
    }
  }, windowMs).unref();
  return () => {
    clearInterval(startup);
    clearInterval(window);
  };
}
