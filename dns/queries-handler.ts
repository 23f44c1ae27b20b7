// `/debug/queries` on the health port: the query log for clusters without the aggregation layer, as
// JSON (`{resourceVersion, size, queries: [...]}`, oldest first), or with `?watch=true` one entry a
// line as queries arrive; each entry carries its resourceVersion, to resume a watch after it. `?fieldSelector=` as in the API (dns/query-selector.ts); a watch starts
// from now, or after `?resourceVersion=` (a list's). Its guard is its own permission (reading the
// queries pods make is not reading the rules): get on --debug-auth-path + "/queries".
import { isWatch } from '../apiserver/attributes.js';
import type { RouteHandler } from '../observability/health-server.js';
import { json } from './no-rules.js';
import type { QueryEntry, QueryLog } from './query-log.js';
import { entryFilter } from './query-selector.js';
import { streamQueries } from './query-stream.js';

/** An entry as /debug shows it: the time in RFC 3339 with milliseconds, and its version. */
const shown = (e: QueryEntry, log: QueryLog) => ({
  ...e,
  time: new Date(e.time).toISOString(),
  resourceVersion: log.version(e.seq),
});

/** What /debug/queries sends for an entry (`spoke-agent queries` reads it). */
export type ShownQuery = ReturnType<typeof shown>;

const watchTimeoutMs = 60 * 60_000;

export function queriesHandler(log: QueryLog | undefined): RouteHandler {
  return (_req, res, url) => {
    if (!log) return json(res, 404, { error: 'the query log is off: --dns-query-log-size=0' });
    const keep = entryFilter(url.searchParams.get('fieldSelector') ?? '', log);
    if (typeof keep !== 'function') return json(res, 400, { error: `fieldSelector: ${keep.error}` });
    if (!isWatch(url)) {
      return json(res, 200, {
        resourceVersion: log.version(log.last),
        size: log.size,
        queries: log
          .entries()
          .filter(keep)
          .map((e) => shown(e, log)),
      });
    }
    const version = url.searchParams.get('resourceVersion');
    streamQueries(res, {
      log,
      after: version === null ? log.last : log.watchAfter(version),
      keep,
      line: (e) => `${JSON.stringify(shown(e, log))}\n`,
      contentType: 'application/x-ndjson',
      timeoutMs: watchTimeoutMs,
    });
  };
}
