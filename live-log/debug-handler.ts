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
function shown<E extends LiveEntry & { time: number }>(e: E, liveLog: LiveLog<E>): Shown<E> {
  return {
    ...e,
    time: new Date(e.time).toISOString(),
    resourceVersion: liveLog.version(e.seq),
    ...(e.id !== undefined ? { objectName: liveLog.nameOf(e), event: liveLog.changeType(e) } : {}),
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
  liveLog: LiveLog<E> | undefined,
  route: LiveDebugRoute<E>,
): RouteHandler {
  return (_req, res, url) => {
    if (!liveLog) return json(res, 404, { error: route.off });
    const keep = entryFilter(route.fields, url.searchParams.get('fieldSelector') ?? '', liveLog);
    if (typeof keep !== 'function') return json(res, 400, { error: `fieldSelector: ${keep.error}` });
    if (!isWatch(url)) {
      return json(res, 200, {
        resourceVersion: liveLog.version(liveLog.last),
        size: liveLog.size,
        [route.resource]: liveLog
          .current()
          .filter(keep)
          .map((e) => shown(e, liveLog)),
      });
    }
    const version = url.searchParams.get('resourceVersion');
    streamLiveLog(res, {
      liveLog,
      after: version === null ? liveLog.last : liveLog.watchAfter(version),
      keep,
      line: (e) => `${JSON.stringify(shown(e, liveLog))}\n`,
      contentType: 'application/x-ndjson',
      timeoutMs: watchTimeoutMs,
    });
  };
}
