// `/debug/<resource>` on the health port: a live log for clusters without the aggregation layer, as
// JSON (`{resourceVersion, size, <resource>: [...]}`, oldest first), or with `?watch=true` one entry
// a line as changes arrive; each entry carries its name and resourceVersion, to resume a watch after
// it. `?fieldSelector=` as in the API (selector.ts); a watch starts from now, or after
// `?resourceVersion=` (a list's). Each route is guarded by its own permission (cmd/agent-command.ts).
import { json, type RouteHandler } from '../observability/health-server.js';
import type { ChangeType, LiveEntry, LiveLog } from './live-log.js';
import { entryFilter, type Fields } from './selector.js';
import { isWatch, streamLiveLog } from './stream.js';

/**
 * An entry as /debug shows it: the time in RFC 3339 with milliseconds and its version; for a log of
 * objects that change (entries with an id), the object's name and the change's type too.
 */
function shown<E extends LiveEntry & { time: number }>(e: E, log: LiveLog<E>): Shown<E> {
  return {
    ...e,
    time: new Date(e.time).toISOString(),
    resourceVersion: log.version(e.seq),
    ...(e.id !== undefined ? { objectName: log.nameOf(e), event: log.changeType(e) } : {}),
  };
}

/** What /debug sends for an entry of a log of `E` (`spoke-agent queries` and `dials` read it). */
export type Shown<E> = Omit<E, 'time'> & {
  time: string;
  resourceVersion: string;
  objectName?: string;
  event?: ChangeType;
};

export interface LiveDebugRoute<E extends LiveEntry & { time: number }> {
  /** The key of the list in the JSON (`queries`, `dials`). */
  resource: string;
  fields: Fields<E>;
  /** Why there is no log, when it is off (the flag that turns it on). */
  off: string;
}

const watchTimeoutMs = 60 * 60_000;

export function liveLogHandler<E extends LiveEntry & { time: number }>(
  log: LiveLog<E> | undefined,
  route: LiveDebugRoute<E>,
): RouteHandler {
  return (_req, res, url) => {
    if (!log) return json(res, 404, { error: route.off });
    const keep = entryFilter(route.fields, url.searchParams.get('fieldSelector') ?? '', log);
    if (typeof keep !== 'function') return json(res, 400, { error: `fieldSelector: ${keep.error}` });
    if (!isWatch(url)) {
      return json(res, 200, {
        resourceVersion: log.version(log.last),
        size: log.size,
        [route.resource]: log
          .current()
          .filter(keep)
          .map((e) => shown(e, log)),
      });
    }
    const version = url.searchParams.get('resourceVersion');
    streamLiveLog(res, {
      log,
      after: version === null ? log.last : log.watchAfter(version),
      keep,
      line: (e) => `${JSON.stringify(shown(e, log))}\n`,
      contentType: 'application/x-ndjson',
      timeoutMs: watchTimeoutMs,
    });
  };
}
