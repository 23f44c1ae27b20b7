// --enable-profiling: the Go agent's /debug/pprof on the admin port, in the formats Node has and Chrome
// DevTools opens: a CPU profile over N seconds (.cpuprofile, Performance tab) and a heap snapshot
// (.heapsnapshot, Memory tab). Imported only when profiling is on, so node:inspector is not loaded
// otherwise.
import { Session } from 'node:inspector/promises';
import { pipeline } from 'node:stream/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { getHeapSnapshot } from 'node:v8';
import type { Guard, HealthServer, RouteHandler } from './health-server.js';
import type { Logger } from './log.js';

/** Go's pprof default when ?seconds= is absent. */
const defaultSeconds = 30;
const maxSeconds = 300;

/** `?seconds=`: a whole number of seconds from 1 to 300 (30 when absent), or why not. */
function profileSeconds(raw: string | null): number | string {
  if (raw === null || raw === '') return defaultSeconds;
  if (!/^\d+$/.test(raw) || Number(raw) < 1 || Number(raw) > maxSeconds)
    return `seconds must be a whole number from 1 to ${maxSeconds}, got "${raw}"`;
  return Number(raw);
}

/** Samples the JavaScript stack for `seconds` (stopped early when `signal` aborts): V8's CPU profile. */
async function cpuProfile(seconds: number, signal?: AbortSignal): Promise<unknown> {
  const session = new Session();
  session.connect();
  try {
    await session.post('Profiler.enable');
    await session.post('Profiler.start');
    await sleep(seconds * 1000, undefined, { signal }).catch(() => {}); // aborted: stop now
    const { profile } = await session.post('Profiler.stop');
    return profile;
  } finally {
    session.disconnect();
  }
}

const attachment = (kind: string) =>
  `attachment; filename="spoke-agent-${process.pid}-${new Date().toISOString().replace(/[:.]/g, '-')}.${kind}"`;

function cpuProfileHandler(log: Logger): RouteHandler {
  let running = false; // one at a time, as Go's pprof
  return async (req, res, url) => {
    const seconds = profileSeconds(url.searchParams.get('seconds'));
    if (typeof seconds === 'string')
      return void res.writeHead(400, { 'content-type': 'text/plain' }).end(`${seconds}\n`);
    if (running)
      return void res
        .writeHead(409, { 'content-type': 'text/plain' })
        .end('a CPU profile is already being taken; try again when it is done\n');
    running = true;
    const gone = new AbortController();
    res.on('close', () => gone.abort()); // the client left: stop profiling
    try {
      log.info({ seconds, client: req.socket.remoteAddress }, 'taking a CPU profile');
      const profile = await cpuProfile(seconds, gone.signal);
      if (gone.signal.aborted) return;
      res
        .writeHead(200, { 'content-type': 'application/json', 'content-disposition': attachment('cpuprofile') })
        .end(JSON.stringify(profile));
    } finally {
      running = false;
    }
  };
}

function heapSnapshotHandler(log: Logger): RouteHandler {
  return async (req, res) => {
    log.info({ client: req.socket.remoteAddress }, 'taking a heap snapshot (JavaScript pauses while it is written)');
    res.writeHead(200, { 'content-type': 'application/json', 'content-disposition': attachment('heapsnapshot') });
    await pipeline(getHeapSnapshot(), res).catch((err: unknown) => log.warn({ err }, 'heap snapshot not delivered'));
  };
}

const index = `spoke-agent profiling (--enable-profiling); save the output and open it in Chrome DevTools:
/debug/pprof/profile?seconds=N  CPU profile over N seconds (default ${defaultSeconds}, at most ${maxSeconds}): a .cpuprofile (Performance tab)
/debug/pprof/heap               heap snapshot: a .heapsnapshot (Memory tab); the agent pauses while it is taken, and it holds every secret in memory
`;

/** Adds /debug/pprof/ (an index), /debug/pprof/profile and /debug/pprof/heap to the admin server. */
export function addProfilingRoutes(server: HealthServer, log: Logger, guard?: Guard): void {
  server.addRoute(
    '/debug/pprof/',
    (_req, res) => void res.writeHead(200, { 'content-type': 'text/plain; charset=utf-8' }).end(index),
    guard,
  );
  server.addRoute('/debug/pprof/profile', cpuProfileHandler(log), guard);
  server.addRoute('/debug/pprof/heap', heapSnapshotHandler(log), guard);
}
