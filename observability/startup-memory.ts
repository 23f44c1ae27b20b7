// One memory-reducing collection once the agent is up. V8 grows the young generation to 8-16 MiB while
// the modules load and keeps it, along with the start-up garbage, until something makes it reduce;
// nothing in an idle agent does. A "last resort" collection gives both back (idle RSS about -5 MiB,
// bench/README.md); the young generation grows again if traffic needs it. `gc` is exposed only
// inside a throwaway context, not on the agent's global.
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

type Gc = (options: { type: 'major'; execution: 'sync'; flavor: 'last-resort' }) => void;

export function releaseStartupMemory(): void {
  setFlagsFromString('--expose-gc');
  const gc = runInNewContext('gc') as Gc;
  setFlagsFromString('--no-expose-gc');
  gc({ type: 'major', execution: 'sync', flavor: 'last-resort' });
}
