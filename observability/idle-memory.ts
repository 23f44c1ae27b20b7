// Memory-reducing collections when the agent goes quiet. V8 grows the young generation (to 8-16 MiB)
// while the modules load and again under a burst of work (10k dials), and keeps it, with the garbage
// of the burst, until its own memory reducer happens to run; nothing in an idle agent prompts it. A
// "last resort" collection gives both back: idle RSS -5 MiB after start, 10k idle connections
// 164 -> 110 MiB after their burst (bench/README.md). The young generation grows again if traffic
// needs it. One collection a second after start, then one after each busy stretch once a window
// passes with little CPU used, so steady traffic never pays for it and an idle agent pays once.
// `gc` is exposed only inside a throwaway context, not on the agent's global.
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

type Gc = (options: { type: 'major'; execution: 'sync'; flavor: 'last-resort' }) => void;

export interface IdleMemoryOptions {
  /** Length of the window over which CPU use is judged. */
  windowMs?: number;
  /** CPU share of a window above which it counts as busy, and below which as quiet. */
  busyShare?: number;
}

/** Starts watching; returns what stops it. */
export function releaseMemoryWhenIdle({ windowMs = 5000, busyShare = 0.02 }: IdleMemoryOptions = {}): () => void {
  let gc: Gc | undefined;
  const collect = () => {
    if (!gc) {
      setFlagsFromString('--expose-gc');
      gc = runInNewContext('gc') as Gc;
      setFlagsFromString('--no-expose-gc');
    }
    gc({ type: 'major', execution: 'sync', flavor: 'last-resort' });
  };
  const startup = setTimeout(collect, 1000).unref();
  let armed = false;
  let last = process.cpuUsage();
  const window = setInterval(() => {
    const now = process.cpuUsage(last);
    last = process.cpuUsage();
    const busy = (now.user + now.system) / 1000 > windowMs * busyShare;
    if (busy) armed = true;
    else if (armed) {
      armed = false;
      collect();
    }
  }, windowMs).unref();
  return () => {
    clearTimeout(startup);
    clearInterval(window);
  };
}
