// `/debug/queries` on the health port: the query log as live-log/debug-handler.ts serves a live log.
// Its guard is its own permission (reading the queries pods make is not reading the rules): get on
// --debug-auth-path + "/queries".
import { liveLogHandler, type Shown } from '../live-log/debug-handler.js';
import type { RouteHandler } from '../observability/health-server.js';
import type { QueryEntry, QueryLog } from './query-log.js';
import { queryFields } from './query-selector.js';

/** What /debug/queries sends for an entry (`spoke-agent queries` reads it). */
export type ShownQuery = Shown<QueryEntry>;

export const queriesHandler = (queryLog: QueryLog | undefined): RouteHandler =>
  liveLogHandler(queryLog, {
    resource: 'queries',
    fields: queryFields,
    off: 'the query log is off: --dns-query-log-size=0',
  });
